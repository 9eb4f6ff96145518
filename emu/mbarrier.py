"""mbarrier objects: phase, pending arrivals, transaction count (PTX ISA 9.7.13.15 "mbarrier").

PTX ISA 9.7.13.15.1: an mbarrier holds the current phase, the pending arrival count, the expected
arrival count and the tx-count. A phase completes when the pending arrival count and the tx-count
both reach zero; then the phase advances, the pending count is reset to the expected count, and
the tx-count starts again from zero. The tx-count may go negative within a phase (a complete-tx
before its expect-tx, 9.7.13.15.2), within its range of +-(2^20 - 1).
try_wait.parity / test_wait.parity (9.7.13.15.16) report whether the phase whose parity is given has
completed, i.e. whether the current phase's parity differs from it.

Happens-before of the initialisation. The object "must be initialized prior to use" (9.7.13.15.3) and
mbarrier.init is a plain write to shared memory, so a thread other than the initialising one may use it only
once the init happens-before that use (PTX ISA 8 "Memory Consistency Model": a synchronization that orders them).
Within a CTA the emulator tracks, per warp, the latest clock of every other warp's actions it has observed
(Warp.seen, vector-clock style) through the synchronizations that order memory: bar.sync / barrier.sync (9.7.13.1:
prior memory accesses of the participating threads are performed relative to all of them), barrier.cluster
arrive/wait (9.7.13.2) and chains of mbarrier arrive -> completed wait (9.7.13.15.16). A use by another warp that
has not observed the init's clock violates the rule whatever the emulated interleaving (INIT_UNORDERED). Lanes of
the initialising warp count as ordered after it (they run in lockstep here; the ISA would ask for a __syncwarp: a
named leniency). Across CTAs the rule is publication (check_remote_use): fence.mbarrier_init plus a release that
reaches the other thread (INIT_UNPUBLISHED). Both are Notes, not Hazards, where the instructions report them
(init_notes): arseni_ivanov's B200-verified kernel creates its pipelines with defer_sync=True and never synchronises,
so its TMA warp uses mbarriers that warp 0 initialised with nothing ordering the two, in its own CTA and (2-CTA
kernel) in the peer's (emu.precedents). A use of an mbarrier no thread has initialised yet waits for the init
(emu.ops_memory.await_uninitialised, the same rule); one never initialised is a deadlock.
Re-initialising a live object is undefined (9.7.13.15.9: mbarrier.inval first). In the middle of a phase (some
arrivals or tx-count already counted) it discards them: a Hazard. At a phase boundary (no arrival or tx-count
counted in the current phase) nothing that was signalled is lost, and hardware-verified code does it
(emu.precedents.DSL435_TMEM_REINIT): a Note (REINIT_QUIESCENT). Several lanes of one mbarrier.init instruction
writing the same count to the same object count as one initialisation: they write the same state at the same
instant (DSL 4.3.5 initialises its pipeline barriers with a whole warp; 4.8.1 elects one lane).
"""

from __future__ import annotations

from . import precedents
from .ordering import observed, release_entries
from .state import Hazard

TX_LIMIT = (1 << 20) - 1
INIT_UNORDERED = "mbarrier-used-before-init"  # inside a CTA: no happens-before from the init to the use
INIT_UNPUBLISHED = "mbarrier-init-unpublished"  # across CTAs: the init was not published to the user
REINIT_QUIESCENT = "mbarrier-reinit-at-phase-boundary"


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
        self.init_clock = None  # machine clock of the mbarrier.init
        self.fenced = False
        self.fenced_at = None  # machine clock of the fence
        self.published_phase = None
        # CTA rank -> latest machine clock of a release by that CTA that reached this barrier (a signal from
        # it, or from a thread that had itself observed it): a thread whose wait on this barrier succeeds
        # learns everything up to these times.
        self.release_from = {}
        # Warp key (CTA rank, warp id) -> latest clock of that warp's actions ordered before a signal that reached
        # this barrier (and the tcgen05 entries of emu.ordering): those of the phase in progress, and of every
        # completed phase. A warp whose wait succeeds has observed the completed ones.
        self.phase_releases = {}
        self.completed_releases = {}
        self.version = 0  # bumped on every state change: wakes warps that spin on this barrier
        # Warp key -> phases completed when that warp's last parity wait on this barrier succeeded, and the warps whose
        # wait has been lapped (lapped_wait): the deadlock report names the cause.
        self.waited = {}
        self.lapped = {}
        # Keys of the warps of its CTA whose use check_use found ordered after the init: what a warp has observed only
        # grows and the init's clock is fixed, so the answer cannot change (a re-init makes a new object)
        self.ordered_users = set()

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
            merge(self.completed_releases, self.phase_releases)
            self.phase_releases = {}
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

    def lapped_wait(self, key, parity: int) -> str | None:
        """Why a failing parity wait by warp `key` can never be the wait its warp meant, or None. A parity wait tells
        only whether the last completed phase has the other parity (PTX ISA 9.7.13.15.16): the phase the warp waits
        for is the first one, after the phase its last successful wait saw, with this parity; if that phase has
        completed and a later one too, the barrier has lapped the warp, which now waits for a phase two beyond, one
        that arrives only if the other threads run on without it. A kernel's own race: a thread fell two phases behind
        (on a B200 it rarely does; the emulator's schedules find it)."""
        seen = self.waited.get(key, 0)
        meant = seen if seen % 2 == parity % 2 else seen + 1
        if self.phase <= meant + 1 or self.phase_complete(parity):  # (the usual case first)
            return None
        return (f"lapped: it waits for parity {parity & 1}, meaning phase {meant} (its last successful wait saw "
                f"{seen} completed), but phases {meant} and {meant + 1} have completed since: the barrier ran two "
                f"phases ahead of this warp, which now waits for phase {meant + 2} (the kernel's own race: a parity "
                f"wait tells only the last phase's parity, PTX ISA 9.7.13.15.16)")


