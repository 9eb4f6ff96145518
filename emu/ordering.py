"""Ordering the PTX ISA does not give for free: tcgen05 operations across threads and proxies.

The emulator runs the tcgen05 operations of a CTA in one FIFO (emu.ops_async: issue order) and every memory access
in one global order, both stricter than the ISA. What a kernel may rely on is narrower, and this module checks it
without changing what runs: where the kernel relies on an order the ISA does not promise but hardware-verified
kernels rely on too, it records a Note (emu.state.Note via Machine.note: the run ends "MATCH with notes"); where no
such precedent is known, a Hazard.

tcgen05 memory consistency model (PTX ISA 9.7.16.6):
  - Pipelined pairs (9.7.16.6.2): mma -> mma (same accumulator and shape), cp -> mma, and mma/cp -> commit of the same
    thread execute in issue order. Nothing else is ordered without a wait or a fence: in particular a tcgen05.cp
    issued after a tcgen05.mma may execute before it. MMA_THEN_CP: a cp that writes tensor-memory columns an earlier
    mma of its CTA reads or writes, where the cp's issuing warp has not observed that mma complete (a commit covering
    it, then a completed wait on that commit's mbarrier). Precedent: gau-nernst's B200-verified dual GEMM (v2 reloads
    its scale columns with tcgen05.cp every k-tile right after the MMAs that read them) and NVIDIA's DSL persistent
    block-scaled GEMM (the same single-buffered scale columns).
  - Cross-thread ordering (9.7.16.6.3, canonical patterns 9.7.16.6.4.3/4): an asynchronous tcgen05 operation (mma,
    cp, ld, st) of one thread is ordered before another thread's tcgen05 operations only through
    tcgen05.fence::before_thread_sync (or the implicit one of tcgen05.commit, for the mma/cp it tracks) ahead of the
    synchronizing release, and tcgen05.fence::after_thread_sync after the synchronizing acquire.
    FENCE_BEFORE: a warp acquires (mbarrier wait, bar.sync, cluster barrier) a release that carries another warp's
    asynchronous tcgen05 operations with no before-fence between them and the release, then issues a tcgen05
    operation. FENCE_AFTER: a warp acquires a release carrying another warp's tcgen05 operations (fenced or by a
    commit) and issues an asynchronous tcgen05 operation without tcgen05.fence::after_thread_sync in between.
    Precedent for both: NVIDIA's CuTe DSL pipelines (cutlass/pipeline/sm100.py, 4.3.5 and 4.8.1) emit no tcgen05.fence
    at all: the B200-verified persistent block-scaled GEMM example waits on the accumulator-full barrier and loads
    tensor memory, and its MMA warp waits on the accumulator-empty barrier (released after tcgen05.wait::ld, no
    before-fence) and issues the next MMAs, exactly as this package's kernel does; gau-nernst's kernels deallocate
    after their epilogue's loads with no before-fence. Emulated, each of them trips these rules.
Tensor-memory hand-off between tcgen05.ld and tcgen05.mma (PTX ISA 9.7.16.6.3 with 9.7.16.8.3: tcgen05.ld is
asynchronous until tcgen05.wait::ld): an MMA and another thread's load of the same accumulator columns are ordered only
through a synchronisation, whatever the hardware's timing. Both directions are checked in happens-before terms, so
they do not depend on the schedule: every point compared is a point in one warp's program order, and what the other
warp knows comes from the synchronisations it made (emu.mbarrier's vector clocks), not from when the emulated
operation runs.
    LD_THEN_MMA: a tcgen05.mma writes (D) columns that an earlier tcgen05.ld of another warp reads, and that read is not
    ordered before the MMA: the load has not read yet, or no release its warp made after the read reaches the MMA's
    warp. The read is where the emulator's data path takes it (emu.ops_async._PendingTmemLoad): tcgen05.wait::ld or
    the first use of one of the load's registers, which ptxas's scoreboard makes wait for the load. The release is the
    reading warp's own entry in the MMA warp's knowledge (the clock of its latest release, transitive through every
    barrier and mbarrier chain: emu.mbarrier.released), not its ("tc", ...) entry of the fence rules, which holds the
    issue clock of its latest tcgen05 operation and reaches only the warp it synchronizes with directly. The MMA may
    overwrite the accumulator before the load reads it: an early accumulator-empty release.
    LD_UNWAITED: the same, with the read ordered before the MMA but no tcgen05.wait::ld between the load and the
    release. The ISA completes a load only at tcgen05.wait::ld (9.7.16.8.3); a Note, since NVIDIA's B200-verified
    example releases its accumulator stages on the register scoreboard alone (emu.precedents.TCGEN05_LD_UNWAITED).
    Which register use is the real consumer is the SASS's business: this package's kernel's PTX (DSL 4.8.1) packs the
    loaded registers with mov.b64 right after each load, so a release before the wait::ld but after those moves is
    this Note, not LD_THEN_MMA, even where the arithmetic that really waits on the load comes after the release.
    MMA_THEN_LD: a tcgen05.ld reads columns that an MMA of its CTA writes, and its warp has not observed that MMA
    complete (a commit covering it, then a completed wait on that commit's mbarrier: the "tcdone" entry): a load
    before (or without) the accumulator-full wait.
    LD_THEN_MMA and MMA_THEN_LD are Hazards: no hardware-verified kernel is known to do either (NVIDIA's example,
    gau-nernst's, arseni_ivanov's and novus677's kernels run clean under both, emulated). Granularity: columns. Every
    MMA the emulator implements writes all 128 lanes of D in each CTA (M = 128 per CTA, Layouts A and D:
    emu.tcgen05), and a load reads 16 or 32 lanes of its warp's quadrant, always among them.
    ST_THEN_MMA: a tcgen05.mma reads tensor-memory words (SFA, SFB, A) that a tcgen05.st of another warp wrote, and
    that store is not ordered before the MMA's issue: its warp has not completed it with tcgen05.wait::st (PTX ISA
    9.7.16.8.4: the store is asynchronous until then), or completed it after the last release of its warp that reaches
    the MMA's warp. Granularity: the columns each 32-lane datapath reads in the storing warp's lane quadrant (the lane
    rule of emu.tcgen05: SFA's datapath q reads column sfa + q only, SFB and A every column). A Note
    (emu.precedents.JIAB_ST_THEN_MMA): jIab-b's kernels that store shared-memory scale words this way passed on the
    B200, the one storing words it had just loaded from global memory did not; the B200-timing schedule gives every
    warp the same load latency, so it cannot tell them apart (design.md "Leniencies and blind spots").
    MMA_THEN_ST: the same race seen from the store (so that every schedule reports it, whichever runs first): a
    tcgen05.st writes columns that an MMA of its CTA reads or writes, and its warp has not observed that MMA complete
    (the "tcdone" entry, as MMA_THEN_CP). Granularity: the MMA's column spans. A Note for the same reason.
    DEALLOC_WHILE_READ: the same question for tcgen05.dealloc (9.7.16.7.1: freed columns may be handed to another
    allocation), in both orders: a dealloc frees columns that another warp's tcgen05.ld reads and that read is not
    ordered before it (not read yet, or no release of the reading warp after the read reaches the deallocating warp),
    or a tcgen05.ld reads columns a dealloc of another warp has already freed. Happens-before again, so the verdict
    does not depend on which of the two the schedule runs first. A Note (emu.precedents.TMEM_DEALLOC_WHILE_READ: a
    public CUDA kernel run on a B200 frees its accumulator with the barrier before the dealloc commented out); freed
    columns keep their data until an allocation takes them (emu.tcgen05), as hardware's do, so C still shows what the
    kernel computed and the note says why it is not promised.
Proxies (PTX ISA 9.7.16.6.5, 9.7.9.25.2 "async proxy"): shared memory written by the generic proxy (st.shared) and
then read by the async proxy (a TMA store's source, a tcgen05.cp's source) needs fence.proxy.async between them, by
the writing thread. This module keeps the log of unfenced generic writes (generic_write, proxy_fence). A tcgen05.cp
reading such bytes is a Hazard (async_read: no hardware-verified precedent is known); a TMA store whose source holds
them is a Note (bulk-store-without-proxy-fence, emu.ops_async._StoreSource: arseni_ivanov's B200-verified epilogue
does it). tcgen05.mma's shared-memory operands are not checked this way (their footprint is the whole operand:
named in README's "what the emulator cannot show").

Tracking is per warp (the tcgen05 instructions of the kernels here are issued by one elected lane; a fence executed
by any lane of the warp counts for the warp: a named leniency). Knowledge travels with the happens-before clocks of
emu.mbarrier (release_entries / observed), so a release carries which warps' tcgen05 operations it orders.
"""
from __future__ import annotations

