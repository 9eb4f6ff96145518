"""harness/capture.py: the real host code of submission.py, compiled offline and called through stand-ins of the
CUDA runtime, launches what its plan() says, with tensor maps that point at the emulator's addresses; the stand-ins
(harness/launch_stubs.c, built alone) refuse what a B200 refuses; the DSL's error lines are read back.

Each config's first capture compiles it in a subprocess (~3-5 s on 2 CPUs; cached per process environment
under $EMU_LAUNCH_CACHE or the temp dir); later captures take ~0.1 s."""
import ctypes
import struct
import subprocess
from pathlib import Path

import pytest

from emu import tma
from emu.launch import entry_params
from harness import capture, host
from harness import dsl as dsl_release
from harness.problems import DUAL_GEMM

ROOT = Path(__file__).resolve().parents[2]
SUBMISSION = str(ROOT / "submission.py")
ADDRS = {name: 0x7F00_0000_0000 + (i + 1) * 0x100_0000 for i, name in enumerate(DUAL_GEMM.operands)}
SHAPE = (256, 512, 512, 1)

@pytest.fixture(scope="module")
def sub():
    import submission

    return submission


def _capture(sub, tile, cluster, shape=SHAPE, **kw):
    cfg = sub.KernelConfig(mma_tile_mn=tile, cluster_mn=cluster)
    return cfg, capture.capture_launch(SUBMISSION, cfg, *shape, ADDRS, **kw)


