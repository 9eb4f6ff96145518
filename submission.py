#!POPCORN leaderboard nvfp4_dual_gemm
#!POPCORN gpu NVIDIA
"""NVFP4 dual GEMM with fused SiLU-multiply for B200 (sm_100a), CuTe DSL.

    C = silu(A @ B1^T) * (A @ B2^T)      A: M x K, B1/B2: N x K in NVFP4 (e2m1 + one e4m3 scale per
                                          16 K-elements), fp32 accumulation, fp16 C.

Structure: NVIDIA's CuTe DSL persistent block-scaled GEMM (dense_blockscaled_gemm_persistent.py),
extended to two B operands that share one A tile:
  warp 5 (TMA)       A, B1, B2, SFA, SFB1, SFB2 -> shared-memory ring (A and SFA loaded once per k-tile)
  warp 4 (MMA)       scales smem -> tensor memory (tcgen05.cp), two block-scaled tcgen05.mma per k-block
                     into two accumulators that live side by side in tensor memory
  warps 0-3 (epi.)   tensor memory -> registers, silu(acc1) * acc2, fp16, 16-byte stores to global
Every departure from NVIDIA's structure is listed in MEMORY.md ("Departures").

Host path: the kernel is compiled once per KernelConfig with dynamic M, N, K, L and called through
TVM-FFI with the torch tensors themselves: ~6 us of host time per call, against 45-73 us for the pointer
fallback used where apache-tvm-ffi is missing (measured on an H200, MEMORY.md "Dispatch").
Nothing but compiled kernels is kept between calls.
"""

from dataclasses import dataclass
from typing import NamedTuple, Tuple

import torch

from task import input_t, output_t

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as blockscaled_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.cutlass_dsl import T, dsl_user_op
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait

# The one version shim: nvidia-cutlass-dsl 4.8 moved the allocators to cutlass.memory and LayoutEnum to
# cutlass.tensor_utils (the cutlass.utils names still work there but warn that they will be removed);
# 4.3.5, the leaderboard's era, has only the cutlass.utils names. Same classes either way.
try:
    from cutlass.memory import SmemAllocator, TmemAllocator
    from cutlass.tensor_utils import LayoutEnum
except ImportError:
    from cutlass.utils import LayoutEnum, SmemAllocator, TmemAllocator

# B200 facts. Querying the device needs a GPU, and offline compiles have none.
SM_COUNT = 148
SMEM_CAPACITY = 232448  # bytes of shared memory per CTA on sm_100
TMEM_COLUMNS = 512  # 128 lanes x 512 columns of 32 bits per SM
SF_VEC_SIZE = 16  # one e4m3 scale per 16 K-elements (NVFP4)
K_TILE = 256  # K per pipeline stage: 4 MMA k-blocks of 64 FP4 elements
MMA_INST_K = 64
SF_ATOM_MN = 32  # scale atoms are 32 rows x 4 row-groups x 4 k-groups (512 bytes)
BARRIER_BYTES = 1024  # mbarriers + tmem pointer, padded to the 1024-byte buffer alignment
DSL_STATIC_SMEM = 1024  # static shared memory the DSL adds to every such kernel (compiled: cubin reports it)

AB_DTYPE = cutlass.Float4E2M1FN
SF_DTYPE = cutlass.Float8E4M3FN
C_DTYPE = cutlass.Float16
ACC_DTYPE = cutlass.Float32


LOG2_E = 1.4426950408889634

# L2 eviction priorities of a TMA load (the createpolicy encodings of CUTLASS's CacheHintSm100)
L2_EVICT_FIRST = 0x12F0000000000000

# Which tile coordinate selects a loaded operand's rows
ROWS_OF_M_TILE, ROWS_OF_N_TILE, ROWS_OF_SFB_TILE = 0, 1, 2


class SmemRing(NamedTuple):
    """The staged shared-memory operand tiles: (MMA, MMA_MN, MMA_K, STAGE) each."""

    sA: object
    sB1: object
    sB2: object
    sSFA: object
    sSFB1: object
    sSFB2: object


class EpilogueViews(NamedTuple):
    """What the epilogue warps use, per thread (DualGemmKernel._epilogue_views)."""

    copy_t2r: object  # tcgen05.ld tiled copy, tensor memory -> registers
    thr_copy_t2r: object  # its slice for this thread
    tAcc: object  # (T2R, T2R_M, T2R_N, EPI_M, EPI_N, ACC): accumulator fragments in tensor memory
    gC: object  # (T2R, T2R_M, T2R_N, EPI_M, EPI_N, RestM, RestN, RestL): the matching elements of C
    fragment_shape: object  # one subtile's register fragment
    store: object  # 16-byte register -> global store atom


class TmaLoad(NamedTuple):
    """One operand of the shared-memory ring, as the TMA warp issues it each k-tile."""

    atom: object  # TMA copy atom
    smem: object  # ((atom_v, rest_v), STAGE)
    gmem: object  # ((atom_v, rest_v), RestMN, RestK, RestL)
    mcast_mask: object  # CTAs of the cluster that receive the tile, or None
    rows: int  # ROWS_OF_M_TILE / ROWS_OF_N_TILE / ROWS_OF_SFB_TILE (SFB atoms cover 128 rows)
    cache_policy: object  # L2 eviction priority, or None for the default


@dataclass(frozen=True)
class KernelConfig:
    """One point of the tuning space.

    mma_tile_mn: (M, N) of one MMA. M 128 runs on one SM; M 256 is a 2-CTA pair (tcgen05 cta_group::2),
                 each CTA holding 128 rows of A and half of the B rows.
    cluster_mn:  CTAs per cluster along M and N; TMA multicasts B across the M direction and A across N.
    epi_tile_n:  accumulator columns the epilogue moves per step (registers: 2 x epi_tile_n per thread).
    raster_along_m: persistent scheduler order.
    b_evict_first: TMA loads of B1/B2 carry the L2 evict-first hint (A keeps the default priority).
    pdl:         programmatic dependent launch: the launch lets the next kernel in the queue start its prologue
                 while this one runs; each CTA signals dependents at its start and waits (griddepcontrol.wait)
                 before its first global-memory load (TMA warp) and store (epilogue warps), so a call still
                 sees everything the previous one wrote. On by default: 1.04 us less per call over 50 back-to-back
                 calls (measured, H200, probes/pdl.py stand-in; MEMORY.md "PDL"). Off, the PTX is unchanged.
    a_collector: per k-block the B1 MMA keeps A in the tensor core's A collector (tcgen05.mma
                 .collector::a::fill) and the B2 MMA takes it from there (.collector::a::lastuse) instead of
                 reading A from shared memory a second time; the two MMAs are issued by inline PTX
                 (mma_pair_a_collector), since the DSL's sm_100 MMA atom has no collector option. Off, the MMAs
                 are the DSL's cute.gemm (collector::a::discard) and the PTX is unchanged. MEMORY.md "A collector".
    silu_tanh:   silu(x) = h + h tanh(h), h = x / 2: one MUFU op (tanh.approx.f32) per element instead of two
                 (ex2.approx, rcp.approx). Its accuracy near tanh = -1 is the hardware's (MEMORY.md "Epilogue knobs").
    epi_pipeline: the epilogue loads subtile i + 1 from tensor memory before it computes and stores subtile i (two
                 register buffers), and hands the accumulator stage back to the MMA warp as soon as the stage's last
                 load has completed (tcgen05.wait::ld), before the last subtile's math and stores.
    epi_ld_16x256b: tensor-memory loads of shape 16x256b (each thread: 2 rows x 2 columns per 8 columns, 4-byte
                 stores of C) instead of 32x32b (one row per thread, 16-byte stores).
    l2_prefetch_k_tiles: before the cluster sync and griddepcontrol.wait, the TMA warp prefetches into L2
                 (cp.async.bulk.prefetch.tensor) the first this-many k-tiles of its first tile's six operands, so
                 under PDL their DRAM reads overlap the previous kernel's tail. 0: off.
    setmaxnreg:  the TMA and MMA warps give registers back (setmaxnreg.dec) and the epilogue warps take them
                 (setmaxnreg.inc).
    """

    mma_tile_mn: Tuple[int, int] = (128, 128)
    cluster_mn: Tuple[int, int] = (1, 1)
    epi_tile_n: int = 32
    raster_along_m: bool = True
    b_evict_first: bool = True
    pdl: bool = True
    a_collector: bool = False
    silu_tanh: bool = False
    epi_pipeline: bool = False
    epi_ld_16x256b: bool = False
    l2_prefetch_k_tiles: int = 0
    setmaxnreg: bool = False

    @property
    def use_2cta(self) -> bool:
        return self.mma_tile_mn[0] == 256

    @property
    def cta_tile_mn(self) -> Tuple[int, int]:
        return (self.mma_tile_mn[0] // (2 if self.use_2cta else 1), self.mma_tile_mn[1])

    @property
    def name(self) -> str:
        return (
            f"m{self.mma_tile_mn[0]}n{self.mma_tile_mn[1]}_c{self.cluster_mn[0]}x{self.cluster_mn[1]}"
            f"_e{self.epi_tile_n}{'' if self.raster_along_m else '_rn'}{'' if self.b_evict_first else '_bn'}"
            f"{'' if self.pdl else '_nopdl'}{'_ac' if self.a_collector else ''}"
            f"{'_th' if self.silu_tanh else ''}{'_ep' if self.epi_pipeline else ''}"
            f"{'_ld16' if self.epi_ld_16x256b else ''}"
            f"{f'_pf{self.l2_prefetch_k_tiles}' if self.l2_prefetch_k_tiles else ''}{'_rg' if self.setmaxnreg else ''}"
        )


# >>> config table (tools/tune.py --write rewrites this block)
CONFIG_TABLE = {
    (256, 4096, 7168, 1): KernelConfig(mma_tile_mn=(256, 64), cluster_mn=(2, 1), a_collector=True),
    (512, 4096, 7168, 1): KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1)),
    (256, 3072, 4096, 1): KernelConfig(mma_tile_mn=(256, 64), cluster_mn=(2, 1), a_collector=True),
    (512, 3072, 7168, 1): KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1)),
}
# <<< config table

