"""st.async (PTX ISA 9.7.9.12) in the emulator: a store into another CTA's shared memory that completes tx on an
mbarrier of that CTA (hand-written PTX, two CTAs of a cluster; no DSL, no GPU). The kernel's split_k and
product_per_cta exchanges are built on it."""
from __future__ import annotations

import pytest

from emu.isa import decode_kernel
from emu.ptx import parse_module
from emu.state import Hazard, Unsupported
from tests.emu.ptx_kit import STORE_TID, WAIT, kernel_text, run_ptx

# CTA 1's thread 0 stores four words into CTA 0's shared memory at smem+16 with st.async, completing tx on CTA 0's
# mbarrier at smem+0, and arrives on it expecting those 16 bytes; CTA 0's thread 0 waits, then copies the words out.
SEND = STORE_TID + """
    mov.u32 %r9, smem;
    mov.u32 %r10, %cluster_ctarank;
    setp.ne.u32 %p3, %r1, 0;
    setp.eq.u32 %p4, %r10, 0;
    @%p3 bra SYNC;
    @!%p4 bra SYNC;
    mov.b32 %r2, 1;
    mbarrier.init.shared.b64 [%r9], %r2;
SYNC:
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.relaxed;
    barrier.cluster.wait;
    @%p3 bra EXIT;
    @%p4 bra RECV;
    mov.b32 %r11, 0;
    mapa.shared::cluster.u32 %r12, %r9, %r11;
    add.s32 %r13, %r9, DST;
    mapa.shared::cluster.u32 %r14, %r13, %r11;
    mov.b32 %r20, 11;
    mov.b32 %r21, 12;
    mov.b32 %r22, 13;
    mov.b32 %r23, 14;
    MBAR_FIX
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%r14], {%r20, %r21, %r22, %r23}, [%r12];
    mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%r12], 16;
    bra EXIT;
RECV:
""" + WAIT + """    ld.shared.v4.b32 {%r30, %r31, %r32, %r33}, [%r9+16];
    st.global.v4.b32 [%rd3], {%r30, %r31, %r32, %r33};
EXIT:
    ret;
"""


def send(dst: int = 16, mbar_fix: str = "") -> str:
    return SEND.replace("DST", str(dst)).replace("MBAR_FIX", mbar_fix)


def test_st_async_lands_in_the_peer_and_completes_its_mbarrier():
    for seed in range(6):  # completion may come before or after the sender's expect-tx
        out, m = run_ptx(kernel_text(send()), grid=(2, 1, 1), cluster=(2, 1, 1), seed=seed)
        assert list(out[:4]) == [11, 12, 13, 14]
        assert m.stats["st_async_bytes"] == 16


def test_st_async_mbarrier_in_another_cta_than_the_destination_is_a_hazard():
    # the mbarrier operand names the sending CTA (rank 1) while the data goes to rank 0
    bad = send(mbar_fix="mov.b32 %r15, 1;\n    mapa.shared::cluster.u32 %r12, %r9, %r15;")
    with pytest.raises(Hazard, match="same CTA"):
        run_ptx(kernel_text(bad), grid=(2, 1, 1), cluster=(2, 1, 1))


def test_st_async_misaligned_vector_is_a_hazard():
    with pytest.raises(Hazard, match="aligned"):
        run_ptx(kernel_text(send(dst=24)), grid=(2, 1, 1), cluster=(2, 1, 1))


def test_st_async_forms():
    ok = parse_module(kernel_text(
        "    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r1], {%r2, %r3, %r4, %r5}, [%r6];\n"
        "    st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.b64 [%r1], %rd2, [%r6];"))
    decode_kernel(ok)
    for form in ("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b64 [%r1], {%rd2, %rd3, %rd4, %rd5}, [%r6];",
                 "st.async.shared::cluster.v4.b32 [%r1], {%r2, %r3, %r4, %r5}, [%r6];"):
        with pytest.raises(Unsupported):
            decode_kernel(parse_module(kernel_text("    " + form)))
