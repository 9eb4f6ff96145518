"""KernelConfig.silu_ex2_poly: the SiLU's 2^t on the FMA/ALU pipes (submission.ex2_poly / ex2_poly_x2, after
FlashAttention-4's ex2_emulation), its numerics in the emulator and the knob's config rules (emulated, no GPU).

The PTX the kernel pastes (submission.EX2_POLY_PTX and EX2_POLY_X2_PTX, the very strings) runs inside a hand-written
kernel beside today's form, each step as the DSL emits it (mul.f32 by -log2 e, add.f32 1, rcp.approx.ftz.f32,
mul.f32): over a dense sweep of x with the edges (the clamp boundaries t = -x log2 e = 128 and -127, +-0, +-inf, NaN,
subnormals, FLT_MAX) and random bit patterns, 2^t must be within 4e-6 of the exact value, +inf from t = 128 on, +0
from t = -127 down and on NaN, never NaN; and silu(x) * y must agree with today's ex2.approx form: NaN where it is
NaN, the same infinity, the same sign everywhere, the same signed zero for x -> -inf, and within 1e-5 relative
elsewhere. The whole kernel with the knob on the table tiles: test_verdict.py's TUNE_SPACE gate (slow).
"""
from __future__ import annotations

import numpy as np
import pytest

from calibration import mufu as mufu_report
from harness.verdict import load_submission
from tests.conftest import ROOT
from tests.emu.ptx_kit import kernel_text, run_ptx

S = load_submission(f"{ROOT}/submission.py")
THREADS = 1024
DECLS = ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<24>;\n.reg .f32 %f<32>;"
OUTPUTS = ("e_mufu", "e_one", "e_pair", "s_mufu", "s_one", "s_pair")


def _asm(text: str, operands: list) -> str:
    """An inline-asm string of the kernel with $0, $1, ... replaced by the given registers (as LLVM pastes it)."""
    for i in reversed(range(len(operands))):
        text = text.replace(f"${i}", operands[i])
    return text