import numpy as np

from . import precedents
from .device import TMEM_COLUMNS
from .state import Hazard
from .tcgen05 import d_columns

MMA_THEN_CP = "tcgen05-mma-then-cp-unordered"
FENCE_BEFORE = "tcgen05-fence-before-thread-sync-missing"
FENCE_AFTER = "tcgen05-fence-after-thread-sync-missing"
LD_THEN_MMA = "tcgen05-ld-then-mma-unordered"
MMA_THEN_LD = "tcgen05-mma-then-ld-unordered"
LD_UNWAITED = "tcgen05-ld-released-before-wait"
ST_THEN_MMA = "tcgen05-st-then-mma-unordered"
MMA_THEN_ST = "tcgen05-mma-then-st-unordered"
DEALLOC_WHILE_READ = "tcgen05-dealloc-while-read"
ASYNC_KINDS = ("mma", "cp", "ld", "st")
RECENT_MMAS = 256  # MMAs of a CTA kept for MMA_THEN_CP / MMA_THEN_LD (older ones have long been observed complete)


def _state(w) -> dict:
    st = getattr(w, "tc_order", None)
    if st is None:
        st = w.tc_order = {"last": -1, "last_line": 0, "mma_cp": -1, "ld_st": -1, "before": -1, "commit": -1,
                           "pending_after": None, "pending_unfenced": None}
    return st