# What tools/tune.py may try on a B200: tile and cluster shapes (cluster N > 1 multicasts A, cluster M > 1
# multicasts B, M 256 is a 2-CTA pair), then single-knob variants of the two default tiles.
_TUNE_TILES = (
    ((128, 64), (1, 1)),
    ((128, 128), (1, 1)),
    ((128, 64), (1, 2)),
    ((128, 64), (1, 4)),
    ((128, 128), (1, 2)),
    ((128, 64), (2, 1)),
    ((128, 128), (2, 1)),
    ((256, 64), (2, 1)),
    ((256, 128), (2, 1)),
    ((256, 64), (2, 2)),
)
TUNE_SPACE = tuple(KernelConfig(mma_tile_mn=tile, cluster_mn=cluster) for tile, cluster in _TUNE_TILES) + tuple(
    KernelConfig(mma_tile_mn=tile, **variant)
    for tile in ((128, 64), (128, 128))
    for variant in ({"epi_tile_n": 16}, {"b_evict_first": False}, {"raster_along_m": False}, {"pdl": False})
) + tuple(
    KernelConfig(mma_tile_mn=tile, cluster_mn=cluster, a_collector=True)
    for tile, cluster in (((128, 64), (1, 1)), ((128, 128), (1, 1)), ((256, 64), (2, 1)), ((256, 128), (2, 1)))
) + tuple(
    # The epilogue and prologue knobs (MEMORY.md "Epilogue knobs") on CONFIG_TABLE's two tiles, one at a time, then
    # together. The pipelined epilogue steps 16 columns (two register buffers); 16x256b loads run in it: without
    # its per-subtile tcgen05.wait::ld, and with 8-column steps, DSL 4.3.5's ptxas puts ~94 R2UR per k-tile into the
    # MMA loop (compiled; preflight's r2ur column).
    KernelConfig(mma_tile_mn=(256, tile_n), cluster_mn=(2, 1), a_collector=tile_n == 64, **variant)
    for tile_n in (64, 128)
    for variant in (
        {"silu_tanh": True},
        {"epi_pipeline": True, "epi_tile_n": 16},
        {"epi_ld_16x256b": True, "epi_pipeline": True, "epi_tile_n": 16},
        {"l2_prefetch_k_tiles": 2},
        {"setmaxnreg": True},
        {"silu_tanh": True, "epi_pipeline": True, "epi_tile_n": 16, "l2_prefetch_k_tiles": 2},
    )
)


