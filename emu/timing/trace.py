"""A timeline of a timed run: per CTA, what each warp role does (issuing instructions, by kind, or waiting, and on
what) and what each unit does (TMA loads in flight, the tensor core). Written as Chrome trace JSON (open in
https://ui.perfetto.dev or chrome://tracing: a row per warp and per unit lane) and as a PNG to read at a glance: a
labelled row per warp role and unit of each CTA, a microsecond axis, a legend of the colours, the call's phases and
the title the caller gives (the binding resources). The PNG needs matplotlib, an optional dependency (the test extra
has it: pip install -e '.[test]'); without it Trace.png says so and the JSON is unaffected.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

MERGE_GAP = 64  # cycles: issue slots closer than this belong to one busy span (the Chrome trace's "issue" spans)
BIN = 32  # cycles: the issue activity the picture draws is summed in bins this wide
# What a warp issues, by kind (the picture's colours, in legend order); activity() sorts each instruction into one.
ACTIVITIES = {
    "ALU, FMA, conversions, branches": "#4285f4",
    "MUFU (ex2, rcp, tanh)": "#a142f4",
    "tcgen05.ld (tensor memory to registers)": "#00acc1",
    "store (global, shared, st.async)": "#fb8c00",
    "TMA / MMA issue (cp.async.bulk, tcgen05)": "#0b8043",
    "synchronisation (mbarrier, barriers, fences)": "#795548",
}
WAITING = ("waiting (mbarrier, barrier)", "#d9d9d9")
ISSUING = ("issuing (any instruction)", "#4285f4")  # a trace without per-kind activity (tools/profile.py's spans)
UNITS = {"TMA": ("TMA unit: loads in flight", "#34a853"), "tensor core": ("tensor core busy (MMA)", "#ea4335")}
ROLE_ORDER = ("TMA", "MMA", "epilogue")
PHASE_COLOURS = ("#fff2cc", "#e2efda", "#ddebf7", "#fce4d6", "#ededed", "#e4dfec")
SYNC_BASES = {"mbarrier", "bar", "barrier", "fence", "membar", "griddepcontrol", "elect", "setmaxnreg"}


def activity(ins) -> str:
    """The kind (a key of ACTIVITIES) of one instruction, by its cost class (emu.timing.engine.classify) and opcode;
    computed once per instruction."""
    kind = getattr(ins, "trace_activity", None)
    if kind is None:
        cls, base = ins.timing[0], ins.base
        names = list(ACTIVITIES)
        if cls == "mufu":
            kind = names[1]
        elif cls in ("tmem_ld", "tmem_wait"):
            kind = names[2]
        elif cls in ("st_global", "st_smem", "atomic") or base == "st":
            kind = names[3]
        elif base in ("cp", "tcgen05", "prefetch"):
            kind = names[4]
        elif base in SYNC_BASES:
            kind = names[5]
        else:
            kind = names[0]
        ins.trace_activity = kind
    return kind


def role_of_row(row: str) -> str:
    """The role in a warp row's label ("warp 5 (TMA)" -> "TMA")."""
    return row[row.index("(") + 1:row.rindex(")")] if "(" in row else row