@pytest.mark.parametrize("tile,cluster", [((128, 64), (1, 1)), ((256, 64), (2, 1))], ids=["m128n64_c1x1", "m256n64_c2x1"])
def test_capture_matches_plan(sub, tile, cluster):
    cfg, cap = _capture(sub, tile, cluster)
    m, n, k, l = SHAPE
    plan = sub.DualGemmKernel(cfg).plan()
    assert cap.block == (plan["threads_per_cta"], 1, 1) == (192, 1, 1)
    assert cap.cluster == (*cluster, 1)
    assert cap.dynamic_smem == plan["dynamic_smem_bytes"]
    cta_m, cta_n = cfg.cta_tile_mn
    tiles = (m // cta_m) * (n // cta_n) * l
    assert cap.grid[0] % cluster[0] == 0 and cap.grid[1] % cluster[1] == 0
    assert cap.grid[0] * cap.grid[1] * cap.grid[2] == min(tiles, sub.SM_COUNT)
    assert cap.kernel_name and f".entry {cap.kernel_name}" in cap.ptx
    assert cap.dsl_version
    # parameters: one per .param of the .entry, exact sizes
    name, params = entry_params(cap.ptx)
    assert name == cap.kernel_name and len(cap.params) == len(params) == 25
    assert [len(b) for b in cap.params] == [p[1] for p in params]
    assert cap.cubin[:4] == bytes.fromhex("50ed55ba")  # the fatbinary handed to cudaLibraryLoadData
    # the kernel's resources: registers from its cubin (cuobjdump's REG); static shared memory as the driver charges
    # it, the kernel's own .shared variables: none here (emu.ptx.static_shared_bytes has the measurement). plan()
    # still keeps the 1 KiB reserved per block out of the stages.
    assert cap.static_smem == 0 and plan["smem_bytes"] - plan["dynamic_smem_bytes"] == 1024
    assert 32 <= cap.registers <= 255
    assert "cuKernelGetAttribute(attr=1, device=0) -> 0" in cap.runtime_log


@pytest.mark.parametrize("tile,cluster", [((128, 64), (1, 1)), ((256, 64), (2, 1))], ids=["m128n64_c1x1", "m256n64_c2x1"])
def test_tensor_maps_point_at_the_operands(sub, tile, cluster):
    cfg, cap = _capture(sub, tile, cluster)
    m, n, k, l = SHAPE
    maps = [tma.decode_tensor_map(b) for b in cap.params if len(b) == 128]
    assert len(maps) == 6
    a, b1, b2, sfa, sfb1, sfb2 = maps
    assert [t.address for t in maps] == [ADDRS[x] for x in ("a", "b1", "b2", "sfa", "sfb1", "sfb2")]
    b_rows = cfg.mma_tile_mn[1] // (2 if cfg.use_2cta else 1)
    for t, rows, box_rows in ((a, m, cfg.cta_tile_mn[0]), (b1, n, b_rows), (b2, n, b_rows)):
        assert t.dtype == "16U4_ALIGN8B" and t.elem_bits == 4  # FP4, dims in 4-bit elements
        assert t.dims == [k, rows, l] and t.strides == [k // 2, rows * k // 2]
        assert t.box == [256, box_rows, 1] and t.swizzle == 3  # 128-byte rows, 128B swizzle
        assert tma.box_bytes(t) == 128 * box_rows
    for t in (sfa, sfb1, sfb2):
        assert t.swizzle == 0 and t.dtype == "UINT16" and t.rank == 4
    assert sum(tma.box_bytes(t) for t in (sfa, sfb1, sfb2)) > 0
    # C (40-byte tensor struct): its address first
    c_param = next(b for b, d in zip(cap.params, cap.param_decls) if "[40]" in d)
    assert int.from_bytes(c_param[:8], "little") == ADDRS["c"]


def test_sm_count_override_and_repeat(sub):
    _, cap = _capture(sub, (128, 64), (1, 1), sm_count=4)
    assert cap.grid == (1, 1, 4)
    _, again = _capture(sub, (128, 64), (1, 1))
    assert again.grid == (1, 1, 16)  # the override does not leak into other captures
    other = dict(ADDRS, a=ADDRS["a"] + 0x1000)
    cap2 = capture.capture_launch(SUBMISSION, sub.KernelConfig(mma_tile_mn=(128, 64)), *SHAPE, other)
    assert tma.decode_tensor_map(cap2.params[2]).address == other["a"]


def test_modified_copy_elsewhere(sub, tmp_path):
    """A copy with 64 KiB less shared memory to plan with is what gets compiled and launched: its plan's stages, not
    the original's."""
    from harness.verdict import load_submission

    copy = tmp_path / "sub_copy.py"
    text = (ROOT / "submission.py").read_text()
    assert text.count("SMEM_CAPACITY = 232448  #") == 1
    copy.write_text(text.replace("SMEM_CAPACITY = 232448  #", "SMEM_CAPACITY = 232448 - 65536  #"))
    cfg = sub.KernelConfig(mma_tile_mn=(128, 64))
    cap = capture.capture_launch(str(copy), cfg, *SHAPE, ADDRS)
    smaller = load_submission(copy).DualGemmKernel(cfg).plan()["dynamic_smem_bytes"]
    assert cap.dynamic_smem == smaller < sub.DualGemmKernel(cfg).plan()["dynamic_smem_bytes"]
    assert cap.block == (192, 1, 1)


@pytest.mark.slow
@pytest.mark.skipif(not dsl_release.is_installed("4.3.5"), reason="needs .venv/dsl/4.3.5 (tools/setup.sh)")
def test_capture_under_dsl_435(sub):
    cfg = sub.KernelConfig(mma_tile_mn=(128, 64))
    cap = capture.capture_launch(SUBMISSION, cfg, *SHAPE, ADDRS, dsl="4.3.5")
    assert cap.dsl_version.startswith("4.3.5")
    assert cap.grid == (1, 1, 16) and cap.block == (192, 1, 1) and cap.cluster == (1, 1, 1)
    assert cap.dynamic_smem == sub.DualGemmKernel(cfg).plan()["dynamic_smem_bytes"]
    _, params = entry_params(cap.ptx)
    assert len(cap.params) == len(params)
    maps = [tma.decode_tensor_map(b) for b in cap.params if len(b) == 128]
    assert [t.address for t in maps] == [ADDRS[x] for x in ("a", "b1", "b2", "sfa", "sfb1", "sfb2")]


def test_source_digest_follows_local_imports_not_the_path(tmp_path):
    """The compile cache's key (issue 16): the file's bytes and those of the modules it imports from its own folder
    (else the repository root), never where the file is."""
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "kernel.py").write_text("import os\nimport helper\nfrom task import input_t\n")
        (tmp_path / d / "helper.py").write_text("X = 1\n")
    one, two = (capture.source_digest(tmp_path / d / "kernel.py", (tmp_path / d, ROOT)) for d in ("one", "two"))
    assert one == two and [name for name, _ in one] == ["", "helper", "task"]  # os: not a local module
    (tmp_path / "two" / "helper.py").write_text("X = 2\n")
    assert capture.source_digest(tmp_path / "two" / "kernel.py", (tmp_path / "two", ROOT)) != one
    (tmp_path / "one" / "task.py").write_text("input_t = None\n")  # a task.py beside the file shadows the root's
    assert capture.source_digest(tmp_path / "one" / "kernel.py", (tmp_path / "one", ROOT))[2] != one[2]


def test_equal_copies_share_one_compile(sub, tmp_path):
    """A copy of submission.py elsewhere (as a planted bug's copy in a fresh tmp_path) hits the same cache entry,
    and the kernel's name in the PTX carries no trace of the file's path."""
    copy = tmp_path / "elsewhere.py"
    copy.write_text((ROOT / "submission.py").read_text())
    cfg = sub.KernelConfig(mma_tile_mn=(128, 64))
    art = capture.compile_artifacts(str(copy), cfg)
    assert art == capture.compile_artifacts(SUBMISSION, cfg)
    name, _ = entry_params((art / "kernel.ptx").read_text())
    assert "emu_submissionDualGemmKernel" in name and str(tmp_path.name) not in name


# ------------------------------------------------------------------ the B200's launch limits in the stand-ins
class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class LaunchAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("val", ctypes.c_ubyte * 64)]


