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
import ctypes
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from emu.cubin import EM_CUDA, cubin_resources
from emu.launch import CapturedLaunch, entry_params
from emu.ptx import static_shared_bytes

from . import dsl as dsl_release
from .compile_worker import C_ABI_PREFIX, EXPORT_NAME
from .dsl_export import K_TVMFFI_DLTENSOR_PTR, TVMFFIAny, c_abi_entry, call_c_abi, call_tvm_ffi, dltensor, init_library
from .host import (LaunchError, build_library, c_compiler, cache_root, dsl_errors, host_output, prime_stubs,
                   recorded_launch)
from .problems import DUAL_GEMM, Problem

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKER = HERE / "compile_worker.py"


class CompileError(LaunchError):
    """The kernel did not compile (the compile worker failed): it never runs either."""


# ----------------------------------------------------------------------------- compile (worker subprocess)
def _config_fields(config) -> dict:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def dsl_env(dsl: str) -> dict:
    """The environment a compile worker imports nvidia-cutlass-dsl `dsl` in ("default": the venv's own release; a
    release number: its install under .venv/dsl, harness.dsl): that release first on PYTHONPATH, the per-artifact dump
    switches every release knows (CUTE_DSL_KEEP=ptx,cubin alone is 4.5 on), and, before 4.5, a placeholder
    libcuda.so.1: those releases build a JIT engine whose runtime library is linked against it, which on a machine
    without a driver would not load (the engine is never run here; 4.5 on compile with no driver at all)."""
    env = dsl_release.environment(dsl)
    env.update(CUTE_DSL_KEEP_PTX="1", CUTE_DSL_KEEP_CUBIN="1")
    if dsl_release.before(dsl_release.resolve(dsl), "4.5"):
        env["LD_LIBRARY_PATH"] = f"{placeholder_libcuda()}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    return env


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
           sorted((k, repr(v)) for k, v in fields.items()), sm_count, variant, dsl_release.resolve(dsl),
           hashlib.sha256(WORKER.read_bytes()).hexdigest()]
    job = {"submission": str(Path(submission_path).resolve()), "sm_count": sm_count, "variant": variant,
           "config": {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}}
    env = dsl_env(dsl)
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


# ----------------------------------------------------------------------------- call the host function
COMPILE_LOG = "compile.log"  # what the compile worker printed (kept: a DSL "Error:" line fails the run)


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


def call_host_c_abi(art: Path, ptx: str, prefix: str, args: list) -> dict:
    """Call a host function exported with the plain C ABI of export_to_c (header <prefix>.h, object kernel.o; the
    convention: harness.dsl_export). `args`: (name in the header, ctypes value) pairs in the header's order.
    Returns what the runtime stand-ins saw (recorded_launch)."""
    entry, names = c_abi_entry((art / f"{prefix}.h").read_text(), prefix)
    want = [name for name, _ in args]
    tail = names[len(want):]
    if names[:len(want)] != want or len(tail) not in (1, 2) or tail[-1] != "ret":
        raise RuntimeError(f"unexpected host argument list {names} (expected {want}, [queue,] ret)")
    lib, kernel_name, params = open_host_library(art, ptx)
    with host_output(lib) as printed:
        init_library(lib, prefix)
        status = call_c_abi(lib, entry, [ctypes.addressof(v) for _, v in args], len(names))
    return recorded_launch(lib, kernel_name, params, status, "the host entry", printed[0])


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
    args = [TVMFFIAny(K_TVMFFI_DLTENSOR_PTR, 0, ctypes.addressof(dltensor(addresses[name], *tensors[name], keep)))
            for name in names]
    with host_output(lib) as printed:
        rc = call_tvm_ffi(lib, EXPORT_NAME, args)
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
