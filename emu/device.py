"""The B200 (sm_100a) as the emulator knows it: every count, capacity and launch limit, in one place, each cited.

Timing rates (clock, bandwidths, latencies) are the timed emulator's cost table (emu/timing/b200.yaml); everything
here is a fact about what the chip holds and accepts, used by the functional model, the launch checks and the timed
model alike.
"""
from __future__ import annotations

# SMs on a B200: chipsandcheese.com, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling" (148 SMs, 74 per die);
# cudaDevAttrMultiProcessorCount on B200 (CUDA deviceQuery).
SM_COUNT = 148

# Tensor memory: 128 lanes x 512 columns of 32-bit cells per SM (PTX ISA 9.7.16.1 "Tensor Memory").
TMEM_LANES = 128
TMEM_COLUMNS = 512

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
    "tmem_columns_per_sm": TMEM_COLUMNS,
}

# The B200's answers to the device queries host code may make (cudaDeviceAttr ids, driver_types.h), from the
# limits above and the compute capability 10.0.
B200_DEVICE_ATTRS = {
    1: B200_LIMITS["threads_per_block"],     # cudaDevAttrMaxThreadsPerBlock
    8: B200_LIMITS["smem_default"],          # cudaDevAttrMaxSharedMemoryPerBlock
    10: 32,                                  # cudaDevAttrWarpSize
    12: B200_LIMITS["regs_per_block"],       # cudaDevAttrMaxRegistersPerBlock
    16: SM_COUNT,                            # cudaDevAttrMultiProcessorCount
    75: 10,                                  # cudaDevAttrComputeCapabilityMajor
    76: 0,                                   # cudaDevAttrComputeCapabilityMinor
    81: B200_LIMITS["smem_per_sm"],          # cudaDevAttrMaxSharedMemoryPerMultiprocessor
    97: B200_LIMITS["smem_optin"],           # cudaDevAttrMaxSharedMemoryPerBlockOptin
    120: 1,                                  # cudaDevAttrClusterLaunch
}


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


def tensor_memory_oversubscribed(launch, columns: int) -> str | None:
    """Why a CTA of `launch` holding `columns` tensor-memory columns is a problem on a B200, or None: every CTA that
    can be resident on the same SM (occupancy, at most the grid's CTAs) holds as many, and the SM has 512 (PTX ISA
    9.7.16.1); a tcgen05.alloc beyond that blocks until another CTA frees columns (9.7.16.7.1), so co-resident CTAs
    serialise, or deadlock where one waits for another (a cluster peer, or the previous kernel under programmatic
    dependent launch)."""
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