class LaunchConfig(ctypes.Structure):  # cudaLaunchConfig_st
    _fields_ = [("grid", Dim3), ("block", Dim3), ("dynamic_smem", ctypes.c_size_t), ("queue", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttr)), ("num_attrs", ctypes.c_uint)]


STUB_PTX = ".visible .entry k(.param .u64 p)\n.reqntid 192, 1, 1\n{\nret;\n}\n"


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """The runtime stand-ins alone (no exported host object), primed as for a 192-thread kernel with 110 registers
    and 1024 bytes of static shared memory."""
    so = tmp_path_factory.mktemp("stubs") / "stubs.so"
    subprocess.run([host.c_compiler(), "-shared", "-fPIC", "-o", str(so), str(host.STUBS_C)], check=True)
    lib = ctypes.CDLL(str(so))
    lib._cudaLaunchKernelEx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def prime(lib, ptx=STUB_PTX, registers=110, static=1024, max_dynamic=231424, nonportable=0):
    host.prime_stubs(lib, ptx, {"registers": registers, "static_smem": static})
    ctypes.c_int.in_dll(lib, "emu_max_dynamic_smem_attr").value = -1
    ctypes.c_int.in_dll(lib, "emu_nonportable_cluster_attr").value = nonportable
    if max_dynamic is not None:
        assert lib._cudaFuncSetAttribute(None, 8, max_dynamic) == 0


def try_launch(lib, grid=(2, 1, 1), block=(192, 1, 1), smem=200000, cluster=(1, 1, 1)):
    """A cudaLaunchKernelEx of the primed kernel; cluster=None: no cluster attribute (as a <<<>>> launch)."""
    attr = LaunchAttr()
    attr.id = host.CLUSTER_DIM_ATTR
    struct.pack_into("<III", attr.val, 0, *(cluster or (1, 1, 1)))
    cfg = LaunchConfig(Dim3(*grid), Dim3(*block), smem, None, ctypes.pointer(attr), 0 if cluster is None else 1)
    param = ctypes.c_uint64(0)
    args = (ctypes.c_void_p * 1)(ctypes.addressof(param))
    rc = lib._cudaLaunchKernelEx(ctypes.addressof(cfg), None, ctypes.addressof(args))
    refusal = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_refusal"))).decode()
    return rc, refusal


def test_stand_ins_launch_what_a_b200_launches(stubs):
    prime(stubs)
    assert try_launch(stubs) == (0, "")
    assert ctypes.c_int.in_dll(stubs, "emu_launches").value == 1


