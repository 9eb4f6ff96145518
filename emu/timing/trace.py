"""A timeline of a timed run: per CTA, one row per warp (busy issuing / waiting, and on what) and one per unit
(TMA loads, tensor core). Written as Chrome trace JSON (open in https://ui.perfetto.dev or chrome://tracing) and as a
PNG of the phases (drawn here with numpy and zlib: no plotting library needed).
"""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np

MERGE_GAP = 64  # cycles: issue slots closer than this belong to one busy span
COLOURS = {"busy": (66, 133, 244), "wait": (230, 230, 230), "TMA": (52, 168, 83), "tensor core": (234, 67, 53)}


class Trace:
    def __init__(self, role_of):
        self.role_of = role_of
        self.spans = []  # (cta label, row label, start, end, kind, name)
        self._busy = {}  # warp -> [start, end]
        self._wait = {}  # warp -> (start, what)
        self._unit_lanes = {}  # (cta label, unit) -> [end of each lane]

    @staticmethod
    def cta_label(cta) -> str:
        sm = getattr(cta, "sm", None)
        return f"CTA {tuple(cta.ctaid)}" + (f" on SM{sm.index}" if sm is not None else "")

    def _row(self, w) -> str:
        return f"warp {w.warp_id} ({self.role_of(w.warp_id)})"

    def busy(self, w, t0: float, t1: float) -> None:
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

    def png(self, path: Path, width: int = 1600, row_px: int = 12, max_ctas: int = 4) -> None:
        """Per CTA (the first max_ctas): a row per warp, then one row per unit (the union of its operations); time
        left to right; one colour per kind of span (COLOURS), a black line between CTAs."""
        self.finish()
        ctas = list(dict.fromkeys(s[0] for s in self.spans))[:max_ctas]

        def row_of(span):
            return span[1] if span[1].startswith("warp") else span[4]  # units collapse to one row each

        rows = []
        for cta in ctas:
            names = {row_of(s) for s in self.spans if s[0] == cta}
            warps = sorted((n for n in names if n.startswith("warp")), key=lambda n: int(n.split()[1]))
            rows += [(cta, n) for n in warps + sorted(names - set(warps))]
        t_end = max((s[3] for s in self.spans), default=1.0) or 1.0
        img = np.full((max(len(rows), 1) * row_px, width, 3), 255, np.uint8)
        index = {r: i for i, r in enumerate(rows)}
        for span in self.spans:
            i = index.get((span[0], row_of(span)))
            if i is None:
                continue
            x0 = int(span[2] / t_end * (width - 1))
            x1 = max(int(span[3] / t_end * (width - 1)), x0 + 1)
            img[i * row_px + 1:(i + 1) * row_px - 1, x0:x1] = COLOURS.get(span[4], (120, 120, 120))
        for i in range(1, len(rows)):
            if rows[i][0] != rows[i - 1][0]:
                img[i * row_px - 1, :] = (0, 0, 0)
        write_png(path, img)


def write_png(path: Path, rgb: np.ndarray) -> None:
    """A minimal RGB PNG (PNG spec: signature, IHDR, one IDAT of filter-0 scanlines, IEND)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
