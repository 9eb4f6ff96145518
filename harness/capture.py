"""Capture the kernel launch that submission.py's real host code makes, without a GPU.

Route (no GPU, no CUDA driver):
1. A worker subprocess imports the submission (a fresh process per compile: the CuTe DSL reads its
   environment at import), sets CUTE_DSL_ARCH=sm_100a and asks the DSL to keep the PTX, then compiles the
   config exactly as the submission does on its timed path: `compile_config(config, tvm_ffi=True)`, i.e.
   `cute.compile(kernel, *_fake_operands(), options="--enable-tvm-ffi")`. The compiled TVM-FFI function is
   written out with its own `export_to_c(obj, function_name)`: an ELF object holding the real host code
   (argument checks, operand views, the TMA descriptor encoding, the scheduler grid, the launch) and the
   embedded cubin.
2. That object imports a handful of CUDA runtime / DSL runtime / TVM-FFI symbols. harness/launch_stubs.c
   defines stand-ins that record every call; `cc` links the two into a shared library.
3. ctypes calls the exported `__tvm_ffi_<name>` through the TVM-FFI C ABI (TVMFFISafeCallType, with seven
   kTVMFFIDLTensorPtr arguments shaped exactly like the leaderboard's torch tensors, whose data pointers are
   the emulator's global addresses). The stand-in of cudaLaunchKernelEx records grid, block, cluster
   (launch attribute cudaLaunchAttributeClusterDimension), dynamic shared memory and the bytes of every
   kernel parameter (sizes from the PTX .entry signature).

Compiled artifacts are cached per (submission bytes and those of the local modules it imports, config,
sm_count, DSL, host path) under a temp directory ($EMU_LAUNCH_CACHE or <tmp>/emu_launch_cache), so repeated
captures only redo step 3 (milliseconds). The file's location is not part of the key: the worker imports every
copy under one module name (the kernel's mangled name includes it), so equal copies compile to equal artifacts
wherever they are (a planted-bug copy in a fresh pytest tmp_path hits the cache of the previous run).
Needs a C compiler (`cc`, or $CC).
"""
from __future__ import annotations

import ast
import contextlib
import ctypes
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from emu.cubin import EM_CUDA, cubin_resources
from emu.device import B200_DEVICE_ATTRS, B200_LIMITS
from emu.launch import CapturedLaunch, entry_params
from emu.ptx import static_shared_bytes

from .compile_worker import C_ABI_PREFIX, EXPORT_NAME
from .problems import DUAL_GEMM, Problem

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STUBS_C = HERE / "launch_stubs.c"
WORKER = HERE / "compile_worker.py"
# CUfunction_attribute ids (cuda.h) the stand-ins answer; 1 (static shared memory) and 4 (registers) come from the
# kernel's cubin.
KERNEL_ATTRS = {0: B200_LIMITS["threads_per_block"], 1: 0, 2: 0, 3: 0, 4: 0, 5: 100, 6: 100, 8: 0}
CLUSTER_DIM_ATTR = 4  # cudaLaunchAttributeClusterDimension

STUB_LIMITS = ("threads_per_block", "block_x", "block_y", "block_z", "grid_x", "grid_y", "grid_z", "smem_default",
               "smem_optin", "regs_per_block", "reg_unit", "cluster_portable", "cluster_nonportable")


class LaunchError(RuntimeError):
    """The launch a B200 would refuse, or DSL output that says "Error:": the kernel never runs."""


class CompileError(LaunchError):
    """The kernel did not compile (the compile worker failed): it never runs either."""


# ----------------------------------------------------------------------------- compile (worker subprocess)
def _config_fields(config) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def dsl_env(dsl: str) -> dict:
    env = dict(os.environ)
    if dsl == "4.3.5":
        root = REPO / ".venv" / "dsl435"
        env["PYTHONPATH"] = f"{root}{os.pathsep}{root / 'nvidia_cutlass_dsl' / 'python_packages'}"
    elif dsl != "default":
        raise ValueError(f"dsl must be 'default' or '4.3.5', got {dsl!r}")
    return env


