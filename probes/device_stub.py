"""submission.DualGemmKernel with its host side intact and a replaceable device body.

What a GPU that is not SM100 can still check of the kernel: its host path (TVM-FFI checks, operand views,
TMA descriptors, scheduler grid, launch) and the device code that needs no tensor memory or tcgen05 MMA
(TMA loads of byte-typed operands, the epilogue's views and stores). probes/dispatch.py and the probes
in tests/ subclass DeviceStub and replace `body`.
"""
import inspect
import sys
from typing import NamedTuple

import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

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
    profile_buf: object = None  # KernelConfig.profile's buffer (configs that profile)


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
        profile_buf: cute.Tensor = None,
    ):
        self.body(
            KernelArgs(
                tiled_mma, tiled_mma_sfb, tma_atom_a, mA_mkl, tma_atom_b1, mB1_nkl, tma_atom_b2, mB2_nkl,
                tma_atom_sfa, mSFA_mkl, tma_atom_sfb1, mSFB1_nkl, tma_atom_sfb2, mSFB2_nkl, mC_mnl,
                cluster_layout_vmnk, cluster_layout_sfb_vmnk, a_smem_layout_staged, b_smem_layout_staged,
                sfa_smem_layout_staged, sfb_smem_layout_staged, tile_sched_params, profile_buf,
            )
        )

    def body(self, args: KernelArgs):
        S.SmemAllocator().allocate(self.shared_storage)

    def ring_and_loads(self, args: KernelArgs):
        """The shared storage, then the kernel's own `_ring_and_loads` on it: (storage, ring, loads, k_tiles, tCgC).
        Under PDL (the config's launch attribute) every thread first waits for the previous grid, as the real kernel
        does before its first global access (without it the stub would race the previous kernel: the emulator
        reports that)."""
        if cutlass.const_expr(getattr(self.config, "pdl", False)):
            S.griddepcontrol_wait()
        storage = S.SmemAllocator().allocate(self.shared_storage)
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


def exit_unless_cuda_gpu(script: str, needs: str, min_major: int = 0) -> None:
    """For the probes run as scripts: where no fitting CUDA GPU is visible, one line on stderr and exit code 2
    (pytest runs them only where one is, see tests/package/test_submission.py)."""
    import torch

    if not torch.cuda.is_available():
        why = f"no CUDA GPU is visible (torch {torch.__version__}: torch.cuda.is_available() is False)"
    elif torch.cuda.get_device_capability()[0] < min_major:
        major, minor = torch.cuda.get_device_capability()
        why = f"{torch.cuda.get_device_name()} is sm_{major}{minor}"
    else:
        return
    print(f"{script}: {why}; it needs {needs}", file=sys.stderr)
    sys.exit(2)


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


@dsl_user_op
def globaltimer(*, loc=None, ip=None) -> cutlass.Int64:
    """%globaltimer: the GPU's nanosecond clock, the same on every SM."""
    return cutlass.Int64(
        llvm.inline_asm(T.i64(), [], "mov.u64 $0, %globaltimer;", "=l", has_side_effects=True, is_align_stack=False,
                        asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    )


class SpinStub(DeviceStub):
    """The real host side and launch (grid, cluster, smem request, PDL attribute); a body that runs about as long
    as the real kernel is modeled to: every CTA claims the shared storage (the prologue), then, with config.pdl,
    signals dependents and waits (griddepcontrol) as the real kernel does, then spins for spin_ns of
    %globaltimer. Thread 0 of CTA 0 writes three timestamps (entry, after the wait, end; int64 ns) over the
    first 24 bytes of C, so a run of calls with distinct C tensors shows each kernel's gap to the previous one.
    """

    def __init__(self, config, spin_ns: int = 10000):
        super().__init__(config)
        self.spin_ns = spin_ns

    def body(self, args: KernelArgs):
        t_entry = globaltimer()
        if cutlass.const_expr(self.config.pdl):
            S.griddepcontrol_launch_dependents()
        S.SmemAllocator().allocate(self.shared_storage)
        if cutlass.const_expr(self.config.pdl):
            S.griddepcontrol_wait()
        _spin_and_stamp(args.mC_mnl, t_entry, globaltimer(), self.spin_ns)


@cute.jit
def _spin_and_stamp(mC: cute.Tensor, t_entry: cutlass.Int64, t_start: cutlass.Int64, spin_ns: cutlass.Constexpr):
    """Spin until spin_ns of %globaltimer have passed since t_start; thread 0 of CTA 0 writes (entry, start, end)."""
    t_now = globaltimer()
    while t_now - t_start < spin_ns:
        t_now = globaltimer()
    if cute.arch.block_idx()[0] == 0:
        if cute.arch.thread_idx()[0] == 0:
            stamps = cute.make_tensor(cute.recast_ptr(mC.iterator, dtype=cutlass.Int64), cute.make_layout(3))
            stamps[0] = t_entry
            stamps[1] = t_start
            stamps[2] = t_now
