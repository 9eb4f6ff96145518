"""tcgen05 ordering (emu.ordering). The tensor-memory hand-off between tcgen05.ld (an epilogue warp reading an
accumulator) and tcgen05.mma (the MMA warp overwriting it), checked in happens-before terms (LD_THEN_MMA, MMA_THEN_LD),
so that every schedule reports it: hand-written PTX with a real MMA (no DSL compile), warp 0 copies the scale factors
and issues the MMAs, warp 1 loads the accumulator and hands it back. Then the fences around thread synchronisation,
an MMA's columns copied over, and the async proxy's fence (fakes where a rule is a pure function). The same rules on
the real kernel: planted bugs of harness/mutants.py such as epi_release_before_last_load (slow,
tests/harness/test_mutants.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from emu import ordering, precedents
from emu.machine import POLICIES, Schedule
from emu.state import Hazard
from tests.emu.ptx_kit import kernel_text, run_ptx, wait_loop

DESC_A_B = (8 << 16) | (16 << 32) | (1 << 46)  # K-major, no swizzle: LBO 128, SBO 256 (PTX ISA 9.7.16.4.1)
DESC_SCALES = (8 << 32) | (1 << 46)  # 32 rows of 16 bytes, SBO 128
IDESC = (8 << 24) | (8 << 17) | (1 << 10) | (1 << 7)  # M 128, N 64, E2M1 x E2M1, UE4M3 scales (PTX ISA 9.7.16.4.2)

# smem: +0 FULL (the first commit arrives), +8 EMPTY (warp 1's 32 threads), +16 ISSUED (warp 0, after its first
# MMA), +24 DONE (the second commit),
# +64 the tensor-memory address, +1024 the scale source (zeros), +4096 A and B (their bytes do not matter).
# Tensor memory: D in columns [0, 64), SFA [64, 68), SFB [68, 70). Warp 1 reads lane quadrant 1 (lane field 32).
HANDOFF = f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    shr.u32 %r8, %r1, 5;
    setp.ne.u32 %p1, %r8, 0;
    @%p1 bra SETUP_DONE;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 128;
    shl.b32 %r2, %r1, 4;
    add.s32 %r3, %r9, %r2;
    mov.u32 %r4, 0;
    st.shared.v4.b32 [%r3+1024], {{%r4, %r4, %r4, %r4}};
    fence.proxy.async.shared::cta;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra SETUP_DONE;
    mbarrier.init.shared.b64 [%r9], 1;
    mbarrier.init.shared.b64 [%r9+8], 32;
    mbarrier.init.shared.b64 [%r9+16], 1;
    mbarrier.init.shared.b64 [%r9+24], 1;
SETUP_DONE:
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    @%p1 bra EPILOGUE;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra MMA_DONE;
    add.s32 %r10, %r9, 1024;
    shr.u32 %r10, %r10, 4;
    cvt.u64.u32 %rd1, %r10;
    or.b64 %rd1, %rd1, {DESC_SCALES};
    add.s32 %r11, %r9, 4096;
    shr.u32 %r11, %r11, 4;
    cvt.u64.u32 %rd2, %r11;
    or.b64 %rd2, %rd2, {DESC_A_B};
    mov.u32 %r12, {IDESC};
    add.s32 %r13, %r20, 64;
    add.s32 %r14, %r20, 68;
    setp.ne.u32 %p3, %r1, 0;
    tcgen05.cp.cta_group::1.32x128b.warpx4 [%r13], %rd1;
    tcgen05.cp.cta_group::1.32x128b.warpx4 [%r14], %rd1;
    tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r20], %rd2, %rd2, %r12, [%r13], [%r14], %p3;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r9];
    mbarrier.arrive.shared.b64 %rd5, [%r9+16];
{wait_loop('[%r9+8]', hint=None, label='WAIT_EMPTY', done='EMPTY_DONE')}    tcgen05.fence::after_thread_sync;
    tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r20], %rd2, %rd2, %r12, [%r13], [%r14], %p3;
    add.s32 %r15, %r9, 24;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r15];
{wait_loop('[%r9+24]', hint=None, label='WAIT_LAST', done='LAST_DONE')}MMA_DONE:
    bar.sync 0;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 128;
    ret;
EPILOGUE:
{wait_loop('[%r9+ACQUIRE]', hint=None, label='WAIT_FULL', done='FULL_DONE')}    tcgen05.fence::after_thread_sync;
    add.s32 %r22, %r20, 2097152;
    HANDBACK
    bar.sync 0;
    ret;
"""
LOAD = "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r40, %r41, %r42, %r43, %r44, %r45, %r46, %r47, %r48, %r49, %r50, " \
       "%r51, %r52, %r53, %r54, %r55}, [%r22];"
