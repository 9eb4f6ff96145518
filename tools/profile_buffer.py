"""The profile buffer of KernelConfig.profile: its layout, its decoder, one time axis for every stamp, the timeline.

Audience: tools/profile.py (on a B200: the leaderboard loop with profiling on), probes/profile_stamps.py (any sm_90+
GPU: the same recording helper and slots in a stub kernel) and the tests (the emulator's functional and timed runs
write the same buffer). Only numpy: a bundle decodes anywhere, without the CuTe DSL, torch or a GPU.

The writer is submission.py (the device code); its PROFILE_* constants are the layout, read here from its source
(read_layout), so the file the leaderboard takes stays one file and the layout has one definition. Per CTA (linear
index x + X (y + Y z) over the grid) a record of `words` int64, -1 where nothing was written:
    2 i, 2 i + 1        phase i of `phases`: %globaltimer (ns), %clock64 (cycles of the CTA's SM)
    sm_word             %smid, plus 1 << 32 where this CTA issues the MMAs (a 2-CTA pair's leader, every 1-CTA CTA)
    count_word          accumulators the epilogue took (the CTA's tiles)
    ring_word + 4 j     hand-off j % ring: (ns, clock) when the epilogue got accumulator j, (ns, clock) when it
                        released it (the ring keeps the last `ring` of a CTA's tiles)
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# submission.py's layout constants, in Layout's field order
LAYOUT_NAMES = ("PROFILE_PHASES", "PROFILE_RING", "PROFILE_SM_WORD", "PROFILE_COUNT_WORD", "PROFILE_RING_WORD",
                "PROFILE_WORDS")
NOT_WRITTEN = -1
# Phases only the CTA that issues the MMAs can see: a 2-CTA pair's peer never waits on the shared-memory ring.
MMA_ISSUER_PHASES = ("first_load", "mainloop_end")
# Orders the kernel's synchronisation guarantees within a CTA (a before b): program order within one warp, the
# CTA-wide barrier after `entry`, a TMA load issued after the wait and landed before the MMA warp sees it, an
# accumulator handed over after its MMAs. Other pairs of phases are on different warps and may come in either order.
ORDER = (("entry", "wait_begin"), ("wait_begin", "wait_done"), ("entry", "tmem_alloc"), ("wait_done", "first_load"),
         ("first_load", "mainloop_end"), ("wait_done", "got 0"), ("first_load", "got 0"), ("tmem_alloc", "got 0"),
         ("epilogue_end", "exit"))
# Timeline rows, named as the timed emulator's trace names its warp rows (emu.timing.trace, emu.machine.role_of) so
# both timelines read alike: the warp that stamps each phase (submission.DualGemmKernel's TMA_WARP, MMA_WARP, and
# thread 0 of epilogue warp 0).
ROW_TMA, ROW_MMA, ROW_EPILOGUE = "warp 5 (TMA)", "warp 4 (MMA)", "warp 0 (epilogue)"


@dataclass(frozen=True)
class Layout:
    phases: tuple
    ring: int
    sm_word: int
    count_word: int
    ring_word: int
    words: int

    def phase_word(self, name: str) -> int:
        return 2 * self.phases.index(name)

    def as_dict(self) -> dict:
        return {"phases": list(self.phases), "ring": self.ring, "sm_word": self.sm_word,
                "count_word": self.count_word, "ring_word": self.ring_word, "words": self.words}

    @classmethod
    def from_dict(cls, d: dict) -> "Layout":
        return cls(tuple(d["phases"]), int(d["ring"]), int(d["sm_word"]), int(d["count_word"]), int(d["ring_word"]),
                   int(d["words"]))


def read_layout(submission: Path | str = REPO / "submission.py") -> Layout:
    """The PROFILE_* assignments of submission.py, evaluated in order (they are literals and arithmetic on each
    other: no import of the CuTe DSL needed)."""
    tree = ast.parse(Path(submission).read_text())
    ns: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id in LAYOUT_NAMES for t in node.targets):
            exec(compile(ast.Module([node], []), str(submission), "exec"), {"__builtins__": {"len": len}}, ns)
    missing_names = [name for name in LAYOUT_NAMES if name not in ns]
    if missing_names:
        raise ValueError(f"{submission} defines no profile layout ({', '.join(missing_names)} missing)")
    return Layout(tuple(ns["PROFILE_PHASES"]), *(int(ns[name]) for name in LAYOUT_NAMES[1:]))


@dataclass
class CtaProfile:
    """One CTA's record of one call. Stamps are (%globaltimer ns, %clock64 cycles) as the device wrote them."""

    call: int
    cta: int
    sm: int
    issues_mma: bool
    stamps: dict  # phase -> (ns, clock)
    handoffs: list  # (tile index, got (ns, clock), released (ns, clock) or None)
    tiles: int

    def events(self) -> dict:
        """Every stamp by name: the phases, then "got j" / "released j" for each hand-off kept."""
        out = dict(self.stamps)
        for j, got, released in self.handoffs:
            out[f"got {j}"] = got
            if released is not None:
                out[f"released {j}"] = released
        return out


