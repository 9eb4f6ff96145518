"""submission.DualGemmKernel with its host side intact and a replaceable device body.

What a GPU that is not SM100 can still check of the kernel: its host path (TVM-FFI checks, operand views,
TMA descriptors, scheduler grid, launch) and the device code that needs no tensor memory or tcgen05 MMA
(TMA loads of byte-typed operands, the epilogue's views and stores). tools/dispatch_probe.py and the probes
in tests/ subclass DeviceStub and replace `body`.
"""
import inspect
import sys
from typing import NamedTuple

import cutlass.cute as cute
import cutlass.utils as utils

import submission as S


class KernelArgs(NamedTuple):
    """DualGemmKernel.kernel's arguments, in its order."""

    tiled_mma: object
    tiled_mma_sfb: object
    tma_atom_a: object
    mA_mkl: object
    tma_atom_b1: object
    mB1_nkl: object
    tma_atom_b2: object
    mB2_nkl: object
    tma_atom_sfa: object
    mSFA_mkl: object
    tma_atom_sfb1: object
    mSFB1_nkl: object
    tma_atom_sfb2: object
    mSFB2_nkl: object
    mC_mnl: object
    cluster_layout_vmnk: object
    cluster_layout_sfb_vmnk: object
    a_smem_layout_staged: object
    b_smem_layout_staged: object
    sfa_smem_layout_staged: object
    sfb_smem_layout_staged: object
    tile_sched_params: object


class DeviceStub(S.DualGemmKernel):
    """The real host side; the device body is `body(args)`: by default it only claims the shared storage."""

    @cute.kernel
    def kernel(
        self,
        tiled_mma: cute.TiledMma,
        tiled_mma_sfb: cute.TiledMma,
        tma_atom_a: cute.CopyAtom,
        mA_mkl: cute.Tensor,
        tma_atom_b1: cute.CopyAtom,
        mB1_nkl: cute.Tensor,
        tma_atom_b2: cute.CopyAtom,
        mB2_nkl: cute.Tensor,
        tma_atom_sfa: cute.CopyAtom,
        mSFA_mkl: cute.Tensor,
        tma_atom_sfb1: cute.CopyAtom,
        mSFB1_nkl: cute.Tensor,
        tma_atom_sfb2: cute.CopyAtom,
        mSFB2_nkl: cute.Tensor,
        mC_mnl: cute.Tensor,
        cluster_layout_vmnk: cute.Layout,
        cluster_layout_sfb_vmnk: cute.Layout,
        a_smem_layout_staged: cute.ComposedLayout,
        b_smem_layout_staged: cute.ComposedLayout,
        sfa_smem_layout_staged: cute.Layout,
        sfb_smem_layout_staged: cute.Layout,
        tile_sched_params: utils.PersistentTileSchedulerParams,
    ):
        self.body(
            KernelArgs(
                tiled_mma, tiled_mma_sfb, tma_atom_a, mA_mkl, tma_atom_b1, mB1_nkl, tma_atom_b2, mB2_nkl,
                tma_atom_sfa, mSFA_mkl, tma_atom_sfb1, mSFB1_nkl, tma_atom_sfb2, mSFB2_nkl, mC_mnl,
                cluster_layout_vmnk, cluster_layout_sfb_vmnk, a_smem_layout_staged, b_smem_layout_staged,
                sfa_smem_layout_staged, sfb_smem_layout_staged, tile_sched_params,
            )
        )

    def body(self, args: KernelArgs):
        utils.SmemAllocator().allocate(self.shared_storage)

    def ring_and_loads(self, args: KernelArgs):
        """The shared storage, then the kernel's own `_ring_and_loads` on it: (storage, ring, loads, k_tiles, tCgC)."""
        storage = utils.SmemAllocator().allocate(self.shared_storage)
        return (storage, *self._ring_and_loads(
            storage,
            args.tiled_mma,
            args.tiled_mma_sfb,
            (args.tma_atom_a, args.tma_atom_b1, args.tma_atom_b2, args.tma_atom_sfa, args.tma_atom_sfb1,
             args.tma_atom_sfb2),
            (args.mA_mkl, args.mB1_nkl, args.mB2_nkl, args.mSFA_mkl, args.mSFB1_nkl, args.mSFB2_nkl, args.mC_mnl),
            args.cluster_layout_vmnk,
            args.cluster_layout_sfb_vmnk,
            args.a_smem_layout_staged,
            args.b_smem_layout_staged,
            args.sfa_smem_layout_staged,
            args.sfb_smem_layout_staged,
        ))


def admit_this_gpu_for_host_side():
    """Let SM100-only op descriptions be built on this GPU's arch.

    The host side only uses the ops' layouts (TMA boxes, tensor-memory shapes); a stub device body emits
    none of their instructions, so nothing SM100-specific reaches the cubin.
    """
    from cutlass.cutlass_dsl import BaseDSL
    import cutlass.cute.nvgpu as nvgpu

    arch = BaseDSL._get_dsl().get_arch_enum()
    seen = set()
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith(nvgpu.__name__):
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            archs = cls.__dict__.get("admissible_archs")
            if isinstance(archs, list) and id(archs) not in seen and arch not in archs:
                archs.append(arch)
                seen.add(id(archs))
    return arch, len(seen)