def cache_root() -> Path:
    return Path(os.environ.get("EMU_LAUNCH_CACHE") or Path(tempfile.gettempdir()) / "emu_launch_cache")


def source_digest(path, search) -> list:
    """Digests of what compiling the file at `path` reads from source: its own bytes, then each module it imports
    that resolves to a file or package in one of the `search` folders (the first folder holding it wins, as on
    the worker's sys.path). Used in compile-cache keys instead of the path."""
    path = Path(path)
    tree = ast.parse(path.read_bytes())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    digest = [("", hashlib.sha256(path.read_bytes()).hexdigest())]
    for name in sorted(names):
        for folder in map(Path, search):
            files = [folder / f"{name}.py"] if (folder / f"{name}.py").is_file() else \
                sorted((folder / name).rglob("*.py")) if (folder / name / "__init__.py").is_file() else []
            if files:
                digest.append((name, [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]))
                break
    return digest


def cached_compile(subdir: str, key_parts, job: dict, worker: Path, worker_flag: str, env: dict | None = None,
                   done_file: str = "meta.json") -> Path:
    """Run a compile worker script (a fresh process per compile: the DSL keeps global state) once per key.

    The worker gets the job as JSON (with "out": its output folder) and must write `done_file` there. Output lands
    in cache_root()/subdir/<key>; a concurrent run that finished first wins."""
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True, default=repr).encode()).hexdigest()[:24]
    root = cache_root() / subdir if subdir else cache_root()
    out = root / key
    if (out / done_file).exists():
        return out
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=key + ".tmp.", dir=root))
    (tmp / "dump").mkdir()
    (tmp / "job.json").write_text(json.dumps({**job, "out": str(tmp)}))
    env = dict(env if env is not None else os.environ)
    env.setdefault("CUTE_DSL_ARCH", "sm_100a")
    env.update(CUTE_DSL_DUMP_DIR=str(tmp / "dump"), CUTE_DSL_DISABLE_FILE_CACHING="1")
    if "CUTE_DSL_KEEP_PTX" not in env:
        env.setdefault("CUTE_DSL_KEEP", "ptx,cubin")
    p = subprocess.run([sys.executable, str(Path(worker).resolve()), worker_flag, str(tmp / "job.json")], cwd=str(REPO),
                       env=env, capture_output=True, text=True, timeout=900)
    if p.returncode or not (tmp / done_file).exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise CompileError(f"compile worker {Path(worker).name} failed (rc {p.returncode}):\n{(p.stdout + p.stderr)[-4000:]}")
    (tmp / COMPILE_LOG).write_text(p.stdout + p.stderr)
    try:
        os.replace(tmp, out)
    except OSError:  # another process won the race: use its copy
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def compile_artifacts(submission_path: str, config, sm_count: int | None = None, dsl: str = "default",
                      variant: str | None = None) -> Path:
    """Directory holding kernel.ptx, kernel.o and meta.json; compiled once per key. variant: the host path compiled,
    "tvm_ffi" or "pointer"; None: default_host_path(), the one custom_kernel compiles in this environment (the DSL
    refuses a TVM-FFI compile where apache-tvm-ffi is missing)."""
    variant = variant or default_host_path()
    fields = _config_fields(config)
    key = [source_digest(submission_path, (Path(submission_path).resolve().parent, REPO)),
           sorted((k, repr(v)) for k, v in fields.items()), sm_count, dsl, variant,
           installed_dsl() if dsl == "default" else dsl, hashlib.sha256(WORKER.read_bytes()).hexdigest()]
    job = {"submission": str(Path(submission_path).resolve()), "sm_count": sm_count, "variant": variant,
           "config": {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}}
    env = dsl_env(dsl)
    if dsl == "4.3.5":  # 4.3.5 knows only the per-artifact switches
        env.update(CUTE_DSL_KEEP_PTX="1", CUTE_DSL_KEEP_CUBIN="1")
        env.pop("CUTE_DSL_KEEP", None)
        # 4.3.5 builds a JIT engine whose runtime library is linked against libcuda.so.1; on a machine without
        # a driver a placeholder (no GPU functionality: every entry point fails) lets it load. Never run here.
        env["LD_LIBRARY_PATH"] = f"{placeholder_libcuda()}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    # Run as a script (not `-m harness.compile_worker`): the worker must not import the emulator or the harness.
    return cached_compile("", key, job, WORKER, "--worker", env)