WAIT = "tcgen05.wait::ld.sync.aligned;"
USE = "add.s32 %r56, %r40, %r55;"  # where the emulator's data path reads the load; it completes only at the wait
RELEASE = "tcgen05.fence::before_thread_sync;\n    mbarrier.arrive.shared.b64 %rd6, [%r9+8];"
FULL, ISSUED = "0", "16"  # which of warp 0's signals the epilogue waits for before it loads


def kernel(handback: list, acquire: str = FULL) -> str:
    return kernel_text(HANDOFF.replace("HANDBACK", "\n    ".join(handback)).replace("ACQUIRE", acquire))


SCHEDULES = [Schedule(policy, seed) for seed, policy in enumerate(POLICIES)]


def test_epilogue_that_waits_before_it_releases_is_clean():
    """PTX ISA 9.7.16.6.4.4's pattern: ld; wait::ld; fence::before_thread_sync; arrive -> wait;
    fence::after_thread_sync; mma. Every schedule runs it without a hazard or a note."""
    for schedule in SCHEDULES:
        m = run_ptx(kernel([LOAD, WAIT, RELEASE]), schedule=schedule, threads=64, dynamic_smem=8192).machine
        assert m.stats["mma"] == 2 and m.notes == {}, schedule.name


@pytest.mark.parametrize("handback", [[LOAD, RELEASE, WAIT], [RELEASE, LOAD, WAIT]],
                         ids=["release_before_the_read", "release_before_load"])
def test_release_before_the_load_reads_is_a_race_at_every_schedule(handback):
    """The accumulator handed back before its load has read it (no wait::ld, no use of its registers before the
    release): the next MMA may overwrite it first. Reported at every schedule, including those where the emulated MMA
    runs after the read and C would come out right. When the MMA warp gets ahead of the load (released before it is
    issued), the load is the one that finds an MMA it has not seen complete."""
    for schedule in SCHEDULES:
        with pytest.raises(Hazard) as e:
            run_ptx(kernel(handback), schedule=schedule, threads=64, dynamic_smem=8192)
        rules = (ordering.LD_THEN_MMA,) if handback[0] == LOAD else (ordering.LD_THEN_MMA, ordering.MMA_THEN_LD)
        assert any(f"[{r}]" in str(e.value) for r in rules), (schedule.name, str(e.value))
        assert "PTX ISA 9.7.16.6.3" in str(e.value)


def test_release_after_the_registers_are_used_but_before_wait_ld_is_a_note():
    """The load's registers used (ptxas's scoreboard waits for the load there), then the release, then wait::ld: the
    ISA completes the load only at the wait (9.7.16.8.3), but NVIDIA's B200-verified example releases this way."""
    for schedule in SCHEDULES:
        m = run_ptx(kernel([LOAD, USE, RELEASE, WAIT]), schedule=schedule, threads=64, dynamic_smem=8192).machine
        assert m.stats["mma"] == 2 and {n.rule for n in m.notes.values()} == {ordering.LD_UNWAITED}, schedule.name
        assert all(n.precedent == precedents.TCGEN05_LD_UNWAITED for n in m.notes.values())


def test_load_before_the_mma_is_observed_complete_is_a_race_at_every_schedule():
    """The epilogue waits for a signal warp 0 gives right after issuing the MMA (not its commit): it loads an
    accumulator the MMA may not have written yet."""
    for schedule in SCHEDULES:
        with pytest.raises(Hazard, match=f"\\[{ordering.MMA_THEN_LD}\\].*tcgen05.commit"):
            run_ptx(kernel([LOAD, WAIT, RELEASE], acquire=ISSUED), schedule=schedule, threads=64, dynamic_smem=8192)


