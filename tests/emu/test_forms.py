"""Instruction forms and shared-memory layout the two public calibration kernels (arseni_ivanov, novus677) needed:
static `__shared__` variables, tanh.approx.f32, cvt.rn.f16.f32, .ftz f32 arithmetic, st.global.wt, setmaxnreg; and
cvt.rn.f16.s32, which the GPU probes' epilogue needed. Hand-written PTX, no DSL, no GPU; each test runs in well under a
second."""
from __future__ import annotations

import numpy as np
import pytest

from emu.machine import RESERVED_SMEM
from emu.state import Hazard, Unsupported
from tests.emu.ptx_kit import kernel_text, run_ptx

DECLS = ".reg .pred %p<8>;\n.reg .b32 %r<64>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<16>;\n.reg .b16 %h<8>;"
STORE_TID = """
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd7, [inp];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    add.s64 %rd8, %rd7, %rd2;
"""
NO_INPUT = np.zeros(64, np.uint32)  # inp of a test that reads none


def kernel(body: str, shared: str = "") -> str:
    """The kernel `k(out, inp)` with `shared` function-scope declarations before its body."""
    return kernel_text(body, ".param .u64 out, .param .u64 inp", DECLS, shared=shared)


# ------------------------------------------------------------------ static shared variables
def test_static_shared_layout_is_static_first_then_dynamic():
    """nvcc demotes a function-scope `__shared__` array into the kernel body; it and the `.extern` buffer must not
    alias: static variables from the start of the window (after the reserved 1 KiB) at their alignment, declaration
    order; the dynamic buffer after them at its declared alignment (CUDA C++ Programming Guide, "Shared Memory")."""
    shared = "    .shared .align 8 .b8 bars[72];\n    .shared .align 16 .b8 small[20];\n    .shared .u32 flag;"
    out, m = run_ptx(kernel(STORE_TID + """
    mov.u32 %r2, bars;
    mov.u32 %r3, small;
    mov.u32 %r4, flag;
    mov.u32 %r5, smem;
    st.global.u32 [%rd1], %r2;
    st.global.u32 [%rd1+4], %r3;
    st.global.u32 [%rd1+8], %r4;
    st.global.u32 [%rd1+12], %r5;
    ret;
""", shared=shared), [NO_INPUT], threads=1)
    layout = m.kernel.shared_layout
    assert layout.offsets == {"bars": 0, "small": 80, "flag": 100} and layout.static_bytes == 104
    assert list(out[:4]) == [RESERVED_SMEM, RESERVED_SMEM + 80, RESERVED_SMEM + 100, 2048]  # smem aligned to 1024
    assert m.dynamic_smem_offset == 2048


def test_static_and_dynamic_shared_hold_separate_data():
    shared = "    .shared .align 8 .b8 bars[64];"
    out, _ = run_ptx(kernel(STORE_TID + """
    mov.u32 %r2, bars;
    mov.u32 %r3, smem;
    shl.b32 %r4, %r1, 2;
    add.s32 %r5, %r2, %r4;
    add.s32 %r6, %r3, %r4;
    st.shared.u32 [%r5], %r1;
    add.s32 %r7, %r1, 1000;
    st.shared.u32 [%r6], %r7;
    bar.sync 0;
    ld.shared.u32 %r8, [%r5];
    st.global.u32 [%rd3], %r8;
    ret;
""", shared=shared), [NO_INPUT], threads=16)
    assert (out[:16] == np.arange(16)).all()


def test_unsized_static_shared_array_is_a_parse_error():
    with pytest.raises(Exception, match="needs a size"):
        run_ptx(kernel("    ret;", shared="    .shared .align 8 .b8 bad[];"), [NO_INPUT])


