"""tcgen05.mma.ws (weight stationary, PTX ISA 9.7.16.10.9.3): shapes, D's cells, the B collector buffers, the
zero-column mask that masks nothing, and what stays refused.

The expected values are built from torch / numpy as tests/emu/test_mma_kinds.py builds them; D's cells are written out
here from CUTLASS tmem_frg_ws's atoms (mma_traits_sm100_frag.hpp): M = 32 "1x4" (32,(N/4,4)):(1,(128,32)), M = 64 "2x2"
(64,(N/2,2)):(1,(128,64)), in (lane + 128 column) units.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from emu.isa import decode_kernel
from emu.ptx import parse_module
from emu.state import POISON_WORD, Hazard, Unsupported
from emu.tcgen05 import mma
from tests.emu.ptx_kit import kernel_text, run_ptx, wait_loop
from tests.emu.test_mma_kinds import A_BASE, B_BASE, CUTLASS_F16, SW128, as_f64, desc, idesc, k_major, ready

B2_BASE = 96 * 1024


def f16_operands(rng, rows, n):
    a = torch.from_numpy(rng.standard_normal((rows, 64))).to(torch.float16)
    b = torch.from_numpy(rng.standard_normal((n, 64))).to(torch.float16)
    return a, b


def test_ws_m64_writes_the_2x2_layout():
    """M = 64: D column j < N/2 at lane i, column col + j; j >= N/2 at lane 64 + i, column col + j - N/2. The
    non-.ws M = 64 layout (lanes 16-at-a-time, N columns) would leave lanes 64..127 unwritten (negative control)."""
    rng = np.random.default_rng(61)
    (cta,) = ready()
    a, b = f16_operands(rng, 64, 64)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    mma([cta], 8, desc(A_BASE + 32), desc(B_BASE + 32), idesc(64, 64, 0, 0), kind="f16", collector="b0::discard")
    expect = (as_f64(a)[:, 16:32] @ as_f64(b)[:, 16:32].T).astype(np.float32)
    got = np.concatenate([cta.tmem[0:64, 8:40], cta.tmem[64:128, 8:40]], axis=1).view(np.float32)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)
    assert (cta.tmem[:, 40:72] == POISON_WORD).all()  # N / 2 columns, not N


def test_ws_m32_i8_writes_the_1x4_layout():
    """M = 32: D column j at lane i + 32 (j // (N/4)), column col + j % (N/4)."""
    rng = np.random.default_rng(62)
    (cta,) = ready()
    a = rng.integers(-128, 128, (32, 128)).astype(np.int8)
    b = rng.integers(-128, 128, (128, 128)).astype(np.int8)
    k_major(cta.smem, A_BASE, a)
    k_major(cta.smem, B_BASE, b)
    mma([cta], 0, desc(A_BASE + 32), desc(B_BASE + 32), idesc(32, 128, 1, 1, dtype=2), kind="i8",
        collector="b0::discard")
    exact = a[:, 32:64].astype(np.int64) @ b[:, 32:64].astype(np.int64).T  # [32, 128]
    got = np.concatenate([cta.tmem[32 * q:32 * q + 32, 0:32] for q in range(4)], axis=1).view(np.int32)
    np.testing.assert_array_equal(got, exact)
    assert (cta.tmem[:, 32:128] == POISON_WORD).all()


def test_ws_m128_is_layout_d():
    rng = np.random.default_rng(63)
    (cta,) = ready()
    a, b = f16_operands(rng, 128, 256)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    mma([cta], 0, desc(A_BASE), desc(B_BASE), idesc(128, 256, 0, 0), kind="f16", collector="b3::discard")
    expect = (as_f64(a)[:, :16] @ as_f64(b)[:, :16].T).astype(np.float32)
    np.testing.assert_allclose(cta.tmem[:, 0:256].view(np.float32), expect, rtol=1e-6, atol=1e-6)


def test_ws_b_collector_buffers_fill_use_lastuse():
    """fill keeps B in buffer N; use / lastuse read it whatever b-desc names (b-desc here names a different B); lastuse
    and discard empty it; each buffer is its own."""
    rng = np.random.default_rng(64)
    (cta,) = ready()
    a, b = f16_operands(rng, 128, 64)
    _, b2 = f16_operands(rng, 128, 64)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    k_major(cta.smem, B2_BASE, b2.view(torch.int16).numpy())
    word = idesc(128, 64, 0, 0)
    with_b = (as_f64(a)[:, :16] @ as_f64(b)[:, :16].T).astype(np.float32)
    with_b2 = (as_f64(a)[:, :16] @ as_f64(b2)[:, :16].T).astype(np.float32)
    mma([cta], 0, desc(A_BASE), desc(B_BASE), word, kind="f16", collector="b2::fill")
    mma([cta], 64, desc(A_BASE), desc(B2_BASE), word, kind="f16", collector="b2::use")
    np.testing.assert_allclose(cta.tmem[:, 64:128].view(np.float32), with_b, rtol=1e-6, atol=1e-6)
    with pytest.raises(Hazard, match="B collector buffer 1 is empty"):
        mma([cta], 64, desc(A_BASE), desc(B2_BASE), word, kind="f16", collector="b1::use")
    mma([cta], 128, desc(A_BASE), desc(B2_BASE), word, kind="f16", collector="b2::lastuse")
    np.testing.assert_allclose(cta.tmem[:, 128:192].view(np.float32), with_b, rtol=1e-6, atol=1e-6)
    with pytest.raises(Hazard, match="B collector buffer 2 is empty"):
        mma([cta], 64, desc(A_BASE), desc(B2_BASE), word, kind="f16", collector="b2::use")
    mma([cta], 192, desc(A_BASE), desc(B2_BASE), word, kind="f16", collector="b2::discard")  # reads b-desc
    np.testing.assert_allclose(cta.tmem[:, 192:256].view(np.float32), with_b2, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kw, error, match", [
    (dict(idesc=idesc(128, 32, 0, 0), kind="f16"), Hazard, r"M = 32 / 64 / 128, N = 64 / 128 / 256"),
    (dict(idesc=idesc(256, 64, 0, 0), kind="f16"), Hazard, r"M = 32 / 64 / 128"),
    (dict(idesc=idesc(128, 64, 0, 0), kind="f16", d_taddr=16 << 16), Hazard, r"lane field must be 0"),
    (dict(idesc=idesc(128, 64, 0, 0), kind="f16", zero_column_mask=1 << 39), Unsupported, r"masks or shifts"),
    (dict(idesc=idesc(128, 64, 0, 0), kind="f16", zero_column_mask=3 << 56), Unsupported, r"masks or shifts"),
    (dict(idesc=idesc(128, 64, 0, 0), kind="f16", zero_column_mask=1 << 37), Hazard, r"reserved bits \[36,39\)"),
    (dict(idesc=idesc(128, 64, 0, 0) | (1 << 30), kind="f16"), Unsupported, r"maximum shift"),
])
def test_ws_refusals(kw, error, match):
    (cta,) = ready()
    cta.smem[:] = 0
    with pytest.raises(error, match=match):
        mma([cta], kw.pop("d_taddr", 0), desc(A_BASE), desc(B_BASE), collector="b0::discard", **kw)