def decode(words: np.ndarray, layout: Layout) -> list:
    """CtaProfiles of a buffer: int64 words shaped (CTAs, layout.words) for one call or (calls, CTAs, words). A
    record without an entry stamp is a CTA that did not run (the buffer has rows for 148 CTAs; a representative-
    cluster emulation runs a few): left out."""
    w = np.asarray(words, dtype=np.int64)
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3 or w.shape[2] != layout.words:
        raise ValueError(f"profile buffer of shape {w.shape}: expected (calls, CTAs, {layout.words})")
    out = []
    entry = layout.phase_word("entry")
    for call in range(w.shape[0]):
        for cta in np.nonzero(w[call, :, entry] != NOT_WRITTEN)[0]:
            rec = w[call, cta]
            stamps = {}
            for i, name in enumerate(layout.phases):
                if rec[2 * i] != NOT_WRITTEN:
                    stamps[name] = (int(rec[2 * i]), int(rec[2 * i + 1]))
            sm_word, count = int(rec[layout.sm_word]), int(rec[layout.count_word])
            tiles = max(count, 0)
            handoffs = []
            for j in range(max(0, tiles - layout.ring), tiles):
                base = layout.ring_word + 4 * (j % layout.ring)
                if rec[base] == NOT_WRITTEN:
                    continue
                released = (int(rec[base + 2]), int(rec[base + 3])) if rec[base + 2] != NOT_WRITTEN else None
                handoffs.append((j, (int(rec[base]), int(rec[base + 1])), released))
            out.append(CtaProfile(call, int(cta), sm_word & 0xFFFFFFFF if sm_word != NOT_WRITTEN else -1,
                                  sm_word != NOT_WRITTEN and bool(sm_word >> 32), stamps, handoffs, tiles))
    return out


def missing(p: CtaProfile, layout: Layout) -> list:
    """Phases this CTA should have stamped and did not, and hand-offs short of its tile count."""
    want = [ph for ph in layout.phases if p.issues_mma or ph not in MMA_ISSUER_PHASES]
    gaps = [ph for ph in want if ph not in p.stamps]
    if p.sm < 0:
        gaps.append("sm")
    if p.tiles < 1:
        gaps.append("tiles")
    kept = min(p.tiles, layout.ring)
    if len(p.handoffs) != kept or any(r is None for _, _, r in p.handoffs):
        gaps.append(f"hand-offs ({len(p.handoffs)} of {kept})")
    return gaps


TIMERS = {"clock64": 1, "globaltimer": 0}  # which word of a stamp pair each ordering check reads


def disorder(p: CtaProfile, timer: str = "clock64") -> list:
    """Pairs the kernel's synchronisation orders that the CTA's own stamps contradict, and hand-offs out of order
    (got j <= released j <= got j + 1 <= ...; the last release <= epilogue_end). timer "clock64": the SM's cycle
    counter, exact within a CTA (one SM) and meaningless between SMs (each SM's counter has its own origin: no check
    compares it across CTAs); "globaltimer": the same pairs on %globaltimer, read on one SM, so a later read is never
    smaller (messages start "%globaltimer: ")."""
    i = TIMERS[timer]
    tag = "" if timer == "clock64" else "%globaltimer: "
    ev = {k: v[i] for k, v in p.events().items()}
    bad = [f"{tag}{a} > {b}" for a, b in ORDER if a in ev and b in ev and ev[a] > ev[b]]
    chain = [t for _, got, rel in p.handoffs for t in (got, rel) if t is not None]
    bad += [f"{tag}hand-off stamps out of order at {k}" for k in range(1, len(chain)) if chain[k - 1][i] > chain[k][i]]
    last = p.handoffs[-1][2] if p.handoffs else None
    if last is not None and "epilogue_end" in ev and last[i] > ev["epilogue_end"]:
        bad.append(f"{tag}last release > epilogue_end")
    return bad