@pytest.mark.parametrize("kwargs,prime_kw,code,words", [
    ({"smem": 232448}, {}, 1, "dynamic 232448 + static 1024"),  # static counts against the per-block maximum
    ({"smem": 220000}, {"max_dynamic": 100000}, 1, "cudaFuncAttributeMaxDynamicSharedMemorySize"),
    ({"smem": 60000}, {"max_dynamic": None}, 1, "above 48 KiB"),
    ({"block": (256, 1, 1)}, {}, 1, ".reqntid is 192"),
    ({"block": (2048, 1, 1)}, {}, 9, "per-block limits"),
    ({"block": (1024, 1, 1)}, {"ptx": STUB_PTX.replace(".reqntid 192, 1, 1\n", ""), "registers": 255}, 701,
     "per block"),
    ({"grid": (16, 1, 1), "cluster": (9, 1, 1)}, {}, 912, "cluster of 9 CTAs > 8"),
    ({"grid": (17, 1, 1), "cluster": (17, 1, 1)}, {"nonportable": 1}, 912, "cluster of 17 CTAs > 16"),
    ({"grid": (3, 1, 1), "cluster": (2, 1, 1)}, {}, 912, "not a multiple of the cluster"),
])
def test_stand_ins_refuse_what_a_b200_refuses(stubs, kwargs, prime_kw, code, words):
    prime(stubs, **prime_kw)
    rc, refusal = try_launch(stubs, **kwargs)
    assert rc == code and words in refusal, (rc, refusal)


@pytest.mark.parametrize("code,name,text", [
    (1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"),  # GPU MODE's B200: "Scale tensormap failed: invalid argument"
    (9, "CUDA_ERROR_INVALID_CONFIGURATION", "invalid configuration argument"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"),
    (912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "a kernel launch error has occurred due to cluster misconfiguration"),
])
def test_stand_ins_name_an_error_in_the_driver_s_words(stubs, code, name, text):
    """Host code that prints a refused call's error prints what it prints on a B200: cuGetErrorString /
    cudaGetErrorString give the driver's and the runtime's words, not the emulator's reason (kept in emu_refusal)."""
    out = ctypes.c_char_p()
    assert stubs.cuGetErrorString(code, ctypes.byref(out)) == 0 and out.value.decode() == text
    assert stubs.cuGetErrorName(code, ctypes.byref(out)) == 0 and out.value.decode() == name
    stubs.cudaGetErrorString.restype = ctypes.c_char_p
    assert stubs.cudaGetErrorString(code).decode() == text


CLUSTER_PTX = STUB_PTX.replace(".reqntid 192, 1, 1\n", ".reqntid 192, 1, 1\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n")


@pytest.mark.parametrize("grid, cluster, code, words, launched", [
    ((4, 1, 1), None, 0, "", (2, 1, 1)),  # <<<>>>: the compile-time shape (gau-nernst's v2: __cluster_dims__(2, 1, 1))
    ((4, 1, 1), (2, 1, 1), 0, "", (2, 1, 1)),  # the same shape asked again
    ((4, 1, 1), (1, 1, 1), 912, "compile-time cluster", None),
    ((3, 1, 1), None, 912, "not a multiple of the cluster", None),
])
def test_a_compile_time_cluster_shape_is_the_launch_s(stubs, grid, cluster, code, words, launched):
    """PTX ISA 11.4 .reqnctapercluster (CUDA's __cluster_dims__): the launch runs in clusters of that shape with or
    without a cluster attribute, and may not ask for another."""
    prime(stubs, ptx=CLUSTER_PTX)
    rc, refusal = try_launch(stubs, grid=grid, cluster=cluster)
    assert rc == code and words in refusal, (rc, refusal)
    if launched:
        c = Dim3.in_dll(stubs, "emu_cluster")
        assert (c.x, c.y, c.z) == launched
    prime(stubs)  # the fixture's other tests: no compile-time shape
    assert try_launch(stubs, cluster=None) == (0, "")
    c = Dim3.in_dll(stubs, "emu_cluster")
    assert (c.x, c.y, c.z) == (1, 1, 1)


def test_non_portable_cluster_needs_the_attribute(stubs):
    prime(stubs, nonportable=1)
    assert try_launch(stubs, grid=(16, 1, 1), cluster=(16, 1, 1)) == (0, "")


def test_dynamic_shared_memory_attribute_cannot_exceed_opt_in_less_static(stubs):
    prime(stubs)
    assert stubs._cudaFuncSetAttribute(None, 8, 232448) == 1  # 232448 > 232448 - 1024
    refusal = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(stubs, "emu_refusal"))).decode()
    assert "opt-in maximum per block less 1024 bytes of static" in refusal


def test_dsl_error_lines():
    text = "warning: x\n\nError: kernel 'k' launch shared memory exceeds current GPU arch sm_100a allowed.\nok\n"
    assert host.dsl_errors(text) == ["Error: kernel 'k' launch shared memory exceeds current GPU arch sm_100a allowed."]
    assert host.dsl_errors("no errors here\nerror-free\n") == []