def placeholder_libcuda() -> Path:
    """A directory with a libcuda.so.1 whose two entry points (the ones 4.3.5's libcuda_dialect_runtime.so
    imports) only return CUDA_ERROR_NO_DEVICE (100)."""
    d = cache_root() / "placeholder_libcuda"
    lib = d / "libcuda.so.1"
    if not lib.exists():
        d.mkdir(parents=True, exist_ok=True)
        src = d / f"libcuda.{os.getpid()}.c"  # per process: a concurrent writer must not truncate it under cc
        src.write_text("int cuKernelGetAttribute(void) { return 100; }\nint cuLibraryUnload(void) { return 100; }\n")
        tmp = d / f"libcuda.{os.getpid()}.so"
        subprocess.run([c_compiler(), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(tmp), str(src)],
                       check=True, capture_output=True)
        os.replace(tmp, lib)
        src.unlink()
    return d


def installed_dsl() -> str:
    """The installed nvidia-cutlass-dsl (metadata only: importing it would pick one version for the process)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ----------------------------------------------------------------------------- link and call
def c_compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RuntimeError("harness.capture needs a C compiler (cc/gcc/clang, or $CC): e.g. apt-get install gcc")
    return cc


def build_library(art: Path) -> Path:
    stubs_id = hashlib.sha256(STUBS_C.read_bytes()).hexdigest()[:12]
    lib = art / f"host-{stubs_id}.so"
    if not lib.exists():
        tmp = art / f"host.{os.getpid()}.so"
        cmd = [c_compiler(), "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-Wl,-z,defs", "-o", str(tmp),
               str(STUBS_C), str(art / "kernel.o")]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"linking the host object failed: {' '.join(cmd)}\n{p.stderr[-3000:]}")
        os.replace(tmp, lib)
    return lib


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # dlpack.h
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _TVMFFIAny(ctypes.Structure):  # tvm/ffi/c_api.h: {int32 type_index; uint32 pad; 8-byte value}
    _fields_ = [("type_index", ctypes.c_int32), ("zero_padding", ctypes.c_uint32), ("v_int64", ctypes.c_int64)]


K_TVMFFI_NONE, K_TVMFFI_DLTENSOR_PTR = 0, 7
K_DL_CUDA = 2
COMPILE_LOG = "compile.log"  # what the compile worker printed (kept: a DSL "Error:" line fails the run)


def dsl_errors(text: str) -> list[str]:
    """The lines of DSL output that report an error ("Error: ..."): the DSL prints some limits it knows are broken
    (e.g. "launch shared memory exceeds current GPU arch sm_100a allowed") and carries on."""
    return [line.strip() for line in text.splitlines() if "Error:" in line]


@contextlib.contextmanager
def host_output(lib):
    """Capture what the exported host code prints (C stdio on file descriptors 1 and 2) while the block runs;
    the captured text is in the yielded list's first element afterwards."""
    out = [""]
    with tempfile.TemporaryFile() as tmp:
        saved = [os.dup(1), os.dup(2)]
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield out
        finally:
            lib.emu_flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            out[0] = tmp.read().decode(errors="replace")


def read_log(lib) -> list[str]:
    n = ctypes.c_int.in_dll(lib, "emu_log_len").value
    buf = (ctypes.c_char * 160 * 256).in_dll(lib, "emu_log")
    return [bytes(buf[i]).split(b"\0", 1)[0].decode() for i in range(n)]


