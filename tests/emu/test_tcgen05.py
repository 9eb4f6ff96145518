"""emu.tcgen05 / emu.numerics: descriptors, operand fetch, block-scaled MMA, tcgen05.cp / ld, TMEM allocation.

The expected values here are built independently of the code under test:
- shared-memory tiles are written with the TMA SWIZZLE_128B placement rule ("16-byte chunk c of row i is
  stored at chunk c ^ (i % 8) of that row's 128 bytes", 8-row groups 1024 bytes apart), not with the
  address-bit XOR that emu.tcgen05 uses;
- scale factors are decoded with torch.float8_e4m3fn, FP4 with the e2m1 formula 2^(e-1) * (1 + m/2);
- the reference product is a per-k-block einsum in float64.
"""

import numpy as np
import pytest
import torch

from emu import numerics, tcgen05
from emu.state import POISON_WORD, TMEM_LANES, Cluster, Cta, Hazard, Unsupported
from emu.tcgen05 import (
    decode_instr_descriptor,
    decode_smem_descriptor,
    mma,
    read_operand,
    tmem_alloc,
    tmem_check_all_freed,
    tmem_copy,
    tmem_dealloc,
    tmem_fragment,
    tmem_load,
    tmem_relinquish,
    tmem_store,
)
from tests.emu.ptx_kit import kernel_text, run_ptx, wait_loop

SMEM_BYTES = 200 * 1024
AB_DESC = 0x4000404000010000  # SW128, SBO 1024, LBO 16, version 1 (from the kernel's PTX)
SF_DESC = 0x400800010000       # no swizzle, SBO 128, LBO 16, version 1
IDESC_128x64 = 0x08100480
IDESC_128x128 = 0x08200480
IDESC_256x64 = 0x10100480
IDESC_256x128 = 0x10200480     # same encoding rule, N = 128


def make_cluster(n):
    cluster = Cluster((0, 0, 0), (n, 1, 1))
    for r in range(n):
        cluster.ctas.append(Cta((r, 0, 0), r, cluster, np.full(SMEM_BYTES, 0xFF, np.uint8)))
    return cluster


def desc_at(desc, addr):
    return desc | ((addr & 0x3FFFF) >> 4)


# ---------------------------------------------------------------- independent reference helpers

def e2m1_ref(codes):
    codes = np.asarray(codes, np.int64)
    sign = np.where(codes & 8, -1.0, 1.0)
    e, m = (codes >> 1) & 3, codes & 1
    mag = np.where(e == 0, 0.5 * m, 2.0 ** (e - 1) * (1 + 0.5 * m))
    return sign * mag


def e4m3_ref(data):
    t = torch.from_numpy(np.ascontiguousarray(data, np.uint8)).view(torch.float8_e4m3fn)
    return t.to(torch.float64).numpy()


def place_sw128_tile(smem, base, codes):
    """codes [R, 256] (one K stage, 128 bytes per row) -> smem at base (1024-aligned), TMA SWIZZLE_128B placement."""
    assert base % 1024 == 0
    rows = codes.shape[0]
    packed = (codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)  # [R, 128], element 2i in the low nibble
    for i in range(rows):
        for chunk in range(8):
            dst = base + i * 128 + (chunk ^ (i % 8)) * 16
            smem[dst:dst + 16] = packed[i, chunk * 16:(chunk + 1) * 16]


def sf_atom_bytes(sf):
    """sf [128, 4] bytes -> 512-byte atom: byte r*16 + g*4 + k = scale of MN row g*32 + r, K block k."""
    atom = np.empty(512, np.uint8)
    for r in range(32):
        for g in range(4):
            for k in range(4):
                atom[r * 16 + g * 4 + k] = sf[g * 32 + r, k]
    return atom


def ref_product(a_codes, sfa, b_codes, sfb, d0=None):
    """float64 reference: sum over k-blocks of (A_blk * sa) @ (B_blk * sb)^T, then one fp32 rounding."""
    a, b = e2m1_ref(a_codes), e2m1_ref(b_codes)
    sa, sb = e4m3_ref(sfa), e4m3_ref(sfb)
    acc = np.zeros((a.shape[0], b.shape[0]))
    for blk in range(4):
        ks = slice(16 * blk, 16 * blk + 16)
        acc += np.einsum("mk,nk->mn", a[:, ks] * sa[:, blk:blk + 1], b[:, ks] * sb[:, blk:blk + 1])
    if d0 is not None:
        acc += d0.astype(np.float64)
    return acc.astype(np.float32)


def read_d(cta, d_col, n):
    """D [128, n] fp32 via four warps' tcgen05.ld.32x32b."""
    out = np.empty((128, n), np.uint32)
    for w in range(4):
        for c0 in range(0, n, 128):
            w_n = min(128, n - c0)
            out[32 * w:32 * w + 32, c0:c0 + w_n] = tmem_load(cta, (32 * w << 16) | (d_col + c0), w, w_n, "32x32b")
    return out.view(np.float32)


# ---------------------------------------------------------------- numerics

def test_e2m1_table():
    assert list(numerics.E2M1_TABLE[:8]) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert list(numerics.E2M1_TABLE[8:]) == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    np.testing.assert_array_equal(numerics.E2M1_TABLE, e2m1_ref(np.arange(16)))


def test_e4m3fn_matches_torch_incl_nan_and_subnormals():
    got = numerics.e4m3fn_to_float(np.arange(256, dtype=np.uint8))
    ref = e4m3_ref(np.arange(256, dtype=np.uint8))
    np.testing.assert_array_equal(got, ref)  # NaN == NaN for assert_array_equal
    assert np.isnan(got[0x7F]) and np.isnan(got[0xFF])
    assert got[0x01] == 2.0 ** -9 and got[0x7E] == 448.0


def test_fp4_pack_roundtrip_low_nibble_first():
    codes = np.array([[1, 2, 3, 4]], np.uint8)
    packed = numerics.pack_fp4(codes)
    assert list(packed[0]) == [0x21, 0x43]
    np.testing.assert_array_equal(numerics.unpack_fp4(packed), codes)