def test_reads_and_writes_of_other_columns_do_not_race():
    """Rule-level: an MMA writing columns [0, 64) against a load of [64, 80) by another warp (no synchronisation at
    all) and the converse; then the same columns: not read, read after the release, released unwaited (a note), and
    waited then released."""
    cta = SimpleNamespace(rank=0, recent_mmas=[])
    mma_warp = SimpleNamespace(cta=cta, warp_id=4, seen={})
    reader = SimpleNamespace(cta=cta, warp_id=0, seen={})
    notes = []
    ex = SimpleNamespace(note=lambda *a: notes.append(a))
    ins = SimpleNamespace(where=lambda: "PTX line 7: tcgen05.mma", line=7)
    footprint = ordering.mma_footprint([cta], 0, 256, 260, (64 >> 3) << 17)
    ordering.ld_issued(reader, "far", 64, 16, 11)
    ordering.mma_overwrites(ex, mma_warp, ins, footprint)  # other columns; SFA/SFB are read, not written
    ordering.ld_issued(reader, "near", 32, 16, 12)
    with pytest.raises(Hazard, match=f"{ordering.LD_THEN_MMA}.*has not read"):
        ordering.mma_overwrites(ex, mma_warp, ins, footprint)
    ordering.ld_read(reader, "near", 30)
    with pytest.raises(Hazard, match=f"{ordering.LD_THEN_MMA}.*after the last release"):
        ordering.mma_overwrites(ex, mma_warp, ins, footprint)
    mma_warp.seen[(0, 0)] = 31  # a release by the reader after the read reached the MMA's warp
    ordering.mma_overwrites(ex, mma_warp, ins, footprint)
    assert [n[0] for n in notes] == [ordering.LD_UNWAITED]  # but no wait::ld came between the load and the release
    ordering.ld_waited(reader, 32)
    mma_warp.seen[(0, 0)] = 33
    notes.clear()
    ordering.mma_overwrites(ex, mma_warp, ins, footprint)
    assert notes == []
    ordering.mma_issued(mma_warp, footprint, 40, 7)
    ordering.ld_issued(reader, "other", 64, 16, 13)  # not a column the MMA writes
    with pytest.raises(Hazard, match=ordering.MMA_THEN_LD):
        ordering.ld_issued(reader, "again", 0, 16, 14)
    reader.seen[("tcdone", 0, 4)] = 40  # a completed commit covering the MMA was observed
    ordering.ld_issued(reader, "again", 0, 16, 14)


# ------------------------------------------------------------------ fences around thread synchronisation, proxies
FENCES = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    shr.u32 %r8, %r1, 5;
    setp.ne.u32 %p1, %r8, 0;
    @%p1 bra INIT_DONE;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 32;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra INIT_DONE;
    mbarrier.init.shared.b64 [%r9], 32;
INIT_DONE:
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    @%p1 bra CONSUMER;
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r21}, [%r20];
    tcgen05.wait::ld.sync.aligned;
    BEFORE
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    bar.sync 0;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
    ret;
CONSUMER:
""" + wait_loop(hint=None) + """    AFTER
    add.s32 %r22, %r20, 2097152;
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r23}, [%r22];
    tcgen05.wait::ld.sync.aligned;
    BEFORE
    bar.sync 0;
    ret;
