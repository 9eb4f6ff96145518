"""The packed single-precision forms {add,sub,mul}{.rnd}{.ftz}.f32x2 and fma.rnd{.ftz}.f32x2 (PTX ISA 9.7.3.3-9.7.3.6,
sm_100+) that CuTe DSL 4.8.1 emits, against the scalar .f32 forms and against an exact reference.

Hand-written PTX run on the emulator's Machine, no DSL, no GPU. Each lane loads .b64 words a, b, c (two f32 each,
element 0 in the low half), runs the packed form once and the scalar form on each half, and stores both; every
result must equal, bit for bit, the IEEE 754 binary32 rounding of the exact result that `ref` below computes with
Python integers (independent of the emulator's float64 + TwoSum method). The inputs cover signed zeros, subnormals,
FLT_MAX and the overflow tie, infinities, NaNs with payloads, rounding ties, and fma cases where rounding a*b+c
first to float64 and then to f32 gives the wrong answer. Runs in a few seconds on 2 CPUs.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from emu.ptx import parse_module
from emu.state import Unsupported
from tests.emu.ptx_kit import kernel_text, run_ptx

# ------------------------------------------------------------------ the exact reference (Python integers)
FLT_MAX_BITS, CANON_NAN, ONE = 0x7F7FFFFF, 0x7FFFFFFF, 0x3F800000


def _decode(bits: int):
    """f32 bits -> ("nan" | "inf" | "num", sign, M, E) with |value| = M * 2^E."""
    sign, e, f = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if e == 0xFF:
        return ("nan" if f else "inf"), sign, 0, 0
    return "num", sign, (f if e == 0 else f | 1 << 23), (-149 if e == 0 else e - 150)


def _round(sign: int, mag: int, exp: int, rnd: str) -> int:
    """Bits of the nonzero value (-1)^sign * mag * 2^exp rounded to binary32 by `rnd` (IEEE 754)."""
    msb = mag.bit_length() - 1 + exp
    q = max(msb - 23, -149)  # the exponent of the result's ulp (subnormals: 2^-149)
    if q <= exp:
        m = mag << (exp - q)
    else:
        sh = q - exp
        m, rem, half = mag >> sh, mag & ((1 << sh) - 1), 1 << (sh - 1)
        if rnd == "rn":
            m += rem > half or (rem == half and m & 1)
        elif rnd == "rp":
            m += bool(rem) and not sign
        elif rnd == "rm":
            m += bool(rem) and bool(sign)
    if m == 1 << 24:
        m, q = 1 << 23, q + 1
    if m and q + 23 > 127:  # past FLT_MAX once rounded with an unbounded exponent
        to_inf = rnd == "rn" or (rnd == "rp" and not sign) or (rnd == "rm" and sign)
        return sign << 31 | (0x7F800000 if to_inf else FLT_MAX_BITS)
    if m < 1 << 23:  # subnormal or zero
        return sign << 31 | m
    return sign << 31 | (q + 150) << 23 | (m - (1 << 23))


def ref(op: str, xs, rnd: str = "rn", ftz: bool = False, sat: bool = False) -> int:
    """The f32 bits PTX ISA 9.7.3 defines for op(xs): .ftz flushes subnormal inputs and results to signed zero, NaN
    results are the canonical NaN (as the H200 returns), .sat clamps to [+0, 1] with NaN -> +0."""
    if ftz:
        xs = [x & 0x80000000 if (x >> 23) & 0xFF == 0 else x for x in xs]
    if op == "sub":
        op, xs = "add", [xs[0], xs[1] ^ 0x80000000]
    d = [_decode(x) for x in xs]
    if any(k == "nan" for k, *_ in d):
        r = CANON_NAN
    else:
        (ka, sa, ma, ea), (kb, sb, mb, eb) = d[0], d[1]
        if op in ("mul", "fma"):  # the exact product (or inf / invalid)
            sp = sa ^ sb
            if "inf" in (ka, kb):
                kp = "nan" if 0 in (ma if ka == "num" else 1, mb if kb == "num" else 1) else "inf"
                mp, ep = 0, 0
            else:
                kp, mp, ep = "num", ma * mb, ea + eb
            terms = [(kp, sp, mp, ep)] + ([d[2]] if op == "fma" else [])
        else:
            terms = [d[0], d[1]]
        r = _sum(terms, rnd)
    if ftz and (r >> 23) & 0xFF == 0:
        r &= 0x80000000
    if sat:
        r = 0 if (r & 0x7FFFFFFF) > 0x7F800000 or r >> 31 or r == 0 else min(r, ONE)
    return r


def _sum(terms, rnd: str) -> int:
    if any(k == "nan" for k, *_ in terms):
        return CANON_NAN
    infs = {s for k, s, *_ in terms if k == "inf"}
    if infs:
        return CANON_NAN if len(infs) == 2 else (infs.pop() << 31 | 0x7F800000)
    e0 = min(e for *_, e in terms)
    total = sum((-1) ** s * (m << (e - e0)) for _, s, m, e in terms)
    if total == 0:  # IEEE 754 6.3: equal-signed zeros keep their sign, otherwise +0 (-0 rounding toward -inf)
        signs = {s for _, s, m, e in terms if m == 0} if all(m == 0 for _, _, m, _ in terms) else set()
        if len(signs) == 1:
            return signs.pop() << 31
        return 0x80000000 if rnd == "rm" else 0
    return _round(int(total < 0), abs(total), e0, rnd)


# ------------------------------------------------------------------ inputs
def _f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


SPECIALS = [
    0x00000000, 0x80000000, ONE, 0xBF800000, _f32(1.5), _f32(3.0), _f32(0.1), _f32(-0.1), _f32(0.5),
    0x3F800001, 0x3F7FFFFF,  # 1 + 2^-23, 1 - 2^-24
    0x33800000, 0x33800001, 0x337FFFFF, 0xB3800000,  # 2^-24 (half an ulp of 1) and its neighbours: ties with 1
    0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x00C00000,  # subnormals, FLT_MIN
    _f32(2.0 ** -64), _f32(2.0 ** -63), _f32(2.0 ** -100), _f32(2.0 ** 64), _f32(1e30), _f32(-1e30),
    FLT_MAX_BITS, 0xFF7FFFFF, 0x7F000000, _f32(2.0 ** 103), _f32(2.0 ** 102), _f32(-(2.0 ** 103)),  # overflow tie
    0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00123, 0x7F800001,  # infinities, NaNs (payloads, signalling)
]
LANES = 1024  # 32 warps; two elements a lane -> 2048 operand tuples


def _random_f32(rng, n, lo=-40, hi=40):
    """Random f32 words: random sign and mantissa, exponent uniform in [lo, hi] (so sums cancel and round)."""
    m = rng.integers(0, 1 << 23, n)
    e = rng.integers(lo, hi + 1, n) + 127
    return (rng.integers(0, 2, n) << 31 | e << 23 | m).astype(np.uint64)


def _pairs(rng):
    s = np.array(SPECIALS, np.uint64)
    a, b = np.meshgrid(s, s)
    a, b = a.ravel(), b.ravel()
    n = 2 * LANES - a.size
    x = _random_f32(rng, n)
    y = x ^ (_random_f32(rng, n, -12, 12) & np.uint64(0x807FFFFF))  # same binade: cancellation, ties
    y[: n // 2] = _random_f32(rng, n // 2)
    return np.concatenate([a, x]), np.concatenate([b, y])


def _triples(rng):
    """fma operands: fixed cases, specials, random values, and products that are an f32 tie nudged by a tiny addend
    (where rounding to float64 first, then to f32, goes wrong), also with subnormal results."""
    s = np.array(SPECIALS, np.uint64)
    n = 2 * LANES
    a, b, c = (s[rng.integers(0, s.size, n)] for _ in range(3))
    fixed = [(FLT_MAX_BITS, ONE, 0), (0x80000000, ONE, 0x80000000), (0, ONE, 0), (0x7F800000, ONE, ONE),
             (0xFF800000, ONE, ONE), (0x7FC00000, ONE, ONE), (0x7F800000, 0, ONE), (ONE, ONE, 0xBF800000),
             (0x7F000000, _f32(2.0), _f32(-(2.0 ** 103)))]  # 2^128 - 2^103: the overflow tie of round-to-nearest
    for i, t in enumerate(fixed):
        a[i], b[i], c[i] = t
    a[300:600], b[300:600], c[300:600] = (_random_f32(rng, 300) for _ in range(3))
    # (1 + 2^-12)^2 2^j + -2^(j-k) = (1 + 2^-11 + 2^-24) 2^j +- 2^(j-k): an f32 tie that the addend decides
    for i in range(600, 800):
        j, k = int(rng.integers(-30, 30)), int(rng.integers(30, 90))
        a[i], b[i] = _f32((1 + 2.0 ** -12) * 2.0 ** j), _f32(1 + 2.0 ** -12)
        c[i] = _f32(2.0 ** (j - k)) | int(rng.integers(0, 2)) << 31
    # tiny products plus subnormal or tiny normal addends: subnormal results
    a[800:900], b[800:900] = _random_f32(rng, 100, -80, -60), _random_f32(rng, 100, -80, -60)
    c[800:850] = (rng.integers(0, 1 << 23, 50) | rng.integers(0, 2, 50) << 31).astype(np.uint64)
    c[850:900] = _random_f32(rng, 50, -126, -124)
    return a, b, c


# ------------------------------------------------------------------ running PTX
PARAMS = ".param .u64 out, .param .u64 pa, .param .u64 pb, .param .u64 pc"
DECLS = ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .f32 %f<32>;\n.reg .b64 %rd<32>;"
LAUNCH = {"threads": LANES, "out_words": 4 * LANES, "dynamic_smem": 0}  # out: four words a lane


def kernel(body: str) -> str:
    """`k(out, pa, pb, pc)`: pointers to u64 operand words."""
    return kernel_text(body, PARAMS, DECLS, smem=False)


def operands(words: list) -> list:
    """pa, pb, pc as u64 arrays (pa's words again for a pointer the form does not read)."""
    arrays = [np.asarray(w, np.uint64) for w in words]
    return arrays + arrays[:1] * (3 - len(arrays))


LOAD = """
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [pa];
    ld.param.u64 %rd3, [pb];
    ld.param.u64 %rd4, [pc];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd6, %rd2, %rd5;
    add.s64 %rd7, %rd3, %rd5;
    add.s64 %rd8, %rd4, %rd5;
    ld.global.b64 %rd10, [%rd6];
    ld.global.b64 %rd11, [%rd7];
    ld.global.b64 %rd12, [%rd8];
    mul.wide.u32 %rd9, %r1, 16;
    add.s64 %rd13, %rd1, %rd9;
"""


def packed_vs_scalar_body(op: str, mods: str, scalar_mods: str | None = None) -> str:
    """out[4 tid .. 4 tid + 1]: the packed form's word; out[4 tid + 2, + 3]: the scalar form on each half."""
    smods = mods if scalar_mods is None else scalar_mods
    srcs = "%rd10, %rd11" + (", %rd12" if op == "fma" else "")
    fsrcs = lambda i: ", ".join(f"%f{i + 2 * k}" for k in range(3 if op == "fma" else 2))  # noqa: E731
    return LOAD + f"""
    {op}{mods}.f32x2 %rd20, {srcs};
    st.global.b64 [%rd13], %rd20;
    mov.b64 {{%f1, %f2}}, %rd10;
    mov.b64 {{%f3, %f4}}, %rd11;
    mov.b64 {{%f5, %f6}}, %rd12;
    {op}{smods}.f32 %f10, {fsrcs(1)};
    {op}{smods}.f32 %f11, {fsrcs(2)};
    st.global.v2.f32 [%rd13+8], {{%f10, %f11}};
    ret;
"""


def _pack(lo, hi):
    return np.asarray(lo, np.uint64) | np.asarray(hi, np.uint64) << np.uint64(32)


FORMS = ([(op, rnd, ftz) for op in ("add", "sub", "mul") for rnd in (None, "rn", "rz", "rm", "rp")
          for ftz in (False, True)]
         + [("fma", rnd, ftz) for rnd in ("rn", "rz", "rm", "rp") for ftz in (False, True)])


@pytest.mark.parametrize("op,rnd,ftz", FORMS, ids=lambda v: {None: "default", True: "ftz", False: "noftz"}.get(v, v))
def test_packed_form_is_two_exact_scalar_ops(op, rnd, ftz):
    rng = np.random.default_rng(FORMS.index((op, rnd, ftz)))
    ops = _triples(rng) if op == "fma" else _pairs(rng)
    mods = (f".{rnd}" if rnd else "") + (".ftz" if ftz else "")
    words = [_pack(x[:LANES], x[LANES:]) for x in ops]
    out = run_ptx(kernel(packed_vs_scalar_body(op, mods)), operands(words), **LAUNCH).words.reshape(LANES, 4)
    packed = np.concatenate([out[:, 0], out[:, 1]])
    scalar = np.concatenate([out[:, 2], out[:, 3]])
    want = np.array([ref(op, [int(x[i]) for x in ops], rnd or "rn", ftz) for i in range(2 * LANES)], np.uint32)
    form = f"{op}{mods}.f32x2"
    bad = np.flatnonzero(packed != want)
    assert not bad.size, (f"{form}: {bad.size} elements differ from the exact rounding, first "
                          f"{[hex(int(x[bad[0]])) for x in ops]} -> {packed[bad[0]]:#010x}, want {want[bad[0]]:#010x}")
    assert np.array_equal(packed, scalar), f"{form} differs from two {op}{mods}.f32"
    # the inputs reach what they are meant to: NaNs, infinities, zeros of both signs, FLT_MAX, subnormals
    for bits in (CANON_NAN, 0x7F800000, 0xFF800000, 0, 0x80000000, FLT_MAX_BITS):
        assert (want == bits).any(), f"no {bits:#x} result"
    subnormal = ((want & 0x7F800000) == 0) & ((want & 0x7FFFFF) != 0)
    assert not subnormal.any() if ftz else subnormal.sum() > 5


def test_fma_is_fused_and_rounded_once():
    """fma.rn: (1 + 2^-12)^2 + 2^-80 = 1 + 2^-11 + 2^-24 + 2^-80 is just above halfway between two f32: the
    correctly rounded result is the upper one. Rounding a*b+c to float64 first (1 + 2^-11 + 2^-24, a tie) and then
    to f32 (ties to even) gives the lower one. mul + add (two roundings) gives 1 + 2^-11."""
    a, c = _f32(1 + 2.0 ** -12), _f32(2.0 ** -80)
    words = [_pack([a] * LANES, [a] * LANES), _pack([a] * LANES, [a] * LANES),
             _pack([c] * LANES, [c ^ 0x80000000] * LANES)]
    out = run_ptx(kernel(LOAD + """
    fma.rn.f32x2 %rd20, %rd10, %rd11, %rd12;
    st.global.b64 [%rd13], %rd20;
    mul.rn.f32x2 %rd21, %rd10, %rd11;
    add.rn.f32x2 %rd22, %rd21, %rd12;
    st.global.b64 [%rd13+8], %rd22;
    ret;
"""), operands(words), **LAUNCH).words.reshape(LANES, 4)
    up, down = _f32(1 + 2.0 ** -11 + 2.0 ** -23), _f32(1 + 2.0 ** -11)
    assert (out[:, 0] == up).all() and (out[:, 1] == down).all()  # +2^-80 rounds up, -2^-80 down
    assert (out[:, 2] == down).all() and (out[:, 3] == down).all()  # unfused: the tie went to even


def test_ftz_flushes_subnormal_inputs_and_results():
    """mul.ftz.f32x2 / add.ftz.f32x2: a subnormal operand acts as a signed zero and a subnormal result becomes a
    signed zero, in each half on its own; without .ftz both survive."""
    tiny, big = 0x00000003, _f32(2.0 ** -63)  # 3 * 2^-149; 2^-63 * 2^-64 = 2^-127 (subnormal)
    a = _pack([tiny] * LANES, [big] * LANES)
    b = _pack([ONE] * LANES, [_f32(-(2.0 ** -64))] * LANES)
    out = run_ptx(kernel(LOAD + """
    mul.ftz.f32x2 %rd20, %rd10, %rd11;
    mul.f32x2 %rd21, %rd10, %rd11;
    st.global.v2.b64 [%rd13], {%rd20, %rd21};
    ret;
"""), operands([a, b]), **LAUNCH).words.reshape(LANES, 4)
    assert (out[:, 0] == 0).all() and (out[:, 1] == 0x80000000).all()  # +0 (flushed input), -0 (flushed result)
    assert (out[:, 2] == tiny).all() and (out[:, 3] == 0x80400000).all()  # -2^-127 = 0x80400000


def test_rounding_modes_on_one_tie():
    """1 + 2^-24 (half an ulp of 1) and its negation under each rounding modifier of add.f32x2."""
    a = _pack([ONE] * LANES, [0xBF800000] * LANES)
    b = _pack([0x33800000] * LANES, [0xB3800000] * LANES)
    out = run_ptx(kernel(LOAD + """
    add.rn.f32x2 %rd20, %rd10, %rd11;
    add.rz.f32x2 %rd21, %rd10, %rd11;
    add.rm.f32x2 %rd22, %rd10, %rd11;
    add.rp.f32x2 %rd23, %rd10, %rd11;
    mul.wide.u32 %rd9, %r1, 32;
    add.s64 %rd14, %rd1, %rd9;
    st.global.v4.b64 [%rd14], {%rd20, %rd21, %rd22, %rd23};
    ret;
"""), operands([a, b]), **{**LAUNCH, "out_words": 8 * LANES}).words.reshape(LANES, 8)
    got = [tuple(int(x) for x in out[0, 2 * i: 2 * i + 2]) for i in range(4)]
    assert got == [(ONE, 0xBF800000), (ONE, 0xBF800000), (ONE, 0xBF800001), (0x3F800001, 0xBF800000)]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma"])
def test_sat_clamps_to_the_unit_interval(op):
    """.sat (scalar .f32 only, PTX ISA 9.7.3): the result clamped to [0.0, 1.0], NaN -> +0.0."""
    xs = [_f32(v) for v in (-2.0, -0.0, 0.25, 0.75, 1.0, 2.0, 1e-40)] + [0x7F800000, 0xFF800000, 0x7FC00000]
    ys = [_f32(v) for v in (0.5, 1.5, -0.0)]
    trip = [(x, y, _f32(0.5)) for x in xs for y in ys]
    n = len(trip)
    cols = [np.array([t[k] for t in trip] + [0] * (2 * LANES - n), np.uint64) for k in range(3)]
    words = [_pack(c[:LANES], c[LANES:]) for c in cols]
    rnd = ".rn" if op == "fma" else ""
    out = run_ptx(kernel(packed_vs_scalar_body(op, rnd, scalar_mods=rnd + ".sat")), operands(words), **LAUNCH)
    out = out.words.reshape(LANES, 4)
    unsat, sat = out[:n, 0], out[:n, 2]  # the packed form without .sat, the scalar form with it
    want = [ref(op, list(t), "rn", sat=True) for t in trip]
    assert list(sat) == want
    assert set(sat.tolist()) >= {0, ONE} and all(s == 0 or 0 < s <= ONE for s in sat.tolist())
    assert (unsat != sat).sum() >= 10  # the clamp did something: without .sat the results leave [0, 1]


@pytest.mark.parametrize("form,why", [
    ("div.rn.f32x2 %rd20, %rd10, %rd11", "div.rn.f32x2"),  # no packed division in the ISA
    ("add.sat.f32x2 %rd20, %rd10, %rd11", ".sat"),  # .sat is not in the .f32x2 syntax
    ("fma.f32x2 %rd20, %rd10, %rd11, %rd12", "rounding modifier"),  # fma has no default rounding
    ("mul.rn.rz.f32x2 %rd20, %rd10, %rd11", "more than one rounding modifier"),
    ("max.f32x2 %rd20, %rd10, %rd11", "max.f32x2"),
    ("add.f32x2 %rd20, %rd10, 0d3FF0000000000000", "immediate"),
])
def test_unknown_forms_fail_naming_the_form(form, why):
    with pytest.raises(Unsupported, match="not implemented") as e:
        run_ptx(kernel(LOAD + f"    {form};\n    ret;\n"), operands([np.zeros(LANES, np.uint64)]),
                **{**LAUNCH, "threads": 32})
    assert why in str(e.value) and form.split()[0] in str(e.value)


def test_issue_cost_is_one_fma_pipe_instruction():
    """The timed engine charges a packed form as one instruction (FFMA2/FADD2/FMUL2) with the table's issue cost,
    not as the 64-bit ALU pair a .b64 add would be."""
    from emu.timing import costs as cost_table
    from emu.timing.engine import DATAFLOW, classify

    c = cost_table.load()
    kernel = parse_module(kernel_text("""    mul.f32x2 %rd1, %rd2, %rd3;
    fma.rn.ftz.f32x2 %rd4, %rd1, %rd2, %rd3;
    sub.rm.f32x2 %rd5, %rd4, %rd1;
    add.s64 %rd6, %rd5, %rd1;
    fma.rn.f32 %f1, %f2, %f3, %f1;
    ret;""", decls=".reg .b64 %rd<8>;\n.reg .f32 %f<4>;", smem=False))
    got = [classify(i) for i in kernel.instrs[:5]]
    assert [g[0] for g in got] == ["fp32x2", "fp32x2", "fp32x2", "alu64", "alu"]
    assert got[1][1:] == (("%rd1", "%rd2", "%rd3"), ("%rd4",)) and "fp32x2" in DATAFLOW
    row = c.rows["fp32x2_issue"]
    assert row.value == 1 and row.unit == "cycles" and "FFMA2" in row.source and "ASSUMED" in row.source


def test_float_literal_as_bits_packs_its_ieee_bits():
    """`mov.b32 %r, 0f3F800000` puts the literal's IEEE bits in a bit-typed register, so packing it with mov.b64 and
    adding with add.f32x2 adds 1.0 (the CuTe DSL 4.8.1 epilogue of teelaitila's B200-run kernel builds its `1.0 + x`
    this way); reading the literal as a number gave the integer 1 (1.4e-45 as an f32)."""
    body = """
    ld.param.u64 %rd1, [out];
    mov.b32 %r10, 0f40000000;
    mov.b32 %r11, 0f40400000;
    mov.b64 %rd5, {%r10, %r11};
    mov.b32 %r12, 0f3F800000;
    mov.b64 %rd6, {%r12, %r12};
    add.f32x2 %rd7, %rd5, %rd6;
    st.global.b64 [%rd1], %rd7;
    mov.b64 %rd8, 0d3FF0000000000000;
    st.global.b64 [%rd1+8], %rd8;
    ret;
"""
    words = run_ptx(kernel_text(body), out_words=4, threads=1).words
    assert [int(w) for w in words] == [0x40400000, 0x40800000, 0, 0x3FF00000]