def test_round_to_fp32_is_rne():
    x = np.array([1.0 + 2.0 ** -24, 1.0 + 3 * 2.0 ** -24])
    assert list(numerics.round_to_fp32(x)) == [np.float32(1.0), np.float32(1.0 + 2.0 ** -22)]


# ---------------------------------------------------------------- descriptors

def test_decode_ab_descriptor():
    d = decode_smem_descriptor(AB_DESC | (0x3A40 >> 4))
    assert (d.start_address, d.leading_byte_offset, d.stride_byte_offset) == (0x3A40, 16, 1024)
    assert (d.version, d.base_offset, d.lbo_mode, d.layout) == (1, 0, 0, "128B")


def test_decode_scale_descriptor():
    d = decode_smem_descriptor(SF_DESC | (0x1200 >> 4))
    assert (d.start_address, d.leading_byte_offset, d.stride_byte_offset, d.layout) == (0x1200, 16, 128, "none")


def test_descriptor_rejects_bad_fixed_bits_and_swizzle():
    with pytest.raises(Hazard, match=r"bits \[46,49\) must be the fixed constant 0b001"):
        decode_smem_descriptor(AB_DESC & ~(1 << 46))  # version 0
    with pytest.raises(Hazard, match=r"swizzling mode 3 is invalid"):
        decode_smem_descriptor((AB_DESC & ~(7 << 61)) | (3 << 61))  # swizzle mode 3 is invalid


@pytest.mark.parametrize("idesc,m,n", [(IDESC_128x64, 128, 64), (IDESC_128x128, 128, 128), (IDESC_256x64, 256, 64)])
def test_decode_instr_descriptor(idesc, m, n):
    d = decode_instr_descriptor(idesc, "mxf4nvf4")
    assert (d.m, d.n, d.k) == (m, n, 64)
    assert (d.a_format, d.b_format, d.scale_format) == ("e2m1", "e2m1", "ue4m3")
    assert (d.a_sf_id, d.b_sf_id, d.negate_a, d.negate_b, d.transpose_a, d.transpose_b, d.sparse) == (0, 0, False, False, False, False, False)


def test_instr_descriptor_rejections():
    with pytest.raises(Hazard, match=r"kind::f16 with an F16 D needs F16 inputs, got bf16"):
        decode_instr_descriptor(IDESC_128x64, "f16")  # Table 42 codes read as kind::f16: dtype F16 (0), atype BF16 (1)
    with pytest.raises(Hazard, match=r"transpose A/B is not supported for kind::mxf4nvf4"):
        decode_instr_descriptor(IDESC_128x64 | (1 << 15), "mxf4nvf4")  # transpose A: not for mxf4nvf4
    with pytest.raises(Unsupported, match=r"sparse A \(bits \[0,3\)\) is not implemented"):
        decode_instr_descriptor(IDESC_128x64 | (1 << 2), "mxf4nvf4")  # sparse
    assert decode_instr_descriptor(IDESC_128x64 | (1 << 23), "mxf4nvf4").scale_format == "ue8m0"
    assert decode_instr_descriptor(IDESC_128x64 | (2 << 29) | (1 << 4), "mxf4nvf4").a_sf_id == 2


# ---------------------------------------------------------------- operand fetch

@pytest.mark.parametrize("base", [0, 2048, 9 * 1024])
def test_read_operand_sw128_every_k_block(base):
    rng = np.random.default_rng(base)
    rows = 128
    smem = np.full(SMEM_BYTES, 0xFF, np.uint8)
    codes = rng.integers(0, 16, (rows, 256), dtype=np.uint8)
    place_sw128_tile(smem, base, codes)
    read = lambda a, n: smem[a:a + n]  # noqa: E731
    for kb in range(4):
        got = read_operand(read, decode_smem_descriptor(desc_at(AB_DESC, base + 32 * kb)), rows, 64, 4)
        np.testing.assert_array_equal(got, codes[:, 64 * kb:64 * kb + 64])


@pytest.mark.parametrize("base", [1024 + 128, 2048 + 256, 4096 + 896])
def test_read_operand_sw128_starting_inside_an_atom(base):
    """arseni_ivanov's 128-byte-aligned buffers: the operand starts in row 1..7 of a 1024-byte SW128 atom and the
    descriptor's base_offset is 0. A TMA SWIZZLE_128B load places 16-byte chunk c of the row at address a at chunk
    c ^ ((a >> 7) & 7) (a function of the absolute address; tests/calibration/test_tma_gpu.py, H200), so the swizzle
    pattern still starts at 1024-byte boundaries and base_offset 0 is right (PTX ISA 9.7.16.4.1: it is the pattern's
    start that matters): the MMA reads the tile back."""
    rng = np.random.default_rng(base)
    rows = 128
    smem = np.full(SMEM_BYTES, 0xFF, np.uint8)
    codes = rng.integers(0, 16, (rows, 256), dtype=np.uint8)
    packed = (codes[:, 0::2] & 0xF) | ((codes[:, 1::2] & 0xF) << 4)
    for i in range(rows):
        row = base + i * 128
        for chunk in range(8):
            dst = row + (chunk ^ ((row >> 7) & 7)) * 16
            smem[dst:dst + 16] = packed[i, chunk * 16:(chunk + 1) * 16]
    for kb in range(4):
        got = read_operand(lambda a, n: smem[a:a + n], decode_smem_descriptor(desc_at(AB_DESC, base + 32 * kb)),
                           rows, 64, 4)
        np.testing.assert_array_equal(got, codes[:, 64 * kb:64 * kb + 64])


