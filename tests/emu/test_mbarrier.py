"""mbarriers (emu.mbarrier): phases, arrivals and tx-counts, the deadlock report of a spin wait, remote arrivals
and the publication of an init across a cluster, happens-before of an init inside a CTA (a Note under arseni's
precedent), re-initialisation (hand-written PTX, fakes where a rule is a pure function; no DSL, no GPU)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from emu import precedents
from emu.machine import Deadlock
from emu.mbarrier import INIT_UNORDERED, REINIT_QUIESCENT, Mbarrier, check_use
from emu.state import Hazard
from tests.emu.ptx_kit import STORE_TID, WAIT, kernel_text, run_ptx


def test_mbarrier_phase_needs_arrivals_and_tx():
    cta = SimpleNamespace(rank=0)
    bar = Mbarrier(cta, 0, 2, 1)
    assert bar.phase_complete(1) and not bar.phase_complete(0)  # the previous phase (parity 1) is complete
    bar.arrive(1)
    bar.expect_tx(64)
    bar.arrive(1)
    assert bar.phase == 0 and bar.tx == 64  # both arrivals in, 64 bytes outstanding
    bar.complete_tx(64)
    assert bar.phase == 1 and bar.pending == 2 and bar.phase_complete(0)
    bar.complete_tx(16)  # complete-tx before expect-tx: the tx-count goes negative within the phase
    bar.expect_tx(16)
    assert bar.phase == 1
    with pytest.raises(Hazard, match="count 0"):
        Mbarrier(cta, 8, 0, 1)


def test_spin_wait_deadlock_is_reported_with_barrier_state():
    body = STORE_TID + """
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra SPIN;
    mov.b32 %r2, 2;
    mbarrier.init.shared.b64 [%r9], %r2;
SPIN:
    bar.sync 0;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
""" + WAIT + """    ret;
"""
    # 32 arrivals on a barrier that expects 2: the first two complete phase 0, then 30 more phases... so use a
    # count the warp cannot reach instead: arrive from lane 0 only
    body = body.replace("    mbarrier.arrive.shared.b64 %rd5, [%r9];", "    @!%p3 mbarrier.arrive.shared.b64 %rd5, [%r9];")
    with pytest.raises(Deadlock) as e:
        run_ptx(kernel_text(body), threads=64)
    msg = str(e.value)
    assert "warp 0" in msg and "warp 1" in msg and "PTX line" in msg
    assert "1 of 2 arrivals pending" in msg and "waiting for parity 0" in msg


def test_a_wait_the_barrier_ran_two_phases_past_is_named_as_lapped():
    """A parity wait sees only the last phase's parity (PTX ISA 9.7.13.15.16): a warp whose phase completed and then
    one more while it was not waiting spins for a phase two beyond. jIab-b/nvfp4_gemm's s_128t.py does this (every
    thread waits on the MMA barrier each k-block; thread 0 issues the next MMA after its own wait): the deadlock report
    says why, not only where."""
    bar = Mbarrier(SimpleNamespace(rank=0), 0, 1, 1)
    assert bar.lapped_wait((0, 1), 0) is None  # phase 0 not complete yet: an ordinary wait
    bar.arrive(1)
    assert bar.phase_complete(0) and bar.lapped_wait((0, 1), 0) is None  # its phase completed: the wait succeeds
    bar.arrive(1)
    assert "phases 0 and 1 have completed" in bar.lapped_wait((0, 1), 0)
    assert bar.lapped_wait((0, 1), 1) is None  # parity 1 = phase 1: complete, the wait succeeds
    bar.waited[(0, 1)] = 2  # a warp that saw both phases waits for phase 2: not lapped
    assert bar.lapped_wait((0, 1), 0) is None

    body = STORE_TID + """
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra SYNC;
    mov.b32 %r2, 1;
    mbarrier.init.shared.b64 [%r9], %r2;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    mbarrier.arrive.shared.b64 %rd5, [%r9];
SYNC:
    bar.sync 0;
    setp.lt.u32 %p4, %r1, 32;
    @%p4 bra END;
""" + WAIT + """END:
    ret;
"""
    with pytest.raises(Deadlock) as e:
        run_ptx(kernel_text(body), threads=64)
    msg = str(e.value)
    assert "warp 1" in msg and "lapped" in msg and "phases 0 and 1 have completed" in msg, msg


def test_probe_then_arrive_then_probe_is_not_a_deadlock():
    # a warp that finds a barrier incomplete, arrives itself, and probes again makes progress
    out, _ = run_ptx(kernel_text(STORE_TID + """
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    mov.b32 %r2, 2;
    mbarrier.init.shared.b64 [%r9], %r2;
    mbarrier.try_wait.parity.shared.b64 %p1, [%r9], 0;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    mbarrier.try_wait.parity.shared.b64 %p1, [%r9], 0;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    mbarrier.try_wait.parity.shared.b64 %p1, [%r9], 0;
    selp.b32 %r4, 7, 0, %p1;
    st.global.u32 [%rd3], %r4;
DONE:
    ret;
"""))
    assert out[0] == 7


def test_remote_arrive_needs_a_published_init():
    # CTA 1 arrives on CTA 0's barrier with no fence + cluster barrier in between: the memory model promises nothing.
    # A hardware-verified kernel does it and survives (arseni_ivanov's, emu.precedents): the run completes with a Note,
    # the arrival waiting for the init when CTA 1 gets there first.
    body = STORE_TID + """
    mov.u32 %r9, smem;
    mov.u32 %r10, %cluster_ctarank;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    setp.eq.u32 %p4, %r10, 0;
    @!%p4 bra ARRIVE;
    mov.b32 %r2, 1;
    mbarrier.init.shared.b64 [%r9], %r2;