def _image_size(lib_data: int) -> int:
    """Size of the module image passed to cudaLibraryLoadData: a fatbinary (header: u32 magic 0xBA55ED50,
    u16 version, u16 header size, u64 payload size) or an ELF64 cubin (its section headers or farthest section)."""
    hdr = ctypes.string_at(lib_data, 64)
    if int.from_bytes(hdr[:4], "little") == 0xBA55ED50:
        return int.from_bytes(hdr[6:8], "little") + int.from_bytes(hdr[8:16], "little")
    if hdr[:4] != b"\x7fELF" or hdr[4] != 2:
        raise RuntimeError(f"cudaLibraryLoadData got neither a fatbinary nor an ELF64 image (magic {hdr[:8].hex()})")
    shoff = int.from_bytes(hdr[0x28:0x30], "little")
    shentsize = int.from_bytes(hdr[0x3A:0x3C], "little")
    shnum = int.from_bytes(hdr[0x3C:0x3E], "little")
    end = shoff + shentsize * shnum
    for i in range(shnum):
        sh = ctypes.string_at(lib_data + shoff + i * shentsize, shentsize)
        if int.from_bytes(sh[4:8], "little") == 8:  # SHT_NOBITS
            continue
        end = max(end, int.from_bytes(sh[0x18:0x20], "little") + int.from_bytes(sh[0x20:0x28], "little"))
    return end


def device_elf(art: Path) -> bytes | None:
    """The kernel's cubin: <art>/kernel.cubin, else the sm_100 ELF embedded (uncompressed) in the host object."""
    if (art / "kernel.cubin").exists():
        return (art / "kernel.cubin").read_bytes()
    obj = (art / "kernel.o").read_bytes() if (art / "kernel.o").exists() else b""
    at = obj.find(b"\x7fELF", 1)
    while at > 0:
        if int.from_bytes(obj[at + 18:at + 20], "little") == EM_CUDA:
            return obj[at:]
        at = obj.find(b"\x7fELF", at + 1)
    return None


def kernel_resources(art: Path, kernel_name: str) -> dict:
    """cubin_resources of the artifact's kernel; None values where its cubin cannot be found."""
    elf = device_elf(art)
    return cubin_resources(elf, kernel_name) if elf else {"registers": None, "static_smem": None}


def open_host_library(art: Path, ptx: str):
    """Load the linked host library with the runtime stand-ins primed (prime_stubs). Returns (lib, kernel_name,
    params)."""
    lib = ctypes.CDLL(str(build_library(art)), mode=os.RTLD_LOCAL if hasattr(os, "RTLD_LOCAL") else 0)
    kernel_name, params = entry_params(ptx)
    prime_stubs(lib, ptx, {**kernel_resources(art, kernel_name), "static_smem": static_shared_bytes(ptx)})
    return lib, kernel_name, params


def prime_stubs(lib, ptx: str, resources: dict) -> None:
    """Set what the runtime stand-ins answer and enforce before a host call: parameter sizes from the PTX, the B200's
    device attributes and launch limits, the kernel's registers and static shared memory (`resources`, from its
    cubin) and .reqntid."""
    _, params = entry_params(ptx)
    lib.emu_reset()
    ctypes.c_int.in_dll(lib, "emu_num_params").value = len(params)
    sizes = (ctypes.c_int * 64).in_dll(lib, "emu_param_sizes")
    for i, (_, size, _, _) in enumerate(params):
        sizes[i] = size
    dev = (ctypes.c_int * 256).in_dll(lib, "emu_device_attr_values")
    for i in range(256):
        dev[i] = B200_DEVICE_ATTRS.get(i, -1)
    kattrs = {**KERNEL_ATTRS, 1: resources["static_smem"] or 0, 4: resources["registers"] or 0}
    kat = (ctypes.c_int * 64).in_dll(lib, "emu_kernel_attr_values")
    for i in range(64):
        kat[i] = kattrs.get(i, -1)
    static = resources["static_smem"]
    ctypes.c_int.in_dll(lib, "emu_kernel_static_smem").value = -1 if static is None else static
    ctypes.c_int.in_dll(lib, "emu_kernel_registers").value = resources["registers"] or -1
    reqntid = (ctypes.c_uint * 3).in_dll(lib, "emu_kernel_reqntid")
    m = re.search(r"\.reqntid\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", ptx)
    for i, v in enumerate(m.groups() if m else (0, 0, 0)):
        reqntid[i] = int(v)
    for key in STUB_LIMITS:
        (ctypes.c_long if key == "grid_x" else ctypes.c_int).in_dll(lib, f"emu_limit_{key}").value = B200_LIMITS[key]
    lib.resources = resources