# What the launch order guarantees between consecutive calls on the default queue, on different SMs (so only on a
# common time axis: %globaltimer, or the time base placed by it): (phase a of call i - 1, phase b of call i,
# premise), read as "the earliest b after the latest a". Every CTA of call i starts after the grid before it
# completed (no PDL), or after every CTA of that grid executed griddepcontrol.launch_dependents, which each CTA does
# right after its entry stamp (PDL), and its griddepcontrol.wait returns after that grid completed (PTX ISA
# "griddepcontrol").
BOUNDARIES = {
    False: (("exit", "entry", "the previous grid completed before this one starts"),),
    True: (("exit", "wait_done", "griddepcontrol.wait returns after the previous grid completed"),
           ("entry", "entry", "the grid starts after every CTA of the previous one signalled its dependents")),
}


def boundary_margins(profiles: list, pdl: bool, at) -> list:
    """Per pair of consecutive calls and each order of BOUNDARIES[pdl]: (call, "a -> b", margin ns), margin = the
    earliest `b` of call i minus the latest `a` of call i - 1, both on the axis at(p, stamp) -> ns; the launch order
    makes it positive, a negative one beyond the axis's error contradicts it."""
    by_call: dict = {}
    for p in profiles:
        by_call.setdefault(p.call, []).append(p)
    out = []
    for call in sorted(by_call):
        if call - 1 not in by_call:
            continue
        for a, b, _ in BOUNDARIES[pdl]:
            before = [at(p, p.stamps[a]) for p in by_call[call - 1] if a in p.stamps]
            after = [at(p, p.stamps[b]) for p in by_call[call] if b in p.stamps]
            if before and after:
                out.append((call, f"{a} -> {b}", float(min(after) - max(before))))
    return out


@dataclass
class TimeBase:
    """One nanosecond axis for every stamp, counted from `origin_ns` (the earliest %globaltimer stamp: an absolute
    %globaltimer, ~1.8e18 ns since 1970 on the lent H100, resolves only 256 ns as a float64, so only differences
    are ever converted). %globaltimer is the same on every SM but ticks coarsely (32 ns on the H100, measured; the
    PTX ISA gives no resolution); %clock64 counts the SM's cycles, fine but per SM. A stamp's time is its SM's
    clock64 / rate plus an offset placed by %globaltimer, so it orders as %clock64 orders it:
      - where one line per SM fits every stamp of that SM (all calls) within a tick, that line: its slope is the
        SM's clock, its intercept the offset of every record of the SM (many stamps: sub-ns placement);
      - otherwise (the clock stopped or changed rate between calls), an offset per record (one CTA of one call),
        the mean of globaltimer - clock64 / ghz over its stamps, and the median clock over SMs, each SM's measured
        within its records (every record's mean removed, so what happens between records does not bend it).
    `ghz` is the median SM clock (a measurement). `residual_ns`: the largest |globaltimer + tick/2 - placed time|
    over all stamps (about half a tick when the stamps are sound); `line_residual_ns`: the largest of the per-SM
    lines' own residual (small where the SMs' clocks ran at one rate through all the calls)."""

    ghz: float = 0.0
    tick_ns: float = 1.0
    origin_ns: int = 0
    clock_origin: dict = field(default_factory=dict)  # sm -> its earliest %clock64 stamp
    lines: dict = field(default_factory=dict)  # sm -> (offset ns since origin_ns at clock_origin, GHz): one line
    offsets: dict = field(default_factory=dict)  # (call, cta) -> offset, for the SMs no line fits
    residual_ns: float = 0.0
    line_residual_ns: float = 0.0

    @classmethod
    def fit(cls, profiles: list) -> "TimeBase":
        stamps = [(p, np.asarray(list(p.events().values()), dtype=np.int64).reshape(-1, 2)) for p in profiles]
        values = np.concatenate([s[:, 0] for _, s in stamps]) if stamps else np.zeros(0, np.int64)
        if not values.size:
            return cls()
        origin = int(values.min())
        steps = np.diff(np.unique(values))
        tick = float(steps[steps > 0].min()) if (steps > 0).any() else 1.0
        half = tick / 2 if tick > 1 else 0.0  # %globaltimer reads the last tick: the true time is half a tick later
        by_sm: dict = {}
        for p, s in stamps:
            if p.sm >= 0 and len(s):  # a record without its SM word (a CTA that never reached it) keeps %globaltimer
                by_sm.setdefault(p.sm, []).append((p, s))
        clock_origin = {sm: int(min(s[:, 1].min() for _, s in recs)) for sm, recs in by_sm.items()}
        # Integer differences first: only values of a few ms (ns) or a few million cycles become floats.
        rel = {sm: [(p, np.stack([(s[:, 0] - origin).astype(np.float64) + half,
                                  (s[:, 1] - clock_origin[sm]).astype(np.float64)], axis=1)) for p, s in recs]
               for sm, recs in by_sm.items()}
        lines, within, worst_line = {}, {}, 0.0
        for sm, recs in rel.items():
            a = np.concatenate([r for _, r in recs])
            if np.ptp(a[:, 0]) >= 10 * tick and np.ptp(a[:, 1]) > 0:
                slope, icpt = np.polyfit(a[:, 1], a[:, 0], 1)
                resid = float(np.abs(a[:, 0] - icpt - slope * a[:, 1]).max())
                worst_line = max(worst_line, resid)
                if resid <= tick and slope > 0:
                    lines[sm] = (float(icpt), float(1 / slope))
                    continue
            sxx = sxy = 0.0
            for _, r in recs:
                if np.ptp(r[:, 0]) >= 10 * tick:  # a record shorter than that says no more than the tick
                    d = r - r.mean(axis=0)
                    sxx += float(d[:, 1] @ d[:, 1])
                    sxy += float(d[:, 1] @ d[:, 0])
            if sxx > 0 and sxy > 0:
                within[sm] = sxx / sxy  # cycles per ns
        rates = [g for _, g in lines.values()] + list(within.values())
        if not rates:
            return cls(0.0, tick, origin, clock_origin, {}, {}, 0.0, worst_line)
        ghz = float(np.median(rates))
        offsets, worst = {}, 0.0
        for sm, recs in rel.items():
            for p, r in recs:
                if sm in lines:
                    d = r[:, 0] - lines[sm][0] - r[:, 1] / lines[sm][1]
                    worst = max(worst, float(np.abs(d).max()))
                else:
                    d = r[:, 0] - r[:, 1] / ghz
                    offsets[(p.call, p.cta)] = float(d.mean())
                    worst = max(worst, float(np.abs(d - d.mean()).max()))
        return cls(ghz, tick, origin, clock_origin, lines, offsets, worst, worst_line)

    def ghz_of(self, p: CtaProfile) -> float:
        """The clock rate the time base reads this record's %clock64 at (its SM's line, else the median)."""
        return self.lines[p.sm][1] if p.sm in self.lines else self.ghz

    def ns(self, p: CtaProfile, stamp) -> float:
        """The stamp's time in ns since origin_ns."""
        if p.sm in self.lines:
            offset, ghz = self.lines[p.sm]
        elif (p.call, p.cta) in self.offsets:
            offset, ghz = self.offsets[(p.call, p.cta)], self.ghz
        else:
            return float(stamp[0] - self.origin_ns) + (self.tick_ns / 2 if self.tick_ns > 1 else 0.0)
        return offset + (stamp[1] - self.clock_origin[p.sm]) / ghz