"""


def test_tcgen05_across_threads_needs_the_fences():
    """PTX ISA 9.7.16.6.4.4: tcgen05.ld; wait::ld; fence::before_thread_sync; arrive -> wait; fence::after_thread_sync;
    tcgen05 operation. Without the fences the run still matches (the emulator runs everything in one order) and each
    missing fence is a note naming its precedent."""
    bare = run_ptx(kernel_text(FENCES.replace("    BEFORE\n", "").replace("    AFTER\n", "")), threads=64,
                   dynamic_smem=8192).machine
    rules = sorted({n.rule for n in bare.notes.values()})
    assert rules == [ordering.FENCE_AFTER, ordering.FENCE_BEFORE]
    assert all(n.precedent for n in bare.notes.values())
    fenced = run_ptx(kernel_text(FENCES.replace("BEFORE", "tcgen05.fence::before_thread_sync;")
                                 .replace("AFTER", "tcgen05.fence::after_thread_sync;")), threads=64,
                     dynamic_smem=8192).machine
    assert fenced.notes == {}


def test_copy_over_columns_an_unobserved_mma_reads_is_a_note():
    cta = SimpleNamespace(rank=0, recent_mmas=[])
    warp = SimpleNamespace(cta=cta, warp_id=4, seen={})
    notes = []
    ex = SimpleNamespace(note=lambda *a: notes.append(a), clock=100)
    ins = SimpleNamespace(where=lambda: "PTX line 9: tcgen05.cp", line=9)
    # an MMA at clock 50: accumulator columns [0, 64), SFA [256, 260), SFB [260, 262) (N = 64)
    ordering.mma_issued(warp, ordering.mma_footprint([cta], 0, 256, 260, (64 >> 3) << 17), 50, 7)
    ordering.cp_issued(ex, warp, ins, [cta], 300)  # other columns: nothing to say
    assert notes == []
    ordering.cp_issued(ex, warp, ins, [cta], 256)
    assert [n[0] for n in notes] == [ordering.MMA_THEN_CP]
    warp.seen[("tcdone", 0, 4)] = 50  # a completed commit covering it was observed: ordered
    notes.clear()
    ordering.cp_issued(ex, warp, ins, [cta], 256)
    assert notes == []


PROXY = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 32;
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    shl.b32 %r2, %r1, 4;
    add.s32 %r3, %r9, %r2;
    st.shared.v4.b32 [%r3+1024], {%r1, %r1, %r1, %r1};
    FENCE
    bar.sync 0;
    add.s32 %r4, %r9, 1024;
    shr.u32 %r5, %r4, 4;
    cvt.u64.u32 %rd1, %r5;
    or.b64 %rd2, %rd1, 70403103981568;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    tcgen05.cp.cta_group::1.32x128b.warpx4 [%r20], %rd2;
    mbarrier.init.shared.b64 [%r9], 1;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r9];
""" + wait_loop(hint=None) + """DONE:
    bar.sync 0;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
    ret;
"""


def test_async_proxy_reads_need_fence_proxy_async():
    """st.shared, then tcgen05.cp reads those bytes through the async proxy (PTX ISA 9.7.16.6.5)."""
    with pytest.raises(Hazard, match="fence.proxy.async"):
        run_ptx(kernel_text(PROXY.replace("    FENCE\n", "")), threads=32, dynamic_smem=8192)
    run_ptx(kernel_text(PROXY.replace("FENCE", "fence.proxy.async.shared::cta;")), threads=32, dynamic_smem=8192)


DEALLOC_LAST = ("MMA_DONE:\n    bar.sync 0;\n    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 128;",
                "MMA_DONE:\n    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 128;\n    bar.sync 0;")


def test_dealloc_before_the_epilogue_reads_are_ordered_is_a_note_at_every_schedule():
    """Warp 0 frees the accumulator before the barrier the epilogue's loads come before (the barrier of a public CUDA
    kernel, commented out there): DEALLOC_WHILE_READ whichever runs first, the dealloc (the load then reads freed
    columns) or the load (not yet released to warp 0); the message names both warps and the load's line. With the
    barrier first (the handoff kernel as it is) no note."""
    handback = [LOAD, WAIT, RELEASE, wait_loop("[%r9+24]", hint=None, label="WAIT_FINAL", done="FINAL_DONE"),
                "tcgen05.fence::after_thread_sync;", LOAD, WAIT]  # the final accumulator, after the last commit
    racy = kernel(handback).replace(*DEALLOC_LAST)
    assert racy != kernel(handback)
    for schedule in SCHEDULES:
        m = run_ptx(racy, schedule=schedule, threads=64, dynamic_smem=8192).machine
        notes = [n for n in m.notes.values() if n.rule == ordering.DEALLOC_WHILE_READ]
        assert len(notes) == 1 and notes[0].precedent == precedents.TMEM_DEALLOC_WHILE_READ, schedule.name
        assert "warp 0 deallocated tensor-memory columns" in notes[0].detail and "warp 1" in notes[0].detail
        clean = run_ptx(kernel(handback), schedule=schedule, threads=64, dynamic_smem=8192).machine
        assert ordering.DEALLOC_WHILE_READ not in {n.rule for n in clean.notes.values()}, schedule.name


