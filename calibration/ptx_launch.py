"""Load a PTX module with the CUDA driver and launch one of its kernels: the probes written in plain PTX
(`calibration/mufu.py`'s MUFU sweep, `probes/profile_stamps.py`'s %globaltimer probe) need no compiler but the
driver's own JIT (cuModuleLoadDataEx)."""
from __future__ import annotations

import ctypes


def launch_ptx(ptx: str, entry: str, grid: int, threads: int, params: list[bytes]) -> None:
    """Run `entry` of `ptx` on the current GPU with `grid` CTAs of `threads` threads and wait for it. `params`: each
    kernel parameter's bytes, in order (e.g. struct.pack("<Q", tensor.data_ptr()))."""
    import torch

    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    cuda = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    log = ctypes.create_string_buffer(1 << 14)
    opts = (ctypes.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
    vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(1 << 14))
    rc = cuda.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(ptx.encode() + b"\0"), 2, opts, vals)
    if rc:
        raise RuntimeError(f"cuModuleLoadDataEx rc {rc}: {log.value.decode(errors='replace')}")
    if cuda.cuModuleGetFunction(ctypes.byref(fn), mod, entry.encode()):
        raise RuntimeError(f"cuModuleGetFunction {entry} failed")
    bufs = [ctypes.create_string_buffer(p, len(p)) for p in params]
    argv = (ctypes.c_void_p * len(bufs))(*[ctypes.cast(b, ctypes.c_void_p) for b in bufs])
    rc = cuda.cuLaunchKernel(fn, grid, 1, 1, threads, 1, 1, 0, None, argv, None)
    if rc:
        raise RuntimeError(f"cuLaunchKernel rc {rc}")
    torch.cuda.synchronize()
