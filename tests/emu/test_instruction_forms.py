"""emu/forms.py: a kernel's instruction forms (calibration/ptx_ledger.py compares kernels by them). Hand-written PTX."""
from __future__ import annotations

from emu.forms import canonical_form, forms
from tests.emu.ptx_kit import kernel_text

BODY = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    add.s32 %r2, %r1, 7;
    add.s32 %r3, %r1, %r2;
    st.global.v4.b32 [%rd1+16], {%r1, %r2, %r3, %r3};
    st.global.v4.b32 [%rd1], {%r3, %r2, %r1, %r1};
    elect.sync %r4|%p1, -1;
    @%p1 tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r1], %rd1, %rd1, 5, [%r2], [%r3], %p1;
    @%p1 tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%r1], %rd1, %rd1, %r4, [%r2], [%r3], %p1;
    ret;
"""


def test_a_form_is_the_opcode_with_the_shape_of_its_operands():
    got = forms(kernel_text(BODY))
    # a register and an immediate are one value (the hardware is asked the same); an address's offset is no part of it
    assert got["add.s32 v, v, v"] == 2 and got["st.global.v4.b32 [a], {4}"] == 2
    assert got["elect.sync v|v, v"] == 1 and got["ld.param.b64 v, [a]"] == 1  # bits moved: .u64 reads as .b64
    # the ISA's two spellings of the 16-element block scale are one instruction
    assert got["tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [a], v, v, v, [a], [a], v"] == 2
    assert not any("block16" in f for f in got)


def test_forms_written_in_another_spelling_read_as_todays():
    assert canonical_form("tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [a], v") == \
        "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X [a], v"
    assert canonical_form("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.block32 [a]") == \
        "tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.block32 [a]"  # another kind: not this alias
    # a load or store moves bits: its .u32 is the .b32 instruction; arithmetic keeps its type (mul.hi.u32 is not .s32)
    assert canonical_form("ld.shared.u32 v, [a]") == "ld.shared.b32 v, [a]"
    assert canonical_form("st.global.v4.s32 [a], {4}") == "st.global.v4.b32 [a], {4}"
    assert canonical_form("mul.hi.u32 v, v, v") == "mul.hi.u32 v, v, v"