# Scale factors written with tcgen05.st by every warp, read by warp 0's MMA (jIab-b's hand-off, each warp storing
# its own lane quadrant: here the SFA words of columns 64-67 and the SFB words of columns 68, 69, the same in every
# quadrant as PTX ISA 9.7.16.10.7 asks). Round 1 is ordered (st; wait::st; fence::before_thread_sync; bar.sync;
# fence::after_thread_sync; mma). Round 2 waits for MMA 1 on its commit, stores again and, with SYNC empty, issues
# MMA 2 with no barrier after the other warps' stores. smem: +0 the first commit's
# mbarrier, +8 the second's, +64 the tensor-memory address, +4096 A and B (their bytes do not matter).
SCALE_STORES = f"""
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    shr.u32 %r8, %r1, 5;
    setp.ne.u32 %p1, %r8, 0;
    @%p1 bra SETUP_DONE;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 128;
    setp.ne.u32 %p2, %r1, 0;
    @%p2 bra SETUP_DONE;
    mbarrier.init.shared.b64 [%r9], 1;
    mbarrier.init.shared.b64 [%r9+8], 1;
SETUP_DONE:
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    shl.b32 %r21, %r8, 21;
    add.s32 %r21, %r21, %r20;
    add.s32 %r22, %r21, 64;
    add.s32 %r23, %r21, 68;
    mov.u32 %r24, 0x38383838;
    tcgen05.st.sync.aligned.32x32b.x4.b32 [%r22], {{%r24, %r24, %r24, %r24}};
    tcgen05.st.sync.aligned.32x32b.x2.b32 [%r23], {{%r24, %r24}};
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    add.s32 %r11, %r9, 4096;
    shr.u32 %r11, %r11, 4;
    cvt.u64.u32 %rd2, %r11;
    or.b64 %rd2, %rd2, {DESC_A_B};
    mov.u32 %r12, {IDESC};
    add.s32 %r13, %r20, 64;
    add.s32 %r14, %r20, 68;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra MMA1_ISSUED;
    tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r20], %rd2, %rd2, %r12, [%r13], [%r14], 0;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r9];
MMA1_ISSUED:
{wait_loop('[%r9]', hint=None, label='WAIT_MMA1', done='MMA1_DONE')}    tcgen05.fence::after_thread_sync;
    tcgen05.st.sync.aligned.32x32b.x4.b32 [%r22], {{%r24, %r24, %r24, %r24}};
    tcgen05.st.sync.aligned.32x32b.x2.b32 [%r23], {{%r24, %r24}};
    tcgen05.wait::st.sync.aligned;
    SYNC
    @%p3 bra MMA2_ISSUED;
    tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r20], %rd2, %rd2, %r12, [%r13], [%r14], 1;
    add.s32 %r15, %r9, 8;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r15];
MMA2_ISSUED:
{wait_loop('[%r9+8]', hint=None, label='WAIT_MMA2', done='MMA2_DONE')}    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    @%p1 bra EXIT;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 128;
EXIT:
    ret;
"""
ORDERED = "tcgen05.fence::before_thread_sync;\n    bar.sync 0;\n    tcgen05.fence::after_thread_sync;"