def default_config(m: int, n: int, k: int, l: int) -> KernelConfig:
    """Tile N by the fewest tile-waves of equal work, then a 2-CTA pair along M wherever M allows.

    Model (MEMORY.md, "Config choice"): a CTA's time scales with its tile area (its FP4 math and its
    L2->SM bytes both do), so a wave of 128x64 CTA tiles costs about half a wave of 128x128 ones.
    N=64 wins when halving the tile does not double the number of waves (small M: 64 or 48 CTAs of
    128x128 leave most of the 148 SMs idle); on a tie N=128 wins for its better operand reuse. A 2-CTA
    pair (MMA M=256, cluster 2x1) keeps the CTA tiles and halves the B bytes each CTA loads. With 64-wide N
    tiles A stays in the MMA's A collector between the two products (a_collector): the model puts those tiles
    shared-memory bound, and the same change measured a gain on B200 for the small-M shapes only (MEMORY.md
    "A collector": where it did not, the DSL's own MMA path stays).
    """
    tiles_128 = (m // 128) * (n // 128) * l
    waves = lambda tiles: -(-tiles // SM_COUNT)  # noqa: E731
    tile_n = 128 if n % 128 == 0 and waves(tiles_128) <= waves(2 * tiles_128) / 2 else 64
    a_collector = tile_n == 64
    if m % 256 == 0:
        return KernelConfig(mma_tile_mn=(256, tile_n), cluster_mn=(2, 1), a_collector=a_collector)
    return KernelConfig(mma_tile_mn=(128, tile_n), a_collector=a_collector)


def config_for(m: int, n: int, k: int, l: int) -> KernelConfig:
    return CONFIG_TABLE.get((m, n, k, l)) or default_config(m, n, k, l)


def candidate_configs(m: int, n: int, k: int, l: int) -> list:
    return [cfg for cfg in TUNE_SPACE if DualGemmKernel.can_implement(cfg, m, n, k, l)[0]]


class DualGemmKernel:
    """Persistent, warp-specialized NVFP4 dual GEMM: C = silu(A B1^T) * (A B2^T)."""

    EPILOGUE_WARPS = (0, 1, 2, 3)
    MMA_WARP = 4
    TMA_WARP = 5
    THREADS_PER_CTA = 32 * 6

    def __init__(self, config: KernelConfig):
        ok, why = DualGemmKernel.can_implement_config(config)
        if not ok:
            raise ValueError(f"unsupported config {config}: {why}")
        self.config = config
        self.use_2cta = config.use_2cta
        self.cta_group = tcgen05.CtaGroup.TWO if self.use_2cta else tcgen05.CtaGroup.ONE
        self.cluster_shape_mn = config.cluster_mn
        self.mma_tiler_mn = config.mma_tile_mn
        self.cta_tile_mn = config.cta_tile_mn
        self.epi_tile_n = config.epi_tile_n
        self.silu_mul = silu_mul_tanh_ if config.silu_tanh else silu_mul_
        plan = self.plan()
        self.num_ab_stage = plan["ab_stages"]
        self.num_acc_stage = plan["acc_stages"]
        self.num_acc_tmem_cols = plan["acc_tmem_cols"]
        self.num_sfa_tmem_cols = plan["sfa_tmem_cols"]
        self.num_sfb_tmem_cols = plan["sfb_tmem_cols"]
        self.stage_bytes = plan["stage_bytes"]
        self.a_stage_bytes, self.b_stage_bytes = plan["a_stage_bytes"], plan["b_stage_bytes"]
        # Named barrier 1: the four epilogue warps; 2: epilogue + MMA warps around the TMEM allocation.
        self.epilogue_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=32 * len(self.EPILOGUE_WARPS))
        self.tmem_alloc_barrier = pipeline.NamedBarrier(
            barrier_id=2, num_threads=32 * (len(self.EPILOGUE_WARPS) + 1)
        )

    # ------------------------------------------------------------------ sizes (no GPU, no tracing)
    @staticmethod
    def can_implement_config(config: KernelConfig) -> Tuple[bool, str]:
        tile_m, tile_n = config.mma_tile_mn
        cm, cn = config.cluster_mn
        if tile_m not in (128, 256):
            return False, "MMA tile M must be 128 (1 CTA) or 256 (2-CTA pair)"
        if tile_n not in (64, 128):
            return False, "MMA tile N must be 64 or 128 (two accumulators must fit in 512 TMEM columns)"
        if cm not in (1, 2, 4) or cn not in (1, 2, 4) or cm * cn > 4:
            return False, "cluster M and N must be powers of two with at most 4 CTAs per cluster"
        if config.use_2cta and cm % 2:
            return False, "a 2-CTA MMA tile needs cluster M to be a multiple of 2"
        if config.epi_tile_n not in (8, 16, 32) or config.cta_tile_mn[1] % config.epi_tile_n:
            return False, "epilogue tile N must be 8, 16 or 32 and divide the CTA tile N"
        if config.l2_prefetch_k_tiles < 0:
            return False, "l2_prefetch_k_tiles must be 0 (off) or a number of k-tiles"
        return True, ""

    @staticmethod
    def can_implement(config: KernelConfig, m: int, n: int, k: int, l: int) -> Tuple[bool, str]:
        ok, why = DualGemmKernel.can_implement_config(config)
        if not ok:
            return ok, why
        tile_m = config.mma_tile_mn[0] * config.cluster_mn[0] // (2 if config.use_2cta else 1)
        tile_n = config.mma_tile_mn[1] * config.cluster_mn[1]
        if m <= 0 or m % tile_m:
            return False, f"M={m} must be a positive multiple of the cluster tile M {tile_m}"
        if n <= 0 or n % tile_n:
            return False, f"N={n} must be a positive multiple of the cluster tile N {tile_n}"
        if k <= 0 or k % K_TILE:
            return False, f"K={k} must be a positive multiple of {K_TILE}"
        if l < 1:
            return False, f"L={l} must be at least 1"
        return True, ""

    def plan(self) -> dict:
        """Shared- and tensor-memory budget, derived from the tile shape and the SM100 capacities."""
        cta_m, cta_n = self.config.cta_tile_mn
        # 2-CTA MMA: each CTA of the pair loads half of the B rows; the MMA reads both halves.
        b_rows = self.config.mma_tile_mn[1] // (2 if self.config.use_2cta else 1)
        sfb_rows = -(-self.config.mma_tile_mn[1] // 128) * 128  # SFB moves in whole 128-row atoms
        a_bytes = cta_m * K_TILE // 2
        b_bytes = b_rows * K_TILE // 2
        sfa_bytes = cta_m * K_TILE // SF_VEC_SIZE
        sfb_bytes = sfb_rows * K_TILE // SF_VEC_SIZE
        stage_bytes = a_bytes + 2 * b_bytes + sfa_bytes + 2 * sfb_bytes
        ab_stages = (SMEM_CAPACITY - DSL_STATIC_SMEM - BARRIER_BYTES) // stage_bytes
        # Tensor memory: per accumulator stage two fp32 accumulators of cta_n columns; scale factors
        # after them (4 columns per 32-row scale atom and per k-group of one 256-wide k-tile).
        sfa_cols = (cta_m // SF_ATOM_MN) * (K_TILE // MMA_INST_K)
        sfb_cols = (sfb_rows // SF_ATOM_MN) * (K_TILE // MMA_INST_K)
        acc_stages = min(2, (TMEM_COLUMNS - sfa_cols - 2 * sfb_cols) // (2 * cta_n))
        return {
            "ab_stages": ab_stages,
            "acc_stages": acc_stages,
            "stage_bytes": stage_bytes,
            "a_stage_bytes": a_bytes,  # one stage of A, and of B1 (= of B2)
            "b_stage_bytes": b_bytes,
            "dynamic_smem_bytes": BARRIER_BYTES + ab_stages * stage_bytes,  # the launch's request
            "smem_bytes": DSL_STATIC_SMEM + BARRIER_BYTES + ab_stages * stage_bytes,
            "acc_tmem_cols": 2 * cta_n * acc_stages,
            "sfa_tmem_cols": sfa_cols,
            "sfb_tmem_cols": sfb_cols,
            "tmem_cols": 2 * cta_n * acc_stages + sfa_cols + 2 * sfb_cols,
            "threads_per_cta": self.THREADS_PER_CTA,
            "epi_tile_n": self.config.epi_tile_n,
        }

    # ------------------------------------------------------------------ host side
    def _make_tiled_mmas(self):
        inst_mn = self.mma_tiler_mn
        tiled_mma = cute.make_tiled_mma(
            tcgen05.MmaMXF4NVF4Op(SF_DTYPE, (*inst_mn, MMA_INST_K), self.cta_group, tcgen05.OperandSource.SMEM)
        )
        # SFB is moved in whole 128-row atoms by a 1-CTA tiled MMA of N rounded up to 128 (NVIDIA's scheme).
        sfb_inst_mn = (inst_mn[0] // (2 if self.use_2cta else 1), cute.round_up(inst_mn[1], 128))
        tiled_mma_sfb = cute.make_tiled_mma(
            tcgen05.MmaMXF4NVF4Op(SF_DTYPE, (*sfb_inst_mn, MMA_INST_K), tcgen05.CtaGroup.ONE, tcgen05.OperandSource.SMEM)
        )
        return tiled_mma, tiled_mma_sfb

    @cute.jit
    def __call__(
        self,
        a: cute.Tensor,
        b1: cute.Tensor,
        b2: cute.Tensor,
        sfa_atoms: cute.Tensor,
        sfb1_atoms: cute.Tensor,
        sfb2_atoms: cute.Tensor,
        c: cute.Tensor,
    ):
        """TVM-FFI entry: the leaderboard's tensors as they come (FP4 operands, permuted scale atoms, C)."""
        self._launch(a, b1, b2, sfa_atoms.iterator, sfb1_atoms.iterator, sfb2_atoms.iterator, c)

    @cute.jit
    def launch_from_pointers(
        self,
        a_ptr: cute.Pointer,
        b1_ptr: cute.Pointer,
        b2_ptr: cute.Pointer,
        sfa_ptr: cute.Pointer,
        sfb1_ptr: cute.Pointer,
        sfb2_ptr: cute.Pointer,
        c_ptr: cute.Pointer,
        m: cutlass.Int32,
        n: cutlass.Int32,
        k: cutlass.Int32,
        l: cutlass.Int32,
    ):
        """Fallback entry for environments without apache-tvm-ffi: raw pointers and the problem size."""
        m = cute.assume(m, divby=128)
        n = cute.assume(n, divby=64)
        k = cute.assume(k, divby=K_TILE)

        def operand(ptr, rows):
            return cute.make_tensor(ptr, cute.make_layout((rows, k, l), stride=(k, 1, rows * k)))

        # 64-bit strides for C, as the TVM-FFI entry's C has: the kernel then gets the same parameter and the same
        # device code on both entries (the emulator runs the TVM-FFI one; compared in tests/test_emu_kernel.py).
        n64 = cute.assume(cutlass.Int64(n), divby=64)
        c = cute.make_tensor(c_ptr, cute.make_layout((m, n, l), stride=(n64, 1, cute.assume(n64 * m, divby=64 * 128))))
        self._launch(operand(a_ptr, m), operand(b1_ptr, n), operand(b2_ptr, n), sfa_ptr, sfb1_ptr, sfb2_ptr, c)

    @cute.jit
    def _launch(self, a, b1, b2, sfa_ptr, sfb1_ptr, sfb2_ptr, c):
        """Builds the scale views, TMA descriptors and smem layouts, then launches the kernel.

        The scales are read through the layout the permuted atoms imply (tile_atom_to_shape_SF); only
        their base addresses are taken from the caller.
        """
        sfa = scale_view(sfa_ptr, a.shape)
        sfb1 = scale_view(sfb1_ptr, b1.shape)
        sfb2 = scale_view(sfb2_ptr, b2.shape)

        tiled_mma, tiled_mma_sfb = self._make_tiled_mmas()
        self._setup_tiles(tiled_mma, tiled_mma_sfb)

        a_smem_layout = cute.slice_(self.a_smem_layout_staged, (None, None, None, 0))
        b_smem_layout = cute.slice_(self.b_smem_layout_staged, (None, None, None, 0))
        sfa_smem_layout = cute.slice_(self.sfa_smem_layout_staged, (None, None, None, 0))
        sfb_smem_layout = cute.slice_(self.sfb_smem_layout_staged, (None, None, None, 0))
        cluster_shape = self.cluster_layout_vmnk.shape
        tma_a = cute.nvgpu.make_tiled_tma_atom_A(
            sm100_utils.cluster_shape_to_tma_atom_A(self.cluster_shape_mn, tiled_mma.thr_id),
            a, a_smem_layout, self.mma_tiler, tiled_mma, cluster_shape,
        )
        tma_sfa = cute.nvgpu.make_tiled_tma_atom_A(
            sm100_utils.cluster_shape_to_tma_atom_A(self.cluster_shape_mn, tiled_mma.thr_id),
            sfa, sfa_smem_layout, self.mma_tiler, tiled_mma, cluster_shape, internal_type=cutlass.Int16,
        )
        tma_b1, tma_b2 = (
            cute.nvgpu.make_tiled_tma_atom_B(
                sm100_utils.cluster_shape_to_tma_atom_B(self.cluster_shape_mn, tiled_mma.thr_id),
                b, b_smem_layout, self.mma_tiler, tiled_mma, cluster_shape,
            )
            for b in (b1, b2)
        )
        tma_sfb1, tma_sfb2 = (
            cute.nvgpu.make_tiled_tma_atom_B(
                sm100_utils.cluster_shape_to_tma_atom_SFB(self.cluster_shape_mn, tiled_mma.thr_id),
                sfb, sfb_smem_layout, self.mma_tiler_sfb, tiled_mma_sfb,
                self.cluster_layout_sfb_vmnk.shape, internal_type=cutlass.Int16,
            )
            for sfb in (sfb1, sfb2)
        )

        # The layouts NVIDIA's helpers built must agree with plan(), which the tools read without tracing.
        atom_thr_size = cute.size(tiled_mma.thr_id.shape)
        stage_bytes = (
            cute.size_in_bytes(AB_DTYPE, a_smem_layout)
            + 2 * cute.size_in_bytes(AB_DTYPE, b_smem_layout)
            + cute.size_in_bytes(SF_DTYPE, sfa_smem_layout)
            + 2 * cute.size_in_bytes(SF_DTYPE, sfb_smem_layout)
        )
        if cutlass.const_expr(stage_bytes != self.stage_bytes):
            raise ValueError(f"smem stage is {stage_bytes} bytes, plan() says {self.stage_bytes}")
        self.num_tma_load_bytes = stage_bytes * atom_thr_size

        tile_sched_params, grid = self._compute_grid(c)
        self.shared_storage = self._shared_storage_type()

        self.kernel(
            tiled_mma,
            tiled_mma_sfb,
            tma_a[0], tma_a[1],
            tma_b1[0], tma_b1[1],
            tma_b2[0], tma_b2[1],
            tma_sfa[0], tma_sfa[1],
            tma_sfb1[0], tma_sfb1[1],
            tma_sfb2[0], tma_sfb2[1],
            c,
            self.cluster_layout_vmnk,
            self.cluster_layout_sfb_vmnk,
            self.a_smem_layout_staged,
            self.b_smem_layout_staged,
            self.sfa_smem_layout_staged,
            self.sfb_smem_layout_staged,
            tile_sched_params,
        ).launch(
            grid=grid,
            block=[self.THREADS_PER_CTA, 1, 1],
            cluster=(*self.cluster_shape_mn, 1),
            min_blocks_per_mp=1,
            use_pdl=self.config.pdl,
        )

    def _setup_tiles(self, tiled_mma, tiled_mma_sfb):
        """MMA/CTA tilers, cluster layouts and staged shared-memory layouts (NVIDIA's _setup_attributes)."""
        mma_k = cute.size(tiled_mma.shape_mnk, mode=[2]) * (K_TILE // MMA_INST_K)
        self.mma_tiler = (*self.mma_tiler_mn, mma_k)
        self.mma_tiler_sfb = (
            self.mma_tiler_mn[0] // (2 if self.use_2cta else 1),
            cute.round_up(self.mma_tiler_mn[1], 128),
            mma_k,
        )
        self.cluster_layout_vmnk = cute.tiled_divide(
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma.thr_id.shape,)
        )
        self.cluster_layout_sfb_vmnk = cute.tiled_divide(
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma_sfb.thr_id.shape,)
        )
        self.num_mcast_ctas_a = cute.size(self.cluster_layout_vmnk.shape[2])
        self.num_mcast_ctas_b = cute.size(self.cluster_layout_vmnk.shape[1])
        self.is_a_mcast = self.num_mcast_ctas_a > 1
        self.is_b_mcast = self.num_mcast_ctas_b > 1
        self.epi_tile = (self.cta_tile_mn[0], self.epi_tile_n)

        self.a_smem_layout_staged = sm100_utils.make_smem_layout_a(
            tiled_mma, self.mma_tiler, AB_DTYPE, self.num_ab_stage
        )
        self.b_smem_layout_staged = sm100_utils.make_smem_layout_b(
            tiled_mma, self.mma_tiler, AB_DTYPE, self.num_ab_stage
        )
        self.sfa_smem_layout_staged = blockscaled_utils.make_smem_layout_sfa(
            tiled_mma, self.mma_tiler, SF_VEC_SIZE, self.num_ab_stage
        )
        self.sfb_smem_layout_staged = blockscaled_utils.make_smem_layout_sfb(
            tiled_mma, self.mma_tiler, SF_VEC_SIZE, self.num_ab_stage
        )

    def _shared_storage_type(self):
        align = 1024

        def buffer(dtype, layout):
            return cute.struct.Align[cute.struct.MemRange[dtype, cute.cosize(layout)], align]

        @cute.struct
        class SharedStorage:
            ab_full_mbar: cute.struct.MemRange[cutlass.Int64, self.num_ab_stage]
            ab_empty_mbar: cute.struct.MemRange[cutlass.Int64, self.num_ab_stage]
            acc_full_mbar: cute.struct.MemRange[cutlass.Int64, self.num_acc_stage]
            acc_empty_mbar: cute.struct.MemRange[cutlass.Int64, self.num_acc_stage]
            tmem_dealloc_mbar: cutlass.Int64
            tmem_holding_buf: cutlass.Int32
            sA: buffer(AB_DTYPE, self.a_smem_layout_staged.outer)
            sB1: buffer(AB_DTYPE, self.b_smem_layout_staged.outer)
            sB2: buffer(AB_DTYPE, self.b_smem_layout_staged.outer)
            sSFA: buffer(SF_DTYPE, self.sfa_smem_layout_staged)
            sSFB1: buffer(SF_DTYPE, self.sfb_smem_layout_staged)
            sSFB2: buffer(SF_DTYPE, self.sfb_smem_layout_staged)

        return SharedStorage

    def _compute_grid(self, c: cute.Tensor):
        cta_tile = (self.cta_tile_mn[0], self.cta_tile_mn[1])
        tiles = cute.zipped_divide(c, tiler=cta_tile)
        num_ctas_mnl = tiles[(0, (None, None, None))].shape
        params = utils.PersistentTileSchedulerParams(
            num_ctas_mnl, (*self.cluster_shape_mn, 1), raster_along_m=self.config.raster_along_m
        )
        max_active_clusters = SM_COUNT // (self.cluster_shape_mn[0] * self.cluster_shape_mn[1])
        grid = utils.StaticPersistentTileScheduler.get_grid_shape(params, max_active_clusters)
        return params, grid

    # ------------------------------------------------------------------ device side
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
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx = cute.arch.thread_idx()[0]
        if cutlass.const_expr(self.config.pdl):
            # The next kernel may start its prologue now: it waits for this grid before touching memory.
            cute.arch.griddepcontrol_launch_dependents()
        tma_atoms = (tma_atom_a, tma_atom_b1, tma_atom_b2, tma_atom_sfa, tma_atom_sfb1, tma_atom_sfb2)
        if warp_idx == self.TMA_WARP:
            for atom in tma_atoms:
                cpasync.prefetch_descriptor(atom)

        use_2cta = cute.size(tiled_mma.thr_id.shape) == 2
        bidx = cute.arch.block_idx()[0]
        is_leader_cta = bidx % cute.size(tiled_mma.thr_id.shape) == 0

        # ---- barriers: smem ring (TMA -> MMA), accumulators (MMA -> epilogue), tensor memory
        smem = SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        num_tma_producer = self.num_mcast_ctas_a + self.num_mcast_ctas_b - 1
        ab_pipeline = pipeline.PipelineTmaUmma.create(
            barrier_storage=storage.ab_full_mbar.data_ptr(),
            num_stages=self.num_ab_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, num_tma_producer),
            tx_count=self.num_tma_load_bytes,
            cta_layout_vmnk=cluster_layout_vmnk,
            defer_sync=True,
        )
        # Every epilogue thread arrives on the accumulator-empty barrier (of both CTAs of a pair).
        acc_pipeline = pipeline.PipelineUmmaAsync.create(
            barrier_storage=storage.acc_full_mbar.data_ptr(),
            num_stages=self.num_acc_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, 32 * len(self.EPILOGUE_WARPS) * (2 if use_2cta else 1)
            ),
            cta_layout_vmnk=cluster_layout_vmnk,
            defer_sync=True,
        )
        tmem = TmemAllocator(
            _smem_field_ptr(storage.tmem_holding_buf),
            barrier_for_retrieve=self.tmem_alloc_barrier,
            allocator_warp_id=self.EPILOGUE_WARPS[0],
            is_two_cta=use_2cta,
            two_cta_tmem_dealloc_mbar_ptr=_smem_field_ptr(storage.tmem_dealloc_mbar),
        )
        pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mn, is_relaxed=True)

        ring, loads, k_tile_cnt, tCgC = self._ring_and_loads(
            storage,
            tiled_mma,
            tiled_mma_sfb,
            tma_atoms,
            (mA_mkl, mB1_nkl, mB2_nkl, mSFA_mkl, mSFB1_nkl, mSFB2_nkl, mC_mnl),
            cluster_layout_vmnk,
            cluster_layout_sfb_vmnk,
            a_smem_layout_staged,
            b_smem_layout_staged,
            sfa_smem_layout_staged,
            sfb_smem_layout_staged,
        )
        sA, sB1, sB2, sSFA, sSFB1, sSFB2 = ring
        if cutlass.const_expr(self.config.l2_prefetch_k_tiles > 0):
            if warp_idx == self.TMA_WARP:
                self._prefetch_first_k_tiles(loads, k_tile_cnt, tile_sched_params, tiled_mma)

        # ---- MMA fragments; accumulator stage s holds acc1 at index 2s and acc2 at 2s + 1
        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB1 = tiled_mma.make_fragment_B(sB1)
        tCrB2 = tiled_mma.make_fragment_B(sB2)
        acc_shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, 2 * self.num_acc_stage))

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)
        if cutlass.const_expr(self.config.setmaxnreg):
            # One setmaxnreg per warpgroup, executed by all its warps (PTX ISA setmaxnreg): warps 0-3 are the
            # epilogue's warpgroup, warps 4-5 (MMA, TMA) the second one.
            if warp_idx < self.MMA_WARP:
                setmaxnreg(SETMAXNREG_EPILOGUE, "inc")
            else:
                setmaxnreg(SETMAXNREG_PRODUCERS, "dec")

        # ============================================================ TMA warp
        if warp_idx == self.TMA_WARP:
            if cutlass.const_expr(self.config.pdl):
                cute.arch.griddepcontrol_wait()  # the previous kernel's writes are complete and visible
            tile_sched, work_tile = self._first_work_tile(tile_sched_params)
            ab_producer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_ab_stage)
            while work_tile.is_valid_tile:
                tile_m, tile_n, tile_l = self._mma_tile_coord(work_tile.tile_idx, tiled_mma)
                row_tiles = self._load_rows(tile_m, tile_n)
                srcs = [load.gmem[(None, row_tiles[load.rows], None, tile_l)] for load in loads]

                ab_producer_state.reset_count()
                peek_empty = cutlass.Boolean(1)
                if ab_producer_state.count < k_tile_cnt:
                    peek_empty = ab_pipeline.producer_try_acquire(ab_producer_state)
                for k_tile in cutlass.range(0, k_tile_cnt, 1, unroll=1):
                    ab_pipeline.producer_acquire(ab_producer_state, peek_empty)
                    barrier = ab_pipeline.producer_get_barrier(ab_producer_state)
                    for load, src in zip(loads, srcs):
                        cute.copy(
                            load.atom,
                            src[(None, ab_producer_state.count)],
                            load.smem[(None, ab_producer_state.index)],
                            tma_bar_ptr=barrier,
                            mcast_mask=load.mcast_mask,
                            cache_policy=load.cache_policy,
                        )
                    ab_producer_state.advance()
                    peek_empty = cutlass.Boolean(1)
                    if ab_producer_state.count < k_tile_cnt:
                        peek_empty = ab_pipeline.producer_try_acquire(ab_producer_state)
                tile_sched.advance_to_next_work()
                work_tile = tile_sched.get_current_work()
            ab_pipeline.producer_tail(ab_producer_state)

        # ============================================================ MMA warp
        if warp_idx == self.MMA_WARP:
            tmem.wait_for_alloc()
            acc_tmem_ptr = tmem.retrieve_ptr(ACC_DTYPE)
            tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)

            # Scale factors live after the accumulators: SFA, then SFB1, then SFB2.
            sfa_col = self.num_acc_tmem_cols
            sfb_cols = (sfa_col + self.num_sfa_tmem_cols, sfa_col + self.num_sfa_tmem_cols + self.num_sfb_tmem_cols)
            sfa_smem_stage0 = cute.slice_(sfa_smem_layout_staged, (None, None, None, 0))
            sfb_smem_stage0 = cute.slice_(sfb_smem_layout_staged, (None, None, None, 0))
            tCtSFA_layout = blockscaled_utils.make_tmem_layout_sfa(tiled_mma, self.mma_tiler, SF_VEC_SIZE, sfa_smem_stage0)
            tCtSFB_layout = blockscaled_utils.make_tmem_layout_sfb(tiled_mma, self.mma_tiler, SF_VEC_SIZE, sfb_smem_stage0)
            tCtSFA = cute.make_tensor(cute.recast_ptr(acc_tmem_ptr + sfa_col, dtype=SF_DTYPE), tCtSFA_layout)
            tCtSFB1, tCtSFB2 = (
                cute.make_tensor(cute.recast_ptr(acc_tmem_ptr + col, dtype=SF_DTYPE), tCtSFB_layout)
                for col in sfb_cols
            )
            s2t_sfa = self._s2t_copy_and_partition(sSFA, tCtSFA)
            s2t_sfb1 = self._s2t_copy_and_partition(sSFB1, tCtSFB1)
            s2t_sfb2 = self._s2t_copy_and_partition(sSFB2, tCtSFB2)

            tile_sched, work_tile = self._first_work_tile(tile_sched_params)
            ab_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_ab_stage)
            acc_producer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_acc_stage)
            while work_tile.is_valid_tile:
                tile_n = self._mma_tile_coord(work_tile.tile_idx, tiled_mma)[1]
                tCtAcc1 = tCtAcc_base[(None, None, None, 2 * acc_producer_state.index)]
                tCtAcc2 = tCtAcc_base[(None, None, None, 2 * acc_producer_state.index + 1)]
                # A 64-wide N tile reads its half of the 128-row SFB atom: shift by 2 columns on odd tiles.
                tCtSFB1_mma, tCtSFB2_mma = tCtSFB1, tCtSFB2
                if cutlass.const_expr(self.cta_tile_mn[1] == 64):
                    shift = cutlass.Int32((tile_n % 2) * 2)
                    tCtSFB1_mma, tCtSFB2_mma = (
                        cute.make_tensor(cute.recast_ptr(acc_tmem_ptr + col + shift, dtype=SF_DTYPE), tCtSFB_layout)
                        for col in sfb_cols
                    )

                ab_consumer_state.reset_count()
                peek_full = cutlass.Boolean(1)
                if ab_consumer_state.count < k_tile_cnt and is_leader_cta:
                    peek_full = ab_pipeline.consumer_try_wait(ab_consumer_state)
                if is_leader_cta:
                    acc_pipeline.producer_acquire(acc_producer_state)
                tiled_mma.set(tcgen05.Field.ACCUMULATE, False)

                for k_tile in range(k_tile_cnt):
                    if is_leader_cta:
                        ab_pipeline.consumer_wait(ab_consumer_state, peek_full)
                        stage = (None, None, None, None, ab_consumer_state.index)
                        for copy_s2t, src, dst in (s2t_sfa, s2t_sfb1, s2t_sfb2):
                            cute.copy(copy_s2t, src[stage], dst)
                        for kblock in cutlass.range(cute.size(tCrA, mode=[2]), unroll_full=True):
                            if cutlass.const_expr(self.config.a_collector):
                                self._mma_pair_a_collector(
                                    tiled_mma, storage, ab_consumer_state.index, kblock,
                                    (tCtAcc1, tCtAcc2), tCtSFA, (tCtSFB1_mma, tCtSFB2_mma),
                                )
                            else:
                                kcoord = (None, None, kblock, ab_consumer_state.index)
                                tiled_mma.set(tcgen05.Field.SFA, tCtSFA[(None, None, kblock)].iterator)
                                for acc, tCrB, tCtSFB in ((tCtAcc1, tCrB1, tCtSFB1_mma), (tCtAcc2, tCrB2, tCtSFB2_mma)):
                                    tiled_mma.set(tcgen05.Field.SFB, tCtSFB[(None, None, kblock)].iterator)
                                    cute.gemm(tiled_mma, acc, tCrA[kcoord], tCrB[kcoord], acc)
                            tiled_mma.set(tcgen05.Field.ACCUMULATE, True)
                        ab_pipeline.consumer_release(ab_consumer_state)
                    ab_consumer_state.advance()
                    peek_full = cutlass.Boolean(1)
                    if ab_consumer_state.count < k_tile_cnt:
                        if is_leader_cta:
                            peek_full = ab_pipeline.consumer_try_wait(ab_consumer_state)

                if is_leader_cta:
                    acc_pipeline.producer_commit(acc_producer_state)
                acc_producer_state.advance()
                tile_sched.advance_to_next_work()
                work_tile = tile_sched.get_current_work()
            acc_pipeline.producer_tail(acc_producer_state)

        # ============================================================ epilogue warps
        if warp_idx < self.MMA_WARP:
            tmem.allocate(TMEM_COLUMNS)
            tmem.wait_for_alloc()
            acc_tmem_ptr = tmem.retrieve_ptr(ACC_DTYPE)
            tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)

            epi = self._epilogue_views(tidx, tCtAcc_base, tCgC)
            tTR_rAcc1 = cute.make_rmem_tensor(epi.fragment_shape, ACC_DTYPE)
            tTR_rAcc2 = cute.make_rmem_tensor(epi.fragment_shape, ACC_DTYPE)
            tTR_rC = cute.make_rmem_tensor(epi.fragment_shape, C_DTYPE)
            if cutlass.const_expr(self.config.pdl):
                cute.arch.griddepcontrol_wait()  # no store to C before the previous kernel is done with it

            tile_sched, work_tile = self._first_work_tile(tile_sched_params)
            acc_consumer_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_acc_stage)
            while work_tile.is_valid_tile:
                tile_m, tile_n, tile_l = self._mma_tile_coord(work_tile.tile_idx, tiled_mma)
                tTR_gC = self._c_tile(epi, tile_m, tile_n, tile_l)
                tTR_tAcc1 = epi.tAcc[(None, None, None, 0, None, 2 * acc_consumer_state.index)]
                tTR_tAcc2 = epi.tAcc[(None, None, None, 0, None, 2 * acc_consumer_state.index + 1)]
                acc_pipeline.consumer_wait(acc_consumer_state)
                if cutlass.const_expr(self.config.epi_pipeline):
                    self._epilogue_stage_pipelined(epi, (tTR_tAcc1, tTR_tAcc2), tTR_gC, acc_pipeline, acc_consumer_state)
                else:
                    for subtile in cutlass.range(cute.size(tTR_tAcc1, mode=[3])):
                        cute.copy(epi.copy_t2r, tTR_tAcc1[(None, None, None, subtile)], tTR_rAcc1)
                        cute.copy(epi.copy_t2r, tTR_tAcc2[(None, None, None, subtile)], tTR_rAcc2)
                        self.silu_mul(tTR_rAcc1, tTR_rAcc2)
                        tTR_rC.store(tTR_rAcc1.load().to(C_DTYPE))
                        cute.copy(epi.store, tTR_rC, tTR_gC[(None, None, None, subtile)])
                    # All tensor-memory reads of this stage are complete before the MMA warp may overwrite it.
                    cute.arch.fence_view_async_tmem_load()
                    acc_pipeline.consumer_release(acc_consumer_state)
                acc_consumer_state.advance()
                tile_sched.advance_to_next_work()
                work_tile = tile_sched.get_current_work()

            tmem.relinquish_alloc_permit()
            self.epilogue_barrier.arrive_and_wait()
            tmem.free(acc_tmem_ptr)

    @cute.jit
    def _prefetch_first_k_tiles(self, loads, k_tile_cnt, tile_sched_params, tiled_mma):
        """L2 prefetch of the first KernelConfig.l2_prefetch_k_tiles k-tiles of this CTA's first tile: the bytes its
        own first TMA loads will bring (each CTA of a cluster its own slice), issued before the cluster sync and
        griddepcontrol.wait. A prefetch only warms L2, the coherence point every earlier write reaches first, so
        it may run while the previous kernel still writes (PTX ISA cp.async.bulk.prefetch.tensor: no effect on
        memory contents)."""
        tile_sched, work_tile = self._first_work_tile(tile_sched_params)
        if work_tile.is_valid_tile:
            tile_m, tile_n, tile_l = self._mma_tile_coord(work_tile.tile_idx, tiled_mma)
            row_tiles = self._load_rows(tile_m, tile_n)
            for load in loads:
                src = load.gmem[(None, row_tiles[load.rows], None, tile_l)]
                for k_tile in cutlass.range_constexpr(self.config.l2_prefetch_k_tiles):
                    if k_tile < k_tile_cnt:
                        with cute.arch.elect_one():
                            cute.prefetch(load.atom, src[(None, k_tile)])

    def _epilogue_stage_pipelined(self, epi, tTR_tAccs, tTR_gC, acc_pipeline, acc_consumer_state):
        """One accumulator stage through the epilogue, software-pipelined (KernelConfig.epi_pipeline).

        Subtile i + 1's tensor-memory loads are issued before subtile i's math and stores, into the other of two
        register buffers, so they are in flight meanwhile. Each subtile starts with tcgen05.wait::ld, after which
        its registers are valid (PTX ISA tcgen05.wait); it also keeps ptxas from hoisting every load of the stage
        to the top (compiled: 255 registers and spills for a 128-wide tile without it). After the last subtile's
        wait every load of the stage is complete and the stage goes back to the MMA warp, before that subtile's
        math and stores.
        """
        subtiles = cute.size(tTR_tAccs[0], mode=[3])
        buffers = [[cute.make_rmem_tensor(epi.fragment_shape, ACC_DTYPE) for _ in tTR_tAccs] for _ in range(2)]
        tTR_rC = cute.make_rmem_tensor(epi.fragment_shape, C_DTYPE)

        def load(subtile):
            for tTR_tAcc, tTR_rAcc in zip(tTR_tAccs, buffers[subtile % 2]):
                cute.copy(epi.copy_t2r, tTR_tAcc[(None, None, None, subtile)], tTR_rAcc)

        load(0)
        for subtile in range(subtiles):
            cute.arch.fence_view_async_tmem_load()
            if subtile + 1 < subtiles:
                load(subtile + 1)
            else:
                acc_pipeline.consumer_release(acc_consumer_state)
            tTR_rAcc1, tTR_rAcc2 = buffers[subtile % 2]
            self.silu_mul(tTR_rAcc1, tTR_rAcc2)
            tTR_rC.store(tTR_rAcc1.load().to(C_DTYPE))
            cute.copy(epi.store, tTR_rC, tTR_gC[(None, None, None, subtile)])

    def _mma_pair_a_collector(self, tiled_mma, storage, stage, kblock, accs, tCtSFA, tCtSFBs):
        """Both MMAs of one k-block, A kept in the A collector between them (KernelConfig.a_collector).

        Builds what cute.gemm builds (the kernel's PTX with the knob off shows each): K-major SWIZZLE_128B
        shared-memory descriptors (start address >> 4, LBO 16 B, SBO 1024 B = one 8-row x 128-byte atom,
        version 1, layout 2), one k-block = 32 bytes further along each 128-byte row, one stage = the operand's
        stage bytes further; the block-scaled instruction descriptor (E2M1 x E2M1, UE4M3 scales, N >> 3, M >> 4;
        the scale addresses' byte fields are 0, so are the SF ids); enable-input-d = the atom's ACCUMULATE.
        """
        kblock_bytes = MMA_INST_K // 2

        def desc_lo(buffer, stage_bytes):
            addr = buffer.data_ptr().toint() + stage * stage_bytes + kblock * kblock_bytes
            return (addr >> 4) & 0x3FFF

        idesc = (1 << 7) | (1 << 10) | ((self.mma_tiler_mn[1] >> 3) << 17) | ((self.mma_tiler_mn[0] >> 4) << 24)
        mma_pair_a_collector(
            [acc.iterator.toint() for acc in accs],
            desc_lo(storage.sA, self.a_stage_bytes),
            [desc_lo(buffer, self.b_stage_bytes) for buffer in (storage.sB1, storage.sB2)],
            idesc,
            tCtSFA[(None, None, kblock)].iterator.toint(),
            [sfb[(None, None, kblock)].iterator.toint() for sfb in tCtSFBs],
            tiled_mma.get(tcgen05.Field.ACCUMULATE),
            2 if self.use_2cta else 1,
        )

    def _ring_and_loads(
        self,
        storage,
        tiled_mma: cute.TiledMma,
        tiled_mma_sfb: cute.TiledMma,
        tma_atoms,
        operands,
        cluster_layout_vmnk: cute.Layout,
        cluster_layout_sfb_vmnk: cute.Layout,
        a_smem_layout_staged: cute.ComposedLayout,
        b_smem_layout_staged: cute.ComposedLayout,
        sfa_smem_layout_staged: cute.Layout,
        sfb_smem_layout_staged: cute.Layout,
    ):
        """The shared-memory ring and the six TMA loads that fill it (device side).

        tma_atoms and operands are in the order A, B1, B2, SFA, SFB1, SFB2 (operands also end with C).
        Returns (ring, loads, k_tile_cnt, tCgC): the staged smem tensors, one TmaLoad per operand, the
        number of k-tiles, and this CTA's MMA partition of C. probes/tma_loads.py runs it on any TMA GPU.
        """
        tma_atom_a, tma_atom_b1, tma_atom_b2, tma_atom_sfa, tma_atom_sfb1, tma_atom_sfb2 = tma_atoms
        mA_mkl, mB1_nkl, mB2_nkl, mSFA_mkl, mSFB1_nkl, mSFB2_nkl, mC_mnl = operands
        use_2cta = cute.size(tiled_mma.thr_id.shape) == 2
        bidx = cute.arch.block_idx()[0]
        cta_rank_in_cluster = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cta_coord_vmnk = cluster_layout_vmnk.get_flat_coord(cta_rank_in_cluster)
        cta_coord_sfb_vmnk = cluster_layout_sfb_vmnk.get_flat_coord(cta_rank_in_cluster)

        sA = storage.sA.get_tensor(a_smem_layout_staged.outer, swizzle=a_smem_layout_staged.inner)
        sB1 = storage.sB1.get_tensor(b_smem_layout_staged.outer, swizzle=b_smem_layout_staged.inner)
        sB2 = storage.sB2.get_tensor(b_smem_layout_staged.outer, swizzle=b_smem_layout_staged.inner)
        sSFA = storage.sSFA.get_tensor(sfa_smem_layout_staged)
        sSFB1 = storage.sSFB1.get_tensor(sfb_smem_layout_staged)
        sSFB2 = storage.sSFB2.get_tensor(sfb_smem_layout_staged)

        a_mcast_mask = None
        b_mcast_mask = None
        sfb_mcast_mask = None
        if cutlass.const_expr(self.is_a_mcast or self.is_b_mcast or use_2cta):
            a_mcast_mask = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, cta_coord_vmnk, mcast_mode=2)
            b_mcast_mask = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, cta_coord_vmnk, mcast_mode=1)
            sfb_mcast_mask = cpasync.create_tma_multicast_mask(
                cluster_layout_sfb_vmnk, cta_coord_sfb_vmnk, mcast_mode=1
            )

        # ---- global tiles, partitioned for the MMA and for TMA
        tiler_mk = cute.slice_(self.mma_tiler, (None, 0, None))
        tiler_nk = cute.slice_(self.mma_tiler, (0, None, None))
        tiler_sfb_nk = cute.slice_(self.mma_tiler_sfb, (0, None, None))
        # (bM, bK, RestM, RestK, RestL) / (bN, bK, RestN, RestK, RestL)
        gA_mkl = cute.local_tile(mA_mkl, tiler_mk, (None, None, None))
        gB1_nkl = cute.local_tile(mB1_nkl, tiler_nk, (None, None, None))
        gB2_nkl = cute.local_tile(mB2_nkl, tiler_nk, (None, None, None))
        gSFA_mkl = cute.local_tile(mSFA_mkl, tiler_mk, (None, None, None))
        gSFB1_nkl = cute.local_tile(mSFB1_nkl, tiler_sfb_nk, (None, None, None))
        gSFB2_nkl = cute.local_tile(mSFB2_nkl, tiler_sfb_nk, (None, None, None))
        gC_mnl = cute.local_tile(mC_mnl, cute.slice_(self.mma_tiler, (None, None, 0)), (None, None, None))
        k_tile_cnt = cute.size(gA_mkl, mode=[3])

        thr_mma = tiled_mma.get_slice(bidx % cute.size(tiled_mma.thr_id.shape))
        thr_mma_sfb = tiled_mma_sfb.get_slice(bidx % cute.size(tiled_mma.thr_id.shape))
        tCgC = thr_mma.partition_C(gC_mnl)

        a_cta_layout = cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, 0, None, 0)).shape)
        b_cta_layout = cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, None, 0, 0)).shape)
        sfb_cta_layout = cute.make_layout(cute.slice_(cluster_layout_sfb_vmnk, (0, None, 0, 0)).shape)

        def tma_partition(atom, cta_coord, cta_layout, s, g, is_scale):
            ts, tg = cpasync.tma_partition(
                atom, cta_coord, cta_layout, cute.group_modes(s, 0, 3), cute.group_modes(g, 0, 3)
            )
            if cutlass.const_expr(is_scale):
                ts, tg = cute.filter_zeros(ts), cute.filter_zeros(tg)
            return ts, tg

        tAsA, tAgA = tma_partition(tma_atom_a, cta_coord_vmnk[2], a_cta_layout, sA, thr_mma.partition_A(gA_mkl), False)
        tBsB1, tBgB1 = tma_partition(tma_atom_b1, cta_coord_vmnk[1], b_cta_layout, sB1, thr_mma.partition_B(gB1_nkl), False)
        tBsB2, tBgB2 = tma_partition(tma_atom_b2, cta_coord_vmnk[1], b_cta_layout, sB2, thr_mma.partition_B(gB2_nkl), False)
        tAsSFA, tAgSFA = tma_partition(
            tma_atom_sfa, cta_coord_vmnk[2], a_cta_layout, sSFA, thr_mma.partition_A(gSFA_mkl), True
        )
        tBsSFB1, tBgSFB1 = tma_partition(
            tma_atom_sfb1, cta_coord_sfb_vmnk[1], sfb_cta_layout, sSFB1, thr_mma_sfb.partition_B(gSFB1_nkl), True
        )
        tBsSFB2, tBgSFB2 = tma_partition(
            tma_atom_sfb2, cta_coord_sfb_vmnk[1], sfb_cta_layout, sSFB2, thr_mma_sfb.partition_B(gSFB2_nkl), True
        )
        # B tiles are read by only M / 128 CTAs, A tiles by N / tile_N of them: let B leave L2 first.
        b_policy = None
        if cutlass.const_expr(self.config.b_evict_first):
            # Materialized as an IR value: DSL 4.3 accepts no Python constant for cache_policy.
            b_policy = cutlass.Int64(cutlass.Int64(L2_EVICT_FIRST).ir_value())
        loads = (
            TmaLoad(tma_atom_a, tAsA, tAgA, a_mcast_mask, ROWS_OF_M_TILE, None),
            TmaLoad(tma_atom_b1, tBsB1, tBgB1, b_mcast_mask, ROWS_OF_N_TILE, b_policy),
            TmaLoad(tma_atom_b2, tBsB2, tBgB2, b_mcast_mask, ROWS_OF_N_TILE, b_policy),
            TmaLoad(tma_atom_sfa, tAsSFA, tAgSFA, a_mcast_mask, ROWS_OF_M_TILE, None),
            TmaLoad(tma_atom_sfb1, tBsSFB1, tBgSFB1, sfb_mcast_mask, ROWS_OF_SFB_TILE, None),
            TmaLoad(tma_atom_sfb2, tBsSFB2, tBgSFB2, sfb_mcast_mask, ROWS_OF_SFB_TILE, None),
        )

        ring = SmemRing(sA, sB1, sB2, sSFA, sSFB1, sSFB2)
        return ring, loads, k_tile_cnt, tCgC

    def _load_rows(self, tile_m, tile_n):
        """Tile index selecting each TmaLoad's rows (by TmaLoad.rows) for MMA tile (tile_m, tile_n)."""
        # A 64-wide N tile takes its scales from half of a 128-row SFB atom tile.
        sfb_n = tile_n // 2 if cutlass.const_expr(self.cta_tile_mn[1] == 64) else tile_n
        return (tile_m, tile_n, sfb_n)

    @staticmethod
    def _first_work_tile(tile_sched_params):
        """Each role walks the same static persistent schedule: its own scheduler, this CTA's first tile."""
        tile_sched = utils.StaticPersistentTileScheduler.create(
            tile_sched_params, cute.arch.block_idx(), cute.arch.grid_dim()
        )
        return tile_sched, tile_sched.initial_work_tile_info()

    @staticmethod
    def _mma_tile_coord(cta_tile_coord, tiled_mma):
        """Scheduler CTA coordinate -> MMA tile coordinate (a 2-CTA pair shares one MMA tile along M)."""
        return (
            cta_tile_coord[0] // cute.size(tiled_mma.thr_id.shape),
            cta_tile_coord[1],
            cta_tile_coord[2],
        )

    def _s2t_copy_and_partition(self, sSF: cute.Tensor, tSF: cute.Tensor):
        """tcgen05.cp of one scale operand, smem (staged) -> tensor memory."""
        tCsSF_compact = cute.filter_zeros(sSF)
        tCtSF_compact = cute.filter_zeros(tSF)
        copy_s2t = tcgen05.make_s2t_copy(
            cute.make_copy_atom(tcgen05.Cp4x32x128bOp(self.cta_group), SF_DTYPE), tCtSF_compact
        )
        thr_copy = copy_s2t.get_slice(0)
        src = tcgen05.get_s2t_smem_desc_tensor(copy_s2t, thr_copy.partition_S(tCsSF_compact))
        return copy_s2t, src, thr_copy.partition_D(tCtSF_compact)

    def _epilogue_views(self, tidx, tAcc: cute.Tensor, tCgC: cute.Tensor) -> "EpilogueViews":
        """Tensor-memory load atom and the matching per-thread views of the accumulators and of C."""
        if cutlass.const_expr(self.config.epi_ld_16x256b):
            # 8 fp32 columns per repetition; a warp's 32 lanes take two 16-lane instructions
            copy_atom_t2r = cute.make_copy_atom(
                tcgen05.Ld16x256bOp(tcgen05.Repetition(self.epi_tile_n // 8)), ACC_DTYPE
            )
        else:
            copy_atom_t2r = sm100_utils.get_tmem_load_op(
                (*self.cta_tile_mn, K_TILE),
                LayoutEnum.ROW_MAJOR,
                C_DTYPE,
                ACC_DTYPE,
                self.epi_tile,
                self.use_2cta,
            )
        # (EPI_TILE_M, EPI_TILE_N, EPI_M, EPI_N, ACC)
        tAcc_epi = cute.flat_divide(tAcc[((None, None), 0, 0, None)], self.epi_tile)
        copy_t2r = tcgen05.make_tmem_copy(copy_atom_t2r, tAcc_epi[(None, None, 0, 0, 0)])
        thr_copy_t2r = copy_t2r.get_slice(tidx)
        # (EPI_TILE_M, EPI_TILE_N, EPI_M, EPI_N, RestM, RestN, RestL)
        gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], self.epi_tile)
        tTR_gC = thr_copy_t2r.partition_D(gC_epi)
        return EpilogueViews(
            copy_t2r=copy_t2r,
            thr_copy_t2r=thr_copy_t2r,
            tAcc=thr_copy_t2r.partition_S(tAcc_epi),
            gC=tTR_gC,
            fragment_shape=tTR_gC[(None, None, None, 0, 0, 0, 0, 0)].shape,
            # 16x256b leaves each thread 2 adjacent columns per row: 4-byte stores; 32x32b a whole row: 16-byte ones
            store=cute.make_copy_atom(
                cute.nvgpu.CopyUniversalOp(), C_DTYPE, num_bits_per_copy=32 if self.config.epi_ld_16x256b else 128
            ),
        )

    @staticmethod
    def _c_tile(epi: "EpilogueViews", tile_m, tile_n, tile_l):
        """(T2R, T2R_M, T2R_N, EPI_N): this thread's part of MMA tile (tile_m, tile_n) of C, per subtile."""
        return epi.gC[(None, None, None, 0, None, tile_m, tile_n, tile_l)]