def recorded_launch(lib, kernel_name: str, params: list, status: int, what: str, printed: str = "") -> dict:
    """What the stand-ins saw after the host code ran once: exactly one launch of the PTX's .entry. A launch the
    B200 would refuse, or host output with a DSL "Error:" line, raises LaunchError."""
    log = read_log(lib)
    err = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_error"))).decode(errors="replace")
    refusal = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_refusal"))).decode(errors="replace")
    if refusal:
        raise LaunchError(f"a B200 refuses this launch: {refusal} ({what} returned {status}; runtime calls: {log})")
    if dsl_errors(printed):
        raise LaunchError(f"the DSL's host code reported an error at launch: {' | '.join(dsl_errors(printed))}")
    if status != 0:
        raise RuntimeError(f"{what} returned {status}: {err or '(no error message)'}; runtime calls: {log}")
    launches = ctypes.c_int.in_dll(lib, "emu_launches").value
    if launches != 1:
        raise RuntimeError(f"expected one cudaLaunchKernelEx, saw {launches}; runtime calls: {log}")

    class Dim3(ctypes.Structure):
        _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

    grid = Dim3.in_dll(lib, "emu_grid")
    block = Dim3.in_dll(lib, "emu_block")
    nattr = ctypes.c_uint.in_dll(lib, "emu_num_attrs").value
    attr_raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_attrs")), 72 * nattr)
    attrs = [(int.from_bytes(attr_raw[72 * i:72 * i + 4], "little"), attr_raw[72 * i + 8:72 * i + 72]) for i in range(nattr)]
    raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_param_bytes")), sum(p[1] for p in params))
    blobs, off = [], 0
    for _, size, _, _ in params:
        blobs.append(raw[off:off + size])
        off += size
    lib_data = ctypes.c_void_p.in_dll(lib, "emu_library_data").value
    cubin = ctypes.string_at(lib_data, _image_size(lib_data)) if lib_data else b""
    recorded_name = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_kernel_name"))).decode()
    if recorded_name != kernel_name:
        raise RuntimeError(f"launched kernel {recorded_name!r} is not the PTX's .entry {kernel_name!r}")
    cluster = (1, 1, 1)
    for aid, val in attrs:
        if aid == CLUSTER_DIM_ATTR:
            cluster = tuple(int.from_bytes(val[4 * j:4 * j + 4], "little") for j in range(3))
    return {"kernel_name": recorded_name, "params": params, "blobs": blobs,
            "grid": (grid.x, grid.y, grid.z), "block": (block.x, block.y, block.z), "cluster": cluster,
            "dynamic_smem": ctypes.c_size_t.in_dll(lib, "emu_dynamic_smem").value, "attrs": attrs,
            "cubin": cubin, "log": log, **lib.resources}


