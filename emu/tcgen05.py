"""tcgen05 (5th-generation Tensor Core) semantics: tensor memory, descriptors, the MMAs, copies: pure functions.

Implemented (everything else raises Unsupported, naming why):
  - shared-memory matrix descriptor and instruction descriptor decoding for every kind (PTX ISA Tables 42 / 43:
    reserved bits and undefined type codes are Hazards),
  - operand fetch through a K-major or MN-major descriptor (SWIZZLE_128B / 64B / 32B / none; MN-major from CUTLASS
    make_umma_desc<MN>), elements of 4 (packed FP4), 8, 16 and 32 bits, and kind::f8f6f4 / mxf8f6f4's padded 6- and
    4-bit elements (Q7),
  - tcgen05.mma.cta_group::{1,2} of kind::f16 (f16 / bf16; F32 D, or F16 D from f16), kind::tf32, kind::f8f6f4 (e4m3,
    e5m2, e2m3, e3m2, e2m1, mixed; F32 or F16 D), kind::i8 (s8 / u8, s32 D, saturate), with negate, transpose
    (MN-major) and scale-input-d; M = 64 / 128 (cta_group::1) and 128 / 256 (cta_group::2); an F16 D (Q8),
  - tcgen05.mma.ws (weight-stationary, Q9) of kind::f16 / tf32 / f8f6f4 / i8: M = 32 / 64 / 128, N = 64 / 128 / 256,
    the four B collector buffers, a zero-column mask that masks nothing,
  - tcgen05.mma ... .block_scale of kind::mxf8f6f4 (every f8f6f4 type, scale_vec::1X), kind::mxf4 (scale_vec::2X) and
    kind::mxf4nvf4 (scale_vec::2X block32 UE8M0, scale_vec::4X block16 UE4M3 / UE8M0), SF_ID selecting the scale
    bytes, M = 128 (cta_group::1) and M = 256 (cta_group::2),
  - tcgen05.cp.cta_group::{1,2} of every shape and multicast (.128x256b, .4x256b, .128x128b, .64x128b.warpx2::02_13 /
    ::01_23, .32x128b.warpx4; not the decompressing .b8x16.b6x16_p32 / .b4x16_p64 forms),
  - tcgen05.shift.cta_group::{1,2}.down (the implicit .31x256b: tmem_shift_down),
  - tcgen05.ld / tcgen05.st of every shape (.32x32b, .16x64b, .16x128b, .16x256b, .16x32bx2), .xN, .pack::16b /
    .unpack::16b,
  - tcgen05.alloc / dealloc / relinquish_alloc_permit.
Not implemented, each for the reason its message gives: a 6- / 4-bit A of kind::f8f6f4 / mxf8f6f4 in tensor memory
and tcgen05.cp's decompression (where a 4- / 6-bit element sits in its 8-bit tensor-memory container is drawn only:
Q7), scale factors / a collector / A in tensor memory with the halved shapes, .sp, a set disable-output-lane bit
(all zeros, as CUTLASS passes it, runs), .ws's zero-column mask when it masks or shifts and its descriptor's maximum
shift (Q9), K = 96.

Sources. Primary: the PTX ISA, tcgen05 chapter (section numbers of PTX ISA 8.8/9.0, where the chapter is
9.7.16; newer ISA versions renumber it 9.7.17 / 9.7.18 with the same sub-structure). Where the ISA gives the
layout only as a figure (scale-factor layouts, data-path layouts), the second source is CUTLASS's C++ headers
(include/cute/arch/mma_sm100_desc.hpp, mma_sm100_umma.hpp, include/cute/atom/mma_traits_sm100.hpp,
mma_traits_sm100_frag.hpp, include/cute/arch/tmem_allocator_sm100.hpp), and the third, for what the hardware
really does, kernels for this exact problem that passed the B200 checks: gau-nernst/gpu-mode-kernels
nvidia/nvfp4_dual_gemm/submission_v2.py, novus677/nvfp4_dual_gemm kernel 9 (raw CUDA+PTX) and arseni_ivanov's CuTe
DSL kernel (Ozamatash/nvfp4_gpumode dual_gemm/others/arseni.py). The CuTe DSL's Python layout code is NOT used.

Address conventions: emu.state (tensor-memory address = lane << 16 | column; shared addresses in
descriptors are shared::cta offsets of the CTA that reads them).

Answers to the questions this module settles (each also cited beside the code that uses it):

Q1 SW128 K-major canonical layout. PTX ISA 9.7.16.3.3 "Canonical layouts" (K-major, 128B swizzling):
   Swizzle<3,4,3> o ((8,m),(T,2k)):((8T,SBO),(1,T)) with T = 128/bits = 32 FP4 elements (16 bytes).
   In bytes, before swizzling: row r, byte j of the row (j < 128) sits at
       start + (r // 8) * SBO + (r % 8) * 128 + j
   and the swizzle XORs address bits [4,7) with bits [7,10): phys = a ^ ((a >> 3) & 0x70).
   64 FP4 K-elements = 32 bytes = two 16-byte chunks of the 128-byte row. LBO is "not used, assumed to be 1"
   for swizzled K-major layouts (PTX ISA 9.7.16.3.1.1 table); SBO is the offset between consecutive 8-row
   groups (PTX ISA 9.7.16.3.2) = 1024 for densely packed 8x128-byte atoms. The swizzle is a function of the
   absolute shared address: the 128B pattern repeats at 1024-byte boundaries, and base_offset must be 0 when
   the pattern starts at such a boundary (PTX ISA 9.7.16.4.1, Table 41). Therefore one 256-element K stage
   (128 bytes per row) is walked by adding 32 bytes per k-block of 64 to the descriptor's start address
   (the kernel adds 2 to the 16-byte-unit field; CUTLASS's UMMA::DescriptorIterator adds to the low word the
   same way; gau-nernst's kernel does `a_desc += 32 >> 4`): the k-block kb of row r reads logical bytes
   [32kb, 32kb+32) of that row, i.e. 16-byte chunks 2kb, 2kb+1, physically at chunk (2kb+c) ^ (r % 8).

Q2 Accumulator layout. PTX ISA 9.7.16.10.5 Data Path Layout Organization (Table: M=128 cta_group::1 ->
   Layout D, 4x1 datapath; M=256 cta_group::2 -> Layout A, 4x1, lane alignment 0); the figures are images,
   so the mapping is taken from CUTLASS mma_traits_sm100_frag.hpp tmem_frg (M_MMA=128: atom (128,N):(1,128),
   i.e. row -> lane, column -> column) and mma_traits_sm100.hpp SM100_MMA_MXF4_2x1SM_SS CLayout
   ((2,(M/2,N)):((M/2),(1,M))): D row i (0..M-1) lives in the TMEM of CTA v = i // 128 of the pair (v = 0
   the even rank), lane i % 128, column d_col + j for D column j. M=128: lane i, column d_col + j.

Q3 cta_group::2 operands. CUTLASS SM100_MMA_MXF4_2x1SM_SS: ALayout ((2,(M/2,K)):((M/2),(1,M))) -> CTA v
   holds A rows [128v, 128v+128) in its own shared memory; BLayout ((2,(N/2,K)):((N/2),(1,N))) -> CTA v holds
   B rows (= D columns) [v*N/2, (v+1)*N/2). Both CTAs read their half through the same descriptor value
   (same shared::cta offset). Evidence that this is the hardware behaviour: gau-nernst's v2 TMA-loads
   B rows off_n + cta_rank * BLOCK_N/2 into each CTA at the same offset and issues the MMA from CTA 0 only.
   PTX ISA 9.7.16.10: "the B matrix ... in Shared Memory of the current CTA and optionally in peer CTA".
   D rows of CTA v go to CTA v's TMEM (Q2).

Q4 Scale factors in TMEM, block16 / scale_vec::4X. PTX ISA 9.7.16.10.7.2.3 / 9.7.16.10.7.3.3: four scale
   factors per row, "provided in 4-byte aligned sub-column", SF_ID must be 0 (figures 233 / 242 are images).
   PTX ISA 9.7.16.10.7: "Scale factors for A and B matrices need to be duplicated to all 32 lane
   partitions of tensor memory". Layout from CUTLASS mma_traits_sm100_frag.hpp tmem_sf_frg (4x1 datapath,
   used for SFA of M=128/256 and SFB of M=256 or cta_group::1): atom
   (((32, MN/32), 4), (16, 4)) : (((1, 512), 32), (0, 128)) in (lane + 128*byte-column) units ->
   scale of MN row n = 32g + r, K block s lives in lane 32q + r (every q = 0..3), TMEM column base + g,
   byte s of the 32-bit word (byte 0 = least significant; SF_ID selects a byte, CUTLASS
   make_runtime_instr_desc_block_scaled: "The first 2-bits of TMEM address includes byte address").
   So SFA (M=128 per CTA) takes 4 columns, SFB takes N/32 columns (N=64: 2, N=128: 4, N=256: 8); with
   cta_group::2 each CTA's TMEM holds its own 128 SFA rows and ALL N SFB rows (CUTLASS 2x1SM traits use the
   4x1 SFB atom for M=256 = ScaleFactorDuplicated4by1).
   Instruction descriptor sf_id fields: a_sf_id bits [29,31), b_sf_id bits [4,6) (CUTLASS
   InstrDescriptorBlockScaled); they must be 0 for scale_vec::4X.
   tcgen05.cp.32x128b.warpx4 (PTX ISA 9.7.16.9.2 + 9.7.16.2.3 Data Movement Shape): 32 rows x 128 bits from
   shared memory go to 32 lanes x 4 columns and are multicast to all 4 warps' lane quadrants; row r's 16
   bytes become columns taddr.col + 0..3 (byte b -> column b // 4, byte b % 4) of lanes r, 32+r, 64+r, 96+r.
   With the 512-byte atom "byte r*16 + g*4 + k = scale of row g*32 + r, K block k" this yields exactly the
   Q4 layout. cta_group::2: "the data is copied into the Tensor Memory of both the current and the peer
   CTAs" (PTX ISA 9.7.16.9.2); the ISA does not say from whose shared memory. We copy each CTA's own shared
   memory (same offset) into its own TMEM: gau-nernst's v2 keeps a different SFA (its own 128 A rows) in
   each CTA's shared memory and issues one cta_group::2 cp from CTA 0, which is only correct this way.

Q5 N=64. The MMA reads N/32 = 2 SFB columns. A 128-row SFB atom spans 4 columns; a 64-wide N tile selects
   its half by an address offset of 2 columns in sfb_taddr (gau-nernst v2: `scale_B1_tmem + sfb_offset`,
   sfb_offset = (bid_n % 2) * 2), not by sf_id (which must be 0 for 4X). The SFB address must be 2-column
   (8-byte) aligned (gau-nernst's source comment; not in the ISA text we could read) -> Hazard otherwise.

Q6 The A collector (.collector::a::{fill, use, lastuse, discard}). PTX ISA 9.7.16.10.9.1 tcgen05.mma (anchor
   #tcgen05-mma-instructions-mma; 9.7.17/9.7.18.10.10 in newer renumbered ISAs), the optional .collector_usage
   qualifier for matrix A: ::fill reads A from memory (through a-desc) and fills the collector buffer with it;
   ::use reads A from the collector buffer, which needs an earlier fill still valid; ::lastuse reads A from the
   collector buffer and lets its contents be discarded afterwards; ::discard (the default when no qualifier is
   given) lets the collector's contents be discarded. The same four operations, in this order of encoding
   (DISCARD 0, LASTUSE 1, FILL 2, USE 3), are LLVM's Tcgen05CollectorUsageOp (llvm/IR/NVVMIntrinsicUtils.h).
   Emulated: each CTA has one A collector (Cta.a_collector). fill = read A from shared memory through a-desc,
   use it and keep it in the collector of every CTA of the group (cta_group::2: each CTA its own 128 rows);
   use = A comes from the collector (a-desc is not read), which stays filled; lastuse = A from the collector,
   which is empty afterwards; discard = read shared memory, collector empty afterwards. A use/lastuse with an
   empty collector is a Hazard (no valid fill). Since a collected A is the data of the fill, shared memory
   rewritten between fill and use is not seen (as on the hardware).

Q7 The 6- and 4-bit operands of kind::f8f6f4 / mxf8f6f4 in shared memory (e2m3, e3m2, e2m1). Every 16 consecutive K
   elements of a row fill one 16-byte chunk: packed from the chunk's first byte, then padding (4 bytes after 16
   6-bit elements, 8 bytes after 16 4-bit ones). Sources, all text: PTX ISA 9.7.16.10.4.4 ("contiguously packed along
   with padding"; its figures 202 / 203 draw it), 9.7.16.9.1.1 / 9.7.16.9.1.2 ("A contiguous set of 16 elements of
   4-bits each followed by 8 bytes of padding", "16 elements of 6-bits each followed by 4 bytes of padding"), 5.5.1.1.1
   (TMA's .b4x16_p64 / .b6x16_p32: sixteen packed elements copied from global memory "with the append of" 64 / 32 bits
   of padding), the CUDA driver API's CUtensorMapDataType (16U4_ALIGN16B: "8 byte gaps between every 8 byte chunk of
   packed values"; 16U6_ALIGN16B: "4 byte gaps between every 12 byte chunk"), and CUTLASS (NVIDIA/cutlass @ 7107b055):
   SM100_MMA_F8F6F4_SS takes float_e2m1 / e2m3 / e3m2_unpacksmem_t operands with K = 32 ("Logical shape-K is always
   256bits", mma_traits_sm100.hpp), whose TMA type is 16U4_ALIGN16B / 16U6_ALIGN16B (copy_sm90_desc.hpp
   to_CUtensorMapDataType) and whose shared memory is allocated one uint8_t an element (SmemAllocTypeA,
   sm100_blockscaled_mma_warpspecialized.hpp): so the descriptor walks the operand exactly as an 8-bit one (32 bytes
   of a row a K block). Inside the packed bytes, element e of a chunk takes bits [b*e, b*e + b) of the chunk read as a
   little-endian bit string (b = 4 or 6): the "packed values" the TMA copies as they are in global memory, where
   CuTe's subbyte_reference (include/cute/container/array_subbyte.hpp) puts element i at bit b*i, low bits first,
   straddling bytes. The padding is never read. Transpose (MN-major) is not defined for them (PTX ISA Table 52).
   Not settled, so Unsupported: where a 4- or 6-bit element sits inside an 8-bit container in tensor memory (an A
   of kind::mxf8f6f4 in tensor memory, PTX ISA 9.7.16.10.4.3, and what tcgen05.cp's .b8x16 decompression writes,
   9.7.16.9.1) is drawn only (figures 195 / 197 / 198, 199-201); the text about the same containers elsewhere
   disagrees: mma.sync keeps e2m1 in the central 4 bits (PTX ISA 9.7.14.5.14), ldmatrix's .b8x16.b4x16_p64 (which
   refers to tcgen05's Optional Decompression) writes it to the low 4 (CUTLASS mma_traits_sm120.hpp fp4_shift_A).

Q8 An F16 D (kind::f16 from f16 inputs, kind::f8f6f4; PTX ISA Table 39). PTX ISA 9.7.16.10.4.1: "The sub-word
   elements of matrix D are expected not to be packed within a 32-bit Tensor Memory word ... a Tensor Memory word
   would contain a single 16-bit element in its lower 16 bits"; CUTLASS tmem_frg (mma_traits_sm100_frag.hpp) likewise
   gives every accumulator, half_t included, its own 32-bit column (StorageType uint32_t). So D's cells are those of
   an F32 D (d_cells) and each holds the f16 result in bits [0, 16). The upper 16 bits are not specified; they are
   written 0 here. The result is the exact sum (plus the old D read from the low 16 bits) rounded once to f16
   (round-to-nearest-even, overflow to infinity).

Q9 tcgen05.mma.ws (PTX ISA 9.7.16.10.9.3, weight stationary): cta_group::1 only, kind::f16 / tf32 / f8f6f4 / i8,
   M = 32, 64 or 128, N = 64, 128 or 256 (Table 39); D = A*B (+ D) as the plain form computes it. The collector is
   B's (9.7.16.10, "Weights Stationary ... Collector buffer is applicable on matrix B"): four buffers b0..b3 a CTA,
   .collector::bN::{fill, use, lastuse, discard} with A's semantics (Q6) on buffer N, default b0::discard
   (Cta.b_collectors). D's cells (Data Path Layout Organization table: M = 32 Layout G "1x4", M = 64 Layout E, M = 128
   Layout D, lane alignment 0; the figures' mapping from CUTLASS tmem_frg_ws, mma_traits_sm100_frag.hpp @ 7107b055, in
   lanes and columns): M = 32: row i, column j at lane i + 32 (j // (N/4)), column col + j % (N/4); M = 64: lane
   i + 64 (j // (N/2)), column col + j % (N/2); M = 128: lane i, column col + j (d_cells). The zero-column mask
   descriptor (9.7.16.4.3, Table 45) is taken when it masks nothing: Non-Zero Mask (bit 39) 0 gives "all 0s"
   (its Example 1) and a Column Shift (bits [56,62)) of 0 moves nothing; otherwise Unsupported, as its worked
   examples contradict the field descriptions (Example 2: Skip Span 2, "consecutive columns where B matrix is used - 1",
   yields runs of 4 used columns). The instruction descriptor's maximum shift (bits [30,32)) bounds B's reuse under
   such a shift; what it does to a result is not written: Unsupported when set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import precedents
from .numerics import E4M3FN_TABLE, UE8M0_TABLE, element_values, fp32_to_bits, round_to_fp32, unpack_fp4
from .device import TMEM_COLUMNS
from .state import POISON_WORD, Cta, Hazard, TensorMemoryAllocation, Unsupported

# --------------------------------------------------------------------------------------------------
# Tensor-memory addresses
# --------------------------------------------------------------------------------------------------


def split_taddr(taddr: int) -> tuple[int, int]:
    """(lane, column) of a tensor-memory address: lane in bits [16,32), column in bits [0,16)
    (PTX ISA 9.7.16.2.1 Tensor Memory Addressing)."""
    taddr = int(taddr) & 0xFFFFFFFF
    return taddr >> 16, taddr & 0xFFFF


def _check_allocated(cta: Cta, col: int, ncols: int, what: str) -> None:
    """Every tensor-memory access must fall inside a live allocation (PTX ISA 9.7.16.7.1: tensor memory
    must be allocated with tcgen05.alloc before use). Columns that exist but lie outside the CTA's allocations are a
    Note when a machine records notes (a hardware-verified kernel survives it: the columns are unused while no other
    CTA on the SM allocates them), a Hazard otherwise; columns past 512 are always a Hazard."""
    if col < 0 or col + ncols > TMEM_COLUMNS:
        raise Hazard(f"{what}: columns [{col}, {col + ncols}) outside tensor memory (512 columns), CTA {cta.ctaid}")
    for alloc in cta.tmem_allocs:
        if alloc.column <= col and col + ncols <= alloc.column + alloc.ncols:
            return
    if any(c0 <= col and col + ncols <= c0 + n for c0, n, _, _ in cta.tmem_freed):
        return  # columns a dealloc freed: emu.ordering's DEALLOC_WHILE_READ names that read
    _note_or_hazard(cta, "tmem-outside-allocation", precedents.ARSENI_TMEM_COLUMNS,
                    f"{what}: columns [{col}, {col + ncols}) are not inside one tensor-memory allocation of CTA "
                    f"{cta.ctaid} (allocations: {[(a.column, a.ncols) for a in cta.tmem_allocs]})")


def _note_or_hazard(cta: Cta, rule: str, precedent: str, detail: str) -> None:
    machine = getattr(cta.cluster, "machine", None)
    if machine is None:
        raise Hazard(detail)
    machine.note(rule, machine.where_now(brief=True), precedent, detail)


# --------------------------------------------------------------------------------------------------
# Shared memory descriptor (PTX ISA 9.7.16.4.1, Table 40; CUTLASS cute::UMMA::SmemDescriptor)
# --------------------------------------------------------------------------------------------------

LAYOUTS = {0: "none", 1: "128B_base32B", 2: "128B", 4: "64B", 6: "32B"}
_SWIZZLE_BYTES = {"none": 16, "32B": 32, "64B": 64, "128B": 128}


@dataclass(frozen=True)
class SmemDescriptor:
    start_address: int        # bytes (field << 4)
    leading_byte_offset: int  # bytes (field << 4); in absolute mode, an address
    stride_byte_offset: int   # bytes (field << 4)
    version: int              # bits [46,49): fixed 0b001 for tcgen05
    base_offset: int          # bits [49,52)
    lbo_mode: int             # bit 52: 0 relative offset, 1 absolute address
    layout: str               # bits [61,64): none / 128B_base32B / 128B / 64B / 32B
    raw: int


def decode_smem_descriptor(desc: int) -> SmemDescriptor:
    """Decode a 64-bit tcgen05 shared memory descriptor (PTX ISA 9.7.16.4.1, Table 40):
    [0,14) start address >> 4, [16,30) LBO >> 4, [32,46) SBO >> 4, [46,49) fixed 0b001, [49,52) base offset,
    52 LBO mode, [53,61) fixed 0, [61,64) swizzling mode (0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B;
    3, 5, 7 invalid). CUTLASS SmemDescriptor calls bits [46,48) version_ (= 1 for Blackwell)."""
    desc = int(desc) & 0xFFFF_FFFF_FFFF_FFFF
    version = (desc >> 46) & 0x7
    layout_code = (desc >> 61) & 0x7
    if version != 0b001:
        raise Hazard(f"smem descriptor {desc:#x}: bits [46,49) must be the fixed constant 0b001 (PTX ISA 9.7.16.4.1), got {version:#b}")
    if (desc >> 53) & 0xFF:
        raise Hazard(f"smem descriptor {desc:#x}: bits [53,61) must be 0 (PTX ISA 9.7.16.4.1)")
    if layout_code not in LAYOUTS:
        raise Hazard(f"smem descriptor {desc:#x}: swizzling mode {layout_code} is invalid (PTX ISA 9.7.16.4.1)")
    return SmemDescriptor(
        start_address=(desc & 0x3FFF) << 4,
        leading_byte_offset=((desc >> 16) & 0x3FFF) << 4,
        stride_byte_offset=((desc >> 32) & 0x3FFF) << 4,
        version=version,
        base_offset=(desc >> 49) & 0x7,
        lbo_mode=(desc >> 52) & 0x1,
        layout=LAYOUTS[layout_code],
        raw=desc,
    )


# --------------------------------------------------------------------------------------------------
# MMA kinds and the instruction descriptor (PTX ISA 9.7.16.2.1 Table 39, 9.7.16.4.2 Tables 42 / 43; CUTLASS
# UMMA::InstrDescriptor / InstrDescriptorBlockScaled, include/cute/arch/mma_sm100_desc.hpp)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MmaKind:
    """What a tcgen05.mma .kind reads and writes. k: the dense K of one MMA (Table 39); formats: atype / btype code ->
    element format (Table 42 / 43); d_formats: dtype code -> D format (Table 42; block-scaled kinds write F32);
    scale_vecs: for .block_scale kinds, the scale_vec sizes allowed (scales per row of one MMA: block = k / scale_vec)
    with the scale formats each allows; mn_major: element formats whose operands may be MN-major (the transpose bits;
    CUTLASS InstrDescriptor a_major_: "only valid for E4M3, E5M2, INT8 (signed and unsigned), F16, BF16 and TF32";
    PTX ISA 9.7.16.10.1: not for .kind::mxf4 / mxf4nvf4); negate: the negate bits allowed (Table 42: not for i8)."""

    k: int
    formats: dict
    d_formats: dict
    scale_vecs: dict = None
    mn_major: tuple = ("e4m3", "e5m2", "u8", "s8", "f16", "bf16", "tf32")
    negate: bool = True


F8F6F4_FORMATS = {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"}
MMA_KINDS = {
    "f16": MmaKind(16, {0: "f16", 1: "bf16"}, {0: "f16", 1: "f32"}),
    "tf32": MmaKind(8, {2: "tf32"}, {1: "f32"}),
    "f8f6f4": MmaKind(32, F8F6F4_FORMATS, {0: "f16", 1: "f32"}),  # Table 39: .f32, .f16
    "i8": MmaKind(32, {0: "u8", 1: "s8"}, {2: "s32"}, negate=False),
    # block32 (MX) scales are UE8M0 (OCP MX spec 5.4.1); mxf4nvf4's block16 (scale_vec::4X) takes UE4M3 or UE8M0
    "mxf8f6f4": MmaKind(32, F8F6F4_FORMATS, {1: "f32"}, {1: ("ue8m0",)}),
    "mxf4": MmaKind(64, {1: "e2m1"}, {1: "f32"}, {2: ("ue8m0",)}, mn_major=()),  # CUTLASS UMMA::MXF4Format E2M1 = 1
    "mxf4nvf4": MmaKind(64, {1: "e2m1"}, {1: "f32"}, {2: ("ue8m0",), 4: ("ue4m3", "ue8m0")}, mn_major=()),
}
# Element bits in shared memory: 8-bit floats and integers one a byte, f16 / bf16 two bytes, tf32 a 32-bit container,
# e2m1 of mxf4 / mxf4nvf4 two a byte (low nibble first, emu.numerics). The 6- and 4-bit formats of kind::f8f6f4 /
# mxf8f6f4 (e2m3, e3m2, e2m1) take a byte each too, as 16 elements in a padded 16-byte chunk (module docstring Q7).
ELEMENT_BITS = {"e4m3": 8, "e5m2": 8, "u8": 8, "s8": 8, "f16": 16, "bf16": 16, "tf32": 32}
PADDED_BITS = {"e2m3": 6, "e3m2": 6, "e2m1": 4}  # kind::f8f6f4 / mxf8f6f4: the packed bits of each padded element


@dataclass(frozen=True)
class InstrDescriptor:
    kind: str
    m: int
    n: int
    k: int
    a_format: str
    b_format: str
    d_format: str       # "f32", "f16", "s32"
    scale_format: str   # block-scaled kinds: "ue4m3" / "ue8m0"; "" otherwise
    a_sf_id: int
    b_sf_id: int
    negate_a: bool
    negate_b: bool
    transpose_a: bool   # A MN-major
    transpose_b: bool   # B MN-major
    saturate: bool      # kind::i8: clamp the s32 result
    sparse: bool
    raw: int


def decode_instr_descriptor(idesc: int, kind: str) -> InstrDescriptor:
    """Decode a 32-bit instruction descriptor for `kind`. Table 42 (tf32, f16, f8f6f4, i8): [0,2) sparsity selector,
    2 sparsity, 3 saturate (i8 only), [4,6) dtype, 6 reserved, [7,10) atype, [10,13) btype, 13 / 14 negate A / B (not
    i8), 15 / 16 transpose A / B, [17,23) N >> 3, 23 reserved, [24,29) M >> 4, 29 reserved, [30,32) the .ws maximum
    shift. Table 43 (mxf8f6f4, mxf4, mxf4nvf4; CUTLASS InstrDescriptorBlockScaled): 3 reserved, [4,6) b_sf_id, 6
    reserved, the same types, negates, transposes and N, 23 scale type (0 UE4M3, 1 UE8M0), [24,29) M >> 4 (the ISA
    writes M >> 7 in [27,29) with [24,27) reserved: identical for M = 128 / 256), [29,31) a_sf_id, 31 K size (mxf4 /
    mxf4nvf4: 1 = K 96). A reserved bit set or a type code the kind does not define is a Hazard."""
    if kind not in MMA_KINDS:
        raise Unsupported(f"instruction descriptor for kind::{kind}: no such kind in PTX ISA Table 39")
    spec = MMA_KINDS[kind]
    scaled = spec.scale_vecs is not None
    idesc = int(idesc) & 0xFFFFFFFF
    bit = lambda i: (idesc >> i) & 1  # noqa: E731
    field = lambda lo, n: (idesc >> lo) & ((1 << n) - 1)  # noqa: E731
    if field(0, 2) or bit(2):
        raise Unsupported(f"idesc {idesc:#x}: sparse A (bits [0,3)) is not implemented")
    reserved = (3, 6) if scaled else (6, 23, 29)
    if any(bit(i) for i in reserved):
        raise Hazard(f"idesc {idesc:#x}: reserved bits {' / '.join(map(str, reserved))} are set (PTX ISA 9.7.16.4.2 "
                     f"Table {43 if scaled else 42})")
    a_code, b_code = field(7, 3), field(10, 3)
    if a_code not in spec.formats or b_code not in spec.formats:
        names = ", ".join(f"{name.upper()} ({code})" for code, name in spec.formats.items())
        raise Hazard(f"idesc {idesc:#x}: kind::{kind} needs atype and btype among {names}, got {a_code}, {b_code}")
    a_format, b_format = spec.formats[a_code], spec.formats[b_code]
    if kind == "f16" and a_format != b_format:  # Table 39: .f16 x .f16 or .bf16 x .bf16
        raise Hazard(f"idesc {idesc:#x}: kind::f16 needs atype = btype, got {a_format}, {b_format}")
    if scaled:
        d_format, saturate = "f32", False
    else:
        if field(4, 2) not in spec.d_formats:
            raise Hazard(f"idesc {idesc:#x}: dtype {field(4, 2)} is not defined for kind::{kind} (Table 42)")
        d_format, saturate = spec.d_formats[field(4, 2)], bool(bit(3))
        if kind == "f16" and d_format == "f16" and a_format != "f16":  # Table 39: an f16 D only from f16 inputs
            raise Hazard(f"idesc {idesc:#x}: kind::f16 with an F16 D needs F16 inputs, got {a_format}")
        if saturate and kind != "i8":
            raise Hazard(f"idesc {idesc:#x}: saturate (bit 3) is for kind::i8 only (Table 42)")
        if field(30, 2):
            raise Unsupported(f"idesc {idesc:#x}: the maximum shift (bits [30,32)) of tcgen05.mma.ws's B reuse: what "
                              "it does to a result is not written (emu.tcgen05 Q9)")
    negate_a, negate_b = bool(bit(13)), bool(bit(14))
    if (negate_a or negate_b) and not spec.negate:
        raise Hazard(f"idesc {idesc:#x}: negate A / B must be 0 for kind::{kind} (Table 42)")
    transpose_a, transpose_b = bool(bit(15)), bool(bit(16))
    for flag, fmt in ((transpose_a, a_format), (transpose_b, b_format)):
        if flag and fmt not in spec.mn_major:
            # PTX ISA 9.7.16.10.1 Table 49: transpose is not supported for .kind::mxf4nvf4 (nor .kind::mxf4); CUTLASS
            # InstrDescriptor: MN-major only for 8-bit, 16-bit and tf32 formats
            raise Hazard(f"idesc {idesc:#x}: transpose A/B is not supported for kind::{kind} with {fmt} operands "
                         "(PTX ISA 9.7.16.10.1)")
    k = spec.k
    if scaled and bit(31):
        if kind == "mxf8f6f4":
            raise Hazard(f"idesc {idesc:#x}: the K size bit 31 must be 0 for kind::mxf8f6f4 (Table 43)")
        raise Unsupported(f"idesc {idesc:#x}: K = 96 (bit 31) is not implemented")
    return InstrDescriptor(
        kind=kind, m=field(24, 5) << 4, n=field(17, 6) << 3, k=k, a_format=a_format, b_format=b_format,
        d_format=d_format, scale_format=("ue8m0" if bit(23) else "ue4m3") if scaled else "",
        a_sf_id=field(29, 2) if scaled else 0, b_sf_id=field(4, 2) if scaled else 0,
        negate_a=negate_a, negate_b=negate_b, transpose_a=transpose_a, transpose_b=transpose_b,
        saturate=saturate, sparse=False, raw=idesc,
    )


def element_bits(fmt: str, kind: str) -> int:
    """Bits an element of `fmt` takes in shared memory for `kind` (ELEMENT_BITS): 4 for mxf4 / mxf4nvf4's packed e2m1,
    8 for kind::f8f6f4 / mxf8f6f4's padded 6- and 4-bit elements (16 to a 16-byte chunk, module docstring Q7)."""
    if fmt == "e2m1" and kind in ("mxf4", "mxf4nvf4"):
        return 4
    return 8 if fmt in PADDED_BITS else ELEMENT_BITS[fmt]