def scale_view(atoms_ptr: cute.Pointer, operand_shape, dtype=SF_DTYPE) -> cute.Tensor:
    """The scales of an (rows, K, L) operand as a (rows, K, L) tensor over the permuted 512-byte atoms.

    Coordinate (i, kk, b) reads the scale of row i and K block kk // 16: NVIDIA's tile_atom_to_shape_SF
    layout (stride 0 within a block), which is the [32, 4, rest_mn, 4, rest_k, L] atom order of docs/leaderboard.md §1.
    """
    return cute.make_tensor(
        cute.recast_ptr(atoms_ptr, dtype=dtype),
        blockscaled_utils.tile_atom_to_shape_SF(operand_shape, SF_VEC_SIZE),
    )


def _smem_field_ptr(field):
    """Pointer to a scalar field of a cute.struct: the field itself before DSL 4.4, its .ptr after."""
    return getattr(field, "ptr", field)


@dsl_user_op
def ex2_approx(a, *, loc=None, ip=None) -> cutlass.Float32:
    """2^a by one ex2.approx.ftz.f32, as an opaque instruction: what the DSL's cute.arch.exp2 emits (deprecated
    since 4.3). Its named replacement, cute.math.exp2(fastmath=True), lets the compiler reorder the epilogue
    around it (different PTX under both DSL versions), so the kernel keeps the instruction itself."""
    return cutlass.Float32(
        llvm.inline_asm(
            T.f32(),
            [cutlass.Float32(a).ir_value(loc=loc, ip=ip)],
            "ex2.approx.ftz.f32 $0, $1;",
            "=f,f",
            has_side_effects=True,
            is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT,
        )
    )


