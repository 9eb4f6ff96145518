"""The timing model's constants: emu/timing/b200.yaml, one row per constant with its value, unit and source.

    costs = load()                      # the table as published: fitted rows at their fitted value
    costs = load(prior=True)            # fitted rows at their prior (the value before the calibration's fit)
    costs = load(overrides={"l2_to_sm_bytes_per_clk": 96})   # a fit or an experiment
    costs = load(overrides=read_overrides("build/profile/costs_fitted.yaml"))   # tools/profile.py's fit
    costs.hbm_bytes_per_clk             # converted to the units the engine uses (cycles, bytes per cycle)

Every constant the engine uses is a row of the table; a row the engine does not know, or a constant the engine asks
for that is not in the table, is an error (no silent defaults).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ..device import SM_COUNT

TABLE = Path(__file__).with_name("b200.yaml")
# "switch": a mode number of a model switch (docs/timing_hypotheses.md; the row's note names each mode);
# "fraction": a dimensionless share in [0, 1]; "cycles/row": cycles per row of a TMA box.
UNITS = {"cycles", "bytes/cycle", "bytes/cycle/SM", "GHz", "TB/s", "us", "count", "MAC/cycle/SM", "cycles/MMA",
         "bytes", "switch", "fraction", "cycles/row"}


@dataclass(frozen=True)
class Row:
    name: str
    value: float
    unit: str
    source: str
    note: str = ""
    fitted: bool = False
    prior: float | None = None  # a fitted row's value before the fit


class Costs:
    """Attribute access to the table's values in engine units; `rows` keeps the table for reports."""

    def __init__(self, rows: dict[str, Row]):
        self.rows = rows
        for name, row in rows.items():
            setattr(self, name, row.value)

    @property
    def sm_count(self) -> int:
        """The B200's SMs: a count, not a rate, so emu.device holds it (the one home of the chip's counts)."""
        return SM_COUNT

    @property
    def clock_hz(self) -> float:
        return self.clock_ghz * 1e9

    @property
    def hbm_bytes_per_clk(self) -> float:
        return self.hbm_tb_per_s * 1e12 / self.clock_hz

    @property
    def l2_bytes_per_clk(self) -> float:
        return self.l2_tb_per_s * 1e12 / self.clock_hz

    def cycles(self, us: float) -> float:
        return us * 1e-6 * self.clock_hz

    def us(self, cycles: float) -> float:
        return cycles / self.clock_hz * 1e6

    def mma_latency(self, n: int, cta_group: int) -> float:
        """Single-MMA latency by N (the table's measured N = 64 / 128 / 256; linear between them)."""
        pts = [(64, f"mma_latency_{cta_group}sm_n64"), (128, f"mma_latency_{cta_group}sm_n128"),
               (256, f"mma_latency_{cta_group}sm_n256")]
        vals = [(x, getattr(self, k)) for x, k in pts]
        if n <= vals[0][0]:
            return vals[0][1]
        for (x0, y0), (x1, y1) in zip(vals, vals[1:]):
            if n <= x1:
                return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
        return vals[-1][1] * n / vals[-1][0]

    def prior_values(self) -> dict:
        """{fitted row: its prior}: overrides that give the table before the fit."""
        return {r.name: r.prior for r in self.rows.values() if r.fitted}

    def describe(self) -> str:
        return ", ".join(f"{r.name}={r.value:g} {r.unit}" for r in self.rows.values() if r.fitted)


def read_overrides(path: Path | str) -> dict:
    """An overrides file (e.g. the fit tools/profile.py writes): YAML with a mapping `overrides: {row: value}`; the
    rest of the file (provenance) is for people."""
    raw = yaml.safe_load(Path(path).read_text()) or {}
    table = raw.get("overrides") if isinstance(raw, dict) else None
    if not isinstance(table, dict):
        raise ValueError(f"{path}: no 'overrides:' mapping of cost-table rows to values")
    return {str(k): float(v) for k, v in table.items()}


def load(path: Path | str = TABLE, overrides: dict | None = None, prior: bool = False) -> Costs:
    """The table (fitted rows at their fitted value; at their prior with prior=True), then `overrides`."""
    raw = yaml.safe_load(Path(path).read_text())
    rows = {}
    for name, entry in raw["constants"].items():
        missing = {"value", "unit", "source"} - set(entry)
        if missing:
            raise ValueError(f"{path}: constant {name} lacks {sorted(missing)}")
        if entry["unit"] not in UNITS:
            raise ValueError(f"{path}: constant {name} has unknown unit {entry['unit']!r}")
        fitted = bool(entry.get("fitted", False))
        if fitted != ("prior" in entry):
            raise ValueError(f"{path}: constant {name}: a fitted row has a prior, and only a fitted row")
        value = float(entry["prior"] if prior and fitted else entry["value"])
        rows[name] = Row(name, value, entry["unit"], entry["source"], entry.get("note", ""), fitted,
                         float(entry["prior"]) if fitted else None)
    for name, value in (overrides or {}).items():
        if name not in rows:
            raise ValueError(f"override {name}: no such constant in {path}")
        r = rows[name]
        rows[name] = Row(name, float(value), r.unit, r.source, r.note, r.fitted, r.prior)
    return Costs(rows)
