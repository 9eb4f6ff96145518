"""The seeded scheduler's policies (emu.machine POLICIES): roles kept ahead, starved warps, late wake-ups that
let a waiter miss whole phases (fakes where the rule is a pure function; hand-written PTX otherwise). The verdict's
choice of schedules: tests/harness/test_verdict.py."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from emu.machine import STARVED, AsyncOp, Deadlock, Draws, InFlight, Machine, Schedule
from tests.emu.ptx_kit import kernel_text, run_ptx, wait_loop


class FakeWarp:  # hashable by identity, as emu.simt.Warp is
    def __init__(self, warp_id):
        self.warp_id = warp_id


def fake_cluster(warp_ids=range(6)):
    return SimpleNamespace(ctas=[SimpleNamespace(warps=[FakeWarp(i) for i in warp_ids])])


def picks(policy: str, seed: int = 0, n: int = 2000) -> list:
    m = Machine.__new__(Machine)
    m.schedule = Schedule(policy, seed)
    m.knobs = m.schedule.knobs
    m.rng = np.random.default_rng(seed)
    cl = fake_cluster()
    order = m._turn_order(cl)
    warps = cl.ctas[0].warps
    return [m._pick(warps, order).warp_id for _ in range(n)], order


def test_priority_policies_keep_one_role_ahead():
    tma, _ = picks("producer_first")
    epi, _ = picks("consumer_first")
    uni, _ = picks("uniform")
    assert tma.count(5) / len(tma) > 0.9  # warp 5: the TMA role
    assert sum(w < 4 for w in epi) / len(epi) > 0.9  # warps 0-3: the epilogue role
    assert 0.1 < uni.count(5) / len(uni) < 0.25


@pytest.mark.parametrize("policy", ["starve_warp", "starve_role"])
def test_starved_warps_run_only_when_nothing_else_can(policy):
    chosen, order = picks(policy, seed=3)
    starved = {w.warp_id for w, o in order.items() if o == STARVED}
    assert starved and sum(w in starved for w in chosen) / len(chosen) < 0.01


ABA = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra SYNC;
    mbarrier.init.shared.b64 [%r9], 1;
SYNC:
    bar.sync 0;
    setp.lt.u32 %p4, %r1, 32;
    @%p4 bra PRODUCE;
""" + wait_loop(hint=None) + """    ret;
PRODUCE:
    @%p3 bra EXIT;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
""" + "    add.s32 %r20, %r20, 1;\n" * 40 + """    mbarrier.arrive.shared.b64 %rd5, [%r9];
EXIT:
    ret;
"""


def test_late_wake_lets_a_waiter_miss_whole_phases():
    """A waiter for phase 0 that sleeps through phases 0 and 1 sees parity 0 again and waits forever (parity ABA):
    the late-wake policy produces that; waking waiters at once rarely does."""
    def deadlocks(policy):
        n = 0
        for seed in range(10):
            try:
                run_ptx(kernel_text(ABA), schedule=Schedule(policy, seed), threads=64, dynamic_smem=8192)
            except Deadlock:
                n += 1
        return n

    assert deadlocks("late_wake") >= 5 > deadlocks("uniform")


def plainly_completable(ops: list) -> list:
    """The definition InFlight implements without listing: in issue order, every unqueued operation whose ready()
    allows it (or that has none) and the first operation of each queue."""
    seen, out = set(), []
    for op in ops:
        if op.queue is None:
            if op.ready is None or op.ready():
                out.append(op)
        elif op.queue not in seen:
            seen.add(op.queue)
            out.append(op)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_in_flight_draws_the_same_operation_as_the_plain_list(seed):
    """Random issues and completions of ungated, queued and ready()-gated operations: the r-th completable
    operation InFlight finds is the plain list's r-th, every time (the seeded schedules do not change); operations
    removed out of turn (as the timed engine completes them) leave the same list."""
    rng = np.random.default_rng(seed)
    gate = {}
    inflight, plain, drawn = InFlight(), [], 0
    for step in range(3000):
        if rng.random() < 0.55 or not plain:
            kind = rng.integers(4)
            name = f"op{step}"
            op = AsyncOp(name, None, queue=f"q{rng.integers(3)}" if kind == 1 else None,
                         ready=(lambda n=name: gate[n]) if kind == 2 else None)
            gate[name] = bool(rng.integers(2))
            inflight.append(op)
            plain.append(op)
        for name in rng.choice(list(gate), size=2):  # a ready() may change between draws
            gate[name] = not gate[name]
        expected = plainly_completable(plain)
        if expected:
            r = int(rng.integers(len(expected)))

            def pick(count):
                assert count == len(expected)
                return r

            op = inflight.pop_completable(pick)
            assert op is expected[r]
            plain.remove(op)
            drawn += 1
        else:
            assert inflight.pop_completable(lambda count: None) is None
        if plain and rng.random() < 0.1:  # the timed engine removes an operation by its completion time instead
            op = plain.pop(int(rng.integers(len(plain))))
            inflight.remove(op)
        assert list(inflight) == plain and len(inflight) == len(plain)
    assert drawn > 1000


def traced(policy: str, seed: int):
    from emu import GlobalMemory, run_kernel
    from tests.emu.ptx_kit import launch

    gmem = GlobalMemory()
    out = gmem.alloc(64, fill=0)
    run = run_kernel(launch(kernel_text(ABA), [out.to_bytes(8, "little")], threads=64, dynamic_smem=8192), gmem,
                     schedule=Schedule(policy, seed), digest=True)
    return run.machine


def test_trace_digest_names_the_schedule():
    """emu.machine.TraceHash (what tools/emulator_bench.py hashes and tests/harness/test_trace_hashes.py compares): the
    same schedule gives the same digest, another schedule another; one event per instruction issued and per asynchronous
    operation completed."""
    a, b, other = traced("uniform", 2), traced("uniform", 2), traced("uniform", 5)
    assert a.digest.hexdigest() == b.digest.hexdigest() != other.digest.hexdigest()
    assert a.digest.events == a.stats["warp_instructions"] + a.stats["async_ops"]


@pytest.mark.parametrize("seed", range(3))
def test_draws_are_the_generators(seed):
    """emu.machine.Draws (the scheduler's draws): the values numpy's Generator gives from the same state, for every
    kind of call a schedule makes, interleaved as they come, and interleaved with the Generator's own calls."""
    ours, numpy_s = Draws(np.random.default_rng(seed)), np.random.default_rng(seed)
    rng = np.random.default_rng(100 + seed)
    for _ in range(20000):
        kind = int(rng.integers(5))
        if kind == 0:
            assert ours.random() == numpy_s.random()
        elif kind == 1:
            n = int(rng.choice([1, 2, 3, 7, 24, 36, 1000, 3 * 10 ** 9, 2 ** 32]))
            assert ours.integers(n) == int(numpy_s.integers(n))
        elif kind == 2:
            assert ours.integers(1, 25) == int(numpy_s.integers(1, 25))
        elif kind == 3:  # below(n), the scheduler's own form of integers(n)
            n = int(rng.choice([1, 2, 3, 7, 12, 24, 1000, 3 * 10 ** 9, 2 ** 32]))
            assert ours.below(n) == int(numpy_s.integers(n))
        else:  # the Generator's own draw on the shared bit generator (elect.sync's, the policies' set-up)
            assert int(ours.generator.integers(5)) == int(numpy_s.integers(5))
