"""Capture the kernel launch that submission.py's real host code makes, without a GPU.

Route (no GPU, no CUDA driver):
1. A worker subprocess imports the submission (a fresh process per compile: the CuTe DSL reads its
   environment at import), sets CUTE_DSL_ARCH=sm_100a and asks the DSL to keep the PTX, then compiles the
   config exactly as the submission does on its timed path: `compile_config(config, tvm_ffi=True)`, i.e.
   `cute.compile(kernel, *_fake_operands(), options="--enable-tvm-ffi")`. The compiled TVM-FFI function is
   written out with its own `export_to_c(obj, function_name)`: an ELF object holding the real host code
   (argument checks, operand views, the TMA descriptor encoding, the scheduler grid, the launch) and the
   embedded cubin.
2. That object imports a handful of CUDA runtime / DSL runtime / TVM-FFI symbols. emu/launch_stubs.c
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
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STUBS_C = HERE / "launch_stubs.c"
EXPORT_NAME = "emu_kernel"
OPERANDS = ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "c")

# The B200's answers to the device queries the host code may make (cudaDeviceAttr ids, driver_types.h).
B200_DEVICE_ATTRS = {
    1: 1024,     # cudaDevAttrMaxThreadsPerBlock
    8: 49152,    # cudaDevAttrMaxSharedMemoryPerBlock
    10: 32,      # cudaDevAttrWarpSize
    12: 65536,   # cudaDevAttrMaxRegistersPerBlock
    16: 148,     # cudaDevAttrMultiProcessorCount
    75: 10,      # cudaDevAttrComputeCapabilityMajor
    76: 0,       # cudaDevAttrComputeCapabilityMinor
    81: 233472,  # cudaDevAttrMaxSharedMemoryPerMultiprocessor
    97: 232448,  # cudaDevAttrMaxSharedMemoryPerBlockOptin
    120: 1,      # cudaDevAttrClusterLaunch
}
# CUfunction_attribute ids (cuda.h); 1 (static shared memory) and 4 (registers) come from the kernel's cubin.
KERNEL_ATTRS = {0: 1024, 1: 0, 2: 0, 3: 0, 4: 0, 5: 100, 6: 100, 8: 0}
CLUSTER_DIM_ATTR = 4  # cudaLaunchAttributeClusterDimension

# What a B200 (sm_100) accepts at launch and keeps resident per SM. Sources: NVIDIA CCCL
# libcudacxx/include/cuda/__device/arch_traits.h (arch_traits<sm_100>: 1024 threads per block, block dims
# 1024 x 1024 x 64, grid 2^31-1 x 65535 x 65535, 48 KiB of shared memory per block without opt-in, 228 KiB per SM,
# 1 KiB reserved per block, so 232448 bytes opt-in per block, static included; 65536 registers per block and per
# SM, at most 255 per thread; 32 blocks and 2048 threads per SM), the same numbers as the CUDA C++ Programming
# Guide's "Technical Specifications per Compute Capability" table (10.0); clusters: CUDA C++ Programming Guide,
# "Thread Block Clusters" (8 CTAs portable; more only with cudaFuncAttributeNonPortableClusterSizeAllowed, up to
# 16); registers are allocated per warp in units of 256 (the CUDA occupancy calculator's allocation unit for
# compute capability 9.0 and 10.0; an assumption for the B200). Tensor memory: 512 columns per SM (PTX ISA
# 9.7.16.1), shared by every CTA resident on it; tcgen05.alloc blocks while the columns are taken (9.7.16.7.1).
B200_LIMITS = {
    "threads_per_block": 1024, "block_x": 1024, "block_y": 1024, "block_z": 64,
    "grid_x": 2**31 - 1, "grid_y": 65535, "grid_z": 65535,
    "smem_default": 48 * 1024, "smem_optin": 232448, "smem_per_sm": 228 * 1024, "smem_reserved_per_block": 1024,
    "regs_per_block": 65536, "regs_per_sm": 65536, "reg_unit": 256,
    "blocks_per_sm": 32, "threads_per_sm": 2048,
    "cluster_portable": 8, "cluster_nonportable": 16,
    "tmem_columns_per_sm": 512,
}


def tensor_memory_oversubscribed(launch, columns: int) -> str | None:
    """Why a CTA of `launch` holding `columns` tensor-memory columns is a problem on a B200, or None: every CTA that
    can be resident on the same SM (occupancy, at most the grid's CTAs) holds as many, and the SM has 512 (PTX ISA
    9.7.16.1); a
    tcgen05.alloc beyond that blocks until another CTA frees columns (9.7.16.7.1), so co-resident CTAs serialise,
    or deadlock where one waits for another (a cluster peer, or the previous kernel under programmatic dependent
    launch)."""
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    grid = launch.grid[0] * launch.grid[1] * launch.grid[2]
    resident = min(grid, occupancy(threads, getattr(launch, "registers", None),
                                   launch.dynamic_smem + (getattr(launch, "static_smem", None) or 0)))
    if resident * columns <= B200_LIMITS["tmem_columns_per_sm"]:
        return None
    return (f"tensor memory over-subscribed: {resident} CTAs of this launch can be resident on one SM (threads, "
            f"registers, shared memory) and each holds {columns} columns: {resident * columns} > "
            f"{B200_LIMITS['tmem_columns_per_sm']} per SM, so tcgen05.alloc blocks until another CTA frees its "
            f"columns (PTX ISA 9.7.16.7.1): co-resident CTAs serialise or deadlock")


STUB_LIMITS = ("threads_per_block", "block_x", "block_y", "block_z", "grid_x", "grid_y", "grid_z", "smem_default",
               "smem_optin", "regs_per_block", "reg_unit", "cluster_portable", "cluster_nonportable")


class LaunchError(RuntimeError):
    """The launch a B200 would refuse, or DSL output that says "Error:": the kernel never runs."""


class CompileError(LaunchError):
    """The kernel did not compile (the compile worker failed): it never runs either."""


def occupancy(threads: int, registers: int | None, smem_per_block: int) -> int:
    """CTAs of one kernel that can be resident on one B200 SM at once (B200_LIMITS), 0 if not even one fits.
    `smem_per_block`: static + dynamic shared memory (the driver adds its reserved 1 KiB per block)."""
    lim = B200_LIMITS
    warps = -(-threads // 32)
    fits = [lim["blocks_per_sm"], lim["threads_per_sm"] // max(threads, 1),
            lim["smem_per_sm"] // (smem_per_block + lim["smem_reserved_per_block"])]
    if registers:
        per_warp = -(-registers * 32 // lim["reg_unit"]) * lim["reg_unit"]
        fits.append(lim["regs_per_sm"] // (per_warp * warps))
    return max(min(fits), 0)


@dataclass
class CapturedLaunch:
    ptx: str                      # PTX text of the module holding the kernel
    kernel_name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    dynamic_smem: int
    params: list[bytes]           # one entry per .param of the kernel, in PTX order, exact bytes as launched
    dsl_version: str
    # extras
    param_names: list[str] = field(default_factory=list)
    param_decls: list[str] = field(default_factory=list)
    cubin: bytes = b""          # the module image handed to cudaLibraryLoadData (a fatbinary holding the cubin)
    launch_attrs: list[tuple[int, bytes]] = field(default_factory=list)
    runtime_log: list[str] = field(default_factory=list)
    artifact_dir: str = ""
    timings: dict = field(default_factory=dict)
    registers: int | None = None  # per thread, from the cubin (None: not known for this capture)
    static_smem: int | None = None  # bytes of static shared memory the driver charges (static_shared_bytes)



# ----------------------------------------------------------------------------- PTX .entry signature
def entry_params(ptx: str) -> tuple[str, list[tuple[str, int, int, str]]]:
    """(name, [(param name, size in bytes, alignment, declaration)]) of the kernel's .entry (emu.ptx's parser)."""
    from .ptx import parse_entry  # not at module level: the compile worker runs this file as a script

    name, params = parse_entry(ptx)
    return name, [(p.name, p.size, p.align, p.decl) for p in params]


# ----------------------------------------------------------------------------- compile (worker subprocess)
def _config_fields(config) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _dsl_env(dsl: str) -> dict:
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
                      variant: str = "tvm_ffi") -> Path:
    """Directory holding kernel.ptx, kernel.o (variant tvm_ffi) and meta.json; compiled once per key."""
    fields = _config_fields(config)
    key = [source_digest(submission_path, (Path(submission_path).resolve().parent, REPO)),
           sorted((k, repr(v)) for k, v in fields.items()), sm_count, dsl, variant,
           installed_dsl() if dsl == "default" else dsl, hashlib.sha256(Path(__file__).read_bytes()).hexdigest()]
    job = {"submission": str(Path(submission_path).resolve()), "sm_count": sm_count, "variant": variant,
           "config": {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}}
    env = _dsl_env(dsl)
    if dsl == "4.3.5":  # 4.3.5 knows only the per-artifact switches
        env.update(CUTE_DSL_KEEP_PTX="1", CUTE_DSL_KEEP_CUBIN="1")
        env.pop("CUTE_DSL_KEEP", None)
        # 4.3.5 builds a JIT engine whose runtime library is linked against libcuda.so.1; on a machine without
        # a driver a placeholder (no GPU functionality: every entry point fails) lets it load. Never run here.
        env["LD_LIBRARY_PATH"] = f"{_placeholder_libcuda()}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    # Run as a script (not `-m emu.launch`): the worker must not import the emulator package.
    return cached_compile("", key, job, Path(__file__), "--worker", env)


def _placeholder_libcuda() -> Path:
    """A directory with a libcuda.so.1 whose two entry points (the ones 4.3.5's libcuda_dialect_runtime.so
    imports) only return CUDA_ERROR_NO_DEVICE (100)."""
    d = cache_root() / "placeholder_libcuda"
    lib = d / "libcuda.so.1"
    if not lib.exists():
        d.mkdir(parents=True, exist_ok=True)
        src = d / f"libcuda.{os.getpid()}.c"  # per process: a concurrent writer must not truncate it under cc
        src.write_text("int cuKernelGetAttribute(void) { return 100; }\nint cuLibraryUnload(void) { return 100; }\n")
        tmp = d / f"libcuda.{os.getpid()}.so"
        subprocess.run([_compiler(), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(tmp), str(src)],
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


def _worker(job_path: str) -> None:
    import importlib.metadata
    import importlib.util
    import time

    # Run as a script, sys.path[0] is emu/: its modules (run, isa, machine, ...) must not shadow anything.
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != HERE]
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out"])
    sub_path = Path(job["submission"])
    for p in (str(REPO), str(sub_path.parent)):
        if p not in sys.path:
            sys.path.insert(0, p)
    name = "emu_submission"  # one name for every copy: the artifacts must not depend on where the file is
    spec = importlib.util.spec_from_file_location(name, sub_path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    t0 = time.time()
    spec.loader.exec_module(mod)
    if job["sm_count"] is not None:
        mod.SM_COUNT = int(job["sm_count"])
    cfg = mod.KernelConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["config"].items()})
    t1 = time.time()
    meta = {"dsl_version": dsl_version(), "config": cfg.name, "import_s": round(t1 - t0, 2)}
    driver_missing = None
    compiled = None
    try:  # 4.3.5 runs a cuInit(0) check before building its JIT engine; with no driver that check fails after
        # the PTX/cubin are written. The check is skipped (the engine itself is never run here).
        from cutlass.base_dsl import compiler as _dsl_compiler

        if hasattr(_dsl_compiler.Compiler, "_check_cuda_dependencies_once"):
            _dsl_compiler.Compiler._check_cuda_dependencies_once = lambda self, shared_libs: None
    except ImportError:
        pass
    try:
        if job["variant"] == "tvm_ffi":
            compiled = mod.compile_config(cfg, tvm_ffi=True)
        else:  # the pointer fallback custom_kernel uses without apache-tvm-ffi
            compiled = mod.compile_config(cfg, tvm_ffi=False).compiled
    except Exception as e:  # noqa: BLE001
        chain, c = [], e
        while c is not None:
            chain.append(type(c).__name__)
            c = c.__cause__ or c.__context__
        if {"DynamicLibNotFoundError", "CudaDriverDependencyError"} & set(chain) and any((out / "dump").glob("*.ptx")):
            driver_missing = " <- ".join(chain)
        else:
            raise
    meta["compile_s"] = round(time.time() - t1, 2)
    ptxs = sorted((out / "dump").glob("*.ptx"))
    if len(ptxs) != 1:
        raise RuntimeError(f"expected one PTX file in the dump, found {[p.name for p in ptxs]}")
    shutil.copy(ptxs[0], out / "kernel.ptx")
    cubins = [c for c in sorted((out / "dump").glob("*.cubin")) if not c.name.endswith(".ptxas.cubin")]
    if cubins:
        shutil.copy(cubins[0], out / "kernel.cubin")
    if compiled is None:
        raise RuntimeError(f"the DSL raised {driver_missing} before returning the compiled function: "
                           "no host object to export")
    if job["variant"] == "tvm_ffi":
        compiled.export_to_c(str(out / "kernel.o"), EXPORT_NAME)
    elif hasattr(compiled, "export_to_c"):  # plain C ABI: <prefix>.h and <prefix>.o
        compiled.export_to_c(str(out), C_ABI_PREFIX)
        os.replace(out / f"{C_ABI_PREFIX}.o", out / "kernel.o")
    else:  # 4.3.5's non-TVM-FFI compiled function cannot be exported: the PTX alone is kept (device-code checks)
        meta["no_host_export"] = f"{type(compiled).__name__} has no export_to_c"
    meta["driver_missing"] = driver_missing
    meta["total_s"] = round(time.time() - t0, 2)
    (out / "meta.json").write_text(json.dumps(meta))


def dsl_version() -> str:
    """The imported CuTe DSL's version (in a compile worker: the one its PYTHONPATH selected)."""
    import importlib.metadata

    try:
        import cutlass

        v = getattr(cutlass, "__version__", None)
        if v:
            return str(v)
    except Exception:  # noqa: BLE001
        pass
    return importlib.metadata.version("nvidia-cutlass-dsl")


