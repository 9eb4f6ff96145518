"""How many clusters of n CTAs the GPU holds at once when each CTA needs a whole SM (the kernel's shared memory).

The kernel's persistent grid launches SM_COUNT // n clusters of n CTAs unless the driver says otherwise
(submission.max_active_clusters). A cluster runs inside one GPC, and the SMs per GPC vary from chip to chip
(floorsweeping), so fewer clusters than SM_COUNT // n may fit; those that do not fit wait for a running one to end,
and a grid sized for all of them then runs an extra round. NVIDIA's persistent examples size the grid with the
driver's answer (cutlass.utils.HardwareInfo.get_max_active_clusters: cuOccupancyMaxActiveClusters on an empty kernel
that takes a whole SM). This probe asks the driver the same question for cluster sizes 1 to 16, through the driver
API alone (ctypes on libcuda, an empty kernel as PTX), so it runs on any cluster-capable GPU (SM 9.0 and later) with
no CuTe DSL installed.

    python probes/cluster_occupancy.py [--smem BYTES] [--threads 192] [--json out.json]

Prints one line per cluster size (measured, this card) and exits 2 without a cluster-capable GPU.
"""

import argparse
import ctypes
import json
import sys

# An empty kernel; PTX for sm_90 is JIT-compiled by the driver for any later architecture.
EMPTY_KERNEL_PTX = b""".version 7.8
.target sm_90
.address_size 64
.visible .entry empty_kernel()
{
    ret;
}
"""

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CLUSTER_SIZES = (1, 2, 3, 4, 6, 8, 16)  # 8 is the portable limit; 16 needs the non-portable attribute
KERNEL_THREADS = 192  # the kernel's CTA: six warps (design.md "Warp roles and data flow")
KERNEL_SMEM = 229376  # the largest CONFIG_TABLE request (MEMORY.md, compiled); capped at the card's opt-in maximum


class LaunchAttributeValue(ctypes.Union):  # cuda.h CUlaunchAttributeValue: 64 bytes; clusterDim is three uints
    _fields_ = [("pad", ctypes.c_char * 64), ("cluster_dim", ctypes.c_uint * 3)]


class LaunchAttribute(ctypes.Structure):  # cuda.h CUlaunchAttribute: id, pad to 8 bytes, value
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", LaunchAttributeValue)]


class LaunchConfig(ctypes.Structure):  # cuda.h CUlaunchConfig (the queue handle field left null)
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem_bytes", ctypes.c_uint),
                ("queue", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


def driver():
    """libcuda with its context made current, or None where no driver or GPU is present."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if cu.cuInit(0) != 0:
        return None
    count = ctypes.c_int()
    if cu.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    return cu


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed: CUresult {rc}")


def max_active_clusters(cu, smem: int, threads: int) -> dict:
    """{cluster size: clusters the driver says fit at once} for a kernel of `threads` threads and `smem` bytes of
    dynamic shared memory per CTA, plus the device's facts."""
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def attribute(attr):
        value = ctypes.c_int()
        check(cu.cuDeviceGetAttribute(ctypes.byref(value), attr, dev), f"cuDeviceGetAttribute({attr})")
        return value.value

    name = ctypes.create_string_buffer(256)
    check(cu.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    facts = {"device": name.value.decode(), "sm_count": attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
             "compute_capability": f"{attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)}."
                                   f"{attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)}",
             "smem_optin_max": attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)}
    if int(facts["compute_capability"].split(".")[0]) < 9:
        raise RuntimeError(f"{facts['device']} (compute capability {facts['compute_capability']}) has no clusters")
    smem = min(smem, facts["smem_optin_max"])
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(EMPTY_KERNEL_PTX)), "cuModuleLoadData")
    check(cu.cuModuleGetFunction(ctypes.byref(func), module, b"empty_kernel"), "cuModuleGetFunction")
    check(cu.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute")
    check(cu.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), "cuFuncSetAttribute")
    rows = {}
    for size in CLUSTER_SIZES:
        attr = LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        attr.value.cluster_dim[:] = (size, 1, 1)
        config = LaunchConfig(shared_mem_bytes=smem, attrs=ctypes.pointer(attr), num_attrs=1)
        config.grid[:] = (size * (facts["sm_count"] // size), 1, 1)
        config.block[:] = (threads, 1, 1)
        clusters = ctypes.c_int()
        rc = cu.cuOccupancyMaxActiveClusters(ctypes.byref(clusters), func, ctypes.byref(config))
        rows[size] = {"max_active_clusters": clusters.value if rc == 0 else None, "cuda_result": rc,
                      "sm_count_over_size": facts["sm_count"] // size}
    return {**facts, "smem_per_cta": smem, "threads": threads, "clusters": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smem", type=int, default=KERNEL_SMEM, help="dynamic shared memory per CTA, bytes")
    ap.add_argument("--threads", type=int, default=KERNEL_THREADS)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    cu = driver()
    if cu is None:
        print("probes/cluster_occupancy.py: no CUDA driver or GPU here (needs a GPU of compute capability 9.0+)",
              file=sys.stderr)
        return 2
    result = max_active_clusters(cu, args.smem, args.threads)
    print(f"{result['device']}: {result['sm_count']} SMs, {result['smem_per_cta']} B shared memory and "
          f"{result['threads']} threads per CTA (measured, cuOccupancyMaxActiveClusters)")
    for size, row in result["clusters"].items():
        got = row["max_active_clusters"]
        tail = "" if got is None else f" = {got * size} CTAs; {row['sm_count_over_size'] - got} fewer than SMs // size"
        print(f"  clusters of {size:>2}: {got if got is not None else 'refused (CUresult ' + str(row['cuda_result']) + ')'}"
              f" (SMs // size = {row['sm_count_over_size']}){tail}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