def _key(w) -> tuple:
    return (w.cta.rank, w.warp_id)


# ---------------------------------------------------------------------------------------------- releases
def release_entries(w, now: int) -> dict:
    """What a release by `w` at `now` says about its tcgen05 operations (merged into the emu.mbarrier knowledge):
    ("tc", warp) -> clock of its latest asynchronous tcgen05 operation; ("tcu", warp) -> the same if that operation
    is not fenced before the release (no before-fence after it, and for mma/cp no commit either)."""
    st = getattr(w, "tc_order", None)
    if st is None or st["last"] < 0:
        return {}
    key = _key(w)
    out = {("tc",) + key: st["last"]}
    unfenced_mma = st["mma_cp"] > max(st["before"], st["commit"])
    unfenced_ld = st["ld_st"] > st["before"]
    if unfenced_mma or unfenced_ld:
        out[("tcu",) + key] = st["last"]
    return out


def commit_entries(w) -> dict:
    """What a tcgen05.commit's arrival says: the mma/cp it tracks completed ("tcdone"), fenced by the commit itself."""
    st = _state(w)
    return {("tcdone",) + _key(w): st["mma_cp"]} if st["mma_cp"] >= 0 else {}


def observed(w, seen: dict, knowledge: dict, line: int | None = None) -> None:
    """`w` acquires `knowledge` (before merging it into `seen`): new tcgen05 entries of other warps make its next
    asynchronous tcgen05 operation need an after-fence, and unfenced ones are remembered for FENCE_BEFORE."""
    for key, clock in knowledge.items():
        if not isinstance(key, tuple) or key[0] not in ("tc", "tcu") or key[1:] == _key(w):
            continue
        if seen.get(key, -1) >= clock:
            continue
        st = _state(w)
        if key[0] == "tc":
            st["pending_after"] = key[1:]
        else:
            st["pending_unfenced"] = key[1:]


# ---------------------------------------------------------------------------------------------- tcgen05 events
def fence(w, kind: str, now: int) -> None:
    """tcgen05.fence::before_thread_sync / ::after_thread_sync by `w`."""
    st = _state(w)
    if kind == "fence::before_thread_sync":
        st["before"] = now
    else:
        st["pending_after"] = None


def commit(w, now: int) -> None:
    """tcgen05.commit by `w`: the implicit before-fence of the mma/cp it tracks (PTX ISA 9.7.16.6.4.2)."""
    _state(w)["commit"] = now