# tcgen05 shared-memory descriptor bits above the start address: LBO 16 B (1 << 16), SBO 1024 B (64 << 32), version
# 1 (bit 46), layout 2 = SWIZZLE_128B (bits 61-63): what the DSL ORs onto every A/B descriptor of this kernel.
SMEM_DESC_SW128_KMAJOR = 0x4000404000010000


@dsl_user_op
def mma_pair_a_collector(d_tmem, a_lo, b_lo, idesc, sfa_tmem, sfb_tmem, accumulate, cta_group, *, loc=None, ip=None):
    """tcgen05.mma D1 = A x B1 with .collector::a::fill, then D2 = A x B2 with .collector::a::lastuse: the second
    MMA takes A from the collector the first one filled, not from shared memory. One elected thread issues both
    (the DSL's cute.gemm elects one the same way). d_tmem, b_lo, sfb_tmem: (for B1, for B2); a_lo, b_lo: the low
    14 bits of the descriptors (start address >> 4); idesc: the instruction descriptor (a constant)."""
    ops = [cutlass.Int32(x).ir_value(loc=loc, ip=ip) for x in (*d_tmem, a_lo, *b_lo, sfa_tmem, *sfb_tmem)]
    ops.append(cutlass.Int32(accumulate).ir_value(loc=loc, ip=ip))
    mma = f"tcgen05.mma.cta_group::{cta_group}.kind::mxf4nvf4.block_scale.scale_vec::4X"
    llvm.inline_asm(
        None,
        ops,
        "{\n"
        ".reg .pred e, p;\n.reg .b32 t, id;\n.reg .b64 ad, bd1, bd2;\n"
        "elect.sync t|e, -1;\n"
        "setp.ne.b32 p, $8, 0;\n"
        f"mov.b32 id, {idesc};\n"
        f"cvt.u64.u32 ad, $2;\nor.b64 ad, ad, {SMEM_DESC_SW128_KMAJOR};\n"
        f"cvt.u64.u32 bd1, $3;\nor.b64 bd1, bd1, {SMEM_DESC_SW128_KMAJOR};\n"
        f"cvt.u64.u32 bd2, $4;\nor.b64 bd2, bd2, {SMEM_DESC_SW128_KMAJOR};\n"
        f"@e {mma}.collector::a::fill [$0], ad, bd1, id, [$5], [$6], p;\n"
        f"@e {mma}.collector::a::lastuse [$1], ad, bd2, id, [$5], [$7], p;\n"
        "}",
        "r,r,r,r,r,r,r,r,r",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


@cute.jit
def silu_mul_(x: cute.Tensor, y: cute.Tensor):
    """x <- silu(x) * y = x * y / (1 + 2^(-x log2 e)), elementwise on register fragments.

    Two MUFU ops per element (ex2.approx, rcp.approx) instead of an IEEE division. For x -> -inf the
    exponential overflows to inf, rcp gives 0 and the result is a signed zero: silu's limit.
    """
    for i in cutlass.range_constexpr(cute.size(x)):
        xi = x[i]
        x[i] = xi * y[i] * cute.arch.rcp_approx(1.0 + ex2_approx(xi * -LOG2_E))


@dsl_user_op
def tanh_approx(a, *, loc=None, ip=None) -> cutlass.Float32:
    """tanh(a) by one tanh.approx.f32 (one MUFU op), opaque to the compiler like ex2_approx."""
    return cutlass.Float32(
        llvm.inline_asm(
            T.f32(),
            [cutlass.Float32(a).ir_value(loc=loc, ip=ip)],
            "tanh.approx.f32 $0, $1;",
            "=f,f",
            has_side_effects=True,
            is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT,
        )
    )


# setmaxnreg targets (KernelConfig.setmaxnreg): per-thread registers of the MMA + TMA warps and of the epilogue warps.
# ptxas makes the larger one the kernel's register count at entry (compiled: 152 under 4.8.1), so the epilogue's
# .inc never waits for the pool; the producers' code needs more than 104 (compiled: 56 and 96 spill).
SETMAXNREG_PRODUCERS = 112
SETMAXNREG_EPILOGUE = 152


@dsl_user_op
def setmaxnreg(count: int, action: str, *, loc=None, ip=None) -> None:
    """setmaxnreg.{inc,dec}.sync.aligned.u32: this warp's per-thread register maximum becomes count (the DSL's
    wrappers for it differ between 4.3.5 and 4.8, the instruction does not)."""
    llvm.inline_asm(
        None,
        [],
        f"setmaxnreg.{action}.sync.aligned.u32 {count};",
        "",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


@cute.jit
def silu_mul_tanh_(x: cute.Tensor, y: cute.Tensor):
    """x <- silu(x) * y with silu(x) = x sigmoid(x) = h + h tanh(h), h = x / 2 (KernelConfig.silu_tanh).

    One MUFU op per element. For x -> -inf, tanh(h) -> -1 and h + h tanh(h) cancels: the result there is
    h times tanh's absolute error near -1, so this form is only as exact as the hardware's tanh.approx there
    (MEMORY.md "Epilogue knobs": on the documented bound alone it would miss the tolerance).
    """
    for i in cutlass.range_constexpr(cute.size(x)):
        h = x[i] * 0.5
        x[i] = (h + h * tanh_approx(h)) * y[i]


# ---------------------------------------------------------------------- host dispatch
_compiled = {}  # (KernelConfig, tvm_ffi) -> launcher; compiled kernels are all that is kept across calls
_launchers = {}  # C's shape (M, N, L) -> launcher of its config, added once check_inputs passed


def _fake_operands():
    """Compile-time stand-ins for the 7 tensors: dynamic sizes, the layouts the leaderboard passes."""
    # Divisibility is part of the compiled signature: TVM-FFI rejects a call that breaks it, and the
    # epilogue's 16-byte stores rely on rows of C starting 128-byte aligned (N % 64 == 0).
    m, n, l = cute.sym_int(divisibility=128), cute.sym_int(divisibility=64), cute.sym_int()
    k = cute.sym_int(divisibility=K_TILE)
    rm, rn, rk = cute.sym_int(), cute.sym_int(), cute.sym_int()

    def fp4(rows):
        # TVM-FFI maps an FP4 fake tensor to torch.float4_e2m1fn_x2 with K/2 bytes per row.
        return make_fake_compact_tensor(AB_DTYPE, (rows, k, l), stride_order=(1, 0, 2), assumed_align=16)

    def scale_atoms(rest_mn):
        # [32, 4, rest_mn, 4, rest_k, L] view of contiguous (L, rest_mn, rest_k, 32, 4, 4) bytes
        return make_fake_compact_tensor(
            SF_DTYPE, (32, 4, rest_mn, 4, rk, l), stride_order=(2, 1, 4, 0, 3, 5), assumed_align=16
        )

    c = make_fake_compact_tensor(C_DTYPE, (m, n, l), stride_order=(1, 0, 2), assumed_align=16)
    return fp4(m), fp4(n), fp4(n), scale_atoms(rm), scale_atoms(rn), scale_atoms(rn), c


def _tvm_ffi_available() -> bool:
    try:
        import tvm_ffi  # noqa: F401
    except ImportError:
        return False
    return True


USE_TVM_FFI = _tvm_ffi_available()


def compile_config(config: KernelConfig, tvm_ffi: bool = USE_TVM_FFI):
    """Compile (once per config, cached in memory) a launcher for every shape the config can implement.

    The launcher takes (a, b1, b2, sfa_permuted, sfb1_permuted, sfb2_permuted, c) torch tensors. With
    apache-tvm-ffi it is the compiled function itself; without it, a pointer-passing fallback that costs
    several times more host time per call (MEMORY.md, "Dispatch").
    """
    key = (config, tvm_ffi)
    launcher = _compiled.get(key)
    if launcher is None:
        kernel = DualGemmKernel(config)
        if tvm_ffi:
            launcher = cute.compile(kernel, *_fake_operands(), options="--enable-tvm-ffi")
        else:
            launcher = _pointer_launcher(kernel)
        _compiled[key] = launcher
    return launcher


def _pointer_launcher(kernel: DualGemmKernel):
    from cutlass.cute.runtime import make_ptr

    gmem = cute.AddressSpace.gmem
    dtypes = (AB_DTYPE, AB_DTYPE, AB_DTYPE, SF_DTYPE, SF_DTYPE, SF_DTYPE, C_DTYPE)
    null_ptrs = [make_ptr(dt, 0, gmem, assumed_align=16) for dt in dtypes]
    sizes = [cutlass.Int32(0)] * 4
    compiled = cute.compile(kernel.launch_from_pointers, *null_ptrs, *sizes)

    def launch(a, b1, b2, sfa, sfb1, sfb2, c):
        m, n, l = c.shape
        ptrs = [make_ptr(dt, t.data_ptr(), gmem, assumed_align=16) for dt, t in zip(dtypes, (a, b1, b2, sfa, sfb1, sfb2, c))]
        compiled(*ptrs, m, n, a.shape[1] * 2, l)

    launch.compiled = compiled  # the compiled host function itself (the emulator exports and runs it)
    return launch


def compile_for(m: int, n: int, k: int, l: int):
    config = config_for(m, n, k, l)
    ok, why = DualGemmKernel.can_implement(config, m, n, k, l)
    if not ok:
        raise ValueError(f"shape (m={m}, n={n}, k={k}, l={l}) is not supported by {config.name}: {why}")
    return compile_config(config)


def check_inputs(data) -> Tuple[int, int, int, int]:
    """Every constraint the kernel relies on, checked before the first launch of each shape."""
    if not isinstance(data, (tuple, list)) or len(data) != 10:
        raise ValueError(
            "data must be the 10-tuple (a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted, sfb2_permuted, c)"
        )
    a, b1, b2, _, _, _, sfa, sfb1, sfb2, c = data
    named = {"a": a, "b1": b1, "b2": b2, "sfa_permuted": sfa, "sfb1_permuted": sfb1, "sfb2_permuted": sfb2, "c": c}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.data_ptr() % 16:
            raise ValueError(f"{name} must start 16-byte aligned (TMA and vector stores need it)")
    if c.dtype != torch.float16 or c.dim() != 3:
        raise ValueError(f"c must be a [M, N, L] torch.float16 tensor, got {c.dtype} with {c.dim()} dims")
    m, n, l = c.shape
    if a.dim() != 3:
        raise ValueError("a must be [M, K/2, L]")
    k = a.shape[1] * 2
    expected_shapes = {"a": (m, k // 2, l), "b1": (n, k // 2, l), "b2": (n, k // 2, l)}
    for name, shape in expected_shapes.items():
        t = named[name]
        if t.dtype != torch.float4_e2m1fn_x2:
            raise ValueError(f"{name} must be torch.float4_e2m1fn_x2 (two e2m1 values per byte), got {t.dtype}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} must have shape {shape} (from c {tuple(c.shape)} and a), got {tuple(t.shape)}")
    config = config_for(m, n, k, l)
    ok, why = DualGemmKernel.can_implement(config, m, n, k, l)
    if not ok:
        raise ValueError(f"shape (m={m}, n={n}, k={k}, l={l}) for {config.name}: {why}")
    # Layouts: K-major operands, row-major C, scales as the permuted view of contiguous 512-byte atoms.
    expected_strides = {"a": (k // 2, 1, m * k // 2), "b1": (k // 2, 1, n * k // 2), "b2": (k // 2, 1, n * k // 2),
                        "c": (n, 1, m * n)}
    rest_k = k // SF_VEC_SIZE // 4
    for name, rows in (("sfa_permuted", m), ("sfb1_permuted", n), ("sfb2_permuted", n)):
        rest_mn = -(-rows // 128)
        expected_shapes[name] = (32, 4, rest_mn, 4, rest_k, l)
        expected_strides[name] = (16, 4, rest_k * 512, 1, 512, rest_mn * rest_k * 512)
        t = named[name]
        if t.dtype != torch.float8_e4m3fn:
            raise ValueError(f"{name} must be torch.float8_e4m3fn, got {t.dtype}")
        if tuple(t.shape) != expected_shapes[name]:
            raise ValueError(f"{name} must have the atom shape {expected_shapes[name]}, got {tuple(t.shape)}")
    for name, strides in expected_strides.items():
        t = named[name]
        # A size-1 dimension's stride never addresses memory, so only the others are compared.
        if any(size != 1 and got != want for size, got, want in zip(t.shape, t.stride(), strides)):
            raise ValueError(f"{name} must have strides {strides} (its layout), got {tuple(t.stride())}")
    for name, t in named.items():
        if t.device != c.device or t.device.type != "cuda":
            raise ValueError(f"{name} is on {t.device}: every tensor must be on the same CUDA device")
    major, minor = torch.cuda.get_device_capability(c.device)
    if major != 10:
        raise ValueError(
            f"this kernel needs an SM100 GPU (B200, sm_100a); {torch.cuda.get_device_name(c.device)} is sm_{major}{minor}"
        )
    return m, n, k, l


def _prepare(data):
    """First call of an (M, N, L): full input check, config choice, compile; later calls skip all three."""
    m, n, k, l = check_inputs(data)
    launch = compile_for(m, n, k, l)
    _launchers[(m, n, l)] = launch
    return launch


def custom_kernel(data: input_t) -> output_t:
    try:
        a, b1, b2, _, _, _, sfa, sfb1, sfb2, c = data
        # Keyed by C's shape alone: the cheapest lookup on the timed path. The config chosen for the first
        # K seen is valid for any K (the compiled kernel takes K at run time; TVM-FFI checks K % 256).
        launch = _launchers.get(c.shape)
        if launch is None:
            launch = _prepare(data)
        # TVM-FFI checks dtype, device, rank, divisibility, strides and alignment in C++ on every call.
        launch(a, b1, b2, sfa, sfb1, sfb2, c)
    except Exception:
        # Name the broken constraint in the package's words where it is one we know: one ValueError, not a
        # chained duplicate of the one the first call's check already raised.
        try:
            check_inputs(data)
        except ValueError as why:
            raise why from None
        raise
    return c


if __name__ == "__main__":
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    _checks = [  # (script, arguments, what it checks); a script missing from this checkout is not listed
        ("test_correctness.py", "", "correctness: every test shape, both input generators (on a B200; elsewhere "
                                    "the sm_100a compile, the reference and the kernel in the emulator)"),
        ("tools/emulate.py", " --shape M,N,K", "the compiled kernel run in a CPU emulator of SM100 (no GPU needed)"),
        ("test_benchmark.py", "", "the leaderboard's timing method on the benchmark shapes (on a B200)"),
        ("tools/preflight.py", "", "sm_100a compile of every config: registers, spills, the leaderboard's rules"),
    ]
    print("submission.py is the nvfp4_dual_gemm kernel: the leaderboard imports it and calls custom_kernel(data); "
          "run by itself it does nothing. To check it, from the repository root:")
    for _script, _args, _what in _checks:
        if os.path.exists(os.path.join(_here, _script)):
            print(f"  .venv/bin/python {_script + _args:<32} {_what}")