def test_read_operand_no_swizzle_core_matrices():
    # K-major, no swizzle: core matrix = 8 rows x 16 bytes contiguous; LBO between K chunks, SBO between 8-row groups.
    rng = np.random.default_rng(1)
    smem = np.zeros(SMEM_BYTES, np.uint8)
    rows, lbo, sbo, base = 16, 128, 256, 4096
    codes = rng.integers(0, 16, (rows, 64), dtype=np.uint8)
    packed = numerics.pack_fp4(codes)  # [16, 32]
    for i in range(rows):
        for c in range(2):
            dst = base + (i // 8) * sbo + c * lbo + (i % 8) * 16
            smem[dst:dst + 16] = packed[i, 16 * c:16 * c + 16]
    desc = (1 << 46) | ((sbo >> 4) << 32) | ((lbo >> 4) << 16) | (base >> 4)
    got = read_operand(lambda a, n: smem[a:a + n], decode_smem_descriptor(desc), rows, 64, 4)
    np.testing.assert_array_equal(got, codes)


def test_read_operand_rejects_k_extent_crossing_the_swizzle_row():
    smem = np.zeros(SMEM_BYTES, np.uint8)
    with pytest.raises(Hazard, match=r"operand K extent \[112, 144\) crosses the 128-byte swizzle row"):
        read_operand(lambda a, n: smem[a:a + n], decode_smem_descriptor(desc_at(AB_DESC, 112)), 128, 64, 4)


# ---------------------------------------------------------------- tcgen05.cp and tcgen05.ld

def test_cp_32x128b_warpx4_then_read_back():
    rng = np.random.default_rng(7)
    cta = make_cluster(1).ctas[0]
    col = tmem_alloc([cta], 64)
    atom = rng.integers(0, 256, 512, dtype=np.uint8)
    cta.smem[0x2000:0x2200] = atom
    tmem_copy([cta], col + 8, desc_at(SF_DESC, 0x2000))
    for w in range(4):
        regs = tmem_load(cta, (32 * w << 16) | (col + 8), w, 4, "32x32b")  # [32 threads, 4 words]
        got = regs.view(np.uint8).reshape(32, 16)  # little-endian bytes of each lane's 4 words
        np.testing.assert_array_equal(got, atom.reshape(32, 16))  # lane 32w + r holds row r's 16 bytes
    assert np.all(cta.tmem[:, col + 12:] == POISON_WORD)


def test_cp_cta_group_2_copies_each_ctas_own_smem():
    ctas = make_cluster(2).ctas
    col = tmem_alloc(ctas, 32)
    for i, cta in enumerate(ctas):
        cta.smem[0x400:0x600] = i + 1
    tmem_copy(ctas, col, desc_at(SF_DESC, 0x400))
    assert np.all(ctas[0].tmem[:, col:col + 4] == 0x01010101)
    assert np.all(ctas[1].tmem[:, col:col + 4] == 0x02020202)


def test_ld_quadrant_rule_and_allocation():
    """emu.tcgen05.tmem_ld_first_lane: the quadrant is the warp's (warp % 4), the lane field is an offset mod 32."""
    cta = make_cluster(1).ctas[0]
    col = tmem_alloc([cta], 32)
    cta.tmem[:, col] = np.arange(128, dtype=np.uint32)
    assert (tmem_load(cta, (64 << 16) | col, 2, 1, "32x32b")[:, 0] == np.arange(64, 96)).all()  # warp 2: lanes 64..95
    assert (tmem_load(cta, (64 << 16) | col, 6, 1, "32x32b")[:, 0] == np.arange(64, 96)).all()  # warp 6 likewise
    # a field naming another quadrant reads the warp's own (novus677's epilogue, gau-nernst v2's odd CTA)
    assert (tmem_load(cta, (0 << 16) | col, 1, 1, "32x32b")[:, 0] == np.arange(32, 64)).all()
    assert (tmem_load(cta, (128 << 16) | col, 3, 1, "32x32b")[:, 0] == np.arange(96, 128)).all()
    assert tcgen05.tmem_ld_first_lane(16, 1, 16, "ld") == (48, True)
    assert tcgen05.tmem_ld_first_lane(32 + 16, 1, 16, "ld") == (48, False)
    with pytest.raises(Hazard, match=r"lane offset 16: 32 lanes from there leave the warp's 32-lane quadrant"):
        tmem_load(cta, (16 << 16) | col, 0, 1, "32x32b")  # 32 lanes from offset 16 leave the quadrant
    with pytest.raises(Hazard, match=r"columns \[16, 48\) are not inside one tensor-memory allocation"):
        tmem_load(cta, col + 16, 0, 32, "32x32b")  # columns 16..47 run past the 32-column allocation


def test_alloc_rules():
    cta = make_cluster(1).ctas[0]
    for bad in (16, 48, 1024, 0):
        with pytest.raises(Hazard, match=fr"nCols = {bad} must be a power of 2 in \[32, 512\]"):
            tmem_alloc([cta], bad)
    a = tmem_alloc([cta], 128)
    b = tmem_alloc([cta], 256)
    assert (a, b) == (0, 256)
    c = tmem_alloc([cta], 64)
    assert c == 128
    with pytest.raises(Hazard, match=r"alloc of 256 columns: not enough free tensor memory .* would block forever"):
        tmem_alloc([cta], 256)  # 64 columns left: would block forever
    with pytest.raises(Hazard, match=r"dealloc of \(256, 128\) .*: no such allocation"):
        tmem_dealloc([cta], b, 128)  # wrong column count
    with pytest.raises(Hazard, match=r"dealloc address 0x10100: lane field must be 0"):
        tmem_dealloc([cta], (1 << 16) | b, 256)  # lane field set
    tmem_dealloc([cta], b, 256)
    tmem_relinquish([cta])
    with pytest.raises(Hazard, match=r"alloc after tcgen05.relinquish_alloc_permit"):
        tmem_alloc([cta], 32)  # permit relinquished
    with pytest.raises(Hazard, match=r"exits with tensor memory still allocated: \[\(0, 128\), \(128, 64\)\]"):
        tmem_check_all_freed(cta)
    tmem_dealloc([cta], a, 128)
    tmem_dealloc([cta], c, 64)
    tmem_check_all_freed(cta)


def test_alloc_cta_group_2_same_column_in_both():
    ctas = make_cluster(2).ctas
    tmem_alloc([ctas[1]], 32)  # only the odd CTA has columns 0..31 taken
    col = tmem_alloc(ctas, 32)
    assert col == 32 and all(any(a.column == 32 for a in c.tmem_allocs) for c in ctas)
    with pytest.raises(Hazard, match=r"cta_group::2 needs \[even CTA, its peer\]; got ranks 1, 0"):
        tmem_alloc([ctas[1], ctas[0]], 32)  # the pair must be [even, odd]


# ---------------------------------------------------------------- MMA

class Stage:
    """One CTA's operands for one 256-K stage: A/B tiles (SW128) and SF atoms (4 per stage, one per k-block)."""

    A_BASE, B_BASE, SFA_BASE, SFB_BASE = 0, 64 * 1024, 128 * 1024, 136 * 1024


def random_sf(rng, rows):
    # positive e4m3 bytes from subnormal (0x01) up to 0x5F (= 15); NaN/negatives excluded
    return rng.integers(0x01, 0x60, (rows, 16), dtype=np.uint8)


def load_cta(cta, a_codes, b_codes, sfa, sfb):
    place_sw128_tile(cta.smem, Stage.A_BASE, a_codes)
    place_sw128_tile(cta.smem, Stage.B_BASE, b_codes)
    for kb in range(4):
        cta.smem[Stage.SFA_BASE + 512 * kb:Stage.SFA_BASE + 512 * kb + 512] = sf_atom_bytes(sfa[:, 4 * kb:4 * kb + 4])
        cta.smem[Stage.SFB_BASE + 512 * kb:Stage.SFB_BASE + 512 * kb + 512] = sf_atom_bytes(sfb[:, 4 * kb:4 * kb + 4])


@pytest.mark.parametrize("n,idesc,upper", [(64, IDESC_128x64, False), (64, IDESC_128x64, True), (128, IDESC_128x128, False)])
def test_mma_1cta(n, idesc, upper):
    rng = np.random.default_rng(n + upper)
    cta = make_cluster(1).ctas[0]
    base = tmem_alloc([cta], 512)
    d_col, sfa_col, sfb_col = base, base + 256, base + 272
    a = rng.integers(0, 16, (128, 256), dtype=np.uint8)
    b_all = rng.integers(0, 16, (128, 256), dtype=np.uint8)  # an SFB atom covers 128 B rows
    sfa, sfb = random_sf(rng, 128), random_sf(rng, 128)
    n_off = 64 if upper else 0
    b = b_all[n_off:n_off + n]  # the N tile the MMA reads from shared memory
    load_cta(cta, a, b, sfa, sfb)
    expect = None
    for kb in (2, 0):  # first MMA overwrites (k-block 2), second accumulates (k-block 0)
        tmem_copy([cta], sfa_col, desc_at(SF_DESC, Stage.SFA_BASE + 512 * kb))
        tmem_copy([cta], sfb_col, desc_at(SF_DESC, Stage.SFB_BASE + 512 * kb))
        mma([cta], d_col, desc_at(AB_DESC, Stage.A_BASE + 32 * kb), desc_at(AB_DESC, Stage.B_BASE + 32 * kb),
                         idesc, sfa_col, sfb_col + (2 if upper else 0), accumulate=expect is not None, kind="mxf4nvf4")
        ks, ss = slice(64 * kb, 64 * kb + 64), slice(4 * kb, 4 * kb + 4)
        expect = ref_product(a[:, ks], sfa[:, ss], b[:, ks], sfb[n_off:n_off + n, ss], expect)
        np.testing.assert_allclose(read_d(cta, d_col, n), expect, rtol=2e-7, atol=0)


@pytest.mark.parametrize("n,idesc", [(64, IDESC_256x64), (128, IDESC_256x128)])
def test_mma_2cta(n, idesc):
    rng = np.random.default_rng(100 + n)
    ctas = make_cluster(2).ctas
    base = tmem_alloc(ctas, 512)
    d_col, sfa_col, sfb_col = base + 128, base + 256, base + 260
    a = rng.integers(0, 16, (256, 256), dtype=np.uint8)
    b = rng.integers(0, 16, (n, 256), dtype=np.uint8)
    sfa, sfb = random_sf(rng, 256), random_sf(rng, 128)
    half = n // 2
    for v, cta in enumerate(ctas):  # CTA v: A rows 128v.., B rows v*N/2.., its own SFA, the full SFB atom
        load_cta(cta, a[128 * v:128 * v + 128], b[half * v:half * v + half], sfa[128 * v:128 * v + 128], sfb)
    expect = None
    for kb in (1, 3):
        tmem_copy(ctas, sfa_col, desc_at(SF_DESC, Stage.SFA_BASE + 512 * kb))
        tmem_copy(ctas, sfb_col, desc_at(SF_DESC, Stage.SFB_BASE + 512 * kb))
        mma(ctas, d_col, desc_at(AB_DESC, Stage.A_BASE + 32 * kb), desc_at(AB_DESC, Stage.B_BASE + 32 * kb),
                         idesc, sfa_col, sfb_col, accumulate=expect is not None, kind="mxf4nvf4")
        ks, ss = slice(64 * kb, 64 * kb + 64), slice(4 * kb, 4 * kb + 4)
        expect = ref_product(a[:, ks], sfa[:, ss], b[:, ks], sfb[:n, ss], expect)
        got = np.concatenate([read_d(c, d_col, n) for c in ctas])  # CTA v holds D rows 128v..128v+127
        np.testing.assert_allclose(got, expect, rtol=2e-7, atol=0)


def _ready_1cta(n=64):
    rng = np.random.default_rng(5)
    cta = make_cluster(1).ctas[0]
    tmem_alloc([cta], 512)
    load_cta(cta, rng.integers(0, 16, (128, 256), dtype=np.uint8), rng.integers(0, 16, (n, 256), dtype=np.uint8),
             random_sf(rng, 128), random_sf(rng, 128))
    tmem_copy([cta], 256, desc_at(SF_DESC, Stage.SFA_BASE))
    tmem_copy([cta], 264, desc_at(SF_DESC, Stage.SFB_BASE))
    return cta


def _mma(cta, **kw):
    args = dict(d_taddr=0, a_desc=desc_at(AB_DESC, Stage.A_BASE), b_desc=desc_at(AB_DESC, Stage.B_BASE), idesc=IDESC_128x64,
                sfa_taddr=256, sfb_taddr=264, accumulate=False, kind="mxf4nvf4")
    args.update(kw)
    mma([cta], **args)


@pytest.mark.parametrize("change, rule", [
    ({"d_taddr": 64, "accumulate": True},  # accumulating into never-written D
     r"accumulates into tensor memory columns \[64, 128\) .* that hold no data \(enable-input-d true on unwritten D\)"),
    ({"sfb_taddr": 265}, r"SFB address 0x109: column 265 is not 2-column \(8-byte\) aligned"),
    ({"sfa_taddr": 300}, r"SFA: reads tensor memory columns \[300, 304\) .* that hold no data"),  # never written
    ({"idesc": IDESC_128x64 | (1 << 29)}, r"SFA: scale_vec::4X requires SF_ID = 0, got 1"),  # block16: SF_ID 0
    ({"d_taddr": 32 << 16}, r"D address 0x200000: lane field must be 0 for M = 128"),
])
def test_mma_hazards(change, rule):
    """Each misuse is refused under its own rule, and the same MMA without it is not."""
    cta = _ready_1cta()
    _mma(cta)  # the baseline is fine
    with pytest.raises(Hazard, match=rule):
        _mma(cta, **change)


def test_mma_refuses_scales_not_duplicated_across_the_four_partitions():
    cta = _ready_1cta()
    _mma(cta)
    cta.tmem[40, 257] ^= 1  # break the 4-partition duplication of SFA
    with pytest.raises(Hazard, match=r"scale factors in columns \[256, 260\) are not duplicated across the four "
                                     r"32-lane partitions"):
        _mma(cta)


def test_scales_per_lane_quadrant_are_a_note_and_each_datapath_reads_its_own():
    """jIab-b's B200-verified layout (emu.precedents.JIAB_SFA_PER_QUADRANT): SFA row 32g + r only in quadrant g of column
    base + g, the other words unwritten: the same D as duplicated scales, with a Note. SFB that differs in one
    quadrant changes only the D rows that quadrant's datapath computes."""
    cta = _ready_1cta()
    _mma(cta)
    want = read_d(cta, 0, 64).copy()
    notes = []
    for g in range(4):  # keep quadrant g's own column of SFA, unwrite the other three quadrants' copies of it
        for q in set(range(4)) - {g}:
            cta.tmem[32 * q:32 * q + 32, 256 + g] = POISON_WORD
    _mma(cta, note=lambda rule, detail: notes.append((rule, detail)))
    np.testing.assert_array_equal(read_d(cta, 0, 64), want)
    assert notes and {rule for rule, _ in notes} == {"tcgen05-scale-factors-not-duplicated"}
    assert "SFA: scale factors in columns [256, 260)" in notes[0][1]
    cta.tmem[32:64, 264] ^= np.uint32(0x01010101)  # SFB rows 0-31 as quadrant 1's datapath reads them
    _mma(cta, note=lambda rule, detail: notes.append((rule, detail)))
    got = read_d(cta, 0, 64)
    np.testing.assert_array_equal(np.delete(got, np.s_[32:64], axis=0), np.delete(want, np.s_[32:64], axis=0))
    assert not np.array_equal(got[32:64, :32], want[32:64, :32])
    np.testing.assert_array_equal(got[32:64, 32:], want[32:64, 32:])  # SFB rows 32-63: column 265, unchanged
    with pytest.raises(Hazard, match="not duplicated"):
        _mma(cta)  # without a note callback (a direct caller): the ISA's sentence, strictly


def test_alloc_of_a_count_outside_the_isa_is_a_note_where_a_b200_ran_it():
    """nCols = 136 (emu.precedents.JIAB_ALLOC_136): with a note callback, a Note and 256 columns taken (the most a
    power-of-2 allocator could); the dealloc of 136 frees them; without one, the ISA's rule as a Hazard."""
    cta = make_cluster(1).ctas[0]
    notes = []
    col = tmem_alloc([cta], 136, lambda rule, detail: notes.append(rule))
    assert col == 0 and [(a.column, a.ncols) for a in cta.tmem_allocs] == [(0, 256)]
    assert notes == ["tcgen05-alloc-columns-not-power-of-two"]
    assert tmem_alloc([cta], 256) == 256
    tcgen05.tmem_dealloc([cta], 0, 136, lambda rule, detail: notes.append(rule))
    assert [(a.column, a.ncols) for a in cta.tmem_allocs] == [(256, 256)]
    with pytest.raises(Hazard, match=r"nCols = 136 must be a power of 2"):
        tmem_alloc([cta], 136)
    with pytest.raises(Hazard, match=r"nCols = 1024 must be a power of 2"):
        tmem_alloc([cta], 1024, lambda rule, detail: None)


def test_mma_with_m_256_needs_the_pair():
    cta = _ready_1cta()
    with pytest.raises(Hazard, match=r"cta_group::1 M = 256: must be 64 or 128 \(PTX ISA Table 39\)"):
        _mma(cta, idesc=IDESC_256x64)  # M = 256 needs cta_group::2


def test_negate_a():
    cta = _ready_1cta()
    _mma(cta)
    d = read_d(cta, 0, 64).copy()
    _mma(cta, idesc=IDESC_128x64 | (1 << 13))
    np.testing.assert_array_equal(read_d(cta, 0, 64), -d)


def test_mma_2cta_needs_scales_in_both_ctas():
    rng = np.random.default_rng(11)
    ctas = make_cluster(2).ctas
    tmem_alloc(ctas, 512)
    for cta in ctas:
        load_cta(cta, rng.integers(0, 16, (128, 256), dtype=np.uint8), rng.integers(0, 16, (32, 256), dtype=np.uint8),
                 random_sf(rng, 128), random_sf(rng, 128))
    tmem_copy(ctas, 256, desc_at(SF_DESC, Stage.SFA_BASE))
    tmem_copy(ctas[:1], 260, desc_at(SF_DESC, Stage.SFB_BASE))  # SFB copied into the even CTA only
    with pytest.raises(Hazard, match=r"SFB: reads tensor memory columns \[260, 262\) of CTA \(1, 0, 0\) that hold no data"):
        mma(ctas, 0, desc_at(AB_DESC, Stage.A_BASE), desc_at(AB_DESC, Stage.B_BASE), IDESC_256x64,
                         256, 260, False, "mxf4nvf4")
    tmem_copy(ctas, 260, desc_at(SF_DESC, Stage.SFB_BASE))
    mma(ctas, 0, desc_at(AB_DESC, Stage.A_BASE), desc_at(AB_DESC, Stage.B_BASE), IDESC_256x64,
                     256, 260, False, "mxf4nvf4")


# ------------------------------------------------------------------ 16x256b loads, lane fields above 127 (gau-nernst)
def _pair():
    cl = Cluster((0, 0, 0), (2, 1, 1))
    for r in range(2):
        cl.ctas.append(Cta((r, 0, 0), r, cl, np.zeros(1024, np.uint8)))
    return cl


def test_ld_16x256b_fragment():
    """Thread t, register 4i + 2h + c <- lane base + t//4 + 8h, column col + 8i + 2(t%4) + c (CUTLASS
    SM100_TMEM_LOAD_16dp256b1x/2x DstLayout)."""
    cta = _pair().ctas[0]
    col = tmem_alloc([cta], 32)
    lanes, cols = np.meshgrid(np.arange(TMEM_LANES), np.arange(512), indexing="ij")
    cta.tmem[:, :] = (lanes << 16 | cols).astype(np.uint32)
    v = tmem_load(cta, (48 << 16) | col, 1, 2, "16x256b")  # warp 1, lanes 48..63, 2 repetitions
    assert v.shape == (32, 8)
    for t in range(32):
        for r in range(8):
            i, h, c = r // 4, (r // 2) % 2, r % 2
            assert v[t, r] >> 16 == 48 + t // 4 + 8 * h
            assert v[t, r] & 0xFFFF == col + 8 * i + 2 * (t % 4) + c
    with pytest.raises(Hazard, match=r"16x256b by warp 1 at lane offset 24: 16 lanes from there leave the warp's 32-lane quadrant"):
        tmem_load(cta, (56 << 16) | col, 1, 1, "16x256b")  # lanes 56..71 cross out of warp 1's quadrant


def test_lane_field_above_127_reads_the_warps_quadrant():
    """gau-nernst v2's odd CTA reads lane field 128 + 32w + 16m: the warp's own quadrant w, offset 16m
    (emu.tcgen05.tmem_ld_first_lane), in either CTA of a pair."""
    cl = _pair()
    for cta in cl.ctas:
        tmem_alloc([cta], 32)
        cta.tmem[:, :32] = np.arange(TMEM_LANES, dtype=np.uint32)[:, None]
    odd, even = cl.ctas[1], cl.ctas[0]
    v = tmem_load(odd, (128 + 64) << 16, 2, 1, "32x32b")
    assert (v[:, 0] == np.arange(64, 96)).all()
    v = tmem_load(odd, (128 + 16) << 16, 0, 1, "16x256b")
    assert v[0, 0] == 16
    v = tmem_load(even, (128 + 64) << 16, 2, 1, "32x32b")
    assert (v[:, 0] == np.arange(64, 96)).all()
    with pytest.raises(Hazard, match=r"16x256b by warp 0 at lane offset 24: 16 lanes from there leave the warp's 32-lane quadrant"):
        tmem_load(odd, (128 + 24) << 16, 0, 1, "16x256b")  # offset 24 + 16 lanes leave the quadrant


# ------------------------------------------------------------------ tcgen05.st
@pytest.mark.parametrize("shape, num, per_rep", [("32x32b", 4, 1), ("16x256b", 2, 4), ("16x64b", 2, 1),
                                                 ("16x128b", 2, 2), ("16x32bx2", 2, 1)])
def test_st_writes_what_ld_of_the_same_shape_reads(shape, num, per_rep):
    """PTX ISA 9.7.16.8.4: tcgen05.st moves the same matrix fragments as tcgen05.ld of its shape, the other way; each
    shape's fragment covers its lanes x columns once (a bijection)."""
    cta = Cta((0, 0, 0), 0, None, np.zeros(1024, np.uint8))
    col = tmem_alloc([cta], 32)
    values = np.arange(32 * num * per_rep, dtype=np.uint32).reshape(32, num * per_rep) + 7
    half = 8 if shape == "16x32bx2" else 0
    tmem_store(cta, (32 << 16) | col, 1, num, shape, values, half_offset=half)  # warp 1: its quadrant, lanes 32..
    assert (tmem_load(cta, (32 << 16) | col, 1, num, shape, half_offset=half) == values).all()
    assert (cta.tmem[:32] == POISON_WORD).all()  # warp 0's quadrant untouched
    lanes, cols = tmem_fragment(shape, num, half)
    assert len({(a, b) for a, b in zip(lanes.ravel(), cols.ravel())}) == lanes.size  # no cell twice
    with pytest.raises(Hazard, match="quadrant"):
        tmem_store(cta, (16 << 16) | col, 0, num, "32x32b", values[:, :num])


ST_THEN_LD = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 32;
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    add.u32 %r2, %r1, 100;
    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r20], {%r2};
    WAIT_ST
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r3}, [%r20];
    tcgen05.wait::ld.sync.aligned;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    ret;