def issued(ex, w, ins, kind: str) -> None:
    """An asynchronous tcgen05 operation (ASYNC_KINDS) or tcgen05.dealloc issued by `w`: note the fences it lacks."""
    st = _state(w)
    where = f"{ins.where()} ({_role(w)})"
    if st["pending_unfenced"] is not None:
        rank, wid = st["pending_unfenced"]
        ex.note(FENCE_BEFORE, where, precedents.TCGEN05_FENCE_BEFORE,
                f"issued after acquiring a release by warp {wid} of CTA rank {rank} whose asynchronous tcgen05 "
                f"operations were not fenced by tcgen05.fence::before_thread_sync (or a commit) ahead of it: PTX ISA "
                f"9.7.16.6.3 does not order them before this operation (canonical pattern 9.7.16.6.4.4)")
        st["pending_unfenced"] = None
    if kind in ASYNC_KINDS and st["pending_after"] is not None:
        rank, wid = st["pending_after"]
        ex.note(FENCE_AFTER, where, precedents.TCGEN05_FENCE_AFTER,
                f"asynchronous tcgen05 operation after acquiring tcgen05 operations of warp {wid} of CTA rank {rank} "
                f"with no tcgen05.fence::after_thread_sync in between: PTX ISA 9.7.16.6.3 orders it after them only "
                f"with the fence (canonical patterns 9.7.16.6.4.2-4)")
        st["pending_after"] = None
    if kind in ASYNC_KINDS:
        st["last"], st["last_line"] = ex.clock, ins.line
        st["mma_cp" if kind in ("mma", "cp") else "ld_st"] = ex.clock


