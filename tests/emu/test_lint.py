"""The kernel-wide static pass (emu.lint): cta_group, mbarrier state spaces, tensor-memory alloc pairing, alignment
where the PTX proves it; and the alignment check at execution where it cannot (hand-written PTX, no DSL, no GPU).
The same rules on the real kernel: the planted bugs of harness/mutants.py (tests/harness/test_mutants.py, slow)."""
from __future__ import annotations

import pytest

from emu import lint
from emu.ptx import parse_module
from emu.state import Hazard
from tests.emu.ptx_kit import kernel_text, run_ptx, static_pass


CLEAN = """
    mov.u32 %r1, smem;
    add.s32 %r2, %r1, 16;
    st.shared.v4.b32 [%r2], {%r3, %r4, %r5, %r6};
    mbarrier.init.shared.b64 [%r1+8], 1;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1+64], 32;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r7, 32;
    ret;
"""


def test_lint_passes_a_clean_kernel():
    assert static_pass(kernel_text(CLEAN)) == ""


@pytest.mark.parametrize("edit,words", [
    (("tcgen05.dealloc.cta_group::1", "tcgen05.dealloc.cta_group::2"), "[cta-group]"),
    (("    ret;", "    mbarrier.try_wait.parity.shared::cluster.b64 %p1, [%r1+8], 0;\n    ret;"), "[mbarrier-space]"),
    (("    ret;", "    mbarrier.arrive.shared::cluster.b64 %rd1, [%r1+8];\n    ret;"), "sink `_`"),
    (("    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r7, 32;\n", ""), "[tmem-pairing]"),
    (("shared::cta.b32 [%r1+64], 32;", "shared::cta.b32 [%r1+64], 48;"), "nCols 48"),
    (("add.s32 %r2, %r1, 16;", "add.s32 %r2, %r1, 8;"), "[alignment]"),
    (("mbarrier.init.shared.b64 [%r1+8], 1;", "mbarrier.init.shared.b64 [%r1+4], 1;"), "8-byte aligned"),
])
def test_lint_rules(edit, words):
    body = CLEAN.replace(*edit)
    assert body != CLEAN
    assert words in static_pass(kernel_text(body))


def test_lint_alignment_only_where_the_ptx_proves_it():
    # a base loaded from memory is unknown: only the execution-time check can judge it
    body = CLEAN.replace("add.s32 %r2, %r1, 16;", "ld.shared.u32 %r2, [%r1];")
    assert static_pass(kernel_text(body)) == ""
    known = lint.register_residues(parse_module(kernel_text(
        "mov.u32 %r1, smem;\nshl.b32 %r2, %r3, 4;\nadd.s32 %r4, %r1, %r2;\nand.b32 %r5, %r6, -128;\nret;")))
    assert known["%r1"] == (1024, 0) and known["%r4"] == (16, 0) and known["%r5"] == (128, 0)


def test_misaligned_vector_access_is_a_hazard_at_execution():
    with pytest.raises(Hazard, match="not a multiple of 16"):
        run_ptx(kernel_text("""
    mov.u32 %r1, smem;
    ld.shared.u32 %r2, [%r1];
    add.s32 %r3, %r2, 8;
    st.shared.v4.b32 [%r3], {%r4, %r5, %r6, %r7};
    ret;
"""), threads=32, dynamic_smem=8192)
