"""tcgen05.mma kinds beside kind::mxf4nvf4 block16: kind::f16, tf32, f8f6f4 (8-bit types), i8, mxf8f6f4 (scale_vec::1X),
mxf4 and mxf4nvf4 with scale_vec::2X; MN-major operands; scale-input-d; the descriptor's rejections.

The expected values are built here from the PTX ISA's description, not with emu.tcgen05's helpers:
- shared-memory tiles are written with the TMA SWIZZLE_128B placement rule (16-byte chunk c of the 128-byte row at
  address a is stored at chunk c ^ ((a >> 7) & 7); K-major: one row of the matrix per 128-byte row, 8-row groups 1024
  bytes apart; MN-major: one K index per 128-byte row holding 128 bytes of MN, 8 K rows an atom, the next 8 K rows
  SBO further, the next 128 bytes of MN LBO further);
- element values come from torch's float16 / bfloat16 / float8 types and numpy integers, scale factors from 2^(e-127);
- D row i is read at lane i, column d_col + j (Layout D; M = 256: CTA i // 128, lane i % 128);
- the reference is a float64 product rounded once to fp32 (or the exact integer sum for kind::i8).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from emu import tcgen05
from emu.isa import decode_kernel
from emu.ptx import parse_module
from emu.state import POISON_WORD, Cluster, Cta, Hazard, Unsupported
from emu.tcgen05 import decode_instr_descriptor, mma, tmem_alloc
from tests.emu.ptx_kit import kernel_text, run_ptx, wait_loop

SMEM_BYTES = 160 * 1024
A_BASE, B_BASE = 0, 64 * 1024
SW128 = (2 << 61) | (1 << 46) | ((1024 >> 4) << 32) | (1 << 16)  # 128B swizzle, SBO 1024, LBO 16 (unused: K-major)


def cluster_of(n):
    cluster = Cluster((0, 0, 0), (n, 1, 1))
    for r in range(n):
        cluster.ctas.append(Cta((r, 0, 0), r, cluster, np.full(SMEM_BYTES, 0xFF, np.uint8)))
    return cluster.ctas


def desc(addr, base=SW128, lbo=None):
    d = base | ((addr & 0x3FFFF) >> 4)
    if lbo is not None:
        d = (d & ~(0x3FFF << 16)) | ((lbo >> 4) << 16)
    return d


def idesc(m, n, atype, btype, dtype=1, **bits):
    """Table 42 (dense kinds) / 43 (block-scaled), written from the ISA's bit table."""
    word = (dtype << 4) | (atype << 7) | (btype << 10) | ((n >> 3) << 17) | ((m >> 4) << 24)
    for name, pos in (("saturate", 3), ("neg_a", 13), ("neg_b", 14), ("t_a", 15), ("t_b", 16), ("ue8m0", 23)):
        word |= int(bits.get(name, 0)) << pos
    return word | (bits.get("a_sf_id", 0) << 29) | (bits.get("b_sf_id", 0) << 4)


def scaled_idesc(m, n, atype, btype, **bits):
    return idesc(m, n, atype, btype, dtype=0, **bits)  # Table 43 has no dtype: bits [4,6) are B's SF_ID


def place_rows(smem, base, rows):
    """rows [R, 128] bytes, one per 128-byte row from base (1024-aligned), TMA SWIZZLE_128B placement."""
    for i, row in enumerate(rows):
        addr = base + i * 128
        for c in range(8):
            dst = addr + (c ^ ((addr >> 7) & 7)) * 16
            smem[dst:dst + 16] = row[16 * c:16 * c + 16]


def k_major(smem, base, elements):
    """elements [R, 128 / esize] (any numpy dtype): row i's bytes in 128-byte row i."""
    place_rows(smem, base, np.ascontiguousarray(elements).view(np.uint8).reshape(elements.shape[0], 128))