def sweep() -> tuple[np.ndarray, np.ndarray]:
    """x and y, a multiple of 2 * THREADS long: dense x over [-100, 100], f32 neighbours of the clamp boundaries
    (t = 128, 127, -126, -127), specials, random bit patterns; y mostly in [-4, 4] with zeros and infinities."""
    f32 = np.float32
    log2e = np.float64(S.LOG2_E)
    xs = [np.linspace(-100, 100, 8193, dtype=np.float32)]
    for t in (128.0, 127.0, -126.0, -127.0):
        x0 = f32(-t / log2e)
        bits = x0.view(np.uint32).astype(np.int64) + np.arange(-200, 201)
        xs.append(bits.astype(np.uint32).view(np.float32))
    xs.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-40, -1e-40, 1e-30, -1e-30, 1e30,
                        -1e30, 2.0 ** -126, -(2.0 ** -126), 88.0, -88.0, 89.0, -89.0, 1.0, -1.0], np.float32))
    n = sum(a.size for a in xs)
    total = -(-n // (2 * THREADS)) * 2 * THREADS + 2 * THREADS
    rng = np.random.default_rng(22)
    xs.append(rng.integers(0, 2**32, total - n, dtype=np.uint64).astype(np.uint32).view(np.float32))
    x = np.concatenate(xs).astype(np.float32)
    y = rng.uniform(-4, 4, x.size).astype(np.float32)
    y[::97] = 0.0
    y[1::389] = np.inf
    y[2::389] = -np.inf
    y[-3 * THREADS:] = 1.0  # the random bit patterns of x once more with y = 1 (plain silu)
    return x, y


def kernel(n: int) -> str:
    """Thread i: x[i], y[i] -> 2^t by ex2.approx, by EX2_POLY_PTX, by EX2_POLY_X2_PTX (the pair (2j, 2j + 1) holding
    i, i's half selected), and silu(x) * y with each; out[j * n + i] for OUTPUTS[j]."""
    one = _asm(S.EX2_POLY_PTX, ["%f5", "%f3"])
    pair = _asm(S.EX2_POLY_X2_PTX, ["%f6", "%f7", "%f10", "%f11", "%rd10", "%rd11", "%rd12", "%rd13", "%rd14",
                                    "%rd15"])
    consts = "".join(f"    mov.b64 %rd{10 + j}, {S._f32x2_word(v)};\n" for j, v in enumerate(S.EX2_POLY_X2_CONSTANTS))
    neg_log2e = f"0f{S._f32_word(float(np.float32(-S.LOG2_E))):08X}"
    stores = "".join(f"    st.global.f32 [%rd3+{4 * n * j}], %f{r};\n" for j, r in enumerate((4, 5, 8, 20, 21, 22)))
    return kernel_text(f"""
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd7, [inp];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    add.s64 %rd8, %rd7, %rd2;
    and.b32 %r5, %r4, -2;
    mul.wide.u32 %rd4, %r5, 4;
    add.s64 %rd9, %rd7, %rd4;
    and.b32 %r6, %r4, 1;
    setp.ne.b32 %p1, %r6, 0;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd8+{4 * n}];
    ld.global.f32 %f12, [%rd9];
    ld.global.f32 %f13, [%rd9+4];
    mul.f32 %f3, %f1, {neg_log2e};
    mul.f32 %f10, %f12, {neg_log2e};
    mul.f32 %f11, %f13, {neg_log2e};
    ex2.approx.ftz.f32 %f4, %f3;
{consts}{one}
{pair}
    selp.f32 %f8, %f7, %f6, %p1;
    mul.f32 %f9, %f1, %f2;
    add.f32 %f14, %f4, 0f3F800000;
    rcp.approx.ftz.f32 %f15, %f14;
    mul.f32 %f20, %f15, %f9;
    add.f32 %f16, %f5, 0f3F800000;
    rcp.approx.ftz.f32 %f17, %f16;
    mul.f32 %f21, %f17, %f9;
    add.f32 %f18, %f8, 0f3F800000;
    rcp.approx.ftz.f32 %f19, %f18;
    mul.f32 %f22, %f19, %f9;
{stores}    ret;
""", ".param .u64 out, .param .u64 inp", DECLS)


@pytest.fixture(scope="module")
def swept():
    x, y = sweep()
    n = x.size
    ran = run_ptx(kernel(n), [np.concatenate([x, y])], out_words=len(OUTPUTS) * n, threads=THREADS,
                  grid=(n // THREADS, 1, 1))
    words = ran.words.reshape(len(OUTPUTS), n)
    return x, y, {name: words[j].view(np.float32) for j, name in enumerate(OUTPUTS)}


def test_constants_are_fa4_degree_4_and_exact():
    """POLY_EX2[4] of FlashAttention-4 (flash_attn/cute/utils.py:47-53 @ 0251105a), c0 = 1 exactly; each an f32."""
    assert S.EX2_POLY_COEFFS == (1.0, 0.693042695522308349609375, 0.2412912547588348388671875,
                                 5.2225358784198760986328125e-2, 1.3434938155114650726318359375e-2)
    for c in S.EX2_POLY_COEFFS:
        assert float(np.float32(c)) == c
    f = np.linspace(0, 1, 100001)[:-1]
    p = sum(c * f ** i for i, c in enumerate(S.EX2_POLY_COEFFS))
    assert np.abs(p / 2 ** f - 1).max() < 3.1e-6  # computed: 2.99e-6
    assert S._f32x2_word(1.0) == 0x3F8000003F800000


def test_ex2_poly_against_exact_and_its_edges(swept):
    x, _, out = swept
    with np.errstate(over="ignore", invalid="ignore"):
        t = (x * np.float32(-S.LOG2_E)).astype(np.float32)  # mul.f32, round to nearest: the kernel's t
    e = out["e_one"]
    assert np.array_equal(e.view(np.uint32), out["e_pair"].view(np.uint32))  # scalar and packed forms agree bitwise
    assert not np.isnan(e).any()
    with np.errstate(invalid="ignore"):
        over, under = t >= 128, (t <= -127) | np.isnan(t)
        sub = (t > -127) & (t < -126)
    assert over.sum() > 1000 and under.sum() > 1000 and sub.sum() > 10
    assert np.all(e[over] == np.inf)
    assert np.all(e[under] == 0) and not np.signbit(e[under]).any()
    assert np.all((e[sub] >= 0) & (e[sub] < 2.0 ** -126))
    mid = ~over & ~under & ~sub
    exact = np.exp2(t[mid].astype(np.float64))
    assert np.abs(e[mid] / exact - 1).max() < 4e-6  # computed bound 3.05e-6 (fp32 Horner) plus the final rounding
    # calibration.mufu's numpy model of the same steps (its --silu accuracy report) gives the same words
    assert np.array_equal(mufu_report.ex2_poly_f32(t).view(np.uint32), e.view(np.uint32))
    assert mufu_report.EX2_POLY_COEFFS == S.EX2_POLY_COEFFS and mufu_report.EX2_POLY_CLAMP == S.EX2_POLY_CLAMP
    # ex2.approx.ftz gives the same infinities and zeros
    assert np.all(out["e_mufu"][over] == np.inf) and np.all(out["e_mufu"][t <= -127] == 0)


def test_silu_keeps_today_s_nan_inf_zero_and_sign(swept):
    x, y, out = swept
    today, poly = out["s_mufu"], out["s_one"]
    assert np.array_equal(poly.view(np.uint32), out["s_pair"].view(np.uint32))
    assert np.array_equal(np.isnan(today), np.isnan(poly))
    ok = ~np.isnan(today)
    assert np.array_equal(np.signbit(today[ok]), np.signbit(poly[ok]))
    inf = ok & np.isinf(today)
    assert inf.sum() > 10 and np.array_equal(today[inf], poly[inf])
    zero = ok & (today == 0)
    assert zero.sum() > 1000 and np.all(poly[zero] == 0)
    fin = ok & np.isfinite(today)
    assert np.all(np.isfinite(poly[fin]))
    a, b = today[fin].astype(np.float64), poly[fin].astype(np.float64)
    assert np.all(np.abs(a - b) <= 1e-5 * np.abs(a) + 2.0 ** -120)
    # silu's limit: x -> -inf (t >= 128) gives the signed zero of x * y, exactly as today
    with np.errstate(over="ignore", invalid="ignore"):
        xy = (x * y).astype(np.float32)
        left = (x * np.float32(-S.LOG2_E) >= 128) & np.isfinite(xy)
    assert left.sum() > 1000
    assert np.all(poly[left] == 0) and np.array_equal(np.signbit(poly[left]), np.signbit(xy[left]))


def test_silu_close_to_exact(swept):
    x, y, out = swept
    with np.errstate(over="ignore", invalid="ignore"):
        sel = (np.abs(x) <= 80) & np.isfinite(y) & (y != 0)
        x64, y64 = x[sel].astype(np.float64), y[sel].astype(np.float64)
        exact = x64 * y64 / (1 + np.exp(-x64))
    got = out["s_one"][sel].astype(np.float64)
    assert sel.sum() > 7000
    assert np.all(np.abs(got - exact) <= 1e-5 * np.abs(exact) + 1e-30)


@pytest.mark.parametrize("k, roles", [
    (0, ["mufu"] * 8),
    (1, ["one", "mufu", "mufu", "mufu"] * 2),
    (2, ["pair", "", "mufu", "mufu"] * 2),
    (3, ["pair", "", "one", "mufu"] * 2),
    (4, ["pair", "", "pair", ""] * 2),
])
def test_which_elements_take_the_polynomial(k, roles):
    assert [S._ex2_poly_role(i, 8, k) for i in range(8)] == roles


@pytest.mark.parametrize("cfg, why", [
    (S.KernelConfig(silu_ex2_poly=5), "from 0 (off) to 4"),
    (S.KernelConfig(silu_ex2_poly=-1), "from 0 (off) to 4"),
    (S.KernelConfig(silu_ex2_poly=2.0), "an int"),
    (S.KernelConfig(silu_ex2_poly=2, silu_tanh=True), "exclusive"),
    (S.KernelConfig(silu_ex2_poly=2, problem="nvfp4_gemm"), "SiLU"),
])
def test_bad_values_refused_with_a_reason(cfg, why):
    ok, reason = S.DualGemmKernel.can_implement(cfg, 1024, 1024, 1024, 1)
    assert not ok and why in reason, reason


def test_name_and_tune_space():
    assert S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1), silu_ex2_poly=2).name == "m256n128_c2x1_e32_px2"
    names = {c.name for c in S.TUNE_SPACE if c.silu_ex2_poly}
    assert names == {"m256n64_c2x1_e32_ac_px2", "m256n128_c2x1_e32_px2", "m256n128_c2x1_e32_t3_px2",
                     "m256n128_c2x1_e16_sk2_rs_px2",  # v1.4's table entry for 256x4096
                     "m256n128_c2x1_e16_ac_sk2_rs_px2",  # and its A-collector twin (docs/levers.md section 6)
                     "m256n128_c2x1_e32_t3_s96_px2"}  # with 96 columns of silu held ahead of acc2
    for c in S.TUNE_SPACE:
        assert (f"_px{c.silu_ex2_poly}" in c.name) == bool(c.silu_ex2_poly)