"""


def test_st_lands_at_wait_st():
    """tcgen05.st is asynchronous until tcgen05.wait::st (PTX ISA 9.7.16.8.5): after the wait a load reads the stored
    words; without it, what the columns held before (the emulator writes as late as the ISA allows)."""

    ran = run_ptx(kernel_text(ST_THEN_LD.replace("WAIT_ST", "tcgen05.wait::st.sync.aligned;")), threads=32)
    assert (ran.words[:32] == np.arange(32) + 100).all()
    ran = run_ptx(kernel_text(ST_THEN_LD.replace("    WAIT_ST\n", "")), threads=32)
    assert (ran.words[:32] == POISON_WORD).all()


def test_ld_fragments_are_cutlass_s():
    """Spot values of each shape's map (CUTLASS copy_traits_sm100.hpp, DstLayout of SM100_TMEM_LOAD_*1x): thread t,
    register r -> (lane, column)."""
    at = lambda shape, t, r, num=1, half=0: tuple(int(x[t, r]) for x in tmem_fragment(shape, num, half))  # noqa: E731
    assert at("16x64b", 1, 0) == (8, 0) and at("16x64b", 2, 0) == (0, 1) and at("16x64b", 5, 1, 2) == (9, 2)
    assert at("16x128b", 6, 1) == (9, 2) and at("16x128b", 3, 2, 2) == (0, 7)
    assert at("16x256b", 5, 3) == (9, 3) and at("16x256b", 0, 4, 2) == (0, 8)
    assert at("16x32bx2", 17, 1, 2, 40) == (1, 41) and at("32x32b", 9, 3, 4) == (9, 3)


def test_pack_16b_joins_the_low_halves_of_two_adjacent_columns():
    """.pack::16b (tcgen05.ld) / .unpack::16b (tcgen05.st): a register holds the low 16 bits of columns 2c (its low
    half) and 2c + 1 (CUTLASS SM100_TMEM_LOAD_32dp32b1x_16b); a store leaves the columns' upper halves as they were."""
    cta = Cta((0, 0, 0), 0, None, np.zeros(1024, np.uint8))
    col = tmem_alloc([cta], 32)
    cta.tmem[:, col:col + 4] = (np.arange(4, dtype=np.uint32) + 1) * 0x10001 + (np.arange(128, dtype=np.uint32) << 8)[:, None]
    words = tmem_load(cta, col, 0, 2, "32x32b", pack=True)  # 2 registers over columns 0-3
    assert words.shape == (32, 2) and words[5, 1] == ((int(cta.tmem[5, col + 2]) & 0xFFFF) | (int(cta.tmem[5, col + 3]) & 0xFFFF) << 16)
    tmem_store(cta, col, 0, 2, "32x32b", np.full((32, 2), 0xBEEF1234, np.uint32), pack=True)
    assert cta.tmem[3, col + 2] & 0xFFFF == 0x1234 and cta.tmem[3, col + 3] & 0xFFFF == 0xBEEF
    assert cta.tmem[3, col + 3] >> 16 == (4 * 0x10001 + (3 << 8)) >> 16  # the upper half kept