# ------------------------------------------------------------------ float forms
def test_tanh_approx_is_exact_rounded_without_a_measurement(monkeypatch):
    monkeypatch.setenv("EMU_MUFU_FIXTURE", "none")
    x = np.array([0.0, -0.0, 0.5, -4.25, 9.5, 1e-30, -3e-39, np.inf, -np.inf, np.nan] + [0.0] * 22, np.float32)
    out, _ = run_ptx(kernel(STORE_TID + """
    ld.global.f32 %f1, [%rd8];
    tanh.approx.f32 %f2, %f1;
    st.global.f32 [%rd3], %f2;
    ret;
"""), [x])
    got = out[:32].view(np.float32)
    want = np.tanh(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(got[:9], want[:9])  # subnormal input -3e-39 kept (tanh has no .ftz): tanh(x) = x
    assert out[9] == 0x7FFFFFFF  # canonical NaN


def test_cvt_rn_f16_f32_rounds_to_nearest_even():
    x = np.array([1.0, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 65504.0, 65520.0, -1e9, 2.0 ** -25, np.nan] + [0.0] * 24,
                 np.float32)
    out, _ = run_ptx(kernel(STORE_TID + """
    ld.global.f32 %f1, [%rd8];
    cvt.rn.f16.f32 %h1, %f1;
    cvt.u32.u16 %r2, %h1;
    st.global.u32 [%rd3], %r2;
    ret;
"""), [x])
    with np.errstate(over="ignore"):
        want = x[:7].astype(np.float16).view(np.uint16)
    assert list(out[:7]) == list(want)  # 1+2^-11 ties to 1.0; 65520 -> inf; 2^-25 ties to 0
    assert out[7] == 0x7FFF


def test_ftz_flushes_subnormal_inputs_and_results():
    x = np.array([1e-39, 1e-20, 3.0] + [1.0] * 29, np.float32)
    out, _ = run_ptx(kernel(STORE_TID + """
    ld.global.f32 %f1, [%rd8];
    mul.ftz.f32 %f2, %f1, 0f3F800000;
    mul.ftz.f32 %f3, %f1, 0f1E3CE508;
    add.f32 %f4, %f2, %f3;
    add.ftz.f32 %f5, %f1, 0f00000000;
    mul.f32 %f6, %f1, 0f3F800000;
    st.global.f32 [%rd3], %f4;
    st.global.f32 [%rd3+128], %f5;
    st.global.f32 [%rd3+256], %f6;
    ret;
"""), [x], out_words=96)
    f = out.view(np.float32)
    assert f[0] == 0.0 and f[32] == 0.0  # subnormal input flushed by .ftz (mul and add)
    assert f[1] == np.float32(1e-20)  # 1e-20 * 1e-20 underflows to 0 under .ftz: only the first product remains
    assert f[64] == np.float32(1e-39)  # without .ftz the subnormal survives


# ------------------------------------------------------------------ floating-point min / max
MINMAX_CASES = [(1.0, 2.0), (2.0, 1.0), (-3.0, 5.0), (np.nan, 2.0), (2.0, np.nan), (np.nan, np.nan), (0.0, -0.0),
                (-0.0, 0.0), (-0.0, -0.0), (np.inf, 1.0), (-np.inf, 1.0), (1e-39, -1e-39), (-127.5, -127.0),
                (np.inf, 128.0)]


def _minmax_ref(op: str, a: float, b: float, nan: bool = False, ftz: bool = False) -> float:
    """PTX ISA 9.7.3.11/9.7.3.12 max_num / min_num (max_nan / min_nan with .NaN), "+0.0 > -0.0"."""
    if ftz:
        a, b = (np.copysign(0.0, v) if 0 < abs(v) < 2.0 ** -126 else v for v in (a, b))
    if np.isnan(a) or np.isnan(b):
        if nan or (np.isnan(a) and np.isnan(b)):
            return np.nan
        return b if np.isnan(a) else a
    if a == 0 and b == 0:
        neg = np.signbit(a) and np.signbit(b) if op == "max" else np.signbit(a) or np.signbit(b)
        return -0.0 if neg else 0.0
    return max(a, b) if op == "max" else min(a, b)


@pytest.mark.parametrize("form", ["max.f32", "min.f32", "max.ftz.f32", "min.ftz.f32", "max.NaN.f32", "min.NaN.f32"])
def test_float_min_max_follow_the_isa(form):
    """A NaN input gives the other input (NaN only when both are, or with .NaN), +0 > -0, .ftz flushes; the
    emulator once used numpy's minimum/maximum, which propagate NaN (FA4's ex2 emulation clamps with max.f32)."""
    a = np.array([c[0] for c in MINMAX_CASES] + [1.0] * (32 - len(MINMAX_CASES)), np.float32)
    b = np.array([c[1] for c in MINMAX_CASES] + [1.0] * (32 - len(MINMAX_CASES)), np.float32)
    out, _ = run_ptx(kernel(STORE_TID + f"""
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd8+128];
    {form} %f3, %f1, %f2;
    st.global.f32 [%rd3], %f3;
    ret;
"""), [np.concatenate([a, b])], out_words=32)
    op = form.split(".")[0]
    got = out.view(np.float32)
    for i, (x, y) in enumerate(MINMAX_CASES):
        want = _minmax_ref(op, float(x), float(y), nan="NaN" in form, ftz="ftz" in form)
        if np.isnan(want):
            assert out[i] == 0x7FFFFFFF, (form, x, y, hex(out[i]))  # the canonical NaN
        else:
            assert got[i] == want and np.signbit(got[i]) == np.signbit(want), (form, x, y, got[i], want)


def test_three_input_max_and_the_clamp_idiom():
    """max with three inputs (PTX ISA 8.8, sm_100+) is two_inputs(two_inputs(a, b), c); min(max(x, lo), hi) sends NaN
    to lo (max drops the NaN for lo, which min keeps)."""
    x = np.array([np.nan, -np.inf, np.inf, 3.5, -200.0] + [0.0] * 27, np.float32)
    out, _ = run_ptx(kernel(STORE_TID + """
    ld.global.f32 %f1, [%rd8];
    max.f32 %f2, %f1, 0fC2FE0000, 0f40000000;
    max.ftz.f32 %f3, %f1, 0fC2FE0000;
    min.ftz.f32 %f3, %f3, 0f43000000;
    st.global.f32 [%rd3], %f2;
    st.global.f32 [%rd3+128], %f3;
    ret;
"""), [x], out_words=64)
    f = out.view(np.float32)
    assert list(f[:5]) == [2.0, 2.0, np.inf, 3.5, 2.0]
    assert list(f[32:37]) == [-127.0, -127.0, 128.0, 3.5, -127.0]


def test_min_max_forms_not_in_the_isa_are_unsupported():
    for form in ("max.f32 %f3, %f1", "max.NaN.f64 %fd1, %fd1, %fd1, %fd1", "max.xorsign.abs.f32 %f3, %f1, %f2"):
        with pytest.raises(Unsupported):
            run_ptx(kernel("    .reg .f64 %fd<4>;\n    " + form + ";\n    ret;\n"), [NO_INPUT], threads=1)


# ------------------------------------------------------------------ stores with cache operators
def test_st_global_wt_and_other_cache_operators_store_the_value():
    out, _ = run_ptx(kernel(STORE_TID + """
    add.s32 %r2, %r1, 5;
    st.global.wt.b32 [%rd3], %r2;
    st.global.cs.b32 [%rd3+128], %r2;
    ld.global.cg.u32 %r3, [%rd3];
    st.global.wb.b32 [%rd3+256], %r3;
    ret;
"""), [NO_INPUT], out_words=96)
    assert (out[:32] == np.arange(32) + 5).all() and (out[32:64] == out[:32]).all() and (out[64:] == out[:32]).all()


def test_cache_operator_of_the_other_direction_is_unsupported():
    with pytest.raises(Unsupported, match="modifier .wt"):
        run_ptx(kernel(STORE_TID + "    ld.global.wt.u32 %r2, [%rd3];\n    ret;"), [NO_INPUT])


# ------------------------------------------------------------------ setmaxnreg
SETMAXNREG_SPLIT = STORE_TID + """
    shr.u32 %r2, %r1, 5;
    setp.lt.u32 %p1, %r2, 4;
    @!%p1 bra PRODUCER;
    setmaxnreg.inc.sync.aligned.u32 232;
    bra DONE;
PRODUCER:
    setmaxnreg.dec.sync.aligned.u32 40;
DONE:
    st.global.u32 [%rd3], %r2;
    ret;
"""


def test_setmaxnreg_per_warpgroup():
    # warps 0-3 (a warpgroup) raise, warps 4-5 (an incomplete second warpgroup, as in novus677's 192-thread CTA)
    # lower: each warpgroup executes one setmaxnreg instruction in all its warps
    out, _ = run_ptx(kernel(SETMAXNREG_SPLIT), [NO_INPUT], threads=192, out_words=192)
    assert (out == np.arange(192) // 32).all()


def test_setmaxnreg_count_range_and_alignment():
    for bad in (16, 260, 100):
        with pytest.raises(Hazard, match="multiple of 8 in \\[24, 256\\]"):
            run_ptx(kernel(f"    setmaxnreg.inc.sync.aligned.u32 {bad};\n    ret;"), [NO_INPUT])


def test_setmaxnreg_must_be_the_same_instruction_in_a_warpgroup():
    body = STORE_TID + """
    shr.u32 %r2, %r1, 5;
    setp.eq.u32 %p1, %r2, 1;
    @%p1 bra OTHER;
    setmaxnreg.inc.sync.aligned.u32 232;
    bra DONE;
OTHER:
    setmaxnreg.inc.sync.aligned.u32 232;
DONE:
    ret;
"""
    with pytest.raises(Hazard, match="same instruction must be executed by all warps in a warpgroup"):
        run_ptx(kernel(body), [NO_INPUT], threads=128)


def test_setmaxnreg_skipped_by_one_warp_is_caught_at_exit():
    body = STORE_TID + """
    shr.u32 %r2, %r1, 5;
    setp.eq.u32 %p1, %r2, 3;
    @%p1 bra DONE;
    setmaxnreg.dec.sync.aligned.u32 40;
DONE:
    ret;
"""
    with pytest.raises(Hazard, match="different numbers of setmaxnreg"):
        run_ptx(kernel(body), [NO_INPUT], threads=128)


def test_setmaxnreg_by_part_of_a_warp_is_a_hazard():
    body = STORE_TID + """
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra DONE;
    setmaxnreg.dec.sync.aligned.u32 40;
DONE:
    ret;
"""
    with pytest.raises(Hazard, match="sync.aligned"):
        run_ptx(kernel(body), [NO_INPUT], threads=32)


# ------------------------------------------------------------------ cvt.rn.f16.s32 (the epilogue probe's form)
CVT_PTX = kernel_text("""    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r2, [%rd3];
    cvt.rn.f16.s32 %rs1, %r2;
    cvt.u32.u16 %r3, %rs1;
    st.global.u32 [%rd3], %r3;
    ret;""", decls=".reg .b32 %r<8>;\n.reg .b16 %rs<4>;\n.reg .b64 %rd<8>;", smem=False)


def _run_cvt(values):
    """Each value converted by one thread, in place in out."""
    init = np.array(values + [0] * (32 - len(values)), np.int32)
    out = run_ptx(CVT_PTX, out_words=32, init=init, dynamic_smem=0).words
    return out[:len(values)].astype(np.uint16).view(np.float16)


def test_cvt_rn_f16_s32_rounds_to_nearest_even():
    """PTX ISA 9.7.9.21 cvt.rn.f16.s32: nearest, ties to even (f16 spacing is 2 in [2048, 4096), 32 at 65504)."""
    values = [0, 1, -1, 127, 2049, 2051, -2049, 2050, 65504, 65519, -65519]
    want = [0, 1, -1, 127, 2048, 2052, -2048, 2050, 65504, 65504, -65504]
    assert _run_cvt(values).tolist() == want


def test_cvt_rn_f16_s32_beyond_f16_range_is_unsupported():
    with pytest.raises(Unsupported, match="f16's finite range"):
        _run_cvt([65520])


@pytest.mark.parametrize("ftz", ["", ".ftz"])
def test_cvt_sat_f32_clamps_to_the_unit_interval(ftz):
    """cvt{.ftz}.sat.f32.f32 (CuTe DSL 4.8.1's exp clamps with it): [0.0, 1.0], NaN -> +0.0; .ftz flushes a
    subnormal first (PTX ISA 9.7.9.21)."""
    x = np.array([-2.0, -0.0, 0.25, 1.0, 7.5, np.inf, -np.inf, np.nan, 1e-40] + [0.5] * 23, np.float32)
    out, _ = run_ptx(kernel(STORE_TID + f"""
    ld.global.f32 %f1, [%rd8];
    cvt{ftz}.sat.f32.f32 %f2, %f1;
    st.global.f32 [%rd3], %f2;
    ret;
"""), [x])
    got = out.view(np.float32)[:9]
    assert list(got[:8]) == [0.0, 0.0, 0.25, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert np.signbit(got[7]) == np.False_  # NaN -> +0.0
    assert got[8] == (0.0 if ftz else np.float32(1e-40))


@pytest.mark.parametrize("ty", ["u16", "s16"])
def test_div_16_bit_truncates_toward_zero(ty):
    """div.{u,s}16 (PTX ISA 9.7.1.6; nvcc emits div.u16 for a short's / in jIab-b's sub_test.py): the quotient
    truncated toward zero, in 16 bits; each thread divides its input's low half by its high half."""
    pairs = [(7, 2), (65535, 3), (100, 7), (5, 5)] if ty == "u16" else [(-7, 2), (7, -2), (-32768, 3), (9, 4)]
    words = np.array([(a & 0xFFFF) | ((b & 0xFFFF) << 16) for a, b in pairs] + [(1 | 1 << 16)] * 28, np.uint32)
    out, _ = run_ptx(kernel(STORE_TID + f"""
    ld.global.u32 %r2, [%rd8];
    mov.b32 {{%h1, %h2}}, %r2;
    div.{ty} %h3, %h1, %h2;
    cvt.{ty[0]}32.{ty} %r3, %h3;
    st.global.u32 [%rd3], %r3;
    ret;
"""), [words])
    got = out.view(np.int32 if ty == "s16" else np.uint32)[:4]
    assert got.tolist() == [int(a / b) for a, b in pairs]  # Python's a / b then int(): truncation toward zero


def test_rem_keeps_the_dividend_s_sign_and_refuses_zero():
    """rem.{s,u}32 (PTX ISA 9.7.1 "rem": the remainder of div's truncating division, so C's %): (13 - t) rem 5 and
    t rem 7; a zero divisor is unspecified, a Hazard as div's."""
    out, _ = run_ptx(kernel(STORE_TID + """
    sub.s32 %r2, 13, %r1;
    rem.s32 %r3, %r2, 5;
    rem.u32 %r4, %r1, 7;
    st.global.u32 [%rd3], %r3;
    st.global.u32 [%rd3+128], %r4;
    ret;
"""), [NO_INPUT], threads=32)
    t = np.arange(32)
    assert (out[:32].view(np.int32) == np.fmod(13 - t, 5)).all() and (out[32:64] == t % 7).all()
    with pytest.raises(Hazard):
        run_ptx(kernel(STORE_TID + "    rem.u32 %r4, %r1, 0;\n    ret;\n"), [NO_INPUT], threads=32)
