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

from . import precedents
from .state import Hazard

MMA_THEN_CP = "tcgen05-mma-then-cp-unordered"
FENCE_BEFORE = "tcgen05-fence-before-thread-sync-missing"
FENCE_AFTER = "tcgen05-fence-after-thread-sync-missing"
ASYNC_KINDS = ("mma", "cp", "ld", "st")
RECENT_MMAS = 256  # MMAs of a CTA remembered for MMA_THEN_CP (older ones have long been observed complete)


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
def mma_footprint(ctas: list, d_taddr: int, sfa_taddr: int, sfb_taddr: int, idesc: int) -> list:
    """(cta, first column, columns) of tensor memory a block-scaled tcgen05.mma reads or writes: the accumulator
    (N columns of fp32), its SFA (4 columns per 128 rows of A in each CTA) and SFB (N/32 columns, at least one)
    (emu.tcgen05 module docstring Q2, Q4)."""
    n = ((idesc >> 17) & 0x3F) << 3
    cols = ((d_taddr & 0xFFFF, n), (sfa_taddr & 0xFFFF, 4), (sfb_taddr & 0xFFFF, max(1, n // 32)))
    return [(cta, c, k) for cta in ctas for c, k in cols]


def mma_issued(w, footprint: list, now: int, line: int) -> None:
    """Remember an MMA's tensor-memory footprint on each CTA it touches (for MMA_THEN_CP)."""
    for cta in {id(c): c for c, _, _ in footprint}.values():
        recent = cta.__dict__.setdefault("recent_mmas", [])
        recent.append((_key(w), now, line, [(c0, n) for c, c0, n in footprint if c is cta]))
        del recent[:-RECENT_MMAS]


def cp_issued(ex, w, ins, ctas: list, taddr: int) -> None:
    """tcgen05.cp.32x128b.warpx4 writes 4 columns at taddr in each CTA of its group: note an earlier, unobserved MMA
    of the CTA that touches them (MMA_THEN_CP)."""
    col = taddr & 0xFFFF
    for cta in ctas:
        for key, clock, line, spans in reversed(getattr(cta, "recent_mmas", ())):
            if w.seen.get(("tcdone",) + key, -1) >= clock:
                continue  # the cp's warp has observed that MMA complete
            if any(c0 < col + 4 and col < c0 + n for c0, n in spans):
                ex.note(MMA_THEN_CP, f"{ins.where()} ({_role(w)})", precedents.TCGEN05_MMA_THEN_CP,
                        f"tcgen05.cp writes tensor-memory columns [{col}, {col + 4}) of CTA rank {cta.rank} that the "
                        f"tcgen05.mma at PTX line {line} reads, and nothing orders that MMA before this copy (PTX ISA "
                        f"9.7.16.6.2: mma -> cp is not a pipelined pair; the emulator runs them in issue order)")
                return


# ---------------------------------------------------------------------------------------------- proxies
def generic_write(w, cta, offset: int, nbytes: int) -> None:
    """st.shared by `w`: bytes the async proxy may read only after w's fence.proxy.async (adjacent writes of a warp
    are kept as one span, with the PTX line of the first)."""
    spans = cta.__dict__.setdefault("generic_unfenced", {}).setdefault(w, [])
    if spans and spans[-1][1] == offset:
        spans[-1] = (spans[-1][0], offset + nbytes, spans[-1][2])
    else:
        spans.append((offset, offset + nbytes, w.last_line))


def proxy_fence(w) -> None:
    """fence.proxy.async by `w`: its earlier generic writes are visible to the async proxy."""
    for cta in w.cta.cluster.ctas:
        cta.__dict__.get("generic_unfenced", {}).pop(w, None)


def unfenced_writers(cta, lo: int, hi: int) -> set:
    """Warp ids with generic writes into [lo, hi) of cta's shared memory that no fence.proxy.async of theirs followed."""
    return {w.warp_id for w, spans in cta.__dict__.get("generic_unfenced", {}).items()
            if any(a < hi and lo < b for a, b, _ in spans)}


def async_read(cta, offset: int, nbytes: int, what: str) -> None:
    """The async proxy reads [offset, offset + nbytes) of `cta`'s shared memory where no precedent is known (a
    tcgen05.cp source): every generic write there must have been fenced with fence.proxy.async by its writer."""
    for writer, spans in cta.__dict__.get("generic_unfenced", {}).items():
        for lo, hi, line in spans:
            if lo < offset + nbytes and offset < hi:
                raise Hazard(f"{what} reads shared memory [{offset:#x}, {offset + nbytes:#x}) of CTA rank {cta.rank} that "
                             f"warp {writer.warp_id} wrote with a generic-proxy store (PTX line {line}) without a "
                             f"fence.proxy.async after it (PTX ISA 9.7.16.6.5, 9.7.9.25.2: the async proxy may not see it)")


def _role(w) -> str:
    from .machine import role_of

    return role_of(w.warp_id)