def test_every_ld_st_shape_decodes_and_round_trips_in_ptx():
    """The forms PTX ISA 9.7.16.8.3-4 define beside .32x32b: .16x64b, .16x128b, .16x32bx2 (its immHalfSplitoff
    operand: after the address for ld, before the registers for st) and .unpack::16b / .pack::16b, run through the
    decoder: a store then a load of the same form gives the stored words back."""

    forms = [("16x64b.x1", "", "{%r2}", "{%r3}"), ("16x128b.x1", "", "{%r2, %r2}", "{%r3, %r4}"),
             ("16x32bx2.x1", ", 2", "{%r2}", "{%r3}"), ("32x32b.x1", "", "{%r2}", "{%r3}")]
    for form, half, src, dst in forms:
        for unpack, pack in (("", ""), (".unpack::16b", ".pack::16b")):
            body = ST_THEN_LD.replace("WAIT_ST", "tcgen05.wait::st.sync.aligned;").replace(
                "tcgen05.st.sync.aligned.32x32b.x1.b32 [%r20], {%r2};",
                f"tcgen05.st.sync.aligned.{form}{unpack}.b32 [%r20]{half}, {src};").replace(
                "tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r3}, [%r20];",
                f"tcgen05.ld.sync.aligned.{form}{pack}.b32 {dst}, [%r20]{half};")
            ran = run_ptx(kernel_text(body), threads=32)
            assert (ran.words[:32] == np.arange(32) + 100).all(), (form, pack)