def unpad_subbyte(chunks: np.ndarray, bits: int) -> np.ndarray:
    """[rows, K] codes of the padded 6- / 4-bit elements from the [rows, K] bytes an operand fetch of one byte an
    element returned (module docstring Q7): each 16 bytes are a chunk whose first 2 * bits bytes hold its 16 elements,
    element e in bits [bits * e, bits * e + bits) of them read as a little-endian bit string; the rest is padding."""
    rows, k = chunks.shape
    packed = np.ascontiguousarray(chunks.reshape(rows, k // 16, 16)[..., :2 * bits])
    stream = np.unpackbits(packed, axis=-1, bitorder="little").reshape(rows, k // 16, 16, bits)
    return (stream.astype(np.uint8) << np.arange(bits, dtype=np.uint8)).sum(axis=-1, dtype=np.uint8).reshape(rows, k)


def read_operand_codes(read_smem, desc: SmemDescriptor, rows: int, k_elems: int, fmt: str, kind: str,
                       mn_major: bool) -> np.ndarray:
    """An MMA operand's [rows, k_elems] element codes in format `fmt` through desc (read_operand), the padded 6- / 4-bit
    elements of kind::f8f6f4 / mxf8f6f4 unpadded (unpad_subbyte)."""
    bits = element_bits(fmt, kind)
    codes = read_operand(read_smem, desc, rows, k_elems, bits, mn_major)
    return unpad_subbyte(codes, PADDED_BITS[fmt]) if bits == 8 and fmt in PADDED_BITS else codes


# --------------------------------------------------------------------------------------------------
# Operand fetch through a descriptor
# --------------------------------------------------------------------------------------------------


def swizzle_address(addr: np.ndarray, layout: str) -> np.ndarray:
    """Physical shared address of a logical (pre-swizzle) address: CuTe Swizzle<B,4,3> on the absolute
    address (PTX ISA 9.7.16.3.3 canonical-layout table, last column; PTX ISA 9.7.16.4.1 Table 41: the
    pattern repeats at 1024 / 512 / 256-byte boundaries for 128B / 64B / 32B): bits [4,4+B) ^= bits [7,7+B)."""
    bits = {"none": 0, "32B": 1, "64B": 2, "128B": 3}[layout]
    if bits == 0:
        return addr
    mask = ((1 << bits) - 1) << 7
    return addr ^ ((addr & mask) >> 3)


def _check_descriptor_mode(desc: SmemDescriptor) -> None:
    if desc.layout == "128B_base32B":
        raise Unsupported("128B swizzling with 32B atomicity (layout 1) is not implemented (an MN-major layout of "
                          "tf32 operands only, drawn as a figure)")
    if desc.lbo_mode:
        raise Unsupported("leading-dimension absolute address mode (bit 52) is sm_103a only (PTX ISA 9.7.16.4.1.1)")
    if desc.base_offset:
        # a pattern anchored off the 1024-byte grid (data not written by TMA): no kernel here does it
        raise Unsupported(f"matrix base offset {desc.base_offset} != 0 is not implemented")


def operand_byte_addresses(desc: SmemDescriptor, rows: int, kbytes: int) -> np.ndarray:
    """[rows, kbytes] physical shared addresses of a K-major operand (PTX ISA 9.7.16.3.3 canonical layouts,
    K-major; T = 16 bytes):
      none:     ((8,m),(T,2k)):((1T,SBO),(1,LBO))  -> row r, byte j: (r//8)*SBO + (r%8)*16 + (j//16)*LBO + j%16
      swizzled: ((8,m),(T,2k)):((wT,SBO),(1,T))    -> row r, byte j: (r//8)*SBO + (r%8)*W + j, W = swizzle bytes
    then the swizzle of swizzle_address (a function of the absolute address)."""
    _check_descriptor_mode(desc)
    if rows % 8:
        raise Hazard(f"operand of {rows} rows: canonical layouts are built of 8-row core matrices")
    r = np.arange(rows, dtype=np.int64)[:, None]
    j = np.arange(kbytes, dtype=np.int64)[None, :]
    start = desc.start_address
    if desc.layout == "none":
        logical = start + (r // 8) * desc.stride_byte_offset + (r % 8) * 16 + (j // 16) * desc.leading_byte_offset + j % 16
        return np.broadcast_to(logical, (rows, kbytes)).copy()
    width = _SWIZZLE_BYTES[desc.layout]
    if (start % width) + kbytes > width:
        # The K extent of one MMA must stay inside one swizzle row (PTX ISA 9.7.16.3.1.2: a 48-byte K "would
        # overflow the 128B shared memory boundary" and needs the sm_103a absolute mode).
        raise Hazard(f"operand K extent [{start % width}, {start % width + kbytes}) crosses the {width}-byte swizzle row "
                     f"(start address {start:#x})")
    # The start address may sit in any row of a swizzle atom. PTX ISA 9.7.16.4.1: "The value of base offset is 0 when
    # the repeating pattern of the specified swizzling mode starts as per ... Table 41" (a 1024-byte boundary for
    # 128B), else "base offset = (pattern start addr >> 0x7) & 0x7": it is the *pattern's* start that counts, not the
    # matrix's. A pattern anchored at 1024-byte boundaries is exactly what the absolute-address XOR below reads, and
    # what a TMA SWIZZLE_128B load writes (the XOR of address bits [4,7) with [7,10) of the shared address: the
    # emulator's TMA, byte-identical to an H200's for 128-byte-aligned destinations, tests/calibration/test_tma_gpu.py).
    # Hardware evidence: arseni_ivanov's B200-verified kernel places its 128-byte-aligned A/B buffers so that MMA
    # operands start in rows 1-2 of an atom with base_offset 0, and is correct. (An earlier version of this module
    # read Table 41 as a rule about the matrix start and flagged that as a hazard.)
    logical = start + (r // 8) * desc.stride_byte_offset + (r % 8) * width + j
    return swizzle_address(logical, desc.layout)


def mn_major_element_addresses(desc: SmemDescriptor, rows: int, k_elems: int, esize: int) -> np.ndarray:
    """[rows, k_elems] physical shared addresses of each element of an MN-major operand (the transpose bit of the
    instruction descriptor), esize bytes an element, T = 16 / esize elements in 16 bytes. CUTLASS make_umma_desc<MN>
    (mma_sm100_desc.hpp), in elements:
      none:          ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))  -> row r, K k: (r%T)*e + (r//T)*SBO + (k%8)*16 + (k//8)*LBO
      swizzled (W):  ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO))  -> (r%T)*e + ((r//T)%W)*16 + (r//(TW))*LBO
                                                               + (k%8)*16W + (k//8)*SBO,  W = 2 / 4 / 8 for 32B / 64B / 128B
    (the PTX ISA's MN-major canonical layouts, 9.7.16.3.3, in the same terms), then the swizzle on the absolute
    address."""
    _check_descriptor_mode(desc)
    t = 16 // esize
    r = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(k_elems, dtype=np.int64)[None, :]
    start = desc.start_address
    if desc.layout == "none":
        logical = (start + (r % t) * esize + (r // t) * desc.stride_byte_offset + (k % 8) * 16
                   + (k // 8) * desc.leading_byte_offset)
        return np.broadcast_to(logical, (rows, k_elems)).copy()
    w = _SWIZZLE_BYTES[desc.layout] // 16
    logical = (start + (r % t) * esize + ((r // t) % w) * 16 + (r // (t * w)) * desc.leading_byte_offset
               + (k % 8) * 16 * w + (k // 8) * desc.stride_byte_offset)
    return swizzle_address(logical, desc.layout)


def read_operand(read_smem, desc: SmemDescriptor, rows: int, k_elems: int, elem_bits: int,
                 mn_major: bool = False) -> np.ndarray:
    """The [rows, k_elems] operand an MMA reads through desc: each element's bits (uint8 codes for 4- and 8-bit
    elements, uint16 / uint32 for 16- / 32-bit ones; little-endian). read_smem(shared_addr, nbytes) -> uint8 array.
    FP4 packing: element 2i in the low nibble of byte i (see emu.numerics); FP4 operands are K-major only."""
    if elem_bits == 4:
        if mn_major:
            raise Unsupported("an MN-major FP4 operand")
        addrs = operand_byte_addresses(desc, rows, k_elems // 2)
        lo, hi = int(addrs.min()), int(addrs.max())
        return unpack_fp4(np.asarray(read_smem(lo, hi - lo + 1), dtype=np.uint8)[addrs - lo])
    esize = elem_bits // 8
    if mn_major:
        starts = mn_major_element_addresses(desc, rows, k_elems, esize)
        addrs = (starts[..., None] + np.arange(esize)).reshape(rows, k_elems * esize)
    else:
        addrs = operand_byte_addresses(desc, rows, k_elems * esize)
    lo, hi = int(addrs.min()), int(addrs.max())
    data = np.ascontiguousarray(np.asarray(read_smem(lo, hi - lo + 1), dtype=np.uint8)[addrs - lo])
    return data.view(f"<u{esize}")


# --------------------------------------------------------------------------------------------------
# Scale factors in tensor memory
# --------------------------------------------------------------------------------------------------


def _read_scale_factors(cta: Cta, taddr: int, rows: int, nscales: int, sf_id: int, what: str, own_rows: bool,
                        note=None) -> np.ndarray:
    """[4, rows, nscales] scale bytes as each 32-lane datapath q of the MMA (D lanes 32q..32q+31) reads them: MN row
    n = 32g + r, K block s at lane 32q + r of column col + g, byte sf_id + s (module docstring Q4: scale_vec::4X takes
    the word's four bytes; scale_vec::2X / 1X take 2 / 1 of them from byte SF_ID, which CUTLASS
    make_runtime_instr_desc_block_scaled fills from the scale address's byte bits 30-31: "The first 2-bits of TMEM
    address includes byte address"), from the datapath's own lane quadrant; own_rows (SFA): datapath q needs only its
    own rows, g = q. The ISA asks all four quadrants to hold the same words (9.7.16.10.7: "duplicated to all 32 lane
    partitions"); a B200 computed right with SFA row 32g + r in quadrant g only (precedents.JIAB_SFA_PER_QUADRANT).
    So words no datapath reads may be unwritten, and quadrants that differ are a Note through `note(rule, detail)` (a
    Hazard without `note`), each datapath computing with its own quadrant's words."""
    lane, col = split_taddr(taddr)
    if lane != 0:
        raise Hazard(f"{what} address {taddr:#x}: lane field {lane:#x} must be 0 (scale factors span all 128 lanes; "
                     "bits 30-31 would be a byte (SF_ID) offset, which the instruction descriptor carries instead)")
    if nscales == 4 and sf_id != 0:
        # PTX ISA 9.7.16.10.7.2.3 / 9.7.16.10.7.3.3: for scale_vec::4X "The SF_ID value must be 0".
        raise Hazard(f"{what}: scale_vec::4X requires SF_ID = 0, got {sf_id}")
    if sf_id % nscales:
        raise Hazard(f"{what}: scale_vec::{nscales}X reads {nscales} bytes of a 4-byte word from byte SF_ID, which "
                     f"must be a multiple of {nscales}, got {sf_id}")
    if rows % 32:
        raise Unsupported(f"{what}: {rows} rows is not a multiple of 32")
    ncols = rows // 32
    _check_allocated(cta, col, ncols, what)
    quads = cta.tmem[:, col:col + ncols].reshape(4, 32, ncols)  # [q, r, g]
    # the words a datapath reads: SFA's datapath q only column col + q of its quadrant, SFB's every column
    read = np.broadcast_to(np.eye(4, dtype=bool)[:, None, :] if own_rows else True, quads.shape)
    if np.any(quads[read] == POISON_WORD):
        raise Hazard(f"{what}: reads tensor memory columns [{col}, {col + ncols}) of CTA {cta.ctaid} that hold no data")
    if np.any(quads != quads[0:1]):
        # PTX ISA 9.7.16.10.7: "Scale factors for A and B matrices need to be duplicated to all 32 lane partitions".
        detail = (f"{what}: scale factors in columns [{col}, {col + ncols}) are not duplicated across the four "
                  "32-lane partitions (PTX ISA 9.7.16.10.7)")
        if note is None:
            raise Hazard(detail)
        note("tcgen05-scale-factors-not-duplicated", detail + "; each 32-lane datapath reads its own quadrant")
    words = quads.transpose(0, 2, 1).reshape(4, rows)  # datapath q: row n = 32g + r -> word [q, r, g]
    shifts = 8 * (sf_id + np.arange(nscales, dtype=np.uint32))
    return ((words[..., None] >> shifts) & 0xFF).astype(np.uint8)


# --------------------------------------------------------------------------------------------------
# tcgen05.mma
# --------------------------------------------------------------------------------------------------


def _check_group(group: list) -> None:
    if len(group) == 1:
        return
    if len(group) != 2:
        raise Hazard(f"cta_group must name 1 or 2 CTAs, got {len(group)}")
    even, odd = group
    if even.rank % 2 or odd is not even.peer:
        # PTX ISA 9.7.16.1 (CTA pair): the pair is ranks 2i, 2i+1 of one cluster.
        raise Hazard(f"cta_group::2 needs [even CTA, its peer]; got ranks {even.rank}, {odd.rank}")


def _check_shape(d: InstrDescriptor, ncta: int) -> None:
    """Valid shapes (PTX ISA 9.7.16.2.1 Table 39, #tcgen05-matrix-shape): cta_group::1 M = 64 or 128, N a multiple of 8
    in [8, 256]; cta_group::2 M = 128 or 256, N a multiple of 16 in [16, 256]."""
    ms, step = ((64, 128), 8) if ncta == 1 else ((128, 256), 16)
    if d.m not in ms:
        raise Hazard(f"cta_group::{ncta} M = {d.m}: must be {ms[0]} or {ms[1]} (PTX ISA Table 39)")
    if d.n % step or not step <= d.n <= 256:
        raise Hazard(f"cta_group::{ncta} N = {d.n}: must be a multiple of {step} in [{step}, 256]")


def _check_ws(d: InstrDescriptor, ncta: int, kind: str, zero_column_mask: int) -> None:
    """tcgen05.mma.ws's shapes and kinds (PTX ISA Table 39) and its zero-column mask (module docstring Q9)."""
    if ncta != 1 or kind not in ("f16", "tf32", "f8f6f4", "i8"):
        raise Hazard(f"tcgen05.mma.ws.cta_group::{ncta}.kind::{kind}: .ws is cta_group::1 of kind::f16 / tf32 / f8f6f4 "
                     "/ i8 only (PTX ISA Table 39)")
    if d.m not in (32, 64, 128) or d.n not in (64, 128, 256):
        raise Hazard(f"tcgen05.mma.ws M = {d.m}, N = {d.n}: must be M = 32 / 64 / 128, N = 64 / 128 / 256 (PTX ISA "
                     "Table 39)")
    if (zero_column_mask >> 36) & 0x7:
        raise Hazard(f"zero-column mask descriptor {zero_column_mask:#x}: reserved bits [36,39) are set (PTX ISA Table "
                     "45)")
    if (zero_column_mask >> 39) & 1 or (zero_column_mask >> 56) & 0x3F:
        raise Unsupported(f"tcgen05.mma.ws zero-column mask {zero_column_mask:#x} that masks or shifts B's columns: "
                          "the ISA's worked examples contradict its field descriptions (PTX ISA 9.7.16.4.3)")


def d_cells(m: int, n: int, ncta: int, d_taddr: int, ws: bool = False) -> tuple:
    """(lanes, columns), each [M / ncta, N], of the tensor-memory cells that hold one CTA's rows of D (its row i, D
    column j), or (None, columns) for the full data paths, which a slice reads. PTX ISA 9.7.16.10.5 draws the layouts;
    they are taken from CUTLASS tmem_frg (mma_traits_sm100_frag.hpp), in lanes and 32-bit columns:
      M = 128 on one CTA, M = 256 on a pair (128 rows a CTA; Layouts D, A): row i -> lane i, column col + j;
      M = 64 on one CTA ("half subpartitions" atom ((16,4),N):((1,32),128)): row i -> lane l0 + i % 16 + 32 (i // 16),
        column col + j, l0 the address's lane field, 0 or 16 (the top or bottom half of each 32-lane subpartition:
        CUTLASS's Interleaved allocation puts a second M = 64 tile there);
      M = 128 on a pair (64 rows a CTA, the "2x2" atom (64,(N/2,2)):(1,(128,64))) and .ws M = 64 (tmem_frg_ws's same
        atom): row i -> lane i + 64 (j // (N/2)), column col + j % (N/2);
      .ws M = 32 (tmem_frg_ws's "1x4" atom (32,(N/4,4)):(1,(128,32))): row i -> lane i + 32 (j // (N/4)), column
        col + j % (N/4)."""
    lane0, col = split_taddr(d_taddr)
    rows = m // ncta
    if rows == 128 or (rows == 64 and ncta == 2) or ws:
        if lane0 != 0:
            # Data Path Layout Organization table: lane alignment 0 for Layouts A, B, D, E and G.
            raise Hazard(f"D address {d_taddr:#x}: lane field must be 0 for M = {m} (PTX ISA 9.7.16.10.5)")
        if rows == 128:
            return None, (col, col + n)
        split = 128 // rows  # the N / split columns of each of the `split` lane groups
        i, j = np.arange(rows)[:, None], np.arange(n)[None, :]
        return i + rows * (j // (n // split)), col + j % (n // split)
    if lane0 not in (0, 16):
        raise Hazard(f"D address {d_taddr:#x}: lane field must be 0 or 16 for M = 64 on one CTA (the half of each "
                     "32-lane subpartition its rows use)")
    i, j = np.arange(64)[:, None], np.arange(n)[None, :]
    return np.broadcast_to(lane0 + i % 16 + 32 * (i // 16), (64, n)), np.broadcast_to(col + j, (64, n))


def d_columns(m: int, n: int, ncta: int, ws: bool = False) -> int:
    """The tensor-memory columns one MMA's D spans in each CTA (d_cells): N, or N / 2 for M = 128 on a pair and .ws
    M = 64, N / 4 for .ws M = 32."""
    if ws:
        return n * m // 128
    return n // 2 if (ncta == 2 and m == 128) else n


A_COLLECTOR_OPS = ("fill", "use", "lastuse", "discard")


def mma(group: list, d_taddr: int, a_desc: int, b_desc: int, idesc: int, sfa_taddr: int | None = None,
        sfb_taddr: int | None = None, accumulate: bool = False, kind: str = "mxf4nvf4", scale_vec: int | None = None,
        collector: str = "discard", note=None, a_in_tmem: bool = False, scale_input_d: int = 0,
        zero_column_mask: int = 0) -> None:
    """One tcgen05.mma.cta_group::len(group).kind::`kind` instruction (PTX ISA 9.7.16.10.9.1):
    D = A x B^T (+ D if accumulate), and for the .block_scale kinds D = (A * scale_A) x (B * scale_B)^T (+ D)
    (9.7.16.10.7), scale_vec scales per row of A and of B (1X, 2X, 4X: blocks of K / scale_vec; None: the kind's
    only one, 4X for mxf4nvf4).

    group: [cta] (cta_group::1, M = 64 or 128) or [cta_even, cta_odd] (cta_group::2, M = 128 or 256). Operands and
    layouts: module docstring Q1-Q5 (an MN-major operand where the descriptor's transpose bit says so:
    mn_major_element_addresses), D's cells: d_cells. Each CTA v computes D rows [Rv, Rv+R) (R = M / len(group))
    from its own A (its smem), the whole B (half from each CTA's smem), its own SFA and its own copy of all N SFB
    rows. The halved shapes (M = 64 on one CTA, M = 128 on a pair) are implemented for the kinds without scale
    factors, A from shared memory: where their scale factors and a collected or tensor-memory A sit is drawn only as
    figures.

    Numerics: every element is decoded exactly to float64 (emu.numerics.element_values); each output element is the
    float64 dot product of the K exact products (plus D, times 2^-scale_input_d for kind::f16 / tf32: "D = A*B + D *
    (2 ^ - scale-input-d)", PTX ISA tcgen05.mma), rounded once to fp32 (round-to-nearest-even), or to f16 for an F16
    D (module docstring Q8). The hardware's internal accumulation order and precision are not specified by the ISA;
    ours is (nearly) the exactly rounded result, so comparisons against hardware need a tolerance. kind::i8: the exact
    integer sum (plus D) as s32; beyond the s32 range the saturate bit clamps it (Table 42), and without it the ISA
    gives no result: a Hazard.

    collector: the .collector::a qualifier (module docstring Q6): "fill" / "use" / "lastuse" / "discard"; or, for the
    weight-stationary form tcgen05.mma.ws (Q9), its B collector's "bN::op" (N = 0..3, op one of the same four).
    zero_column_mask: .ws's optional zero-column-mask-desc (Q9; 0 when absent).
    a_in_tmem: the form with A in tensor memory ([a-tmem] for a-desc, PTX ISA 9.7.16.10.9.1): a_desc is then its
    address and A is read by tmem_a_operand (FP4 only).
    note: note(rule, detail) for scale factors not duplicated across the lane quadrants (_read_scale_factors);
    None: a Hazard.

    Open question (ISA silent): how a hardware NaN/inf scale or a 0x80-0xFF (negative) UE4M3 byte behaves.
    We decode scale bytes as signed e4m3fn (poison 0xFF -> NaN, which then propagates).
    """
    ws = collector.startswith("b")
    b_buffer, b_op = (int(collector[1]), collector.split("::")[1]) if ws else (None, "discard")
    a_op = "discard" if ws else collector
    if a_op not in A_COLLECTOR_OPS or b_op not in A_COLLECTOR_OPS or b_buffer not in (None, 0, 1, 2, 3):
        raise Unsupported(f"tcgen05.mma collector usage {collector}")
    spec = MMA_KINDS.get(kind)
    if spec is None:
        raise Unsupported(f"tcgen05.mma kind::{kind}")
    scaled = spec.scale_vecs is not None
    if scaled:
        scale_vec = scale_vec or max(spec.scale_vecs)
        if scale_vec not in spec.scale_vecs:
            raise Hazard(f"kind::{kind} takes scale_vec::{'/'.join(f'{v}X' for v in spec.scale_vecs)}, not "
                         f"{scale_vec}X (PTX ISA 9.7.16.10.7)")
        if sfa_taddr is None or sfb_taddr is None:
            raise Hazard(f"kind::{kind} .block_scale needs the scale-factor addresses")
    _check_group(group)
    d = decode_instr_descriptor(idesc, kind)
    ncta = len(group)
    if ws:
        _check_ws(d, ncta, kind, zero_column_mask)
    else:
        _check_shape(d, ncta)
    if scaled and d.scale_format not in spec.scale_vecs[scale_vec]:
        raise Hazard(f"kind::{kind} scale_vec::{scale_vec}X takes {' or '.join(spec.scale_vecs[scale_vec]).upper()} "
                     f"scale factors, the descriptor says {d.scale_format.upper()} (PTX ISA 9.7.16.10.7)")
    if scale_input_d and kind not in ("f16", "tf32"):
        raise Hazard(f"scale-input-d is for kind::f16 and kind::tf32 only, not kind::{kind} (PTX ISA tcgen05.mma)")
    if not 0 <= scale_input_d <= 15:
        raise Hazard(f"scale-input-d {scale_input_d}: must be in [0, 15] (PTX ISA tcgen05.mma)")
    K = d.k
    a_bits = element_bits(d.a_format, kind)
    n_per_cta, rows = d.n // ncta, d.m // ncta
    if a_in_tmem and a_bits == 8 and d.a_format in PADDED_BITS:
        raise Unsupported(f"tcgen05.mma kind::{kind} with a {d.a_format} A in tensor memory: where a 4- / 6-bit "
                          "element sits in its 8-bit tensor-memory container is drawn only (PTX ISA 9.7.16.10.4.3, "
                          "figures 199-201; emu.tcgen05 Q7)")
    if a_in_tmem and (a_op != "discard" or a_bits != 4):
        raise Unsupported(f"tcgen05.mma with A in tensor memory and {d.a_format} elements / .collector::a::{a_op}")
    if rows < 128 and (scaled or a_in_tmem or a_op != "discard"):
        raise Unsupported(f"cta_group::{ncta} M = {d.m} with scale factors, A in tensor memory or an A collector: "
                          "their data-path layouts are drawn only as figures (PTX ISA 9.7.16.10.5)")
    a_sd = None if a_in_tmem else decode_smem_descriptor(a_desc)
    b_sd = decode_smem_descriptor(b_desc)

    lanes, cols = d_cells(d.m, d.n, ncta, d_taddr, ws)
    d_col, width = split_taddr(d_taddr)[1], d_columns(d.m, d.n, ncta, ws)
    if scaled and split_taddr(sfb_taddr)[1] % 2:
        raise Hazard(f"SFB address {sfb_taddr:#x}: column {split_taddr(sfb_taddr)[1]} is not 2-column (8-byte) aligned")

    # B: rows [v*N/2, (v+1)*N/2) from CTA v's shared memory, same descriptor (Q3); .ws: maybe B's collector (Q9).
    if b_op in ("use", "lastuse"):
        b_codes = _collected(group[0].b_collectors.get(b_buffer), f"collector::b{b_buffer}::{b_op}",
                             f"B collector buffer {b_buffer}", (d.n, K), group[0])
    else:
        b_codes = np.concatenate([read_operand_codes(lambda a, n, c=cta: _smem(c, a, n), b_sd, n_per_cta, K,
                                                     d.b_format, kind, d.transpose_b) for cta in group], axis=0)
    b_vals = element_values(b_codes, d.b_format)
    if d.negate_b:
        b_vals = -b_vals
    sf_table = E4M3FN_TABLE if d.scale_format == "ue4m3" else UE8M0_TABLE
    block = K // scale_vec if scaled else K

    results = []
    collected = []
    for cta in group:
        _check_allocated(cta, d_col, width, "tcgen05.mma D")
        if a_op in ("use", "lastuse"):
            a_codes = _collected(cta.a_collector, f"collector::a::{a_op}", "the A collector", (128, K), cta)
        elif a_in_tmem:
            a_codes = tmem_a_operand(cta, a_desc, K)
        else:
            a_codes = read_operand_codes(lambda a, n, c=cta: _smem(c, a, n), a_sd, rows, K, d.a_format, kind,
                                         d.transpose_a)
        collected.append(a_codes if a_op in ("fill", "use") else None)
        a_vals = element_values(a_codes, d.a_format)
        if d.negate_a:
            a_vals = -a_vals
        with np.errstate(invalid="ignore", over="ignore"):
            if scaled:
                acc = _scaled_product(cta, a_vals, b_vals, sf_table, sfa_taddr, sfb_taddr, d, scale_vec, block, note)
            else:
                acc = _dot(a_vals, b_vals)  # [rows, N] float64 (exact integers for kind::i8)
            if accumulate:
                old = cta.tmem[:, cols[0]:cols[1]] if lanes is None else cta.tmem[lanes, cols]
                if np.any(old == POISON_WORD):
                    raise Hazard(f"tcgen05.mma accumulates into tensor memory columns [{d_col}, {d_col + width}) of "
                                 f"CTA {cta.ctaid} that hold no data (enable-input-d true on unwritten D)")
                if d.d_format == "s32":
                    acc = acc + old.view(np.int32).astype(np.float64)
                elif d.d_format == "f16":  # the low 16 bits of each cell (Q8)
                    old_f16 = (old & 0xFFFF).astype(np.uint16).view(np.float16)
                    acc = acc + old_f16.astype(np.float64) * 2.0 ** -scale_input_d
                else:
                    acc = acc + old.view(np.float32).astype(np.float64) * 2.0 ** -scale_input_d
        results.append(_d_words(acc, d))
    for cta, bits, keep in zip(group, results, collected):  # write after all reads (a 2-CTA MMA is one instruction)
        if lanes is None:
            cta.tmem[:, cols[0]:cols[1]] = bits
        else:
            cta.tmem[lanes, cols] = bits
        cta.a_collector = keep
    if ws:
        group[0].b_collectors[b_buffer] = b_codes if b_op in ("fill", "use") else None


def _collected(codes, usage: str, what: str, shape: tuple, cta: Cta) -> np.ndarray:
    """An operand a .collector::a / .collector::bN ::use or ::lastuse (`usage`) reads from its collector buffer (`what`;
    module docstring Q6, Q9): a Hazard when no ::fill since the last ::lastuse / ::discard left it filled, or it holds
    another shape."""
    if codes is None:
        raise Hazard(f"tcgen05.mma .{usage} in CTA {cta.ctaid}: {what} is empty (no ::fill since its last "
                     "lastuse/discard; PTX ISA tcgen05.mma .collector_usage)")
    if codes.shape != shape:
        raise Hazard(f"tcgen05.mma .{usage}: {what} holds a {codes.shape} operand, this MMA needs {shape}")
    return codes


def _scaled_product(cta, a_vals, b_vals, sf_table, sfa_taddr, sfb_taddr, d, scale_vec, block, note) -> np.ndarray:
    """(A * scale_A) x (B * scale_B)^T of one CTA's 128 rows, each 32-lane datapath with its own quadrant's scale
    factors (_read_scale_factors)."""
    sfa_q = sf_table[_read_scale_factors(cta, sfa_taddr, 128, scale_vec, d.a_sf_id, "tcgen05.mma SFA", True, note)]
    sfb_q = sf_table[_read_scale_factors(cta, sfb_taddr, d.n, scale_vec, d.b_sf_id, "tcgen05.mma SFB", False, note)]
    sfa = np.concatenate([sfa_q[q, 32 * q:32 * q + 32] for q in range(4)])  # each datapath its own rows
    a_scaled = a_vals * np.repeat(sfa, block, axis=1)
    if np.any(sfb_q != sfb_q[0:1]):  # each datapath's D rows with its own quadrant's SFB
        return np.concatenate([_dot(a_scaled[32 * q:32 * q + 32], b_vals * np.repeat(sfb_q[q], block, axis=1))
                               for q in range(4)])  # [128, N] float64
    return _dot(a_scaled, b_vals * np.repeat(sfb_q[0], block, axis=1))  # duplicated (as the ISA asks): one B


def _d_words(acc: np.ndarray, d: InstrDescriptor) -> np.ndarray:
    """D's tensor-memory words from the exact float64 result: s32 (_s32_bits), fp32, or f16 (numpy's float64 -> float16
    cast rounds to nearest even, once) in the low 16 bits with the upper 16 zero (module docstring Q8)."""
    if d.d_format == "s32":
        return _s32_bits(acc, d.saturate)
    if d.d_format == "f16":
        return acc.astype(np.float16).view(np.uint16).astype(np.uint32)
    return fp32_to_bits(round_to_fp32(acc))


def _s32_bits(acc: np.ndarray, saturate: bool) -> np.ndarray:
    """An exact integer result as s32 words: clamped under the saturate bit (PTX ISA Table 42), a Hazard beyond the
    s32 range without it (the ISA gives no result for an overflow)."""
    lo, hi = -2.0 ** 31, 2.0 ** 31 - 1
    if saturate:
        acc = np.clip(acc, lo, hi)
    elif np.any((acc < lo) | (acc > hi)):
        raise Hazard("tcgen05.mma kind::i8: a result beyond the s32 range without the saturate bit (PTX ISA Table 42)")
    return acc.astype(np.int64).astype(np.int32).view(np.uint32)


def tmem_a_operand(cta: Cta, taddr: int, k_elems: int) -> np.ndarray:
    """[128, k_elems] FP4 codes of an A operand in tensor memory (PTX ISA 9.7.16.10.9.1, the [a-tmem] form): row i of
    this CTA's 128 rows at lane i, its K / 2 bytes along the columns from taddr's, four a column, low byte first, two
    FP4 a byte, low nibble first: the layout tcgen05.cp.128x256b writes a 32-byte shared-memory row in (tmem_copy),
    the copy the public kernel using this form (jIab-b's s_cp.py) fills A with."""
    lane, col = split_taddr(taddr)
    if lane != 0:
        raise Hazard(f"tcgen05.mma A address {taddr:#x}: lane field must be 0 (the 128 rows of A fill lanes 0..127)")
    ncols = k_elems // 8  # 4 bits an element, 32 bits a column
    _check_allocated(cta, col, ncols, "tcgen05.mma A")
    words = cta.tmem[:, col:col + ncols]
    if np.any(words == POISON_WORD):
        raise Hazard(f"tcgen05.mma A: reads tensor memory columns [{col}, {col + ncols}) of CTA {cta.ctaid} that hold "
                     f"no data")
    return unpack_fp4(np.ascontiguousarray(words).view(np.uint8).reshape(128, ncols * 4))


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b.T in float64 without BLAS: every product of e2m1 and e4m3 values is exact and so (nearly always) is their
    64-term sum, so the order of summation does not matter; a threaded BLAS does, for speed: on a 2-CPU machine with
    other work running, its threads made a [128, 64] x [64, 256] product take 16 ms instead of 0.1 (measured; einsum
    0.5 ms whatever the load)."""
    return np.einsum("ik,jk->ij", a, b)


def _smem(cta: Cta, addr: int, nbytes: int) -> np.ndarray:
    if addr < 0 or addr + nbytes > cta.smem.size:
        raise Hazard(f"tcgen05 shared read of {nbytes} bytes at {addr:#x} outside {cta.smem.size} bytes (CTA {cta.ctaid})")
    return cta.smem[addr:addr + nbytes]


# --------------------------------------------------------------------------------------------------
# tcgen05.cp.cta_group::N.shape{.multicast}
# --------------------------------------------------------------------------------------------------

# Shapes and multicasts of tcgen05.cp (PTX ISA 9.7.16.9.2; 9.7.16.2.3 "Data Movement Shape"): rows x bits a row of the
# shared-memory source, and the tensor-memory lanes (relative to the address's lane) each source row lands in. The
# ISA draws the lane maps; Apache TVM's tcgen05.cp table states them: .128x256b / .128x128b "consecutive 128 lanes",
# .4x256b "0, 32, 64, 96 relative to the origin", .64x128b.warpx2::02_13 "64 consecutive lanes, replicated 64 lanes
# apart", .64x128b.warpx2::01_23 "logical row r maps to 64*(r//32)+r%32, replicated 32 lanes apart",
# .32x128b.warpx4 "32 consecutive lanes, four replicas 32 lanes apart" (the last one as module docstring Q4 reads it).
def _cp_lanes(rows: int, multicast: str | None) -> np.ndarray:
    r = np.arange(rows)[:, None]
    if multicast is None:
        return 32 * r if rows == 4 else r
    if multicast == "warpx4":
        return r + 32 * np.arange(4)[None, :]
    if multicast == "warpx2::02_13":
        return r + 64 * np.arange(2)[None, :]
    return 64 * (r // 32) + r % 32 + 32 * np.arange(2)[None, :]  # warpx2::01_23


CP_SHAPES = {("128x256b", None): (128, 32), ("4x256b", None): (4, 32), ("128x128b", None): (128, 16),
             ("64x128b", "warpx2::02_13"): (64, 16), ("64x128b", "warpx2::01_23"): (64, 16),
             ("32x128b", "warpx4"): (32, 16)}


def cp_source_addresses(sd: SmemDescriptor, rows: int, row_bytes: int) -> np.ndarray:
    """[rows, row_bytes] shared addresses a tcgen05.cp reads: the matrix descriptor's canonical K-major layout, as an
    MMA operand's (operand_byte_addresses: 8-row core matrices SBO apart, 16-byte chunks LBO apart without swizzle);
    a 4-row source is the first half of one core matrix."""
    return operand_byte_addresses(sd, max(rows, 8), row_bytes)[:rows]


def tmem_copy(group: list, taddr: int, s_desc: int, shape: str = "32x128b", multicast: str | None = "warpx4") -> None:
    """tcgen05.cp.cta_group::len(group).shape{.multicast} [taddr], s_desc (PTX ISA 9.7.16.9.2): row r of the source
    (row_bytes bytes, cp_source_addresses) goes to the lanes _cp_lanes gives it, columns taddr.col + 0.. (byte b ->
    column b // 4, byte b % 4 of the word, little-endian). cta_group::2: each CTA of the pair copies from its own
    shared memory at the descriptor's offset into its own tensor memory (module docstring Q4: the ISA says both
    tensor memories are written, not whose shared memory is read; chosen from the hardware-verified kernel)."""
    _check_group(group)
    rows, row_bytes = CP_SHAPES[(shape, multicast)]
    sd = decode_smem_descriptor(s_desc)
    lane, col = split_taddr(taddr)
    lanes = lane + _cp_lanes(rows, multicast)
    if lanes.max() >= 128:
        raise Hazard(f"tcgen05.cp.{shape}{'.' + multicast if multicast else ''} at lane {lane}: the copy's lanes run "
                     f"past lane 127")
    addrs = cp_source_addresses(sd, rows, row_bytes)
    lo, hi = int(addrs.min()), int(addrs.max())
    ncols = row_bytes // 4
    for cta in group:
        _check_allocated(cta, col, ncols, "tcgen05.cp")
        data = _smem(cta, lo, hi - lo + 1)[addrs - lo]  # [rows, row_bytes]
        words = np.ascontiguousarray(data).view("<u4").reshape(rows, ncols)
        for copy in range(lanes.shape[1]):
            cta.tmem[lanes[:, copy], col:col + ncols] = words


def tmem_shift_down(group: list, taddr: int) -> None:
    """tcgen05.shift.cta_group::len(group).down [taddr] (PTX ISA 9.7.16.9.3): "the shifting of 32-byte elements
    downwards across all the rows, except the last, by one row"; the shape is the implicit .31x256b (9.7.16.2.3), the
    lane of taddr aligned to 32. So in each CTA of the group, the 8 columns from taddr's and the 32 lanes from its
    lane: lane L + r + 1 takes what lane L + r held, r = 0..30, and lane L + 31's words are gone. What lane L holds
    afterwards the ISA does not say: it is poisoned (read before being written again it shows as data no one wrote)."""
    _check_group(group)
    lane, col = split_taddr(taddr)
    if lane % 32:
        raise Hazard(f"tcgen05.shift at lane {lane}: the lane of taddr must be aligned to 32 (PTX ISA 9.7.16.9.3)")
    for cta in group:
        _check_allocated(cta, col, 8, "tcgen05.shift")
        rows = cta.tmem[lane:lane + 31, col:col + 8].copy()
        cta.tmem[lane + 1:lane + 32, col:col + 8] = rows
        cta.tmem[lane, col:col + 8] = POISON_WORD


# --------------------------------------------------------------------------------------------------
# tcgen05.ld.sync.aligned.32x32b.xN
# --------------------------------------------------------------------------------------------------


def tmem_ld_first_lane(lane_field: int, quad: int, rows: int, what: str) -> tuple[int, bool]:
    """The first tensor-memory lane a warp's tcgen05.ld{.32x32b,.16x256b} reads, and whether its address named a
    quadrant other than the warp's own.

    The rule: the quadrant comes from the warp (warp id % 4 -> lanes 32q .. 32q+31), the lane field only selects the
    offset inside it, modulo 32; the access (32 lanes for .32x32b, 16 for .16x256b) must fit in the quadrant.
    Sources:
    - PTX ISA 9.7.16.8.1 "Access restrictions": "The Tensor Memory of a CTA is divided into 4 equal chunks such that
      each warp of a warpgroup in the CTA can access a chunk of the Tensor Memory. A lane of the Tensor Memory can
      be accessed by a single warp in the warpgroup" (warp 0: lanes 0-31, ..., warp 3: 96-127). The ISA does not say
      what a lane field naming another chunk does.
    - The CuTe DSL kernels here (this package's, NVIDIA's example) pass the warp's own chunk, 32 (warp % 4), in the
      lane field: the emulator's earlier literal rule (lane field == 32 (warp % 4)) held for them in every run.
      Consistent with the rule, silent on other values.
    - Hardware evidence, both B200-verified: novus677/nvfp4_dual_gemm@4670b254 kernel 9 reads its accumulators
      with .16x256b at lane field 0 or 16 from every epilogue warp (and .32x32b at lane 0 in its transposed-C
      variant) and writes warp w's rows 32w + ...; gau-nernst v2 reads the odd CTA's half of an M=256 accumulator
      at lane field 128 + 32w + 16m. Read literally (lane = the field) both would read another warp's rows or lanes
      that do not exist; read as quadrant = warp % 4, offset = field % 32, both read exactly their own rows, and so
      do this package's kernel and NVIDIA's example (field = 32 (warp % 4)). The rule replaces an earlier special
      case that accepted lanes 128-255 only in the odd CTA of a pair.
    A field naming another quadrant is accepted with a Note (emu.ops_async records it), since it relies on this
    reading of the hardware rather than on the ISA text."""
    offset = lane_field % 32
    if offset + rows > 32:
        raise Hazard(f"{what} by warp {quad} at lane offset {offset}: {rows} lanes from there leave the warp's 32-lane "
                     f"quadrant (lanes {32 * quad}..{32 * quad + 31}; PTX ISA 9.7.16.8.1)")
    return 32 * quad + offset, (lane_field >> 5) != quad


# Per .num repetition of each tcgen05.ld / tcgen05.st shape (PTX ISA 9.7.16.2.3 "Matrix fragments", 9.7.16.8.3 Table
# of registers): (lanes the warp accesses, registers a thread holds, columns). .16x32bx2 is two 16-lane x 32-bit
# halves, the second immHalfSplitoff columns after the first.
TMEM_LD_SHAPES = {"32x32b": (32, 1, 1), "16x64b": (16, 1, 2), "16x128b": (16, 2, 4), "16x256b": (16, 4, 8),
                  "16x32bx2": (16, 1, 1)}


def tmem_fragment(shape: str, num: int, half_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """([32 threads, registers] lane offsets, [32, registers] column offsets) of a tcgen05.{ld,st}.shape.x{num}: thread
    t's register r holds the 32-bit cell at (first lane + lane, first column + column). PTX ISA 9.7.16.2.3 gives these
    maps as figures; they are read from CUTLASS include/cute/atom/copy_traits_sm100.hpp (Copy_Traits of
    SM100_TMEM_LOAD_{32dp32b,16dp64b,16dp128b,16dp256b,16dp32b}1x: ValID and DstLayout), the same maps Apache TVM's
    tcgen05.ld/st table states (r = repetition i, register q within it):
      .32x32b    lane t,                     column i
      .16x64b    lane t/4 + 8 (t%2),         column (t/2)%2 + 2i
      .16x128b   lane t/4 + 8q,              column t%4 + 4i
      .16x256b   lane t/4 + 8 ((q/2)%2),     column 8i + 2 (t%4) + q%2   (the mma.sync m16n8 accumulator fragment)
      .16x32bx2  lane t%16,                  column i + (t/16) immHalfSplitoff"""
    if num not in (1, 2, 4, 8, 16, 32, 64, 128):
        raise Hazard(f"tcgen05.{{ld,st}}.{shape}.x{num}: .num must be a power of two in [1, 128]")
    _, per_rep, _ = TMEM_LD_SHAPES[shape]
    t = np.arange(32)[:, None]
    r = np.arange(per_rep * num)[None, :]
    i, q = r // per_rep, r % per_rep
    if shape == "32x32b":
        lanes, cols = t + 0 * r, i + 0 * t
    elif shape == "16x64b":
        lanes, cols = t // 4 + 8 * (t % 2) + 0 * r, (t // 2) % 2 + 2 * i
    elif shape == "16x128b":
        lanes, cols = t // 4 + 8 * q, t % 4 + 4 * i
    elif shape == "16x256b":
        lanes, cols = t // 4 + 8 * ((q // 2) % 2), 8 * i + 2 * (t % 4) + q % 2
    else:  # 16x32bx2
        lanes, cols = t % 16 + 0 * r, i + (t // 16) * half_offset
    return lanes, cols


def tmem_footprint(shape: str, num: int, pack: bool, half_offset: int = 0) -> tuple[int, int]:
    """(first column offset, columns) a tcgen05.{ld,st} touches: .pack::16b / .unpack::16b spread each register over
    two columns."""
    _, cols = tmem_fragment(shape, num, half_offset)
    width = 2 if pack else 1
    return int(cols.min()) * width, (int(cols.max()) + 1 - int(cols.min())) * width


def _fragment_cells(cta: Cta, taddr: int, warp_id_in_warpgroup: int, num: int, shape: str, pack: bool,
                    half_offset: int, what: str):
    lane_field, col = split_taddr(taddr)
    rows = TMEM_LD_SHAPES[shape][0]
    lane, _ = tmem_ld_first_lane(lane_field, warp_id_in_warpgroup % 4, rows, f"{what}.{shape}")
    lanes, cols = tmem_fragment(shape, num, half_offset)
    first, ncols = tmem_footprint(shape, num, pack, half_offset)
    _check_allocated(cta, col + first, ncols, what)
    if pack:
        return lane + lanes, col + 2 * cols
    return lane + lanes, col + cols


def tmem_load(cta: Cta, taddr: int, warp_id_in_warpgroup: int, num: int, shape: str = "32x32b", pack: bool = False,
              half_offset: int = 0) -> np.ndarray:
    """tcgen05.ld.sync.aligned.{shape}.x{num}{.pack::16b}.b32 (PTX ISA 9.7.16.8.3): [32 threads, registers] uint32 by
    tmem_fragment's map. The first lane: tmem_ld_first_lane (the warp's own quadrant, PTX ISA 9.7.16.8.1).
    .pack::16b: a register holds the low 16 bits of two adjacent columns, the first in its low half (CUTLASS
    SM100_TMEM_LOAD_32dp32b1x_16b: ValID (16 bits, 2 columns) per 32-bit value), so the same registers span twice the
    columns. (All threads give the same taddr, PTX ISA 9.7.16.8.3: checked by the caller, which passes one.)"""
    lanes, cols = _fragment_cells(cta, taddr, warp_id_in_warpgroup, num, shape, pack, half_offset, "tcgen05.ld")
    if not pack:
        return cta.tmem[lanes, cols].copy()
    return (cta.tmem[lanes, cols] & 0xFFFF) | ((cta.tmem[lanes, cols + 1] & 0xFFFF) << 16)


def tmem_store(cta: Cta, taddr: int, warp_id_in_warpgroup: int, num: int, shape: str, values: np.ndarray,
               pack: bool = False, half_offset: int = 0) -> None:
    """tcgen05.st.sync.aligned.{shape}.x{num}{.unpack::16b}.b32: the inverse of tcgen05.ld of the same shape (PTX ISA
    9.7.16.8.4: "the same ... matrix fragments" as tcgen05.ld, 9.7.16.2.3), `values` [32 threads, registers] uint32
    written where the load of that shape would read them; the same quadrant rule (tmem_ld_first_lane). .unpack::16b:
    a register's low half goes to the low 16 bits of the first of two adjacent columns, its high half to the second's;
    the columns' upper 16 bits, which the form does not address, are left as they were."""
    lanes, cols = _fragment_cells(cta, taddr, warp_id_in_warpgroup, num, shape, pack, half_offset, "tcgen05.st")
    values = np.asarray(values, np.uint32)
    if not pack:
        cta.tmem[lanes, cols] = values
        return
    keep = np.uint32(0xFFFF0000)
    cta.tmem[lanes, cols] = (cta.tmem[lanes, cols] & keep) | (values & 0xFFFF)
    cta.tmem[lanes, cols + 1] = (cta.tmem[lanes, cols + 1] & keep) | (values >> 16)


# --------------------------------------------------------------------------------------------------
# tcgen05.alloc / dealloc / relinquish_alloc_permit (PTX ISA 9.7.16.7.1; CUTLASS tmem_allocator_sm100.hpp)
# --------------------------------------------------------------------------------------------------


def _check_ncols(ncols: int, what: str, note=None) -> int:
    """The columns an allocation of nCols takes. PTX ISA 9.7.16.7.1 (tcgen05.alloc): allocation unit is 32 columns x
    all 128 lanes, nCols a power of 2 in [32, 512]; CUTLASS tmem_allocator_sm100.hpp Allocator1Sm/2Sm: "Must be 32 <=
    num_columns <= 512 and power of 2". Another count in (0, 512] ran on a B200 (precedents.JIAB_ALLOC_136): with
    `note`, a Note and the next power of 2, at least 32 (what the hardware takes is not published: the most a
    power-of-2 allocator could); without, a Hazard."""
    if 32 <= ncols <= TMEM_COLUMNS and not ncols & (ncols - 1):
        return ncols
    detail = f"{what}: nCols = {ncols} must be a power of 2 in [32, 512]"
    if note is None or not 0 < ncols <= TMEM_COLUMNS:
        raise Hazard(detail)
    taken = max(32, 1 << (ncols - 1).bit_length())
    note("tcgen05-alloc-columns-not-power-of-two", f"{detail} (PTX ISA 9.7.16.7.1); taken as {taken} columns")
    return taken


def tmem_alloc(group: list, ncols: int, note=None) -> int:
    """tcgen05.alloc.cta_group::len(group): allocate ncols columns (all 128 lanes) in every CTA of the group
    and return the tensor-memory address (lane 0, column c) that the instruction writes to shared memory.
    Call once per collective allocation (for cta_group::2: once for the pair, not once per warp).
    Placement: the lowest column that is a multiple of ncols and free in every CTA of the group (the ISA
    leaves placement to the implementation; natural alignment is our choice). Hazard when the CTA has
    relinquished its allocation permit, or when no space is free (the hardware would block; nothing else
    frees columns in this emulator's one-CTA-per-SM model). note: as _check_ncols's."""
    _check_group(group)
    ncols = _check_ncols(ncols, "tcgen05.alloc", note)
    for cta in group:
        if cta.relinquished:
            raise Hazard(f"tcgen05.alloc after tcgen05.relinquish_alloc_permit in CTA {cta.ctaid} (PTX ISA 9.7.16.7.1)")
    for col in range(0, TMEM_COLUMNS, ncols):
        if all(not any(a.column < col + ncols and col < a.column + a.ncols for a in cta.tmem_allocs) for cta in group):
            for cta in group:
                cta.tmem_allocs.append(TensorMemoryAllocation(col, ncols))
                cta.tmem[:, col:col + ncols] = POISON_WORD  # a new allocation holds nothing the kernel wrote
            return col  # lane 0 << 16 | col
    raise Hazard(f"tcgen05.alloc of {ncols} columns: not enough free tensor memory in CTA(s) "
                 f"{[c.ctaid for c in group]} (the allocation would block forever)")


def tmem_dealloc(group: list, taddr: int, ncols: int, note=None) -> None:
    """tcgen05.dealloc.cta_group::len(group) taddr, ncols: free an allocation made by tcgen05.alloc (same
    address and column count) in every CTA of the group. The freed columns keep their data until an allocation takes
    them (which poisons them), as hardware's do: a read after the dealloc is emu.ordering's DEALLOC_WHILE_READ."""
    _check_group(group)
    ncols = _check_ncols(ncols, "tcgen05.dealloc", note)
    lane, col = split_taddr(taddr)
    if lane != 0:
        raise Hazard(f"tcgen05.dealloc address {taddr:#x}: lane field must be 0")
    for cta in group:
        match = [a for a in cta.tmem_allocs if a.column == col and a.ncols == ncols]
        if not match:
            raise Hazard(f"tcgen05.dealloc of ({col}, {ncols}) in CTA {cta.ctaid}: no such allocation "
                         f"(allocations: {[(a.column, a.ncols) for a in cta.tmem_allocs]})")
    for cta in group:
        cta.tmem_allocs.remove(next(a for a in cta.tmem_allocs if a.column == col and a.ncols == ncols))


def tmem_relinquish(group: list) -> None:
    """tcgen05.relinquish_alloc_permit.cta_group::len(group): the CTA(s) may not allocate again."""
    _check_group(group)
    for cta in group:
        cta.relinquished = True


def tmem_check_all_freed(cta: Cta) -> None:
    """At CTA exit every allocation must have been deallocated (PTX ISA 9.7.16.7.1)."""
    if cta.tmem_allocs:
        raise Hazard(f"CTA {cta.ctaid} exits with tensor memory still allocated: "
                     f"{[(a.column, a.ncols) for a in cta.tmem_allocs]}")