def mn_major(smem, base, elements, lbo):
    """elements [R, K] with R * esize a multiple of 128: K row k of each 128-byte MN slice s at base + s * lbo +
    (k // 8) * 1024 + (k % 8) * 128."""
    raw = np.ascontiguousarray(elements.T).view(np.uint8)  # [K, R * esize]
    for s in range(raw.shape[1] // 128):
        for k in range(raw.shape[0]):
            place_rows(smem, base + s * lbo + (k // 8) * 1024 + (k % 8) * 128, raw[k:k + 1, 128 * s:128 * s + 128])


def d_of(cta, col, n, dtype=np.float32):
    return cta.tmem[:, col:col + n].copy().view(dtype)


def ready(n_cta=1):
    ctas = cluster_of(n_cta)
    tmem_alloc(ctas, 512)
    return ctas


def as_f64(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.float64).numpy()


# ---------------------------------------------------------------- kind::f16, tf32, f8f6f4, i8 (K-major)

@pytest.mark.parametrize("fmt,code", [("f16", 0), ("bf16", 1)])
def test_f16_kind_accumulates_over_two_k_blocks(fmt, code):
    rng = np.random.default_rng(code)
    (cta,) = ready()
    ttype = torch.float16 if fmt == "f16" else torch.bfloat16
    a = torch.from_numpy(rng.standard_normal((128, 64))).to(ttype)
    b = torch.from_numpy(rng.standard_normal((64, 64))).to(ttype)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    expect = np.zeros((128, 64))
    for step, kb in enumerate((1, 3)):  # K 16 = 32 bytes a block
        mma([cta], 0, desc(A_BASE + 32 * kb), desc(B_BASE + 32 * kb), idesc(128, 64, code, code), accumulate=step > 0,
            kind="f16")
        ks = slice(16 * kb, 16 * kb + 16)
        expect = expect + as_f64(a)[:, ks] @ as_f64(b)[:, ks].T
        np.testing.assert_allclose(d_of(cta, 0, 64), expect.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_tf32_reads_the_upper_19_bits_and_scale_input_d_scales_the_old_d():
    rng = np.random.default_rng(7)
    (cta,) = ready()
    a = rng.standard_normal((128, 32)).astype(np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float32)
    k_major(cta.smem, A_BASE, a)
    k_major(cta.smem, B_BASE, b)
    tf32 = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)  # 1-8-10 bits
    old = rng.standard_normal((128, 32)).astype(np.float32)
    cta.tmem[:, 64:96] = old.view(np.uint32)
    mma([cta], 64, desc(A_BASE + 32), desc(B_BASE + 32), idesc(128, 32, 2, 2), accumulate=True, kind="tf32",
        scale_input_d=3)
    expect = tf32(a[:, 8:16]) @ tf32(b[:, 8:16]).T + old.astype(np.float64) / 8
    np.testing.assert_allclose(d_of(cta, 64, 32), expect.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_f8f6f4_mixes_e4m3_and_e5m2_and_negates_b():
    rng = np.random.default_rng(3)
    (cta,) = ready()
    a = rng.integers(0, 256, (128, 128), dtype=np.uint8)
    b = rng.integers(0, 256, (16, 128), dtype=np.uint8)
    a[(a & 0x7F) == 0x7F] = 0x10  # no e4m3 NaN
    b[(b & 0x7C) == 0x7C] = 0x10  # no e5m2 inf / NaN
    k_major(cta.smem, A_BASE, a)
    k_major(cta.smem, B_BASE, b)
    mma([cta], 8, desc(A_BASE + 64), desc(B_BASE + 64), idesc(128, 16, 0, 1, neg_b=1), kind="f8f6f4")
    av = as_f64(torch.from_numpy(a[:, 64:96].copy()).view(torch.float8_e4m3fn))
    bv = as_f64(torch.from_numpy(b[:, 64:96].copy()).view(torch.float8_e5m2))
    np.testing.assert_allclose(d_of(cta, 8, 16), (av @ -bv.T).astype(np.float32), rtol=1e-6, atol=0)


def test_i8_is_exact_integer_arithmetic_with_saturate():
    rng = np.random.default_rng(4)
    (cta,) = ready()
    a = rng.integers(-128, 128, (128, 128)).astype(np.int8)
    b = rng.integers(0, 256, (32, 128)).astype(np.uint8)
    k_major(cta.smem, A_BASE, a)
    k_major(cta.smem, B_BASE, b)
    i8 = idesc(128, 32, 1, 0, dtype=2)  # s8 x u8 -> s32
    mma([cta], 0, desc(A_BASE), desc(B_BASE), i8, kind="i8")
    exact = a[:, :32].astype(np.int64) @ b[:, :32].astype(np.int64).T
    np.testing.assert_array_equal(d_of(cta, 0, 32, np.int32), exact)
    cta.tmem[:, 0:32] = np.full((128, 32), 2 ** 31 - 1, np.int32).view(np.uint32)  # D at the s32 maximum
    with pytest.raises(Hazard, match="beyond the s32 range without the saturate bit"):
        mma([cta], 0, desc(A_BASE + 32), desc(B_BASE + 32), i8, accumulate=True, kind="i8")
    mma([cta], 0, desc(A_BASE + 32), desc(B_BASE + 32), i8 | (1 << 3), accumulate=True, kind="i8")
    second = a[:, 32:64].astype(np.int64) @ b[:, 32:64].astype(np.int64).T + 2 ** 31 - 1
    np.testing.assert_array_equal(d_of(cta, 0, 32, np.int32), np.clip(second, -2 ** 31, 2 ** 31 - 1))


def test_f16_kind_on_a_cta_pair_splits_a_and_b():
    rng = np.random.default_rng(11)
    ctas = ready(2)
    a = torch.from_numpy(rng.standard_normal((256, 64))).to(torch.float16)
    b = torch.from_numpy(rng.standard_normal((64, 64))).to(torch.float16)
    for v, cta in enumerate(ctas):  # CTA v: A rows 128v.., B rows 32v..
        k_major(cta.smem, A_BASE, a[128 * v:128 * v + 128].view(torch.int16).numpy())
        k_major(cta.smem, B_BASE, b[32 * v:32 * v + 32].view(torch.int16).numpy())
    mma(ctas, 0, desc(A_BASE), desc(B_BASE), idesc(256, 64, 0, 0), kind="f16")
    expect = as_f64(a)[:, :16] @ as_f64(b)[:, :16].T
    got = np.concatenate([d_of(c, 0, 64) for c in ctas])
    np.testing.assert_allclose(got, expect.astype(np.float32), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- the halved shapes (CUTLASS tmem_frg atoms)

def test_m64_on_one_cta_fills_half_of_each_subpartition():
    """M = 64: row i at lane 16 + i % 16 + 32 (i // 16) with the address's lane field 16 (CUTLASS's "half subpartitions"
    atom ((16,4),N):((1,32),128)); the other half of every subpartition is left as it was."""
    rng = np.random.default_rng(31)
    (cta,) = ready()
    a = torch.from_numpy(rng.standard_normal((64, 64))).to(torch.float16)
    b = torch.from_numpy(rng.standard_normal((32, 64))).to(torch.float16)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    mma([cta], (16 << 16) | 8, desc(A_BASE + 32), desc(B_BASE + 32), idesc(64, 32, 0, 0), kind="f16")
    expect = (as_f64(a)[:, 16:32] @ as_f64(b)[:, 16:32].T).astype(np.float32)
    lanes = [16 + i % 16 + 32 * (i // 16) for i in range(64)]
    np.testing.assert_allclose(cta.tmem[lanes, 8:40].view(np.float32), expect, rtol=1e-6, atol=1e-6)
    untouched = [lane for lane in range(128) if lane not in lanes]
    assert (cta.tmem[untouched, 8:40] == POISON_WORD).all()


def test_m128_on_a_pair_puts_the_second_half_of_n_in_lanes_64_up():
    """cta_group::2 M = 128: 64 rows a CTA (A rows 64v..), D column j < N/2 at lane i, column col + j, and j >= N/2 at
    lane 64 + i, column col + j - N/2 (CUTLASS's "2x2" atom (64,(N/2,2)):(1,(128,64)))."""
    rng = np.random.default_rng(32)
    ctas = ready(2)
    a = rng.integers(-128, 128, (128, 128)).astype(np.int8)
    b = rng.integers(-128, 128, (32, 128)).astype(np.int8)
    for v, cta in enumerate(ctas):
        k_major(cta.smem, A_BASE, a[64 * v:64 * v + 64])
        k_major(cta.smem, B_BASE, b[16 * v:16 * v + 16])
    mma(ctas, 0, desc(A_BASE), desc(B_BASE), idesc(128, 32, 1, 1, dtype=2), kind="i8")
    exact = a[:, :32].astype(np.int64) @ b[:, :32].astype(np.int64).T
    for v, cta in enumerate(ctas):
        rows = exact[64 * v:64 * v + 64]
        got = np.concatenate([cta.tmem[0:64, 0:16], cta.tmem[64:128, 0:16]], axis=1).view(np.int32)
        np.testing.assert_array_equal(got, rows)
        assert (cta.tmem[:, 16:32] == POISON_WORD).all()  # N / 2 columns, not N


# ---------------------------------------------------------------- MN-major operands

def test_mn_major_a_and_b_with_the_transpose_bits():
    """A [128, 16] f16 MN-major: 64 elements of M per 128-byte row, two M slices LBO apart; B [64, 16] one slice. Read
    as K-major the same bytes give another product (the test fails if the transpose bit is ignored)."""
    rng = np.random.default_rng(12)
    (cta,) = ready()
    a = torch.from_numpy(rng.standard_normal((128, 16))).to(torch.float16)
    b = torch.from_numpy(rng.standard_normal((64, 16))).to(torch.float16)
    lbo = 8192
    mn_major(cta.smem, A_BASE, a.view(torch.int16).numpy(), lbo)
    mn_major(cta.smem, B_BASE, b.view(torch.int16).numpy(), lbo)
    # MN-major SW128: LBO is the offset between 128-byte MN slices, SBO between 8-K-row groups (CUTLASS make_umma_desc)
    mma([cta], 0, desc(A_BASE, lbo=lbo), desc(B_BASE, lbo=lbo), idesc(128, 64, 0, 0, t_a=1, t_b=1), kind="f16")
    expect = as_f64(a) @ as_f64(b).T
    np.testing.assert_allclose(d_of(cta, 0, 64), expect.astype(np.float32), rtol=1e-6, atol=1e-6)
    mma([cta], 0, desc(A_BASE, lbo=lbo), desc(B_BASE, lbo=lbo), idesc(128, 64, 0, 0), kind="f16")
    assert not np.allclose(d_of(cta, 0, 64), expect.astype(np.float32), rtol=1e-3)


# ---------------------------------------------------------------- block-scaled kinds with 1X / 2X scales

def put_scales(cta, col, scales):
    """scales [rows, 4] bytes -> tensor memory: row n = 32g + r at lanes r, 32+r, 64+r, 96+r of column col + g, byte j
    of the word = scales[n, j] (the 4x1 data path, every quadrant the same: PTX ISA 9.7.16.10.7)."""
    rows = scales.shape[0]
    words = scales.astype(np.uint32) @ (1 << (8 * np.arange(4, dtype=np.uint32)))
    for g in range(rows // 32):
        for q in range(4):
            cta.tmem[32 * q:32 * q + 32, col + g] = words[32 * g:32 * g + 32]


def ue8m0(e):
    return 2.0 ** (e.astype(np.float64) - 127)


def test_mxf8f6f4_scale_vec_1x_takes_the_byte_sf_id_names():
    rng = np.random.default_rng(21)
    (cta,) = ready()
    a = rng.integers(0, 0x78, (128, 128), dtype=np.uint8)  # positive e4m3, no NaN
    b = rng.integers(0, 0x78, (64, 128), dtype=np.uint8)
    k_major(cta.smem, A_BASE, a)
    k_major(cta.smem, B_BASE, b)
    sfa = rng.integers(120, 135, (128, 4), dtype=np.uint8)
    sfb = rng.integers(120, 135, (128, 4), dtype=np.uint8)
    put_scales(cta, 256, sfa)
    put_scales(cta, 264, sfb)
    word = scaled_idesc(128, 64, 0, 0, ue8m0=1, a_sf_id=2, b_sf_id=3)
    mma([cta], 0, desc(A_BASE + 32), desc(B_BASE + 32), word, 256, 264, kind="mxf8f6f4", scale_vec=1)
    av = as_f64(torch.from_numpy(a[:, 32:64].copy()).view(torch.float8_e4m3fn)) * ue8m0(sfa[:, 2:3])
    bv = as_f64(torch.from_numpy(b[:, 32:64].copy()).view(torch.float8_e4m3fn)) * ue8m0(sfb[:64, 3:4])
    np.testing.assert_allclose(d_of(cta, 0, 64), (av @ bv.T).astype(np.float32), rtol=1e-6, atol=0)


@pytest.mark.parametrize("kind", ["mxf4", "mxf4nvf4"])
def test_fp4_kinds_with_scale_vec_2x_read_two_bytes_from_sf_id(kind):
    rng = np.random.default_rng(22)
    (cta,) = ready()
    codes_a = rng.integers(0, 16, (128, 256), dtype=np.uint8)
    codes_b = rng.integers(0, 16, (32, 256), dtype=np.uint8)
    pack = lambda c: (c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8)  # element 2i in the low nibble
    k_major(cta.smem, A_BASE, pack(codes_a))
    k_major(cta.smem, B_BASE, pack(codes_b))
    sfa = rng.integers(120, 135, (128, 4), dtype=np.uint8)
    sfb = rng.integers(120, 135, (128, 4), dtype=np.uint8)
    put_scales(cta, 256, sfa)
    put_scales(cta, 264, sfb)
    e2m1 = lambda c: np.where(c & 8, -1, 1) * np.array([0, .5, 1, 1.5, 2, 3, 4, 6])[c & 7]
    word = scaled_idesc(128, 32, 1, 1, ue8m0=1, a_sf_id=2, b_sf_id=0)
    mma([cta], 0, desc(A_BASE + 64), desc(B_BASE + 64), word, 256, 264, kind=kind, scale_vec=2)
    ks = slice(128, 192)  # k-block 2: bytes 64..96 of the rows
    sa = np.repeat(ue8m0(sfa[:, 2:4]), 32, axis=1)  # SFA bytes 2, 3: blocks of 32
    sb = np.repeat(ue8m0(sfb[:32, 0:2]), 32, axis=1)
    expect = (e2m1(codes_a[:, ks]) * sa) @ (e2m1(codes_b[:, ks]) * sb).T
    np.testing.assert_allclose(d_of(cta, 0, 32), expect.astype(np.float32), rtol=1e-6, atol=0)


# ---------------------------------------------------------------- kind::f8f6f4 / mxf8f6f4's padded 6- / 4-bit operands
# Written from the text of PTX ISA 9.7.16.9.1 / 9.7.16.10.4.4 and the CUDA driver's 16U4_ALIGN16B / 16U6_ALIGN16B: each
# 16 consecutive K elements of a row fill a 16-byte chunk, packed low bits first from its first byte (element e at bits
# [b e, b e + b) of the little-endian chunk, as CuTe's subbyte_reference packs a global tensor), 8 / 4 bytes of padding
# after them; the descriptor walks the chunks as an 8-bit operand's (one byte an element, 32 bytes a K block).

FP_FORMATS = {"e2m3": (2, 3, 1), "e3m2": (3, 2, 3), "e2m1": (2, 1, 1)}  # exponent bits, mantissa bits, bias (OCP MX)


def fp_value(codes, fmt):
    """OCP MX v1.0 5.3: sign, exponent (bias), mantissa; exponent 0 subnormal; no inf / NaN."""
    e_bits, m_bits, bias = FP_FORMATS[fmt]
    codes = codes.astype(np.int64)
    sign = np.where(codes >> (e_bits + m_bits) & 1, -1.0, 1.0)
    exp, man = (codes >> m_bits) & ((1 << e_bits) - 1), codes & ((1 << m_bits) - 1)
    frac = man / 2.0 ** m_bits
    return sign * np.where(exp == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (exp - bias))


def padded_rows(codes, bits, rng, layout="isa"):
    """codes [R, 128] -> [R, 128] bytes, 16 elements a 16-byte chunk with random padding. layout "isa": packed from the
    chunk's first byte, element 0 in the lowest bits; the misplaced layouts of the negative controls: "padding_first"
    (the packed bytes at the chunk's end), "msb_first" (element 0 in the highest bits of the packed bytes)."""
    out = rng.integers(0, 256, codes.shape, dtype=np.uint8)  # padding: whatever was there
    nbytes = 2 * bits
    for r in range(codes.shape[0]):
        for c in range(codes.shape[1] // 16):
            elements = [int(x) for x in codes[r, 16 * c:16 * c + 16]]
            if layout == "msb_first":
                elements = elements[::-1]
            word = sum(x << (bits * e) for e, x in enumerate(elements))
            at = 16 * c + (16 - nbytes if layout == "padding_first" else 0)
            out[r, at:at + nbytes] = np.frombuffer(word.to_bytes(nbytes, "little"), np.uint8)
    return out


@pytest.mark.parametrize("a_fmt, b_fmt", [("e2m3", "e3m2"), ("e2m1", "e2m3"), ("e3m2", "e2m1")])
def test_f8f6f4_reads_padded_6_and_4_bit_operands(a_fmt, b_fmt):
    rng = np.random.default_rng(41)
    (cta,) = ready()
    code = {"e2m3": 3, "e3m2": 4, "e2m1": 5}
    bits = {"e2m3": 6, "e3m2": 6, "e2m1": 4}
    a = rng.integers(0, 1 << bits[a_fmt], (128, 128))
    b = rng.integers(0, 1 << bits[b_fmt], (64, 128))
    k_major(cta.smem, A_BASE, padded_rows(a, bits[a_fmt], rng))
    k_major(cta.smem, B_BASE, padded_rows(b, bits[b_fmt], rng))
    expect = np.zeros((128, 64))
    for step, kb in enumerate((1, 2)):  # K 32 = 32 bytes a block, as an 8-bit operand
        mma([cta], 0, desc(A_BASE + 32 * kb), desc(B_BASE + 32 * kb), idesc(128, 64, code[a_fmt], code[b_fmt]),
            accumulate=step > 0, kind="f8f6f4")
        ks = slice(32 * kb, 32 * kb + 32)
        expect = expect + fp_value(a[:, ks], a_fmt) @ fp_value(b[:, ks], b_fmt).T
    np.testing.assert_allclose(d_of(cta, 0, 64), expect.astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", ["padding_first", "msb_first"])
def test_padded_operands_misplaced_give_another_product(layout):
    """Negative control: A's elements in a misplaced chunk layout (B as the ISA packs it) must not give the product
    (the test above fails for an emulator that reads the chunks so; misplacing both operands alike would permute K in
    both and leave some products unchanged)."""
    rng = np.random.default_rng(42)
    (cta,) = ready()
    a = rng.integers(0, 64, (128, 128))
    b = rng.integers(0, 64, (32, 128))
    k_major(cta.smem, A_BASE, padded_rows(a, 6, rng, layout))
    k_major(cta.smem, B_BASE, padded_rows(b, 6, rng))
    mma([cta], 0, desc(A_BASE), desc(B_BASE), idesc(128, 32, 3, 3), kind="f8f6f4")
    expect = fp_value(a[:, :32], "e2m3") @ fp_value(b[:, :32], "e2m3").T
    assert not np.allclose(d_of(cta, 0, 32), expect.astype(np.float32), rtol=1e-3)


def test_mxf8f6f4_scales_padded_e2m1_by_ue8m0_on_a_cta_pair():
    rng = np.random.default_rng(43)
    ctas = ready(2)
    a = rng.integers(0, 16, (256, 128))
    b = rng.integers(0, 16, (64, 128))
    sfa = rng.integers(120, 135, (256, 4), dtype=np.uint8)
    sfb = rng.integers(120, 135, (64, 4), dtype=np.uint8)
    for v, cta in enumerate(ctas):  # CTA v: A rows 128v.., B rows 32v.., its own SFA, all of SFB
        k_major(cta.smem, A_BASE, padded_rows(a[128 * v:128 * v + 128], 4, rng))
        k_major(cta.smem, B_BASE, padded_rows(b[32 * v:32 * v + 32], 4, rng))
        put_scales(cta, 256, sfa[128 * v:128 * v + 128])
        put_scales(cta, 264, np.concatenate([sfb, sfb]))
    word = scaled_idesc(256, 64, 5, 5, ue8m0=1, a_sf_id=1, b_sf_id=2)
    mma(ctas, 0, desc(A_BASE + 96), desc(B_BASE + 96), word, 256, 264, kind="mxf8f6f4", scale_vec=1)
    ks = slice(96, 128)
    expect = (fp_value(a[:, ks], "e2m1") * ue8m0(sfa[:, 1:2])) @ (fp_value(b[:, ks], "e2m1") * ue8m0(sfb[:, 2:3])).T
    got = np.concatenate([d_of(c, 0, 64) for c in ctas])
    np.testing.assert_allclose(got, expect.astype(np.float32), rtol=1e-6, atol=0)


# ---------------------------------------------------------------- an F16 D
# PTX ISA 9.7.16.10.4.1: D's 16-bit elements are not packed, a tensor-memory word holds one "in its lower 16 bits":
# D row i, column j at lane i, column d_col + j as an F32 D's, the f16 value in bits [0, 16).

def test_f16_d_sits_in_the_low_half_of_one_column_an_element():
    rng = np.random.default_rng(51)
    (cta,) = ready()
    a = torch.from_numpy(rng.standard_normal((128, 64))).to(torch.float16)
    b = torch.from_numpy(rng.standard_normal((32, 64))).to(torch.float16)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    old = torch.from_numpy(rng.standard_normal((128, 32))).to(torch.float16)
    cta.tmem[:, 16:48] = old.view(torch.int16).numpy().view(np.uint16).astype(np.uint32) | 0xABCD0000  # upper halves
    mma([cta], 16, desc(A_BASE + 64), desc(B_BASE + 64), idesc(128, 32, 0, 0, dtype=0), accumulate=True, kind="f16",
        scale_input_d=1)
    exact = as_f64(a)[:, 32:48] @ as_f64(b)[:, 32:48].T + as_f64(old) / 2
    expect = torch.from_numpy(exact).to(torch.float16).view(torch.int16).numpy().view(np.uint16)
    words = cta.tmem[:, 16:48]
    np.testing.assert_array_equal(words & 0xFFFF, expect)  # rounded once to f16, each in its own column
    assert (words >> 16 == 0).all()
    # negative control: two f16 a word (a packed D) would leave columns 32..47 unwritten and mix j, j + 1
    packed = expect[:, 0::2].astype(np.uint32) | (expect[:, 1::2].astype(np.uint32) << 16)
    assert not np.array_equal(words[:, :16], packed)


def test_f8f6f4_f16_d_read_back_by_tcgen05_ld_pack_16b():
    """kind::f8f6f4 e4m3 x e2m1 with an F16 D, read as tcgen05.ld.32x32b.pack::16b reads it (two adjacent columns' low
    halves into one register, the first in the low half: CUTLASS SM100_TMEM_LOAD_32dp32b1x_16b)."""
    rng = np.random.default_rng(52)
    (cta,) = ready()
    a = rng.integers(0, 0x78, (128, 128), dtype=np.uint8)  # positive e4m3, no NaN
    b = rng.integers(0, 16, (16, 128))
    k_major(cta.smem, A_BASE, a)
    k_major(cta.smem, B_BASE, padded_rows(b, 4, rng))
    mma([cta], 0, desc(A_BASE), desc(B_BASE), idesc(128, 16, 0, 5, dtype=0), kind="f8f6f4")
    av = as_f64(torch.from_numpy(a[:, :32].copy()).view(torch.float8_e4m3fn))
    expect = torch.from_numpy(av @ fp_value(b[:, :32], "e2m1").T).to(torch.float16)
    regs = tcgen05.tmem_load(cta, 0, 1, 8, "32x32b", pack=True)  # warp 1: lanes 32..63, 8 registers = 16 columns
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).reshape(32, 16).astype(np.uint16)
    np.testing.assert_array_equal(halves, expect[32:64].view(torch.int16).numpy().view(np.uint16))


# ---------------------------------------------------------------- what is refused, and why

@pytest.mark.parametrize("kind, word, error, match", [
    ("f16", idesc(128, 64, 0, 0) | (1 << 23), Hazard, r"reserved bits 6 / 23 / 29 are set"),
    ("f16", idesc(128, 64, 0, 1), Hazard, r"kind::f16 needs atype = btype"),
    ("tf32", idesc(128, 64, 2, 2, dtype=0), Hazard, r"dtype 0 is not defined for kind::tf32"),
    ("i8", idesc(128, 64, 1, 1, dtype=2, neg_a=1), Hazard, r"negate A / B must be 0 for kind::i8"),
    ("f8f6f4", idesc(128, 64, 2, 0), Hazard, r"atype and btype among"),
    ("f16", idesc(128, 64, 0, 0, saturate=1), Hazard, r"saturate \(bit 3\) is for kind::i8 only"),
    ("mxf4", scaled_idesc(128, 64, 1, 1, t_a=1), Hazard, r"transpose A/B is not supported for kind::mxf4"),
    ("f8f6f4", idesc(128, 64, 0, 3, t_b=1), Hazard, r"not supported for kind::f8f6f4 with e2m3"),  # PTX ISA Table 52
    ("mxf8f6f4", scaled_idesc(128, 64, 0, 0) | (1 << 31), Hazard, r"K size bit 31 must be 0"),
    ("f16", idesc(128, 64, 0, 0) | (1 << 30), Unsupported, r"maximum shift .* tcgen05.mma.ws"),
])
def test_descriptor_rejections(kind, word, error, match):
    with pytest.raises(error, match=match):
        decode_instr_descriptor(word, kind)


def test_shapes_formats_and_scales_refused_with_their_reasons():
    (cta,) = ready()
    cta.smem[:] = 0
    cases = [
        (dict(idesc=scaled_idesc(64, 64, 1, 1, ue8m0=1), sfa_taddr=256, sfb_taddr=264, kind="mxf4", scale_vec=2),
         Unsupported, r"M = 64 with scale factors"),
        (dict(idesc=idesc(64, 64, 0, 0), kind="f16", d_taddr=32 << 16), Hazard, r"lane field must be 0 or 16"),
        (dict(idesc=idesc(128, 64, 5, 0), kind="f8f6f4", a_in_tmem=True), Unsupported,
         r"e2m1 A in tensor memory: where a 4- / 6-bit element sits"),
        (dict(idesc=idesc(128, 64, 2, 2), kind="tf32", scale_input_d=16), Hazard, r"must be in \[0, 15\]"),
        (dict(idesc=idesc(128, 64, 1, 1, dtype=2), kind="i8", scale_input_d=1), Hazard, r"scale-input-d is for"),
        (dict(idesc=scaled_idesc(128, 64, 1, 1), sfa_taddr=256, sfb_taddr=264, kind="mxf4", scale_vec=2), Hazard,
         r"scale_vec::2X takes UE8M0 scale factors, the descriptor says UE4M3"),
        (dict(idesc=scaled_idesc(128, 64, 1, 1, ue8m0=1, a_sf_id=1), sfa_taddr=256, sfb_taddr=264, kind="mxf4nvf4",
              scale_vec=2), Hazard, r"must be a multiple of 2, got 1"),
        (dict(idesc=scaled_idesc(128, 64, 0, 0, ue8m0=1), sfa_taddr=256, sfb_taddr=264, kind="mxf8f6f4",
              scale_vec=2), Hazard, r"takes scale_vec::1X, not 2X"),
    ]
    put_scales(cta, 256, np.full((128, 4), 127, np.uint8))
    put_scales(cta, 264, np.full((128, 4), 127, np.uint8))
    for kw, error, match in cases:
        with pytest.raises(error, match=match):
            mma([cta], kw.pop("d_taddr", 0), desc(A_BASE), desc(B_BASE), **kw)
    assert (cta.tmem[:, 0:64] == POISON_WORD).all()  # nothing written by a refused MMA


FORMS = kernel_text("""
  tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1, 3;
  tcgen05.mma.cta_group::2.kind::tf32 [%r1], %rd1, %rd2, %r2, {%r3, %r4, %r5, %r6, %r3, %r4, %r5, %r6}, %p1, 1;
  tcgen05.mma.cta_group::1.kind::i8 [%r1], %rd1, %rd2, %r2, %p1;
  tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.block32 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::2X [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
  ret;""", params="", decls="  .reg .pred %p<3>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;", smem=False)


def test_decode_of_the_kinds_and_their_scale_vectors():
    k = parse_module(FORMS)
    decode_kernel(k)
    assert [i.info for i in k.instrs if i.base == "tcgen05"] == [
        ("mma", 1, "f16", None, "discard"), ("mma", 2, "tf32", None, "discard"), ("mma", 1, "i8", None, "discard"), ("mma", 2, "mxf8f6f4", 1, "discard"),
        ("mma", 1, "mxf4nvf4", 2, "discard"), ("mma", 1, "mxf4", 2, "discard")]


@pytest.mark.parametrize("form, why", [
    ("tcgen05.mma.sp.cta_group::1.kind::f16 [%r1], %rd1, %rd2, [%r3], %r2, %p1;", r"sparse"),
    ("tcgen05.mma.cta_group::1.kind::f16.block_scale [%r1], %rd1, %rd2, %r2, %p1;", r"takes no .block_scale"),
    ("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, {%r3, %r4}, %p1;", r"disable-output-lane"),
    ("tcgen05.mma.cta_group::1.kind::mxf4.block_scale [%r1], %rd1, %rd2, %r2, [%r3], [%r4], {%r3, %r4, %r5, %r6}, "
     "%p1;", r"disable-output-lane"),
    ("tcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64 [%r1], %rd1;", r"lands in its 8-bit tensor-memory container"),
    ("tcgen05.shift.cta_group::1.up [%r1];", r"tcgen05.shift"),
])
def test_forms_left_unsupported(form, why):
    k = parse_module(kernel_text(form + "\n ret;", params="", decls="  .reg .pred %p<3>;\n  .reg .b32 %r<8>;\n"
                                 "  .reg .b64 %rd<4>;", smem=False))
    with pytest.raises(Unsupported, match=why):
        decode_kernel(k)


def test_element_bits_per_kind():
    assert [tcgen05.element_bits(f, k) for f, k in (("f16", "f16"), ("tf32", "tf32"), ("s8", "i8"), ("e5m2", "f8f6f4"),
                                                    ("e2m1", "mxf4nvf4"), ("e2m1", "mxf8f6f4"), ("e3m2", "f8f6f4"))] == [
        16, 32, 8, 8, 4, 8, 8]  # a padded 6- / 4-bit element takes a byte: 16 to a 16-byte chunk


CUTLASS_F16 = """
    mov.u32 %r9, smem;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p3, %r1, 0;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 64;
    @%p3 mbarrier.init.shared.b64 [%r9+8], 1;
    bar.sync 0;
    ld.shared.b32 %r20, [%r9];
    tcgen05.fence::after_thread_sync;
    add.s32 %r10, %r9, 4096;
    shr.u32 %r10, %r10, 4;
    cvt.u64.u32 %rd2, %r10;
    or.b64 %rd2, %rd2, SW128_BITS;
    mov.u32 %r12, IDESC;
    mov.u32 %r30, 0;
    ld.param.u32 %r31, [lane_mask];
    setp.ne.u32 %p4, %r30, 0;
    @%p3 tcgen05.mma.cta_group::1.kind::f16 [%r20], %rd2, %rd2, %r12, {%r30, %r30, %r30, %r31}, %p4;
    @%p3 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r9+8];
WAIT
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 64;
    ret;
"""


def test_cutlass_s_all_zero_disable_output_lane_runs_and_a_set_bit_is_unsupported():
    """CUTLASS's SM100_MMA_F16BF16_SS passes disable-output-lane {0, 0, 0, 0} (mma_sm100_umma.hpp): nothing disabled,
    the MMA runs; a set bit names a lane the sources at hand do not pin down."""
    body = (CUTLASS_F16.replace("SW128_BITS", str(SW128)).replace("IDESC", str(idesc(128, 64, 0, 0)))
            .replace("WAIT", wait_loop("[%r9+8]", hint=None)))
    ptx = kernel_text(body, params=".param .u64 out, .param .u32 lane_mask")
    assert run_ptx(ptx, args=(0,), threads=32, dynamic_smem=32768).machine.stats["mma"] == 1
    with pytest.raises(Unsupported, match="a disable-output-lane bit set"):
        run_ptx(ptx, args=(1,), threads=32, dynamic_smem=32768)