@pytest.mark.parametrize("shape, multicast, lanes_of_row", [
    ("128x256b", None, lambda r: [r]), ("128x128b", None, lambda r: [r]), ("4x256b", None, lambda r: [32 * r]),
    ("64x128b", "warpx2::02_13", lambda r: [r, r + 64]),
    ("64x128b", "warpx2::01_23", lambda r: [64 * (r // 32) + r % 32, 64 * (r // 32) + r % 32 + 32]),
    ("32x128b", "warpx4", lambda r: [r, r + 32, r + 64, r + 96])])
def test_cp_shapes_land_each_source_row_in_its_lanes(shape, multicast, lanes_of_row):
    """tcgen05.cp of every shape and multicast (PTX ISA 9.7.16.9.2): source row r (canonical K-major, no swizzle: 8-row
    core matrices SBO apart, 16-byte chunks LBO apart) lands in the lanes of the ISA's data-movement figures (Apache
    TVM's table), byte b in column b // 4; lanes of no row keep what they held."""
    rows, row_bytes = tcgen05.CP_SHAPES[(shape, multicast)]
    cta = Cta((0, 0, 0), 0, None, np.zeros(65536, np.uint8))
    col = tmem_alloc([cta], 32)
    desc = 0x400000000000 | (1024 >> 4) << 32 | (128 >> 4) << 16  # SBO 1024, LBO 128
    r = np.arange(rows)[:, None]
    j = np.arange(row_bytes)[None, :]
    addrs = 0x2000 + (r // 8) * 1024 + (r % 8) * 16 + (j // 16) * 128 + j % 16
    cta.smem[addrs] = ((r * 7 + j) % 251).astype(np.uint8)
    tcgen05.tmem_copy([cta], col, desc_at(desc, 0x2000), shape, multicast)
    written = set()
    for row in range(rows):
        want = ((row * 7 + np.arange(row_bytes)) % 251).astype(np.uint8).view("<u4")
        for lane in lanes_of_row(row):
            assert (cta.tmem[lane, col:col + row_bytes // 4] == want).all(), (row, lane)
            written.add(lane)
    assert all((cta.tmem[lane, col:col + 8] == POISON_WORD).all() for lane in set(range(128)) - written)


def test_cp_forms_decode_and_decompression_is_named():
    """PTX: tcgen05.cp.cta_group::1.128x256b (jIab-b's s_cp.py) decodes; the decompressing forms are unsupported by
    name (what the emulator lacks, not the file's fault)."""
    from emu.isa import decode_kernel
    from emu.ptx import parse_module

    decode_kernel(parse_module(kernel_text("    tcgen05.cp.cta_group::1.128x256b [%r1], %rd1;\n"
                                           "    tcgen05.cp.cta_group::2.64x128b.warpx2::01_23 [%r1], %rd1;\n    ret;")))
    with pytest.raises(Unsupported, match="decompression b4x16_p64, b8x16"):
        decode_kernel(parse_module(kernel_text("    tcgen05.cp.cta_group::1.128x128b.b8x16.b4x16_p64 [%r1], %rd1;\n")))


def test_a_in_tensor_memory_is_the_shared_operand_cp_128x256b_copied():
    """tcgen05.mma's [a-tmem] form (PTX ISA 9.7.16.10.9.1): A read from tensor memory after tcgen05.cp.128x256b
    copied it there (jIab-b's s_cp.py) is, element for element, the A the shared-memory form reads through the same
    canonical layout; unwritten columns are a Hazard."""
    cta = Cta((0, 0, 0), 0, None, np.zeros(65536, np.uint8))
    col = tmem_alloc([cta], 32)
    desc = 0x400000000000 | (1024 >> 4) << 32 | (128 >> 4) << 16  # no swizzle, SBO 1024, LBO 128
    rng = np.random.default_rng(3)
    sd = tcgen05.decode_smem_descriptor(desc_at(desc, 0x2000))
    addrs = tcgen05.operand_byte_addresses(sd, 128, 32)
    cta.smem[addrs] = rng.integers(0, 256, addrs.shape, dtype=np.uint8)
    with pytest.raises(Hazard, match="hold no data"):
        tcgen05.tmem_a_operand(cta, col, 64)
    tcgen05.tmem_copy([cta], col, desc_at(desc, 0x2000), "128x256b", None)
    from_smem = tcgen05.read_operand(lambda a, n: cta.smem[a:a + n], sd, 128, 64, 4)
    assert (tcgen05.tmem_a_operand(cta, col, 64) == from_smem).all()


# Warp 0 stores lane * 1000 + column into columns [8, 16) of its 32 lanes (a shift reaches past column 7), one thread
# shifts them down with tcgen05.shift, commits, and the warp loads them back into `out` (lane-major, 8 words a lane).
SHIFT = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 32;
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    add.u32 %r21, %r20, 8;
    mul.lo.u32 %r2, %r1, 1000;
    add.u32 %r10, %r2, 0;
    add.u32 %r11, %r2, 1;
    add.u32 %r12, %r2, 2;
    add.u32 %r13, %r2, 3;
    add.u32 %r14, %r2, 4;
    add.u32 %r15, %r2, 5;
    add.u32 %r16, %r2, 6;
    add.u32 %r17, %r2, 7;
    tcgen05.st.sync.aligned.32x32b.x8.b32 [%r21], {%r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17};
    tcgen05.wait::st.sync.aligned;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SHIFTED;
    mbarrier.init.shared.b64 [%r9], 1;
    SHIFT_OP
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r9];
SHIFTED:
""" + wait_loop(hint=None) + """    tcgen05.ld.sync.aligned.32x32b.x8.b32 {%r30, %r31, %r32, %r33, %r34, %r35, %r36, %r37}, [%r21];
    tcgen05.wait::ld.sync.aligned;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 32;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r30, %r31, %r32, %r33};
    st.global.v4.u32 [%rd3+16], {%r34, %r35, %r36, %r37};
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
    ret;
"""


def test_shift_moves_every_row_but_the_last_one_row_down():
    """PTX ISA 9.7.16.9.3: the 32-byte elements (8 columns) of rows L..L+30 move to L+1..L+31 (the last row's are
    gone); row L is what the ISA leaves unsaid, poisoned here. The reference is numpy's, from the stored values."""
    stored = np.arange(32)[:, None] * 1000 + np.arange(8)[None, :]
    ran = run_ptx(kernel_text(SHIFT.replace("SHIFT_OP", "tcgen05.shift.cta_group::1.down [%r21];")), threads=32,
                  out_words=256)
    got = ran.words[:256].reshape(32, 8)
    assert (got[1:] == stored[:-1]).all() and (got[0] == POISON_WORD).all()
    unshifted = run_ptx(kernel_text(SHIFT.replace("SHIFT_OP", "")), threads=32, out_words=256)
    assert (unshifted.words[:256].reshape(32, 8) == stored).all()  # the control: the same kernel without the shift


def test_shift_from_a_lane_not_aligned_to_32_is_a_hazard():
    with pytest.raises(Hazard, match="aligned to 32"):
        run_ptx(kernel_text(SHIFT.replace("SHIFT_OP", "add.u32 %r22, %r21, 1048576;\n    "
                                          "tcgen05.shift.cta_group::1.down [%r22];")), threads=32, out_words=256)
