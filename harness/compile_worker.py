"""The compile worker: one fresh process per compile (the CuTe DSL keeps global state and reads its environment at
import), run as a script by harness.capture.compile_artifacts (`python harness/compile_worker.py --worker JOB.json`).

It imports the submission file named in the job, builds the job's KernelConfig and compiles it the way the
submission does on its timed path (`compile_config(config, tvm_ffi=True)`, or the pointer fallback), then writes
kernel.ptx, kernel.cubin, the exported host object kernel.o (`export_to_c`) and meta.json into the job's folder.
It imports nothing of this repository but the submission (and what the submission imports).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EXPORT_NAME = "emu_kernel"  # export_to_c name of the TVM-FFI host function (called as __tvm_ffi_<EXPORT_NAME>)
C_ABI_PREFIX = "emu_c"  # export_to_c prefix of the plain C ABI exports (pointer entries)


def work(job_path: str) -> None:
    import importlib.metadata
    import importlib.util
    import time

    # Run as a script, sys.path[0] is harness/: its modules must not shadow anything.
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


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        work(sys.argv[2])
    else:
        print("usage: python harness/compile_worker.py --worker JOB.json (internal)", file=sys.stderr)
        sys.exit(2)