def call_host_c_abi(art: Path, ptx: str, prefix: str, args: list) -> dict:
    """Call a host function exported with the plain C ABI of export_to_c (header <prefix>.h, object kernel.o).

    The header defines the convention: `_mlir_<p>_cuda_init(void **)` takes {cudaLibrary_t **, cudaError_t *},
    `_mlir_<p>_cuda_load_to_device(void **)` takes {cudaLibrary_t **, int32 *device, cudaError_t *}, and the entry
    `_mlir_<p>__mlir_ciface_...(void **args, int32 num_args)` takes pointers to each argument, then the queue
    handle if the function takes one (passed as the default queue) and an int32 return slot. `args`: (name in the
    header, ctypes value) pairs in the header's order.
    Returns what the runtime stand-ins saw (recorded_launch)."""
    header = (art / f"{prefix}.h").read_text()
    m_entry = re.search(r"void\s+(_mlir_%s__mlir_ciface_\w+)\(void \*\*args, int32_t num_args\)" % prefix, header)
    m_args = re.search(r"void \*args\[(\d+)\] = \{\s*(.*?)\s*\};", header, re.S)
    if not m_entry or not m_args:
        raise RuntimeError(f"cannot find the host entry / argument list in {art / (prefix + '.h')}")
    names = [a.strip().lstrip("&") for a in m_args.group(2).split(",") if a.strip()]
    want = [name for name, _ in args]
    tail = names[len(want):]
    if names[:len(want)] != want or len(tail) not in (1, 2) or tail[-1] != "ret":
        raise RuntimeError(f"unexpected host argument list {names} (expected {want}, [queue,] ret)")
    lib, kernel_name, params = open_host_library(art, ptx)
    storage = ctypes.c_void_p(0)
    library_ptr = ctypes.c_void_p(ctypes.addressof(storage))
    ret = ctypes.c_int32(0)
    device_id = ctypes.c_int32(0)
    with host_output(lib) as printed:
        for fn_name, packed in ((f"_mlir_{prefix}_cuda_init", (library_ptr, ret)),
                                (f"_mlir_{prefix}_cuda_load_to_device", (library_ptr, device_id, ret))):
            fn = getattr(lib, fn_name)
            fn.restype, fn.argtypes = None, [ctypes.c_void_p]
            arr = (ctypes.c_void_p * len(packed))(*[ctypes.addressof(x) for x in packed])
            fn(ctypes.addressof(arr))
            if ret.value:
                break
        else:
            vals = [v for _, v in args] + [ctypes.c_void_p(0)] * (len(tail) - 1) + [ctypes.c_int32(0)]  # queue, ret
            arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
            entry = getattr(lib, m_entry.group(1))
            entry.restype, entry.argtypes = None, [ctypes.c_void_p, ctypes.c_int32]
            entry(ctypes.addressof(arr), len(vals))
    if ret.value:
        raise RuntimeError(f"{fn_name} returned cudaError {ret.value}; runtime calls: {read_log(lib)}")
    return recorded_launch(lib, kernel_name, params, vals[-1].value, "the host entry", printed[0])


def call_host_pointers(art: Path, ptx: str, m: int, n: int, k: int, l: int, addresses: dict[str, int],
                       problem: Problem = DUAL_GEMM) -> dict:
    """The submission's pointer fallback (DualGemmKernel.launch_from_pointers: a pointer per operand and M, N, K, L),
    the path custom_kernel takes where apache-tvm-ffi is missing."""
    args = [(f"{name}_ptr", ctypes.c_void_p(int(addresses[name]))) for name in problem.operands]
    args += [(dim, ctypes.c_int32(v)) for dim, v in zip("mnkl", (m, n, k, l))]
    return call_host_c_abi(art, ptx, C_ABI_PREFIX, args)


def call_host(art: Path, ptx: str, m: int, n: int, k: int, l: int, addresses: dict[str, int], extra=(),
              problem: Problem = DUAL_GEMM) -> dict:
    """Call the exported TVM-FFI host function once with DLTensors at `addresses`; return what the stubs saw.
    `extra`: (name, dtype, shape, strides) of tensors the function takes after the leaderboard's operands."""
    lib, kernel_name, params = open_host_library(art, ptx)
    keep = []
    tensors = {**problem.tensors(m, n, k, l), **{name: spec for name, *spec in extra}}
    names = problem.operands + tuple(name for name, *_ in extra)
    args = (_TVMFFIAny * len(names))()
    for i, name in enumerate(names):
        (code, bits, lanes), shape, strides = tensors[name]
        sh = (ctypes.c_int64 * len(shape))(*shape)
        st = (ctypes.c_int64 * len(strides))(*strides)
        t = _DLTensor(ctypes.c_void_p(int(addresses[name])), _DLDevice(K_DL_CUDA, 0), len(shape),
                      _DLDataType(code, bits, lanes), sh, st, 0)
        keep += [sh, st, t]
        args[i].type_index = K_TVMFFI_DLTENSOR_PTR
        args[i].v_int64 = ctypes.addressof(t)
    result = _TVMFFIAny(K_TVMFFI_NONE, 0, 0)
    fn = getattr(lib, "__tvm_ffi_" + EXPORT_NAME)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p]
    with host_output(lib) as printed:
        rc = fn(None, ctypes.addressof(args), len(names), ctypes.addressof(result))
    return recorded_launch(lib, kernel_name, params, rc, "the host function", printed[0])