class Trace:
    def __init__(self, role_of):
        self.role_of = role_of
        self.spans = []  # (cta label, row label, start, end, kind, name)
        self.issued = defaultdict(lambda: defaultdict(float))  # (cta, role, activity) -> {bin: issue cycles}
        self.role_warps = defaultdict(set)  # (cta, role) -> warp ids seen
        self._busy = {}  # warp -> [start, end]
        self._wait = {}  # warp -> (start, what)
        self._unit_lanes = {}  # (cta label, unit) -> [end of each lane]

    @staticmethod
    def cta_label(cta) -> str:
        sm = getattr(cta, "sm", None)
        return f"CTA {tuple(cta.ctaid)}" + (f" on SM{sm.index}" if sm is not None else "")

    def _row(self, w) -> str:
        return f"warp {w.warp_id} ({self.role_of(w.warp_id)})"

    def busy(self, w, t0: float, t1: float, ins=None) -> None:
        """Warp w issues from t0 to t1; `ins`, the instruction, sorts the issue cycles by kind for the picture."""
        if ins is not None:
            cta, role = self.cta_label(w.cta), self.role_of(w.warp_id)
            self.role_warps[(cta, role)].add(w.warp_id)
            self.issued[(cta, role, activity(ins))][int(t0 // BIN)] += t1 - t0
        span = self._busy.get(w)
        if span is not None and t0 - span[1] <= MERGE_GAP:
            span[1] = t1
            return
        if span is not None:
            self.spans.append((self.cta_label(w.cta), self._row(w), span[0], span[1], "busy", "issue"))
        self._busy[w] = [t0, t1]

    def begin_wait(self, w, t: float, what: str) -> None:
        span = self._busy.pop(w, None)
        if span is not None:
            self.spans.append((self.cta_label(w.cta), self._row(w), span[0], span[1], "busy", "issue"))
        self._wait[w] = (t, what)

    def end_wait(self, w, t: float) -> None:
        start = self._wait.pop(w, None)
        if start is not None:
            self.spans.append((self.cta_label(w.cta), self._row(w), start[0], t, "wait", start[1]))

    def unit(self, cta, unit: str, t0: float, t1: float, name: str) -> None:
        """An operation on a unit; overlapping operations go on separate lanes of that unit's rows."""
        key = (self.cta_label(cta), unit)
        lanes = self._unit_lanes.setdefault(key, [])
        for i, end in enumerate(lanes):
            if end <= t0:
                lanes[i] = t1
                break
        else:
            lanes.append(t1)
            i = len(lanes) - 1
        self.spans.append((key[0], f"{unit} {i}" if unit == "TMA" else unit, t0, t1, unit, name))

    def finish(self) -> None:
        for w, span in list(self._busy.items()):
            self.spans.append((self.cta_label(w.cta), self._row(w), span[0], span[1], "busy", "issue"))
        self._busy.clear()

    # ------------------------------------------------------------------ output
    def chrome(self, path: Path, us_per_cycle: float, marks: dict, meta: dict) -> None:
        self.finish()
        pids, tids, events = {}, {}, []
        for cta, row, t0, t1, kind, name in self.spans:
            pid = pids.setdefault(cta, len(pids))
            tid = tids.setdefault((cta, row), len(tids))
            events.append({"name": name[:120], "cat": kind, "ph": "X", "ts": t0 * us_per_cycle,
                           "dur": max(t1 - t0, 0.0) * us_per_cycle, "pid": pid, "tid": tid})
        for ctaid, m in marks.items():
            cta = next((c for c in pids if c.startswith(f"CTA {tuple(ctaid)}")), f"CTA {tuple(ctaid)}")
            pid = pids.setdefault(cta, len(pids))
            for key, value in m.items():
                for t in (value if isinstance(value, list) else [value]):
                    events.append({"name": key, "ph": "i", "s": "p", "ts": t * us_per_cycle, "pid": pid, "tid": 0})
        for cta, pid in pids.items():
            events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": cta}})
        for (cta, row), tid in tids.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pids[cta], "tid": tid, "args": {"name": row}})
        Path(path).write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns", "otherData": meta}))

    def rows(self, max_ctas: int = 4) -> list[tuple[str, str, str]]:
        """The picture's rows, top to bottom: (CTA, "warps" or "unit", role or unit) for the first max_ctas CTAs, each
        CTA's warp roles (TMA, MMA, epilogue, then any other) and then its units."""
        ctas = list(dict.fromkeys(s[0] for s in self.spans))
        ctas += [c for c, _ in self.role_warps if c not in ctas]
        out = []
        for cta in ctas[:max_ctas]:
            roles = {role_of_row(s[1]) for s in self.spans if s[0] == cta and s[1].startswith("warp")}
            roles |= {r for c, r in self.role_warps if c == cta}
            order = [r for r in ROLE_ORDER if r in roles] + sorted(roles - set(ROLE_ORDER))
            units = [u for u in UNITS if any(s[0] == cta and s[4] == u and not s[1].startswith("warp")
                                             for s in self.spans)]
            out += [(cta, "warps", r) for r in order] + [(cta, "unit", u) for u in units]
        return out

    def _warp_spans(self, cta: str, role: str, kind: str):
        return [s for s in self.spans if s[0] == cta and s[1].startswith("warp") and role_of_row(s[1]) == role
                and s[4] == kind]

    def role_image(self, cta: str, role: str, bins: int, width: float, rows: int = 24) -> np.ndarray:
        """The role's row as an RGBA image (rows x bins), one column per display bin of `width` cycles: grey where its
        warps waited at least half the bin; else, where they issued, the mix of kinds they issued, stacked top down in
        ACTIVITIES order by share of the bin's issue cycles; transparent where they neither waited nor issued (a
        warp stalled on a latency)."""
        warps = max(len(self.role_warps.get((cta, role), ())), 1)
        issued = np.zeros((len(ACTIVITIES), bins))
        for i, name in enumerate(ACTIVITIES):
            for b, cycles in self.issued.get((cta, role, name), {}).items():
                issued[i, min(int(b * BIN // width), bins - 1)] += cycles
        edges = np.arange(bins + 1) * width
        waited = np.zeros(bins)
        for _, _, t0, t1, _, _ in self._warp_spans(cta, role, "wait"):
            waited += np.clip(np.minimum(edges[1:], t1) - np.maximum(edges[:-1], t0), 0, None)
        palette = np.array([rgba(c) for c in ACTIVITIES.values()])
        img = np.zeros((rows, bins, 4))
        total = issued.sum(axis=0)
        for b in range(bins):
            if waited[b] >= 0.5 * warps * width:
                img[:, b] = rgba(WAITING[1])
            elif total[b] > 0:
                ends = np.round(np.cumsum(issued[:, b]) / total[b] * rows).astype(int)
                for i, (lo, hi) in enumerate(zip(np.concatenate(([0], ends[:-1])), ends)):
                    img[lo:hi, b] = palette[i]
        return img

    def figure(self, us_per_cycle: float, title: str = "", phases=(), max_ctas: int = 4, bins: int = 700):
        """A matplotlib Figure of the timeline (see the module docstring). phases: (name, start us, end us) bands
        drawn above the rows (the call's phases); time in microseconds from the trace's origin."""
        Figure = _figure_class()
        self.finish()
        rows = self.rows(max_ctas)
        t_end = max([s[3] for s in self.spans] + [(b + 1) * BIN for d in self.issued.values() for b in d] + [1.0])
        width = t_end / bins
        fig = Figure(figsize=(15, 1.9 + 0.42 * (len(rows) + 1)), dpi=110)
        ax = fig.add_axes((0.2, 0.9 / (2.6 + 0.42 * len(rows)) + 0.12, 0.78, 0.6))
        labels, seen = [], set()
        has_activity = bool(self.issued)
        for y, (cta, what, name) in enumerate(rows):
            short = cta.split(" on ")[0]
            if what == "unit":
                labels.append(f"{short}  {UNITS[name][0]}")
                spans = [(s[2], s[3]) for s in self.spans if s[0] == cta and s[4] == name and not s[1].startswith("warp")]
                _bars(ax, y, _union(spans), us_per_cycle, UNITS[name][1])
                seen.add(UNITS[name])
                continue
            ids = sorted(self.role_warps.get((cta, name), ())) or sorted(
                {int(s[1].split()[1]) for s in self.spans if s[0] == cta and s[1].startswith("warp")
                 and role_of_row(s[1]) == name})
            warps = f"warp {ids[0]}" if len(ids) == 1 else f"warps {ids[0]}-{ids[-1]}" if ids else "warps"
            labels.append(f"{short}  {name} {warps}")
            if has_activity:
                ax.imshow(self.role_image(cta, name, bins, width), extent=(0, bins * width * us_per_cycle,
                          y + 0.38, y - 0.38), aspect="auto", interpolation="nearest")
                seen.update([WAITING] if self._warp_spans(cta, name, "wait") else [])
                seen.update(kind for kind in ACTIVITIES.items() if self.issued.get((cta, name, kind[0])))
            else:  # spans as given (tools/profile.py: phases of a profile record)
                for kind, look in (("wait", WAITING), ("busy", ISSUING), ("tensor core", UNITS["tensor core"])):
                    spans = [(s[2], s[3]) for s in self._warp_spans(cta, name, kind)]
                    _bars(ax, y, spans, us_per_cycle, look[1])
                    seen.update([look] if spans else [])
        for y in range(1, len(rows)):
            if rows[y][0] != rows[y - 1][0]:
                ax.axhline(y - 0.5, color="black", linewidth=1.2)
        if phases:
            y = len(rows)
            for i, (name, t0, t1) in enumerate(phases):
                ax.broken_barh([(t0, t1 - t0)], (y - 0.4, 0.8), facecolors=PHASE_COLOURS[i % len(PHASE_COLOURS)],
                               edgecolor="grey", linewidth=0.5)
                ax.text((t0 + t1) / 2, y, f"{name}\n{t1 - t0:.2f} μs", ha="center", va="center", fontsize=7.5)
                ax.axvline(t0, color="grey", linestyle=":", linewidth=0.8)
            ax.axvline(phases[-1][2], color="grey", linestyle=":", linewidth=0.8)
            labels.append("phases of the call (mean CTA)")
        ax.set_xlim(0, t_end * us_per_cycle)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("μs since the previous kernel ended (the leaderboard's back-to-back calls)")
        order = list(ACTIVITIES.items()) + [WAITING, ISSUING] + list(UNITS.values())
        handles = [_patch(colour, name) for name, colour in order if (name, colour) in seen]
        ax.legend(handles=handles, loc="upper center", ncol=4, fontsize=8, frameon=False, alignment="left",
                  bbox_to_anchor=(0.45, -0.55 / max(len(rows), 1) - 0.12), title_fontsize=8,
                  title="a warp role's row: what its warps issue in each time bin, the kinds stacked by share of "
                        "issue cycles; grey: waiting; blank: stalled on a latency" if has_activity else None)
        if title:
            fig.suptitle(title, fontsize=10, x=0.02, ha="left")
        return fig

    def png(self, path: Path, us_per_cycle: float, title: str = "", phases=(), max_ctas: int = 4) -> None:
        self.figure(us_per_cycle, title, phases, max_ctas).savefig(path)


def phase_bands(start_us: float, phases_us: dict) -> list[tuple[str, float, float]]:
    """(name, start, end) in microseconds of a timed call's phases (emu.timing.call.TimedCall): the CTAs' start, then
    each phase of phases_us in order, back to back."""
    bands, t = [("start", 0.0, start_us)], start_us
    for name, us in phases_us.items():
        bands.append((name, t, t + us))
        t += us
    return bands


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise RuntimeError("the timeline's PNG needs matplotlib, an optional dependency: pip install matplotlib (or "
                           "pip install -e '.[test]'); the Chrome trace JSON needs nothing more") from e
    return Figure


def _patch(colour: str, label: str):
    from matplotlib.patches import Patch

    return Patch(facecolor=colour, edgecolor="grey", linewidth=0.5, label=label)


def _bars(ax, y: int, spans, us_per_cycle: float, colour: str) -> None:
    if spans:
        ax.broken_barh([(a * us_per_cycle, max(b - a, 0.0) * us_per_cycle) for a, b in spans], (y - 0.38, 0.76),
                       facecolors=colour, linewidth=0)


def _union(spans) -> list[tuple[float, float]]:
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(s) for s in out]


def rgba(colour: str) -> tuple:
    return tuple(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)) + (1.0,)
