"""harness/capture.py: the real host code of submission.py, compiled offline and called through stand-ins of the
CUDA runtime, launches what its plan() says, with tensor maps that point at the emulator's addresses.

Each config's first capture compiles it in a subprocess (~3-5 s on 2 CPUs; cached per process environment
under $EMU_LAUNCH_CACHE or the temp dir); later captures take ~0.1 s."""
from pathlib import Path

import pytest

from emu import tma
from emu.launch import entry_params
from harness import capture
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
    copy = tmp_path / "sub_copy.py"
    copy.write_text((ROOT / "submission.py").read_text().replace("THREADS_PER_CTA = 32 * 6", "THREADS_PER_CTA = 32 * 6  # copy"))
    cap = capture.capture_launch(str(copy), sub.KernelConfig(mma_tile_mn=(128, 64)), *SHAPE, ADDRS)
    assert cap.block == (192, 1, 1)


def test_entry_params_parser():
    ptx = """.visible .entry k(
        .param .align 64 .b8 k_param_0[128],
        .param .u32 k_param_1, // comment
        .param .align 4 .b8 k_param_2[12]
    )
    { ret; }"""
    name, params = entry_params(ptx)
    assert name == "k" and [(p[0], p[1], p[2]) for p in params] == [("k_param_0", 128, 64), ("k_param_1", 4, 4),
                                                                      ("k_param_2", 12, 4)]


@pytest.mark.slow
@pytest.mark.skipif(not (ROOT / ".venv" / "dsl435" / ".complete").exists(), reason="needs .venv/dsl435 (tools/setup.sh)")
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
