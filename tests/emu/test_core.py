"""Unit tests of the emulator's core: the PTX parser, warps and divergence, named barriers and the
unsupported-instruction error (no DSL, no GPU: hand-written PTX). mbarriers and cluster barriers:
tests/emu/test_mbarrier.py."""
from __future__ import annotations

import numpy as np
import pytest

from emu.isa import decode_kernel
from emu.ptx import Addr, Imm, Pair, Reg, Sym, TensorCoords, Vec, parse_module
from emu.state import Hazard, Unsupported
from tests.emu.ptx_kit import STORE_TID, kernel_text, run_ptx


# ------------------------------------------------------------------ parser
def test_parser_operands_and_scoped_labels():
    text = kernel_text("""
    mov.b64 %rd1, {%r1, %r2};
    elect.sync %r3|%p1, -1;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4+16], [%rd2, {%r5, %r6}], [%r7];
    mov.b32 %r8, 0f3F800000;
    @!%p1 bra $L__X;
    {
    .reg .pred P1;
    LAB: @P1 bra.uni DONE;
    bra.uni LAB;
    DONE:
    }
    {
    .reg .pred P1;
    LAB: @P1 bra.uni DONE;
    DONE:
    }
$L__X:
    ret;
""")
    k = parse_module(text)
    ops = [i.opcode for i in k.instrs]
    assert ops[:4] == ["mov.b64", "elect.sync", "cp.async.bulk.tensor.2d.shared::cluster.global.tile."
                       "mbarrier::complete_tx::bytes", "mov.b32"]
    assert k.instrs[0].operands[1] == Vec((Reg("%r1"), Reg("%r2")))
    assert k.instrs[1].operands[0] == Pair(Reg("%r3"), Reg("%p1"))
    tma = k.instrs[2]
    assert tma.operands[0] == Addr(Reg("%r4"), 16)
    assert tma.operands[1] == TensorCoords(Reg("%rd2"), (Reg("%r5"), Reg("%r6")))
    assert k.instrs[3].operands[1] == Imm(1.0, True)
    assert k.instrs[4].guard == (Reg("%p1"), True)
    # the two blocks' labels and .reg names are their own: each DONE branch lands inside its block
    branches = [i for i in k.instrs if i.base == "bra" and i.operands[0].name.startswith("DONE")]
    assert len({b.target for b in branches}) == 2
    assert {b.guard[0].name for b in branches} == {"P1@1", "P1@2"}
    assert k.params[0].name == "out" and k.params[0].size == 8
    assert isinstance(k.instrs[-1].operands, tuple) and k.instrs[-1].opcode == "ret"
    assert isinstance(parse_module(kernel_text("mov.u64 %rd1, out;")).instrs[0].operands[1], Sym)


def test_statements_end_at_semicolons_not_at_line_ends():
    """PTX ISA 4.3: a statement ends with ';', whatever lines it spans; inline asm written "opcode\\n operands;" puts
    an opcode on one line and its operands on the next (jIab-b's tcgen05.mma), and a vector operand's '{' may open a
    line. Debugging directives (.loc) end at their line. A statement is numbered by its first line."""
    text = kernel_text(STORE_TID + """
    .loc 1 7 0
    mov.b32 %r2,
        7;
    {
    .reg .pred P1;
    setp.ne.b32 P1, %r2, 0;
    @P1 mov.b64
    %rd4,
    {%r2, %r2};
    }
    add.s32 %r3, %r2, 1; st.global.u32
    [%rd3], %r3;
    ret;
""")
    k = parse_module(text)
    ops = [(i.opcode, len(i.operands)) for i in k.instrs]
    assert ops[4:8] == [("mov.b32", 2), ("setp.ne.b32", 3), ("mov.b64", 2), ("add.s32", 3)]
    assert k.instrs[6].operands[1] == Vec((Reg("%r2"), Reg("%r2"))) and k.instrs[6].guard is not None
    assert k.instrs[4].line == text.split("\n").index("    mov.b32 %r2,") + 1
    out, _ = run_ptx(text, threads=32)
    assert (out[:32] == 8).all()


def test_unsupported_forms_are_named_with_their_line():
    k = parse_module(kernel_text("    add.s32 %r1, %r2, %r3;\n    tcgen05.mma.sp.cta_group::1.kind::f16 [%r1], %rd1, %rd2, [%r2], %r3, %p1;\n"
                                 "    vote.sync.any.pred %p1, %p2, -1;"))
    with pytest.raises(Unsupported) as e:
        decode_kernel(k)
    msg = str(e.value)
    assert "tcgen05.mma.sp.cta_group::1.kind::f16" in msg and "vote.sync.any.pred" in msg and "PTX line" in msg


# ------------------------------------------------------------------ SIMT
def test_divergence_reconverges_and_loops_per_lane():
    # odd lanes take a branch; each lane loops tid % 4 times; all lanes store after reconverging
    out, _ = run_ptx(kernel_text(STORE_TID + """
    and.b32 %r2, %r1, 1;
    setp.eq.b32 %p1, %r2, 1;
    mov.b32 %r3, 100;
    @%p1 bra ODD;
    mov.b32 %r3, 200;
ODD:
    and.b32 %r4, %r1, 3;
    mov.b32 %r5, 0;
LOOP:
    setp.ge.s32 %p2, %r5, %r4;
    @%p2 bra END;
    add.s32 %r3, %r3, 1000;
    add.s32 %r5, %r5, 1;
    bra LOOP;
END:
    st.global.u32 [%rd3], %r3;
    ret;
"""), out_words=32)
    tid = np.arange(32)
    assert (out == np.where(tid % 2 == 1, 100, 200) + 1000 * (tid % 4)).all()


def test_elect_picks_one_member_by_seed():
    leaders = set()
    for seed in range(6):
        out, _ = run_ptx(kernel_text(STORE_TID + """
    elect.sync %r2|%p1, -1;
    selp.b32 %r3, 1, 0, %p1;
    st.global.u32 [%rd3], %r3;
    ret;
"""), out_words=32, seed=seed)
        assert out.sum() == 1
        leaders.add(int(np.flatnonzero(out)[0]))
    assert len(leaders) > 1  # which lane leads is unspecified: the emulator varies it


def test_bra_uni_that_diverges_is_a_hazard():
    with pytest.raises(Hazard, match="bra.uni"):
        run_ptx(kernel_text(STORE_TID + """
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra.uni SKIP;
SKIP:
    ret;
"""))


def test_named_barrier_orders_shared_memory_between_warps():
    # warp 1 writes smem, bar.sync, warp 0 reads it
    out, _ = run_ptx(kernel_text(STORE_TID + """
    mov.u32 %r9, smem;
    shl.b32 %r6, %r1, 2;
    add.s32 %r7, %r9, %r6;
    setp.ge.u32 %p1, %r1, 32;
    @!%p1 bra WAIT;
    add.s32 %r8, %r1, 7;
    st.shared.u32 [%r7+-128], %r8;
WAIT:
    bar.sync 1, 64;
    @%p1 bra DONE;
    ld.shared.u32 %r10, [%r7];
    st.global.u32 [%rd3], %r10;
DONE:
    ret;
"""), threads=64, out_words=64)
    assert (out[:32] == np.arange(32) + 32 + 7).all()