def test_ws_zero_column_mask_that_masks_nothing_runs():
    """PTX ISA 9.7.16.4.3 Example 1: Non-Zero Mask 0 gives mask 0x0 whatever the spans say: every column of B used."""
    rng = np.random.default_rng(65)
    (cta,) = ready()
    a, b = f16_operands(rng, 128, 64)
    k_major(cta.smem, A_BASE, a.view(torch.int16).numpy())
    k_major(cta.smem, B_BASE, b.view(torch.int16).numpy())
    mask = (4 << 40) | (3 << 48)  # Skip Span 4, Use Span 3, Non-Zero Mask 0, no shift
    mma([cta], 0, desc(A_BASE), desc(B_BASE), idesc(128, 64, 0, 0), kind="f16", collector="b0::discard",
        zero_column_mask=mask)
    expect = (as_f64(a)[:, :16] @ as_f64(b)[:, :16].T).astype(np.float32)
    np.testing.assert_allclose(cta.tmem[:, 0:64].view(np.float32), expect, rtol=1e-6, atol=1e-6)


DECLS = "  .reg .pred %p<3>;\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<4>;"


def test_ws_decodes_its_collector_and_mask_operand():
    k = parse_module(kernel_text("""
  tcgen05.mma.ws.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;
  tcgen05.mma.ws.cta_group::1.kind::i8.collector::b2::use [%r1], %rd1, %rd2, %r2, %p1, %rd3;
  tcgen05.mma.ws.cta_group::1.kind::tf32.collector::b3::fill [%r1], [%r3], %rd2, %r2, %p1;
  ret;""", params="", decls=DECLS, smem=False))
    decode_kernel(k)
    assert [i.info for i in k.instrs if i.base == "tcgen05"] == [
        ("mma", 1, "f16", None, "b0::discard"), ("mma", 1, "i8", None, "b2::use"), ("mma", 1, "tf32", None, "b3::fill")]


@pytest.mark.parametrize("form", [
    "tcgen05.mma.ws.cta_group::1.kind::f16.collector::a::fill [%r1], %rd1, %rd2, %r2, %p1;",  # .ws has B's collector
    "tcgen05.mma.cta_group::1.kind::f16.collector::b0::fill [%r1], %rd1, %rd2, %r2, %p1;",  # only .ws has it
    "tcgen05.mma.ws.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, {%r3, %r4, %r5, %r6}, %p1;",
])
def test_ws_forms_the_isa_does_not_define(form):
    k = parse_module(kernel_text(form + "\n ret;", params="", decls=DECLS, smem=False))
    with pytest.raises(Unsupported):
        decode_kernel(k)


def test_ws_runs_from_ptx_with_a_zero_column_mask_operand():
    """The .ws form in a kernel: its sixth operand is the 64-bit zero-column mask (here the `lane_mask` parameter
    widened): 0 runs, a Non-Zero Mask bit is Unsupported."""
    body = (CUTLASS_F16.replace("SW128_BITS", str(SW128)).replace("IDESC", str(idesc(128, 64, 0, 0)))
            .replace("WAIT", wait_loop("[%r9+8]", hint=None))
            .replace("ld.param.u32 %r31, [lane_mask];", "ld.param.u64 %rd3, [zero_mask];")
            .replace("tcgen05.mma.cta_group::1.kind::f16 [%r20], %rd2, %rd2, %r12, {%r30, %r30, %r30, %r31}, %p4;",
                     "tcgen05.mma.ws.cta_group::1.kind::f16.collector::b1::fill [%r20], %rd2, %rd2, %r12, %p4, %rd3;"))
    ptx = kernel_text(body, params=".param .u64 out, .param .u64 zero_mask")
    assert run_ptx(ptx, args=(0,), threads=32, dynamic_smem=32768).machine.stats["mma"] == 1
    with pytest.raises(Unsupported, match="masks or shifts"):
        run_ptx(ptx, args=(1 << 39,), threads=32, dynamic_smem=32768)