@pytest.mark.parametrize("sync", [ORDERED, ""], ids=["barrier", "no_barrier"])
def test_scale_words_stored_by_other_warps_need_a_barrier_before_the_mma(sync):
    """jIab-b's sub_tcgen5.py @ 5a340df5 (wrong on the B200) against sub_tcgen4.py @ 33224fdc (passed): the other
    warps' tcgen05.st of the scale words and warp 0's MMA with or without a barrier between them. Without it every
    schedule reports the race, from whichever side ran second: the MMA reads words another warp stored and did not
    release to it (ST_THEN_MMA), or a warp stores over words an MMA it has not seen complete reads (MMA_THEN_ST); a
    Note each, as B200 runs of the shared-memory-sourced variant passed. With the barrier, no note."""
    for schedule in SCHEDULES:
        m = run_ptx(kernel_text(SCALE_STORES.replace("SYNC", sync)), schedule=schedule, threads=128,
                    dynamic_smem=8192).machine
        rules = {n.rule for n in m.notes.values()}
        assert m.stats["mma"] == 2, schedule.name
        if sync:
            assert rules == set(), (schedule.name, rules)
        else:
            assert rules and rules <= {ordering.ST_THEN_MMA, ordering.MMA_THEN_ST}, (schedule.name, rules)
            assert all(n.precedent == precedents.JIAB_ST_THEN_MMA for n in m.notes.values())
            assert all("PTX ISA 9.7.16.6.3" in n.detail for n in m.notes.values())


def test_a_store_to_columns_no_datapath_reads_is_not_a_race():
    """Rule-level: SFA's datapath q reads column sfa + q of lane quadrant q only, so warp 1's store of column sfa + 2
    (its quadrant 1) is not among an MMA's reads; a store of column sfa + 1 is, until a release after its wait::st
    reaches the MMA's warp."""
    cta = SimpleNamespace(rank=0, recent_mmas=[])
    mma_warp = SimpleNamespace(cta=cta, warp_id=0, seen={})
    store_warp = SimpleNamespace(cta=cta, warp_id=1, seen={})
    notes = []
    ex = SimpleNamespace(note=lambda *a: notes.append(a), clock=100)
    ins = SimpleNamespace(where=lambda: "PTX line 9", line=9)
    reads = ordering.mma_tmem_reads(ordering.mma_footprint([cta], 0, 64, 68, (64 >> 3) << 17), 64)
    ordering.st_issued(ex, store_warp, ins, 66, 1)
    ordering.st_waited(store_warp, 20)
    ordering.mma_reads_stores(ex, mma_warp, ins, reads)
    assert notes == []
    ordering.st_issued(ex, store_warp, ins, 65, 1)
    ordering.mma_reads_stores(ex, mma_warp, ins, reads)  # not waited yet
    assert [n[0] for n in notes] == [ordering.ST_THEN_MMA] and "no tcgen05.wait::st" in notes[0][3]
    ordering.st_waited(store_warp, 30)
    mma_warp.seen[(0, 1)] = 29  # the storing warp's last release reaching warp 0 came before its wait::st
    notes.clear()
    ordering.mma_reads_stores(ex, mma_warp, ins, reads)
    assert [n[0] for n in notes] == [ordering.ST_THEN_MMA]
    mma_warp.seen[(0, 1)] = 31  # a release after the wait::st: ordered
    notes.clear()
    ordering.mma_reads_stores(ex, mma_warp, ins, reads)
    assert notes == []


def test_an_mma_footprint_spans_the_columns_its_d_layout_writes():
    """D's columns (emu.tcgen05.d_columns): N for M = 128, N / 2 for M = 128 on a pair, and for .ws N / 2 at M = 64
    and N / 4 at M = 32 (their 2x2 and 1x4 data paths), so a load of columns past them races with nothing."""
    cta, pair = SimpleNamespace(rank=0), [SimpleNamespace(rank=0), SimpleNamespace(rank=1)]
    idesc = lambda m, n: ((m >> 4) << 24) | ((n >> 3) << 17)  # noqa: E731
    d_span = lambda fp: [(c0, k) for _, c0, k, written in fp if written][0]  # noqa: E731
    assert d_span(ordering.mma_footprint([cta], 0, None, None, idesc(128, 256))) == (0, 256)
    assert d_span(ordering.mma_footprint(pair, 0, None, None, idesc(128, 256))) == (0, 128)
    assert d_span(ordering.mma_footprint([cta], 0, None, None, idesc(64, 256), ws=True)) == (0, 128)
    assert d_span(ordering.mma_footprint([cta], 0, None, None, idesc(32, 256), ws=True)) == (0, 64)