def times(p: CtaProfile, tb: TimeBase, origin: float = 0.0) -> dict:
    """Every event of the CTA in ns on the time base, minus origin."""
    return {k: tb.ns(p, v) - origin for k, v in p.events().items()}


def spans(p: CtaProfile, tb: TimeBase, origin: float, label: str) -> list:
    """The CTA's phases as timeline spans (emu.timing.trace.Trace.spans rows: CTA label, row, start, end, kind,
    name), in ns since origin: the TMA warp's prologue and griddepcontrol.wait, the MMA warp's wait for the first
    stage and its mainloop, epilogue warp 0's prologue, per tile its wait for the accumulator and its work, then its
    teardown."""
    t = times(p, tb, origin)
    out = []

    def add(row, a, b, kind, name):
        if a in t and b in t:
            out.append((label, row, t[a], t[b], kind, name))

    add(ROW_TMA, "entry", "wait_begin", "busy", "prologue")
    add(ROW_TMA, "wait_begin", "wait_done", "wait", "griddepcontrol.wait")
    add(ROW_MMA, "tmem_alloc", "first_load", "wait", "first stage")
    add(ROW_MMA, "first_load", "mainloop_end", "tensor core", "mainloop (MMA issue)")
    add(ROW_EPILOGUE, "entry", "tmem_alloc", "busy", "prologue and tensor-memory allocation")
    previous = "tmem_alloc"
    for j, _, _ in p.handoffs:
        add(ROW_EPILOGUE, previous, f"got {j}", "wait", f"accumulator {j}")
        add(ROW_EPILOGUE, f"got {j}", f"released {j}", "busy", f"tile {j}")
        previous = f"released {j}"
    add(ROW_EPILOGUE, "epilogue_end", "exit", "busy", "teardown")
    return out