def warp_key(warp) -> tuple:
    return (warp.cta.rank, warp.warp_id)


def merge(into: dict, knowledge: dict) -> None:
    """Fold `knowledge` (warp key -> clock) into `into`, keeping the latest clock per warp."""
    for key, clock in knowledge.items():
        if into.get(key, -1) < clock:
            into[key] = clock


def observe(warp, knowledge: dict) -> None:
    """`warp` has synchronized with releases carrying `knowledge` (warp key -> clock): it has observed them."""
    observed(warp, warp.seen, knowledge)
    merge(warp.seen, knowledge)


def released(warp, now: int) -> dict:
    """What a release by `warp` at clock `now` carries: its own actions so far, everything it has observed, and which
    of its own tcgen05 operations are ordered before it (emu.ordering.release_entries; another warp's tcgen05
    issue entries are not forwarded: the fence rules pair a producer with the consumer it synchronizes with)."""
    forwarded = {k: v for k, v in warp.seen.items() if k[0] not in ("tc", "tcu")}
    return {**forwarded, warp_key(warp): now, **release_entries(warp, now)}


def initialise(cta, offset: int, count: int, warp, lane: int, line: int, now: int, note) -> Mbarrier:
    """mbarrier.init by `warp`'s `lane` at clock `now` (PTX ISA 9.7.13.15.9): a new object at `offset` of `cta`. The
    location must not hold a live one (no mbarrier.inval is implemented, so every re-init is of a live object);
    `note(rule, precedent, detail)` records one at a phase boundary (module docstring)."""
    old = cta.mbarriers.get(offset)
    if old is not None and old.init_thread[0] is warp and old.init_clock == now and old.expected == count:
        return old  # another lane of the same instruction, same count: one initialisation (see module docstring)
    if old is not None:
        what = (f"mbarrier.init at shared offset {offset:#x} of CTA rank {cta.rank} re-initialises the live mbarrier "
                f"initialised at PTX line {old.init_line} (undefined: mbarrier.inval first, PTX ISA 9.7.13.15.9)")
        if old.pending != old.expected or old.tx:
            raise Hazard(f"{what} in the middle of phase {old.phase} ({old.expected - old.pending} arrivals, tx-count "
                         f"{old.tx} already counted): they are lost")
        note(REINIT_QUIESCENT, precedents.DSL435_TMEM_REINIT, f"{what}, at a phase boundary (phase {old.phase})")
    bar = cta.mbarriers[offset] = Mbarrier(cta, offset, count, line)
    bar.init_thread = (warp, lane)
    bar.init_clock = now
    return bar


def check_use(bar: Mbarrier, warp, what: str, note=None) -> None:
    """`warp` uses `bar` (an arrive, wait, expect-tx, or an asynchronous operation it issues that will signal it):
    the initialisation must happen-before the use (module docstring). A violation raises Hazard, or, when
    `note(rule, detail)` is given, is recorded through it under INIT_UNORDERED (inside the CTA) or INIT_UNPUBLISHED
    (across CTAs): a hardware-verified kernel survives both (init_notes)."""
    key = warp_key(warp)
    if key in bar.ordered_users:
        return
    if warp.cta is bar.cta:
        init_warp = bar.init_thread[0]
        if init_warp is warp or warp.seen.get(warp_key(init_warp), -1) >= bar.init_clock:
            bar.ordered_users.add(key)
            return
        msg = (f"{what}: warp {warp.warp_id} of CTA rank {warp.cta.rank} uses the mbarrier at {bar.offset:#x} "
               f"before its initialisation by warp {init_warp.warp_id} (PTX line {bar.init_line}) is ordered "
               f"before the use: no bar.sync, cluster barrier or mbarrier chain from that warp after the init "
               f"reaches this one (PTX ISA 9.7.13.15.3: initialised prior to use; 9.7.13.1)")
        if note is None:
            raise Hazard(msg)
        note(INIT_UNORDERED, msg)
        return
    check_remote_use(bar, warp, what, None if note is None else lambda detail: note(INIT_UNPUBLISHED, detail))


def init_notes(ex, where: str):
    """The `note` of check_use for machine `ex`: a Note filed at `where` under the rule's hardware-verified precedent
    (arseni_ivanov's kernel never synchronises its mbarrier inits with their users, in its CTA or across the pair)."""
    precedent = {INIT_UNORDERED: precedents.ARSENI_INIT_UNORDERED, INIT_UNPUBLISHED: precedents.ARSENI_INIT_UNPUBLISHED}
    return lambda rule, detail: ex.note(rule, where, precedent[rule], detail)


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


def note_signal(bar: Mbarrier, warp, now: int, release: dict | None = None) -> None:
    """`warp` signals `bar` (an arrival or complete-tx it issued at clock `now`): a release from its CTA,
    carrying what it had observed of other CTAs (and, per warp, of its own). `release`: released(warp, now), when
    the caller signals from several lanes at once and made it once."""
    rel = bar.release_from
    rank = warp.cta.rank
    if rel.get(rank, -1) < now:
        rel[rank] = now
    for r, t in warp.known.items():
        if rel.get(r, -1) < t:
            rel[r] = t
    merge(bar.phase_releases, released(warp, now) if release is None else release)


def note_acquire(bar: Mbarrier, warp) -> None:
    """`warp` saw a phase of `bar` complete: it has observed every release that reached the barrier."""
    for r, t in bar.release_from.items():
        if warp.known.get(r, -1) < t:
            warp.known[r] = t
    observe(warp, bar.completed_releases)
