"""mbarrier objects: phase, pending arrivals, transaction count (PTX ISA 9.7.13.15 "mbarrier").

PTX ISA 9.7.13.15.1: an mbarrier holds the current phase, the pending arrival count, the expected
arrival count and the tx-count. A phase completes when the pending arrival count and the tx-count
both reach zero; then the phase advances, the pending count is reset to the expected count, and
the tx-count starts again from zero. The tx-count may go negative within a phase (a complete-tx
before its expect-tx, 9.7.13.15.2), within its range of +-(2^20 - 1).
try_wait.parity / test_wait.parity (9.7.13.15.16) report whether the phase whose parity is given has
completed, i.e. whether the current phase's parity differs from it.
"""
from __future__ import annotations

from .state import Hazard

TX_LIMIT = (1 << 20) - 1


class Mbarrier:
    def __init__(self, cta, offset: int, count: int, line: int):
        if not 1 <= count <= (1 << 20) - 1:
            raise Hazard(f"mbarrier.init with count {count} at {offset:#x}: the ISA allows 1..2^20-1 (9.7.13.15.9)")
        self.cta = cta
        self.offset = offset
        self.expected = count
        self.pending = count
        self.tx = 0
        self.phase = 0
        self.init_line = line
        # Publication of the initialisation to the other CTAs of the cluster (PTX ISA 9.7.13.15.9 and
        # 9.7.13.4): the initialising thread's fence.mbarrier_init.release.cluster, then a release that
        # reaches the other thread: its barrier.cluster.arrive in phase P matched by that thread's wait on
        # P, or any later chain of mbarrier signals from this CTA that the other thread has waited on
        # (see `release_from`).
        self.init_thread = None  # (warp, lane)
        self.fenced = False
        self.fenced_at = None  # machine clock of the fence
        self.published_phase = None
        # CTA rank -> latest machine clock of a release by that CTA that reached this barrier (a signal from
        # it, or from a thread that had itself observed it): a thread whose wait on this barrier succeeds
        # learns everything up to these times.
        self.release_from = {}
        self.version = 0  # bumped on every state change: wakes warps that spin on this barrier

    def describe(self) -> str:
        return (f"mbarrier CTA{self.cta.rank}+{self.offset:#x} (initialised at PTX line {self.init_line}; phase {self.phase}, waiting for parity "
                f"{self.phase & 1} to complete: {self.pending} of {self.expected} arrivals pending, tx-count {self.tx} bytes)")

    def _check(self, what: str) -> None:
        if abs(self.tx) > TX_LIMIT:
            raise Hazard(f"{what}: tx-count {self.tx} outside +-(2^20-1) on {self.describe()}")
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected
            self.tx = 0
        self.version += 1

    def arrive(self, count: int = 1, what: str = "mbarrier.arrive") -> int:
        """Returns the state token (the phase before the arrival)."""
        token = self.phase
        if count > self.pending:
            raise Hazard(f"{what}: {count} arrivals on {self.describe()}: more arrivals than pending in this phase")
        self.pending -= count
        self._check(what)
        return token

    def expect_tx(self, nbytes: int, what: str = "expect-tx") -> None:
        self.tx += nbytes
        self._check(what)

    def complete_tx(self, nbytes: int, what: str = "complete-tx") -> None:
        self.tx -= nbytes
        self._check(what)

    def phase_complete(self, parity: int) -> bool:
        return (self.phase & 1) != (parity & 1)


def check_remote_use(bar: Mbarrier, warp, what: str, note=None) -> None:
    """A thread of another CTA uses `bar`: its initialisation must have been published to that thread. A violation
    raises Hazard, or, when `note(detail)` is given, is recorded through it (a model violation that hardware-verified
    kernels survive: the remote use comes long after the init in practice; see emu.ops_async)."""
    if warp.cta is bar.cta:
        return
    synced = getattr(warp, "cluster_synced_phase", -1)
    by_cluster_barrier = bar.published_phase is not None and synced >= bar.published_phase
    by_signals = bar.fenced_at is not None and warp.known.get(bar.cta.rank, -1) >= bar.fenced_at
    if not (by_cluster_barrier or by_signals):
        how = ("was never fenced (fence.mbarrier_init.release.cluster) and published by a cluster barrier"
               if bar.published_phase is None else
               f"was published in cluster-barrier phase {bar.published_phase}, but this thread has not waited on it")
        msg = (f"{what}: CTA rank {warp.cta.rank} uses the mbarrier at {bar.offset:#x} of CTA rank {bar.cta.rank}, "
               f"whose initialisation {how} (PTX ISA 9.7.13.15.9, 9.7.13.4)")
        if note is None:
            raise Hazard(msg)
        note(msg)


def note_signal(bar: Mbarrier, warp, now: int) -> None:
    """`warp` signals `bar` (an arrival or complete-tx it issued at clock `now`): a release from its CTA,
    carrying what it had observed of other CTAs."""
    rel = bar.release_from
    rank = warp.cta.rank
    if rel.get(rank, -1) < now:
        rel[rank] = now
    for r, t in warp.known.items():
        if rel.get(r, -1) < t:
            rel[r] = t


def note_acquire(bar: Mbarrier, warp) -> None:
    """`warp` saw a phase of `bar` complete: it has observed every release that reached the barrier."""
    for r, t in bar.release_from.items():
        if warp.known.get(r, -1) < t:
            warp.known[r] = t
