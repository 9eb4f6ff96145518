"""Does a kernel's 1 KiB of cubin "static" shared memory count against the per-block opt-in maximum? (GPU probe)

The launch stand-ins (harness/launch_stubs.c) refuse a launch whose dynamic shared memory plus the cubin's static shared
memory (.nv.shared.<kernel>, what cuobjdump reports as SHARED) exceeds the opt-in maximum per block (232448 bytes on
sm_90 and sm_100), as the CUDA runtime documents for cudaFuncAttributeMaxDynamicSharedMemorySize. CuTe DSL kernels
declare only `.extern .shared .align 1024` memory, yet their cubins report 1024 bytes of static shared memory, and
NVIDIA's own example sizes some configs to exactly 232448 bytes of dynamic shared memory (emulated: the stand-ins
refuse its 1cta-f32-l2 calibration config). This probe asks a real GPU: for the same PTX with the extern array aligned
to 16, 128 and 1024 bytes, JIT-compiled by the driver, it records the static size the driver reports, the shared
address where the array starts, whether cuFuncSetAttribute accepts MAX_DYNAMIC_SHARED_SIZE_BYTES = opt-in and
opt-in - static, and whether launches with those dynamic sizes succeed.

    python -m calibration.launch_limits [--out DIR]      # on a lent H100/H200 (sm_90: same 228/227 KiB limits)

Needs only the CUDA driver (libcuda.so.1, through ctypes). Writes DIR/launch_limits.json (default $OUT or .) and
prints it; exit 2 where no CUDA driver or GPU is present. The answer is measured on the card it ran on (sm_90), and
carries over to the B200 only as far as both share the rule; say so where it is used.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
from pathlib import Path

CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def probe_ptx(align: int, target: str) -> str:
    """One kernel whose only shared memory is an extern array aligned to `align`; thread 0 stores the array's
    shared-window address to out[0]."""
    return f""".version 8.0
.target {target}
.address_size 64
.extern .shared .align {align} .b8 dyn[];
.visible .entry probe(.param .u64 out)
{{
.reg .pred %p<2>;
.reg .b32 %r<4>;
.reg .b64 %rd<3>;
mov.u32 %r1, %tid.x;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra DONE;
mov.u32 %r2, dyn;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd2, %rd1;
st.global.u32 [%rd2], %r2;
DONE:
ret;
}}
"""


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def __call__(self, name: str, *args) -> int:
        return int(getattr(self.lib, name)(*args))

    def check(self, name: str, *args) -> None:
        rc = self(name, *args)
        if rc:
            raise RuntimeError(f"{name} failed: CUresult {rc}")


def measure(drv: Driver) -> dict:
    drv.check("cuInit", 0)
    dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
    drv.check("cuDeviceGet", ctypes.byref(dev), 0)
    attr = lambda a: (lambda v: (drv.check("cuDeviceGetAttribute", ctypes.byref(v), a, dev), v.value)[1])(ctypes.c_int())  # noqa: E731
    major, minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    name = ctypes.create_string_buffer(256)
    drv.check("cuDeviceGetName", name, 256, dev)
    drv.check("cuCtxCreate_v2", ctypes.byref(ctx), 0, dev)
    out = ctypes.c_uint64()
    drv.check("cuMemAlloc_v2", ctypes.byref(out), 64)
    target = f"sm_{major}{minor}"
    rows = []
    for align in (16, 128, 1024):
        mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
        drv.check("cuModuleLoadData", ctypes.byref(mod), ctypes.c_char_p(probe_ptx(align, target).encode()))
        drv.check("cuModuleGetFunction", ctypes.byref(fn), mod, b"probe")
        static = ctypes.c_int()
        drv.check("cuFuncGetAttribute", ctypes.byref(static), CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn)
        row = {"align": align, "static_smem": static.value, "attribute": {}, "launch": {}}
        for value in sorted({optin, optin - static.value, optin - 1024}):
            row["attribute"][value] = drv("cuFuncSetAttribute", fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          value)
        drv("cuFuncSetAttribute", fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static.value)
        for dynamic in sorted({optin - static.value, optin, 48 * 1024}):
            arg = ctypes.c_uint64(out.value)
            params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
            rc = drv("cuLaunchKernel", fn, 1, 1, 1, 32, 1, 1, dynamic, None, params, None)
            rc = rc or drv("cuCtxSynchronize")
            addr = ctypes.c_uint32()
            if not rc:
                drv.check("cuMemcpyDtoH_v2", ctypes.byref(addr), out, 4)
            row["launch"][dynamic] = {"result": rc, "array_shared_address": addr.value if not rc else None}
        rows.append(row)
        drv("cuModuleUnload", mod)
    return {"label": f"measured ({name.value.decode()}, sm_{major}{minor})", "optin_per_block": optin,
            "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for launch_limits.json")
    args = ap.parse_args(argv)
    try:
        drv = Driver()
    except OSError as e:
        print(f"no CUDA driver here ({e}): this probe needs a GPU", file=sys.stderr)
        return 2
    try:
        result = measure(drv)
    except RuntimeError as e:
        print(f"no usable GPU: {e}", file=sys.stderr)
        return 2
    Path(args.out).mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1)
    (Path(args.out) / "launch_limits.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
