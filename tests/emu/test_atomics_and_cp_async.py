"""The PTX forms gau-nernst's nvfp4_gemm versions added to the emulator (hand-written PTX, no compiler, no GPU):
atom/red .global.add (split-K in gemm v1 and v4), non-bulk cp.async with cp.async.mbarrier.arrive (gemm v2b's
4-byte scale loads) and bar.warp.sync (__syncwarp in every gemm version); cp.async's own groups (commit_group,
wait_group, wait_all: jIab-b's sub_test.py)."""
from __future__ import annotations

import numpy as np
import pytest

from emu.machine import Schedule
from emu.state import Hazard, Unsupported
from tests.emu.ptx_kit import kernel_text, run_ptx

REGS = ".reg .pred %p<8>;\n.reg .b32 %r<64>;\n.reg .f32 %f<16>;\n.reg .b64 %rd<16>;"


def test_atom_add_f32_returns_old_values_in_lane_order_and_logs_stores():
    # every lane adds 1.5 to word 0; lane i gets the value before its own add: 1.5 * i (lane order)
    raw, m = run_ptx(kernel_text("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    atom.relaxed.gpu.global.add.f32 %f1, [%rd1], 0f3FC00000;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3+4], %f1;
    ret;
""", decls=REGS), out_words=40)
    words = raw.view(np.float32)
    assert words[0] == np.float32(1.5 * 32)
    assert (words[1:33] == np.float32(1.5) * np.arange(32, dtype=np.float32)).all()
    assert sum(1 for a, n in m.store_log if n == 4) >= 32 + 32


def test_red_add_flushes_subnormals_and_adds_integers():
    init = np.zeros(4, np.uint32)
    init[0] = np.float32(1e-39).view(np.uint32)  # a subnormal already in memory
    init[1] = 7
    raw, _ = run_ptx(kernel_text("""
    ld.param.u64 %rd1, [out];
    red.global.add.f32 [%rd1], 0f00000001;
    red.relaxed.gpu.global.add.u32 [%rd1+4], 2;
    ret;
""", decls=REGS), threads=32, out_words=4, init=init)
    assert raw.view(np.float32)[0] == 0.0  # subnormal input and subnormal addends flush to +0 (PTX ISA "red")
    assert raw.view(np.uint32)[1] == 7 + 2 * 32


def test_atom_misaligned_is_a_hazard_and_other_ops_are_unsupported():
    with pytest.raises(Hazard, match="aligned"):
        run_ptx(kernel_text("""
    ld.param.u64 %rd1, [out];
    atom.global.add.f32 %f1, [%rd1+2], 0f3F800000;
    ret;
""", decls=REGS))
    with pytest.raises(Unsupported, match="atom"):
        run_ptx(kernel_text("""
    ld.param.u64 %rd1, [out];
    atom.global.exch.b32 %r1, [%rd1], 1;
    ret;
""", decls=REGS))


CP_ASYNC = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 bra COPY;
    mbarrier.init.shared::cta.b64 [%r9], {count};
COPY:
    bar.sync 0;
    shl.b32 %r2, %r1, 4;
    add.s32 %r3, %r9, 64;
    add.s32 %r3, %r3, %r2;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    cp.async.ca.shared::cta.global [%r3], [%rd3], 4;
    cp.async.mbarrier.arrive{noinc}.shared::cta.b64 [%r9];
    {extra}
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r9], 0;
    @!%p2 bra WAIT;
    ld.shared.u32 %r5, [%r3];
    st.global.u32 [%rd3+256], %r5;
    ret;
"""


def test_cp_async_lands_before_its_noinc_arrive_completes_the_phase():
    # each of 32 lanes copies its word to smem (16-byte apart) and arrives (.noinc) on a barrier of count 32:
    # the phase completes only when every copy has landed, then each lane reads its word back
    init = np.arange(64, dtype=np.uint32) * 3 + 1
    for seed in range(3):
        text = kernel_text(CP_ASYNC.replace("{count}", "32").replace("{noinc}", ".noinc").replace("{extra}", ""),
                           decls=REGS)
        raw, _ = run_ptx(text, out_words=128, init=np.concatenate([init, np.zeros(64, np.uint32)]), seed=seed)
        words = raw.view(np.uint32)
        assert (words[64:96] == init[:32]).all()


def test_cp_async_arrive_without_noinc_leaves_the_count_to_mbarrier_arrive():
    # without .noinc the asynchronous arrive-on nets zero: the phase (count 32) needs the threads' own arrivals
    raw, _ = run_ptx(kernel_text(CP_ASYNC.replace("{count}", "32").replace("{noinc}", "").replace(
        "{extra}", "mbarrier.arrive.shared::cta.b64 %rd9, [%r9];"), decls=REGS), out_words=128,
        init=np.concatenate([np.arange(64, dtype=np.uint32) + 5, np.zeros(64, np.uint32)]))
    assert (raw.view(np.uint32)[64:96] == np.arange(32) + 5).all()


def test_cp_async_size_and_alignment_are_checked():
    with pytest.raises(Hazard, match="cp-size"):
        run_ptx(kernel_text("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r9, smem;
    cp.async.ca.shared::cta.global [%r9+4], [%rd1], 8;
    ret;
""", decls=REGS))


GROUPS = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    shl.b32 %r2, %r1, 2;
    add.s32 %r3, %r9, %r2;
    add.s32 %r4, %r3, 128;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    cp.async.ca.shared::cta.global [%r3], [%rd3], 4;
    {first}
    cp.async.ca.shared::cta.global [%r4], [%rd3+128], 4;
    {wait}
    ld.shared.u32 %r5, [%r3];
    st.global.u32 [%rd3+256], %r5;
    ld.shared.u32 %r6, [%r4];
    st.global.u32 [%rd3+384], %r6;
    ret;
"""
GROUP_WORDS = np.concatenate([np.arange(64, dtype=np.uint32) + 11, np.zeros(64, np.uint32)])


def _landed(first: str, wait: str, seed: int) -> tuple:
    """Each of 32 threads copies word i (then word 32 + i) to shared memory, waits as told, reads both back: how many
    of the first copies and of the second were there (of 32), under the slow_async schedule (completions late)."""
    raw, _ = run_ptx(kernel_text(GROUPS.replace("{first}", first).replace("{wait}", wait), decls=REGS),
                     out_words=128, init=GROUP_WORDS, seed=seed, schedule=Schedule("slow_async", seed))
    words = raw.view(np.uint32)
    return int((words[64:96] == GROUP_WORDS[:32]).sum()), int((words[96:128] == GROUP_WORDS[32:64]).sum())


@pytest.mark.parametrize("wait", ["cp.async.commit_group;\n    cp.async.wait_group 0;", "cp.async.wait_all;"])
def test_cp_async_wait_group_0_and_wait_all_wait_for_every_committed_copy(wait):
    """PTX ISA 9.7.9.25.3: wait_group 0 returns once every committed cp.async-group is complete; wait_all commits
    first. Without any wait the copies are still in flight under the same schedules (the test can fail)."""
    for seed in range(3):
        assert _landed("cp.async.commit_group;", wait, seed) == (32, 32)
    assert min(sum(_landed("cp.async.commit_group;", "", seed)) for seed in range(3)) < 64


def test_cp_async_wait_group_1_waits_for_all_but_the_newest_group():
    """wait_group 1 after two groups: the first is complete, the second may still be in flight (the emulator does
    not wait longer than the ISA says, which would hide a kernel's missing wait)."""
    seen = [_landed("cp.async.commit_group;", "cp.async.commit_group;\n    cp.async.wait_group 1;", s) for s in range(4)]
    assert all(first == 32 for first, _ in seen) and min(second for _, second in seen) < 32, seen


def test_cp_async_group_forms_outside_the_isa_are_unsupported():
    for form in ("cp.async.wait_group;", "cp.async.wait_all 0;", "cp.async.commit_group.x;"):
        with pytest.raises(Unsupported, match="cp.async"):
            run_ptx(kernel_text(f"    {form}\n    ret;\n", decls=REGS))


def test_bar_warp_sync_passes_a_converged_warp_and_refuses_a_split_one():
    raw, _ = run_ptx(kernel_text("""
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 3;
    @!%p1 bra JOIN;
    st.global.u32 [%rd1], 9;
JOIN:
    bar.warp.sync -1;
    ld.global.u32 %r2, [%rd1];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3+4], %r2;
    ret;
""", decls=REGS), out_words=40)
    assert (raw.view(np.uint32)[1:33] == 9).all()
    with pytest.raises(Unsupported, match="later PC"):
        run_ptx(kernel_text("""
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 3;
    @%p1 bra LATE;
    bar.warp.sync -1;
    ret;
LATE:
    bar.warp.sync -1;
    ret;
""", decls=REGS))