def tvm_ffi_installed() -> bool:
    """Whether apache-tvm-ffi imports here (the compile worker runs in the same environment): submission.py's own
    test for its TVM-FFI entry (USE_TVM_FFI)."""
    try:
        import tvm_ffi  # noqa: F401
    except ImportError:
        return False
    return True


def default_host_path() -> str:
    """The host path custom_kernel takes in this environment: "tvm_ffi" where apache-tvm-ffi imports, else its
    pointer fallback ("pointer"). Every emulator and tool path defaults to it, so a machine without the optional
    apache-tvm-ffi emulates the launch custom_kernel would make there."""
    return "tvm_ffi" if tvm_ffi_installed() else "pointer"


def capture_launch(submission_path: str, config, m: int, n: int, k: int, l: int,
                   addresses: dict[str, int], sm_count: int | None = None, dsl: str = "default",
                   host_path: str | None = None, extra=(), problem: Problem = DUAL_GEMM) -> CapturedLaunch:
    """The launch submission_path's host code makes for config on an (m, n, k, l) problem whose operands live at
    `addresses` (problem.operands: emulator global addresses). host_path None: default_host_path(). `extra`:
    (name, dtype, shape, strides) of further tensor arguments (at addresses[name]), TVM-FFI entry only."""
    import time

    missing = [n_ for n_ in problem.operands + tuple(e[0] for e in extra) if n_ not in addresses]
    if missing:
        raise ValueError(f"addresses lacks {missing}")
    t0 = time.time()
    host_path = host_path or default_host_path()
    if host_path not in ("tvm_ffi", "pointer"):
        raise ValueError(f"host_path must be 'tvm_ffi' or 'pointer', got {host_path!r}")
    if extra and host_path != "tvm_ffi":
        raise RuntimeError("extra tensor arguments (the profile buffer) need the TVM-FFI entry (apache-tvm-ffi): the "
                         "pointer fallback takes the problem's operands only")
    art = compile_artifacts(submission_path, config, sm_count, dsl, variant=host_path)
    t1 = time.time()
    ptx = (art / "kernel.ptx").read_text()
    meta = json.loads((art / "meta.json").read_text())
    if not (art / "kernel.o").exists():
        raise RuntimeError(f"nvidia-cutlass-dsl {meta['dsl_version']} cannot export the {host_path} host function "
                           f"({meta.get('no_host_export')}): its launch cannot be captured under this DSL version")
    log = art / COMPILE_LOG
    if log.exists() and dsl_errors(log.read_text()):
        raise LaunchError(f"the DSL reported an error while compiling {config.name}: "
                          + " | ".join(dsl_errors(log.read_text())))
    if host_path == "tvm_ffi":
        rec = call_host(art, ptx, m, n, k, l, addresses, extra, problem)
    else:
        rec = call_host_pointers(art, ptx, m, n, k, l, addresses, problem)
    t2 = time.time()
    return CapturedLaunch(
        ptx=ptx, kernel_name=rec["kernel_name"], grid=rec["grid"], block=rec["block"], cluster=rec["cluster"],
        dynamic_smem=rec["dynamic_smem"], params=rec["blobs"], dsl_version=meta["dsl_version"],
        param_names=[p[0] for p in rec["params"]], param_decls=[p[3] for p in rec["params"]], cubin=rec["cubin"],
        launch_attrs=rec["attrs"], runtime_log=rec["log"], artifact_dir=str(art),
        timings={"compile_s": round(t1 - t0, 3), "call_s": round(t2 - t1, 3), "worker": meta},
        registers=rec["registers"], static_smem=rec["static_smem"],
    )