# ---------------------------------------------------------------------------------------------- mma -> cp
def mma_footprint(ctas: list, d_taddr: int, sfa_taddr, sfb_taddr, idesc: int, a_taddr=None,
                  ws: bool = False) -> list:
    """(cta, first column, columns, written) of tensor memory a tcgen05.mma reads or writes: the accumulator (N
    columns of 32-bit values, fewer for M = 128 on a pair and the .ws M = 64 / 32 layouts: emu.tcgen05.d_columns,
    written), for a block-scaled kind its SFA (4 columns per 128 rows of A in each CTA) and SFB (N/32 columns, at
    least one), both read (emu.tcgen05 module docstring Q2, Q4; None: no scales), and A's 8 columns when it is in
    tensor memory."""
    n = ((idesc >> 17) & 0x3F) << 3
    m = ((idesc >> 24) & 0x1F) << 4
    cols = ((d_taddr & 0xFFFF, d_columns(m, n, len(ctas), ws), True),)
    if sfa_taddr is not None:
        cols += ((sfa_taddr & 0xFFFF, 4, False), (sfb_taddr & 0xFFFF, max(1, n // 32), False))
    if a_taddr is not None:
        cols += ((a_taddr & 0xFFFF, 8, False),)
    return [(cta, c, k, written) for cta in ctas for c, k, written in cols]


def mma_issued(w, footprint: list, now: int, line: int) -> None:
    """Remember an MMA's tensor-memory footprint on each CTA it touches (for MMA_THEN_CP and MMA_THEN_LD)."""
    for cta in {id(c): c for c, _, _, _ in footprint}.values():
        recent = cta.recent_mmas
        recent.append((_key(w), now, line, [(c0, n, written) for c, c0, n, written in footprint if c is cta]))
        del recent[:-RECENT_MMAS]


def _unordered_mma(w, cta, col: int, ncols: int, writes_only: bool = False):
    """(warp key, PTX line) of the latest MMA of `cta` touching columns [col, col + ncols) (writes_only: its D) that
    `w` has not observed complete, or None. Observed: a tcgen05.commit covering it, then a completed wait on its
    mbarrier (the "tcdone" entry), which observes every earlier MMA of that warp too."""
    settled = set()
    for key, clock, line, spans in reversed(getattr(cta, "recent_mmas", ())):
        if key in settled:
            continue
        if w.seen.get(("tcdone",) + key, -1) >= clock:
            settled.add(key)
            continue
        if any((written or not writes_only) and _overlap(c0, n, col, ncols) for c0, n, written in spans):
            return key, line
    return None


def cp_issued(ex, w, ins, ctas: list, taddr: int, ncols: int = 4, op: str = "tcgen05.cp") -> None:
    """tcgen05.cp writes ncols columns at taddr in each CTA of its group (4 for the 128-bit shapes, 8 for the 256-bit
    ones; tcgen05.shift its 8): note an earlier, unobserved MMA of the CTA that touches them (MMA_THEN_CP)."""
    col = taddr & 0xFFFF
    for cta in ctas:
        unordered = _unordered_mma(w, cta, col, ncols)
        if unordered is not None:
            ex.note(MMA_THEN_CP, f"{ins.where()} ({_role(w)})", precedents.TCGEN05_MMA_THEN_CP,
                    f"{op} writes tensor-memory columns [{col}, {col + ncols}) of CTA rank {cta.rank} that the "
                    f"tcgen05.mma at PTX line {unordered[1]} reads, and nothing orders that MMA before it (PTX ISA "
                    f"9.7.16.6.2: mma -> {op.split('.')[1]} is not a pipelined pair; the emulator runs them in issue "
                    f"order)")
            return


# ---------------------------------------------------------------------------------------------- ld <-> mma
class TmemReads:
    """The tcgen05.ld reads of one CTA's tensor memory, per reading warp ((CTA rank, warp id), the key of its entry in
    a warp's knowledge). A warp's reads and waits come in its program order, so per column the latest is the largest."""

    def __init__(self):
        self.pending = {}  # warp key -> {load: (first column, columns, PTX line)}: not read yet
        self.unwaited = {}  # warp key -> [(first column, columns)] issued since the warp's last tcgen05.wait::ld
        self.read = {}  # warp key -> (clock of the latest load's read per column, -1 for none; its PTX line)
        self.waited = {}  # warp key -> clock per column of the tcgen05.wait::ld after the latest load (-1: none yet)


def _reads(cta) -> TmemReads:
    reads = getattr(cta, "tmem_reads", None)
    if reads is None:
        reads = cta.tmem_reads = TmemReads()
    return reads


def _columns(table: dict, key: tuple, arrays: int) -> tuple:
    if key not in table:
        table[key] = tuple(np.full(TMEM_COLUMNS, -1, np.int64) for _ in range(arrays))
    return table[key]


def _overlap(c0: int, n: int, col: int, ncols: int) -> bool:
    return c0 < col + ncols and col < c0 + n


def ld_issued(w, load, col: int, ncols: int, line: int) -> None:
    """tcgen05.ld by `w` (`load`: its handle until ld_read) reads columns [col, col + ncols) of its quadrant: every
    MMA of its CTA that writes them must have been observed complete by `w` (MMA_THEN_LD: module docstring)."""
    unordered = _unordered_mma(w, w.cta, col, ncols, writes_only=True)
    if unordered is not None:
        (rank, wid), mma_line = unordered
        raise Hazard(f"[{MMA_THEN_LD}] tcgen05.ld reads tensor-memory columns [{col}, {col + ncols}) of CTA rank "
                     f"{w.cta.rank} that the tcgen05.mma at PTX line {mma_line} (warp {wid} of CTA rank {rank}) "
                     f"writes, and this warp has not observed that MMA complete (a tcgen05.commit covering it, then a "
                     f"completed wait on its mbarrier): PTX ISA 9.7.16.6.3 orders another thread's tcgen05.mma before "
                     f"this load only through that synchronisation")
    reads, key = _reads(w.cta), _key(w)
    reads.pending.setdefault(key, {})[load] = (col, ncols, line)
    reads.unwaited.setdefault(key, []).append((col, ncols))


def ld_read(w, load, now: int) -> None:
    """The data path has read the tcgen05.ld `load` of `w` at clock `now` (tcgen05.wait::ld, or the first use of one
    of its registers: emu.ops_async._PendingTmemLoad); no tcgen05.wait::ld covers it yet unless one comes at `now`."""
    reads, key = _reads(w.cta), _key(w)
    col, ncols, line = reads.pending[key].pop(load)
    clocks, lines = _columns(reads.read, key, 2)
    clocks[col:col + ncols], lines[col:col + ncols] = now, line
    _columns(reads.waited, key, 1)[0][col:col + ncols] = -1


def ld_waited(w, now: int) -> None:
    """tcgen05.wait::ld by `w` at clock `now` (after the data path read its loads): they are complete (9.7.16.8.3)."""
    reads, key = _reads(w.cta), _key(w)
    waited = _columns(reads.waited, key, 1)[0]
    for col, ncols in reads.unwaited.pop(key, ()):
        waited[col:col + ncols] = now


def mma_overwrites(ex, w, ins, footprint: list) -> None:
    """A tcgen05.mma by `w` writes its footprint's D columns: every tcgen05.ld of another warp that reads them must
    have read and be released to `w` (LD_THEN_MMA), and been waited for before that release (LD_UNWAITED: a Note)."""
    own = _key(w)
    for cta, c0, n, written in footprint:
        reads = getattr(cta, "tmem_reads", None)
        if not written or reads is None:
            continue
        for reader, loads in reads.pending.items():
            for col, ncols, ld_line in loads.values():
                if reader != own and _overlap(c0, n, col, ncols):
                    _ld_then_mma(w, ins, cta, reader, c0, n, ld_line, "has not read tensor memory yet (no "
                                 "tcgen05.wait::ld and no use of its registers since it was issued)")
        for reader, (clocks, lines) in reads.read.items():
            if reader == own:
                continue
            released = w.seen.get(reader, -1)
            last = c0 + int(clocks[c0:c0 + n].argmax())
            if clocks[last] > released:
                _ld_then_mma(w, ins, cta, reader, c0, n, int(lines[last]), "read it after the last release of its "
                             "warp that reaches the MMA's warp")
            waited = reads.waited[reader][0][c0:c0 + n]
            unwaited = (clocks[c0:c0 + n] >= 0) & ((waited < 0) | (waited > released))
            if unwaited.any():
                ld_line = int(lines[c0 + int(unwaited.argmax())])
                ex.note(LD_UNWAITED, f"{ins.where()} ({_role(w)})", precedents.TCGEN05_LD_UNWAITED,
                        f"tcgen05.mma writes accumulator columns [{c0}, {c0 + n}) of CTA rank {cta.rank} that the "
                        f"tcgen05.ld at PTX line {ld_line} of warp {reader[1]} ({_role(reader[1])}) read before its "
                        f"warp's release reached this warp, with no tcgen05.wait::ld between that load and the "
                        f"release: only the register scoreboard of its first use orders the read; PTX ISA 9.7.16.8.3 "
                        f"completes a load at tcgen05.wait::ld")


def _ld_then_mma(w, ins, cta, reader: tuple, c0: int, n: int, ld_line: int, why: str) -> None:
    raise Hazard(f"[{LD_THEN_MMA}] tcgen05.mma (PTX line {ins.line}, warp {w.warp_id} of CTA rank {w.cta.rank}) writes "
                 f"accumulator columns [{c0}, {c0 + n}) of CTA rank {cta.rank} that the tcgen05.ld at PTX line "
                 f"{ld_line} of warp {reader[1]} ({_role(reader[1])}) reads, and that load {why}: PTX ISA 9.7.16.6.3 "
                 f"orders it before this MMA only through a synchronisation after the read, so the MMA may overwrite "
                 f"the accumulator before the load reads it")


# ---------------------------------------------------------------------------------------------- st -> mma
class TmemStores:
    """The tcgen05.st writes of one CTA's tensor memory, per storing warp ((CTA rank, warp id)); each warp writes its
    own lane quadrant (warp id % 4). A warp's stores and waits come in its program order."""

    def __init__(self):
        self.pending = {}  # warp key -> [(first column, columns, PTX line)] since its last tcgen05.wait::st
        self.done = {}  # warp key -> (clock per column of the wait::st that completed its latest store, -1 for none;
        #                              that store's PTX line)


def st_issued(ex, w, ins, col: int, ncols: int) -> None:
    """tcgen05.st by `w` writes columns [col, col + ncols) of its quadrant, complete at its next tcgen05.wait::st: note
    an earlier MMA of its CTA touching them that `w` has not observed complete (MMA_THEN_ST)."""
    unordered = _unordered_mma(w, w.cta, col, ncols)
    if unordered is not None:
        (_, wid), line = unordered
        ex.note(MMA_THEN_ST, f"{ins.where()} ({_role(w)})", precedents.JIAB_ST_THEN_MMA,
                f"tcgen05.st writes tensor-memory columns [{col}, {col + ncols}) of CTA rank {w.cta.rank} that the "
                f"tcgen05.mma at PTX line {line} (warp {wid}) reads or writes, and this warp has not observed that MMA "
                f"complete (a tcgen05.commit covering it, then a completed wait on its mbarrier): PTX ISA 9.7.16.6.3 "
                f"orders them only through that synchronisation, so the MMA may read the new words")
    stores = getattr(w.cta, "tmem_stores", None)
    if stores is None:
        stores = w.cta.tmem_stores = TmemStores()
    stores.pending.setdefault(_key(w), []).append((col, ncols, ins.line))


def st_waited(w, now: int) -> None:
    """tcgen05.wait::st by `w` at clock `now`: its stores are complete (PTX ISA 9.7.16.8.5)."""
    stores = getattr(w.cta, "tmem_stores", None)
    if stores is None or _key(w) not in stores.pending:
        return
    clocks, lines = _columns(stores.done, _key(w), 2)
    for col, ncols, line in stores.pending.pop(_key(w)):
        clocks[col:col + ncols], lines[col:col + ncols] = now, line


def mma_tmem_reads(footprint: list, sfa_taddr) -> list:
    """(cta, lane quadrant or None for all four, first column, columns) of tensor memory a tcgen05.mma reads besides
    its accumulator, from its footprint's read spans (mma_footprint): SFA's datapath q reads column sfa + q of quadrant
    q only (emu.tcgen05.scale_words' own rows); SFB's and A's columns are read in every quadrant."""
    sfa = None if sfa_taddr is None else sfa_taddr & 0xFFFF
    reads = []
    for cta, c0, n, written in footprint:
        if written:
            continue
        reads += [(cta, q, c0 + q, 1) for q in range(4)] if c0 == sfa else [(cta, None, c0, n)]
    return reads


def mma_reads_stores(ex, w, ins, reads: list) -> None:
    """A tcgen05.mma by `w` reads `reads` (mma_tmem_reads): every tcgen05.st of another warp that wrote them must be
    complete and released to `w` (ST_THEN_MMA: a Note)."""
    own = _key(w)
    for cta, quadrant, c0, n in reads:
        stores = getattr(cta, "tmem_stores", None)
        if stores is None:
            continue
        for writer in set(stores.pending) | set(stores.done):
            if writer == own or (quadrant is not None and writer[1] % 4 != quadrant):
                continue
            unwaited = [line for col, ncols, line in stores.pending.get(writer, ()) if _overlap(c0, n, col, ncols)]
            if unwaited:
                _st_then_mma(ex, w, ins, cta, writer, c0, n, unwaited[0], "has not completed it (no "
                             "tcgen05.wait::st of its warp since)")
                return
            if writer in stores.done:
                clocks, lines = stores.done[writer]
                last = c0 + int(clocks[c0:c0 + n].argmax())
                if clocks[last] > w.seen.get(writer, -1):
                    _st_then_mma(ex, w, ins, cta, writer, c0, n, int(lines[last]), "completed it after the last "
                                 "release of that warp that reaches the MMA's warp")
                    return


def _st_then_mma(ex, w, ins, cta, writer: tuple, c0: int, n: int, st_line: int, why: str) -> None:
    ex.note(ST_THEN_MMA, f"{ins.where()} ({_role(w)})", precedents.JIAB_ST_THEN_MMA,
            f"tcgen05.mma reads tensor-memory columns [{c0}, {c0 + n}) of CTA rank {cta.rank} (lane quadrant "
            f"{writer[1] % 4}) that the tcgen05.st at PTX line {st_line} of warp {writer[1]} wrote, and that warp {why}: "
            f"PTX ISA 9.7.16.6.3 orders another thread's tcgen05.st before this MMA only through a synchronisation "
            f"after its tcgen05.wait::st, so the MMA may read the words before they are written")


def _outstanding_reads(w, cta, c0: int, n: int) -> dict:
    """{reader warp key: PTX line} of the tcgen05.ld of warps other than `w` that read columns [c0, c0 + n) of `cta`
    and are not ordered before `w`'s next operation: not read yet, or read after the last release of the reading warp
    that reaches `w`."""
    reads, own, out = getattr(cta, "tmem_reads", None), _key(w), {}
    if reads is None:
        return out
    for reader, loads in reads.pending.items():
        for col, ncols, ld_line in loads.values():
            if reader != own and _overlap(c0, n, col, ncols):
                out.setdefault(reader, ld_line)
    for reader, (clocks, lines) in reads.read.items():
        span = clocks[c0:c0 + n]
        if reader != own and span.max() > w.seen.get(reader, -1):
            out.setdefault(reader, int(lines[c0 + int(span.argmax())]))
    return out


def _warps(keys) -> str:
    ids = sorted({k[1] for k in keys})
    return f"warp{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"


def dealloc_frees(ex, w, ins, ctas: list, col: int, ncols: int) -> None:
    """tcgen05.dealloc by `w` frees columns [col, col + ncols) of each CTA of `ctas` (DEALLOC_WHILE_READ for the reads
    not ordered before it); the freed range is remembered for later loads (ld_issued)."""
    for cta in ctas:
        outstanding = _outstanding_reads(w, cta, col, ncols)
        if outstanding:
            ex.note(DEALLOC_WHILE_READ, f"{ins.where()} ({_role(w)})", precedents.TMEM_DEALLOC_WHILE_READ,
                    f"warp {w.warp_id} deallocated tensor-memory columns {col}-{col + ncols - 1} of CTA rank "
                    f"{cta.rank} while {_warps(outstanding)} had reads of them outstanding (tcgen05.ld at PTX line "
                    f"{min(outstanding.values())}): nothing orders those reads before the dealloc (PTX ISA "
                    f"9.7.16.7.1, 9.7.16.6.3: a barrier after the reads, with tcgen05.fence::before_thread_sync)")
        cta.tmem_freed = [f for f in cta.tmem_freed if not _overlap(f[0], f[1], col, ncols)]
        cta.tmem_freed.append((col, ncols, _key(w), ins.line))


def allocated(cta, col: int, ncols: int) -> None:
    """tcgen05.alloc gave columns [col, col + ncols) of `cta` to a new allocation: no longer freed."""
    cta.tmem_freed = [f for f in cta.tmem_freed if not _overlap(f[0], f[1], col, ncols)]


def freed_by(cta, col: int, ncols: int):
    """(warp key, PTX line) of the dealloc that freed columns of [col, col + ncols) of `cta` and no allocation took
    back since, or None."""
    return next(((key, line) for c0, n, key, line in cta.tmem_freed if _overlap(c0, n, col, ncols)),
                None)


def ld_after_dealloc(ex, w, ins, col: int, ncols: int) -> None:
    """A tcgen05.ld by `w` of columns [col, col + ncols) that a dealloc of another warp already freed
    (DEALLOC_WHILE_READ)."""
    freed = freed_by(w.cta, col, ncols)
    if freed is not None and freed[0] != _key(w):
        (rank, wid), line = freed
        ex.note(DEALLOC_WHILE_READ, f"{ins.where()} ({_role(w)})", precedents.TMEM_DEALLOC_WHILE_READ,
                f"warp {wid} deallocated tensor-memory columns of CTA rank {rank} at PTX line {line} while warp "
                f"{w.warp_id} had reads of them outstanding (this tcgen05.ld of columns {col}-{col + ncols - 1}): "
                f"nothing orders the read before the dealloc (PTX ISA 9.7.16.7.1, 9.7.16.6.3)")


# ---------------------------------------------------------------------------------------------- proxies
def generic_write(w, cta, offset: int, nbytes: int) -> None:
    """st.shared by `w`: bytes the async proxy may read only after w's fence.proxy.async (adjacent writes of a warp
    are kept as one span, with the PTX line of the first)."""
    spans = cta.generic_unfenced.setdefault(w, [])
    if spans and spans[-1][1] == offset:
        spans[-1] = (spans[-1][0], offset + nbytes, spans[-1][2])
    else:
        spans.append((offset, offset + nbytes, w.last_line))


def proxy_fence(w) -> None:
    """fence.proxy.async by `w`: its earlier generic writes are visible to the async proxy."""
    for cta in w.cta.cluster.ctas:
        cta.generic_unfenced.pop(w, None)


def unfenced_writers(cta, lo: int, hi: int) -> set:
    """Warp ids with generic writes into [lo, hi) of cta's shared memory that no fence.proxy.async of theirs followed."""
    return {w.warp_id for w, spans in cta.generic_unfenced.items()
            if any(a < hi and lo < b for a, b, _ in spans)}


def async_read(cta, offset: int, nbytes: int, what: str) -> None:
    """The async proxy reads [offset, offset + nbytes) of `cta`'s shared memory where no precedent is known (a
    tcgen05.cp source): every generic write there must have been fenced with fence.proxy.async by its writer."""
    for writer, spans in cta.generic_unfenced.items():
        for lo, hi, line in spans:
            if lo < offset + nbytes and offset < hi:
                raise Hazard(f"{what} reads shared memory [{offset:#x}, {offset + nbytes:#x}) of CTA rank {cta.rank} that "
                             f"warp {writer.warp_id} wrote with a generic-proxy store (PTX line {line}) without a "
                             f"fence.proxy.async after it (PTX ISA 9.7.16.6.5, 9.7.9.25.2: the async proxy may not see it)")


def _role(w) -> str:
    """The role of warp `w` (or of warp id `w`) in this package's kernel layout (emu.machine.role_of)."""
    from .machine import role_of

    return role_of(w if isinstance(w, int) else w.warp_id)