""" + WAIT + """    bra DONE;
ARRIVE:
    mov.b32 %r11, 0;
    mapa.shared::cluster.u32 %r12, %r9, %r11;
    mbarrier.arrive.shared::cluster.b64 _, [%r12], 1;
DONE:
    ret;
"""
    rules = set()
    for seed in range(6):
        _, m = run_ptx(kernel_text(body), grid=(2, 1, 1), cluster=(2, 1, 1), seed=seed)
        got = {n.rule for n in m.notes.values()}
        assert got and got <= {"mbarrier-init-unpublished", "mbarrier-used-before-init"}, got
        rules |= got
    assert rules == {"mbarrier-init-unpublished", "mbarrier-used-before-init"}  # both orders were drawn
    published = STORE_TID + """
    mov.u32 %r9, smem;
    mov.u32 %r10, %cluster_ctarank;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra SYNC;
    mov.b32 %r2, 1;
    mbarrier.init.shared.b64 [%r9], %r2;
SYNC:
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.relaxed;
    barrier.cluster.wait;
    setp.eq.u32 %p4, %r10, 0;
    or.pred %p5, %p3, %p4;
    @%p5 bra DONE;
    mov.b32 %r11, 0;
    mapa.shared::cluster.u32 %r12, %r9, %r11;
    mbarrier.arrive.shared::cluster.b64 _, [%r12], 1;
DONE:
    @%p3 bra EXIT;
    @!%p4 bra EXIT;
""" + WAIT + """EXIT:
    ret;
"""
    for seed in range(4):  # CTA 0 waits for the remote arrival before it exits; published: no notes
        _, m = run_ptx(kernel_text(published), grid=(2, 1, 1), cluster=(2, 1, 1), seed=seed)
        assert not m.notes
    # without that wait CTA 0 may exit first: a remote access to an exited CTA's shared memory
    early_exit = published.replace("    @!%p4 bra EXIT;", "    bra EXIT;")
    outcomes = set()
    for seed in range(8):
        try:
            run_ptx(kernel_text(early_exit), grid=(2, 1, 1), cluster=(2, 1, 1), seed=seed)
            outcomes.add("ok")
        except Hazard as e:
            assert "exited" in str(e)
            outcomes.add("hazard")
    assert "hazard" in outcomes


# ------------------------------------------------------------------ happens-before of the init, re-initialisation
INIT_THEN_USE = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    ld.param.u64 %rd1, [out];
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra USE;
    mbarrier.init.shared.b64 [%r9], 32;
    mov.b32 %r2, 1;
    st.volatile.global.u32 [%rd1], %r2;
USE:
    SYNC
    setp.lt.u32 %p4, %r1, 32;
    @%p4 bra DONE;
SPIN:
    ld.volatile.global.u32 %r3, [%rd1];
    setp.eq.u32 %p5, %r3, 0;
    @%p5 bra SPIN;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
DONE:
    ret;
"""


def test_mbarrier_use_before_ordered_init_is_noted_whatever_the_interleaving():
    """Warp 1 sees warp 0's flag in global memory (a plain load: no synchronization) and uses the barrier: in
    emulated time the init came first, but nothing orders it before the use. arseni_ivanov's B200-verified kernel
    does the same (its TMA warp never synchronises with warp 0's inits), so the run says so in a Note under that
    precedent rather than a Hazard; without the precedent (no note callback) it is a Hazard."""
    m = run_ptx(kernel_text(INIT_THEN_USE.replace("    SYNC\n", "")), threads=64, dynamic_smem=8192).machine
    notes = list(m.notes.values())
    assert [n.rule for n in notes] == [INIT_UNORDERED], notes
    assert "before its initialisation by warp 0" in notes[0].detail
    assert notes[0].precedent == precedents.ARSENI_INIT_UNORDERED
    synced = run_ptx(kernel_text(INIT_THEN_USE.replace("    SYNC\n", "    bar.sync 0;\n")), threads=64,
                     dynamic_smem=8192)
    assert synced.machine.notes == {}  # a CTA barrier orders it
    init, user = SimpleNamespace(warp_id=0), SimpleNamespace(warp_id=1, seen={})
    init.cta = user.cta = SimpleNamespace(rank=0)
    bar = SimpleNamespace(cta=init.cta, init_thread=(init, 0), init_clock=5, init_line=7, offset=0, ordered_users=set())
    with pytest.raises(Hazard, match="before its initialisation by warp 0"):
        check_use(bar, user, "mbarrier.arrive")
    user.seen[(0, 0)] = 5  # it observed the init (e.g. through bar.sync)
    check_use(bar, user, "mbarrier.arrive")


REINIT = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    mbarrier.init.shared.b64 [%r9], COUNT;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    mbarrier.init.shared.b64 [%r9], 2;
DONE:
    ret;
"""


def test_reinitialising_a_live_mbarrier():
    with pytest.raises(Hazard, match="in the middle of phase 0"):
        # one of two arrivals already counted
        run_ptx(kernel_text(REINIT.replace("COUNT", "2")), threads=32, dynamic_smem=8192)
    # the arrival completed phase 0: nothing is lost
    m = run_ptx(kernel_text(REINIT.replace("COUNT", "1")), threads=32, dynamic_smem=8192).machine
    assert [n.rule for n in m.notes.values()] == [REINIT_QUIESCENT]
    whole_warp = "    mov.u32 %r9, smem;\n    mbarrier.init.shared.b64 [%r9], 1;\n    ret;\n"
    # 32 lanes of one instruction: one initialisation
    assert run_ptx(kernel_text(whole_warp), threads=32, dynamic_smem=8192).machine.notes == {}