# ----------------------------------------------------------------------------- link and call
def _compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RuntimeError("emu.launch needs a C compiler (cc/gcc/clang, or $CC): e.g. apt-get install gcc")
    return cc


def build_library(art: Path) -> Path:
    stubs_id = hashlib.sha256(STUBS_C.read_bytes()).hexdigest()[:12]
    lib = art / f"host-{stubs_id}.so"
    if not lib.exists():
        tmp = art / f"host.{os.getpid()}.so"
        cmd = [_compiler(), "-shared", "-fPIC", "-O1", "-Wl,-Bsymbolic", "-Wl,-z,defs", "-o", str(tmp),
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
# DLDataType (dlpack.h codes): what torch's DLPack export gives the leaderboard's tensors
DT_FP4X2 = (17, 4, 2)   # kDLFloat4_e2m1fn, torch.float4_e2m1fn_x2 (two e2m1 per byte)
DT_E4M3 = (10, 8, 1)    # kDLFloat8_e4m3fn
DT_F16 = (2, 16, 1)     # kDLFloat
DT_I64 = (0, 64, 1)     # kDLInt (KernelConfig.profile's buffer)


def leaderboard_tensors(m: int, n: int, k: int, l: int) -> dict[str, tuple[tuple, tuple, tuple]]:
    """(dtype, shape, strides) of the 7 tensors exactly as the leaderboard's torch tensors have them
    (submission.check_inputs): FP4 operands as float4_e2m1fn_x2 [rows, K/2, L]; permuted scale atoms
    [32, 4, rest_mn, 4, rest_k, L]; C fp16 [M, N, L]."""
    rest_k = k // 16 // 4
    out = {}
    for name, rows in (("a", m), ("b1", n), ("b2", n)):
        out[name] = (DT_FP4X2, (rows, k // 2, l), (k // 2, 1, rows * k // 2))
    for name, rows in (("sfa", m), ("sfb1", n), ("sfb2", n)):
        rest_mn = -(-rows // 128)
        out[name] = (DT_E4M3, (32, 4, rest_mn, 4, rest_k, l), (16, 4, rest_k * 512, 1, 512, rest_mn * rest_k * 512))
    out["c"] = (DT_F16, (m, n, l), (n, 1, m * n))
    return out


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


EM_CUDA = 190  # ELF e_machine of a cubin
EIATTR_REGCOUNT = 0x2F  # .nv.info attribute: (symbol index, registers per thread)


def _elf_sections(elf: bytes) -> dict:
    """{section name: (type, file offset, size)} of an ELF64 image."""
    shoff = int.from_bytes(elf[0x28:0x30], "little")
    shentsize, shnum, shstrndx = (int.from_bytes(elf[o:o + 2], "little") for o in (0x3A, 0x3C, 0x3E))
    raw = [elf[shoff + i * shentsize:shoff + (i + 1) * shentsize] for i in range(shnum)]
    names_off = int.from_bytes(raw[shstrndx][0x18:0x20], "little")
    out = {}
    for sh in raw:
        name_at = names_off + int.from_bytes(sh[0:4], "little")
        name = elf[name_at:elf.index(b"\0", name_at)].decode()
        out[name] = (int.from_bytes(sh[4:8], "little"), int.from_bytes(sh[0x18:0x20], "little"),
                     int.from_bytes(sh[0x20:0x28], "little"))
    return out


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


def cubin_resources(elf: bytes, kernel_name: str) -> dict:
    """Registers per thread (.nv.info EIATTR_REGCOUNT of the kernel's symbol) and static shared memory (size of
    .nv.shared.<kernel>) of a cubin: what cuobjdump --dump-resource-usage reports as REG and SHARED."""
    secs = _elf_sections(elf)
    _, symoff, symsize = secs[".symtab"]
    _, stroff, _ = secs[".strtab"]
    index = None
    for i in range(symsize // 24):
        name_at = stroff + int.from_bytes(elf[symoff + 24 * i:symoff + 24 * i + 4], "little")
        if elf[name_at:elf.index(b"\0", name_at)].decode() == kernel_name:
            index = i
    registers = None
    _, off, size = secs.get(".nv.info", (0, 0, 0))
    p = off
    while p < off + size:
        fmt, attr = elf[p], elf[p + 1]
        if fmt == 4:  # EIFMT_SVAL: u16 size, payload
            n = int.from_bytes(elf[p + 2:p + 4], "little")
            if attr == EIATTR_REGCOUNT and int.from_bytes(elf[p + 4:p + 8], "little") == index:
                registers = int.from_bytes(elf[p + 8:p + 12], "little")
            p += 4 + n
        else:  # EIFMT_HVAL (u16 value), EIFMT_BVAL (u8), EIFMT_NVAL (none): 4 bytes at most, all skipped
            p += {3: 4, 2: 3}.get(fmt, 2)
    static = secs.get(f".nv.shared.{kernel_name}", (0, 0, 0))[2]
    return {"registers": registers, "static_smem": static}


def kernel_resources(art: Path, kernel_name: str) -> dict:
    """cubin_resources of the artifact's kernel; None values where its cubin cannot be found."""
    elf = device_elf(art)
    return cubin_resources(elf, kernel_name) if elf else {"registers": None, "static_smem": None}


def static_shared_bytes(ptx: str) -> int:
    """The static shared memory the driver charges a kernel: its own sized `.shared` variables. Not the cubin's
    .nv.shared.<kernel> section, which for a kernel with only an `.extern` array holds 1024 bytes: measured on a lent
    H100 (python -m emu.calibration.launch_limits; MEMORY.md "Launch limits"), cuFuncGetAttribute(SHARED_SIZE_BYTES)
    is 0 for such a kernel, its array starts at shared address 1024 (the 1 KiB reserved per block, CUDA C++
    Programming Guide) and a launch with the whole 232448-byte opt-in maximum of dynamic memory succeeds; and
    arseni_ivanov's B200-verified CuTe DSL kernel launches 231680 dynamic bytes, which a charged 1024 would refuse."""
    from .ptx import _SHARED_RE, _TYPE_SIZES, layout_shared

    decls = {}
    for extern, align, ty, name, count in _SHARED_RE.findall(ptx):
        size = None if extern else _TYPE_SIZES[ty] * (int(count) if count else 1)
        decls[name] = (int(align) if align else _TYPE_SIZES[ty], size)
    return layout_shared(decls).static_bytes


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


C_ABI_PREFIX = "emu_c"  # export_to_c prefix of the plain C ABI exports (pointer entries)


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


def call_host_pointers(art: Path, ptx: str, m: int, n: int, k: int, l: int, addresses: dict[str, int]) -> dict:
    """The submission's pointer fallback (DualGemmKernel.launch_from_pointers: 7 pointers and M, N, K, L), the path
    custom_kernel takes where apache-tvm-ffi is missing."""
    args = [(f"{name}_ptr", ctypes.c_void_p(int(addresses[name]))) for name in OPERANDS]
    args += [(dim, ctypes.c_int32(v)) for dim, v in zip("mnkl", (m, n, k, l))]
    return call_host_c_abi(art, ptx, C_ABI_PREFIX, args)


def call_host(art: Path, ptx: str, m: int, n: int, k: int, l: int, addresses: dict[str, int], extra=()) -> dict:
    """Call the exported TVM-FFI host function once with DLTensors at `addresses`; return what the stubs saw.
    `extra`: (name, dtype, shape, strides) of tensors the function takes after the leaderboard's seven."""
    lib, kernel_name, params = open_host_library(art, ptx)
    keep = []
    tensors = {**leaderboard_tensors(m, n, k, l), **{name: spec for name, *spec in extra}}
    names = OPERANDS + tuple(name for name, *_ in extra)
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


def capture_launch(submission_path: str, config, m: int, n: int, k: int, l: int,
                   addresses: dict[str, int], sm_count: int | None = None, dsl: str = "default",
                   host_path: str = "tvm_ffi", extra=()) -> CapturedLaunch:
    """The launch submission_path's host code makes for config on an (m, n, k, l) problem whose 7 tensors
    live at `addresses` ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "c": emulator global addresses). `extra`:
    (name, dtype, shape, strides) of further tensor arguments (at addresses[name]), TVM-FFI entry only."""
    import time

    missing = [n_ for n_ in OPERANDS + tuple(e[0] for e in extra) if n_ not in addresses]
    if missing:
        raise ValueError(f"addresses lacks {missing}")
    t0 = time.time()
    if host_path not in ("tvm_ffi", "pointer"):
        raise ValueError(f"host_path must be 'tvm_ffi' or 'pointer', got {host_path!r}")
    if extra and host_path != "tvm_ffi":
        raise ValueError("extra tensor arguments need the TVM-FFI entry (the pointer fallback takes the seven operands)")
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
        rec = call_host(art, ptx, m, n, k, l, addresses, extra)
    else:
        rec = call_host_pointers(art, ptx, m, n, k, l, addresses)
    t2 = time.time()
    return CapturedLaunch(
        ptx=ptx, kernel_name=rec["kernel_name"], grid=rec["grid"], block=rec["block"], cluster=rec["cluster"],
        dynamic_smem=rec["dynamic_smem"], params=rec["blobs"], dsl_version=meta["dsl_version"],
        param_names=[p[0] for p in rec["params"]], param_decls=[p[3] for p in rec["params"]], cubin=rec["cubin"],
        launch_attrs=rec["attrs"], runtime_log=rec["log"], artifact_dir=str(art),
        timings={"compile_s": round(t1 - t0, 3), "call_s": round(t2 - t1, 3), "worker": meta},
        registers=rec["registers"], static_smem=rec["static_smem"],
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        _worker(sys.argv[2])
    else:
        print("usage: python emu/launch.py --worker JOB.json (internal)", file=sys.stderr)
        sys.exit(2)
