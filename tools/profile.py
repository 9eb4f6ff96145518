#!/usr/bin/env python3
"""Profile the kernel on a B200 beside the timed emulator's prediction, and fit the emulator's constants to it.

    python tools/profile.py [--shape M,N,K[,L] ...] [--config NAME] [--out DIR] [--repeats N] [--costs FILE]
                            [--fit-iterations N] [--jobs N] [--no-timed]
    python tools/profile.py --from-bundle DIR [...]     # anywhere: decode, report and fit a bundle again
    python tools/profile.py --stand-in [--stand-in-cost NAME=VALUE ...] [...]
                                                        # anywhere: the timed emulator's own profile stands in for
                                                        #   the measurement (checks this pipeline; no B200 figure)

Per shape (default: task.yml's benchmark shapes, each with its custom_kernel config's profiling twin, `<name>_prof`,
KernelConfig.profile):
 1. measured (SM100 GPU only): the leaderboard loop, test_benchmark.benchmark_callable (50 input sets checked, then
    repeats of {L2 flush, events around 50 back-to-back calls}); call j of every repeat writes slice j of a
    (50, 148, words) buffer, so after the last repeat it holds one repeat's 50 calls, decoded by
    tools/profile_buffer.py onto one time axis (per SM: %clock64 placed on %globaltimer).
 2. timed: the timed emulator (emu/timing) on the same shape and config, profiling on, decoded the same way.
    Both are read in one frame: ns since the previous call's last `exit` stamp (measured: calls 1-49, call 0
    follows the L2 flush; timed: its steady-state call, whose previous call ended at the timed per-call time before
    its own end).
 3. report: per phase measured vs timed, and a Chrome trace + PNG (the format of tools/emulate.py --timing --trace)
    of the median steady call's CTAs beside the timed CTAs.
 4. fit (rows of emu/timing/b200.yaml; evidence per shape in profile.json):
    clock_ghz             the SMs' %clock64 rate against %globaltimer (median over SMs)
    launch_gap_us or      the mean CTA's entry after the previous call (the gap row of the config's launch: PDL or
      pdl_cta_start_us    not) less cta_start_cycles
    cta_start_cycles      the mean CTA's entry lag behind the first CTA, beyond the timed run's own (the engine
                          starts a wave's CTAs together: this row carries the launch's per-CTA stagger)
    pdl_wait_release_us   the first TMA warp out of griddepcontrol.wait (PDL configs whose wait blocked)
    l2_to_sm_bytes_per_clk  secant on log(rate) against the median MMA-issuing CTA's mainloop (first stage landed ->
                          last accumulator got), re-running the timed emulator (--fit-iterations, 0: skip)
    Written as DIR/costs_fitted.yaml, which `tools/emulate.py --timing --costs FILE` takes.
Without an SM100 GPU, and without --from-bundle or --stand-in, it says so in one line and exits 2.
Every figure is labelled: measured (the card), timed (the timed emulator), or timed stand-in.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools import profile_buffer as pb  # noqa: E402

CALLS = 50  # test_benchmark.NUM_ITERATIONS_PER_BENCHMARK: the leaderboard's calls between two events
WAIT_BLOCKED_NS = 50.0  # a griddepcontrol.wait longer than this waited for the release (an idle one takes a few cycles)
RATE_ROW = "l2_to_sm_bytes_per_clk"
RATE_TOLERANCE = 0.02  # the secant stops within 2% of the measured mainloop


# ----------------------------------------------------------------------------- runs
@dataclass
class Run:
    """A decoded profile: measured (calls 0..49 of one repeat) or timed (one steady-state call)."""

    label: str  # "measured (<card>)", "timed", "timed stand-in (not a measurement)"
    shape: tuple
    config: str
    pdl: bool
    layout: pb.Layout
    words: np.ndarray  # (calls, CTAs, layout.words) int64
    per_call_us: float  # events / 50 (measured) or the timed per-call time
    period_ns: float | None = None  # a single steady-state call's period (timed); None: read from the calls
    info: dict = field(default_factory=dict)

    @cached_property
    def profiles(self) -> list:
        return pb.decode(self.words, self.layout)

    @cached_property
    def timebase(self) -> pb.TimeBase:
        return pb.TimeBase.fit(self.profiles)

    def by_call(self) -> dict:
        out: dict = {}
        for p in self.profiles:
            out.setdefault(p.call, []).append(p)
        return out

    def last_exit(self, call: int) -> float:
        return max(self.timebase.ns(p, p.stamps["exit"]) for p in self.by_call()[call] if "exit" in p.stamps)

    def steady(self) -> dict:
        """call -> origin (ns on the time base of the previous call's last exit stamp), for the steady calls."""
        calls = sorted(self.by_call())
        if self.period_ns is not None:
            return {c: self.last_exit(c) - self.period_ns for c in calls}
        return {c: self.last_exit(prev) for prev, c in zip(calls, calls[1:]) if c == prev + 1}


def statistics(run: Run) -> dict:
    """What the report and the fit read, in ns since each steady call's origin (medians over steady calls)."""
    tb = run.timebase
    by_call = run.by_call()
    origins = run.steady()
    phases = {ph: [] for ph in run.layout.phases}
    extra = {"first got": [], "last released": []}
    entry_first, entry_mean, release, mainloop, tile, kernel, exit_last, blocked = [], [], [], [], [], [], [], 0
    for call, origin in origins.items():
        ctas = by_call[call]
        t = [pb.times(p, tb, origin) for p in ctas]
        for p, tp in zip(ctas, t):
            for ph in phases:
                if ph in tp:
                    phases[ph].append(tp[ph])
            if p.handoffs:
                j0, jn = p.handoffs[0][0], p.handoffs[-1][0]
                extra["first got"].append(tp[f"got {j0}"])
                if f"released {jn}" in tp:
                    extra["last released"].append(tp[f"released {jn}"])
                tile += [tp[f"released {j}"] - tp[f"got {j}"] for j, _, r in p.handoffs if r is not None]
                if p.issues_mma and "first_load" in tp:
                    mainloop.append(tp[f"got {jn}"] - tp["first_load"])
        entries = [tp["entry"] for tp in t if "entry" in tp]
        entry_first.append(min(entries))
        entry_mean.append(float(np.mean(entries)))
        exit_last.append(max(tp["exit"] for tp in t if "exit" in tp))
        kernel.append(exit_last[-1] - min(entries))
        waited = [tp["wait_done"] for tp in t if "wait_done" in tp and tp["wait_done"] - tp["wait_begin"] > WAIT_BLOCKED_NS]
        blocked += len(waited)
        if waited:
            release.append(min(waited))
    calls = sorted(origins)
    periods = [origins[b] - origins[a] for a, b in zip(calls, calls[1:]) if b == a + 1]
    med = lambda xs: float(np.median(xs)) if len(xs) else None  # noqa: E731
    return {
        "steady_calls": len(origins),
        "ctas_per_call": med([len(by_call[c]) for c in origins]),
        "phases_ns": {k: med(v) for k, v in {**phases, **extra}.items()},
        "entry_first_ns": med(entry_first),
        "entry_mean_ns": med(entry_mean),
        "release_ns": med(release),
        "blocked_waits": blocked,
        "mainloop_ns": med(mainloop),
        "tile_epilogue_ns": med(tile),
        "kernel_ns": med(kernel),
        "exit_last_ns": med(exit_last),
        "period_ns": run.period_ns if run.period_ns is not None else med(periods),
        "clock_ghz": tb.ghz or None,
        "globaltimer_tick_ns": tb.tick_ns,
        "timebase_residual_ns": tb.residual_ns,
        "timebase_line_residual_ns": tb.line_residual_ns,
        **stamp_checks(run),
    }


def stamp_checks(run: Run) -> dict:
    """Whether the stamps can be trusted (reported, as probes/profile_stamps.py checks them on Hopper): CTA records
    whose stamps contradict the kernel's orders (pb.disorder: on %clock64, exact within a CTA; on %globaltimer), and
    per launch order between consecutive calls (pb.BOUNDARIES) its smallest margin on raw %globaltimer, the only
    clock common to the SMs (below minus one tick: out of order)."""
    margins = pb.boundary_margins(run.profiles, run.pdl, lambda p, s: float(s[0] - run.timebase.origin_ns))
    return {
        "records_out_of_order": {timer: sum(bool(pb.disorder(p, timer)) for p in run.profiles) for timer in pb.TIMERS},
        "boundary_margin_min_ns": {order: min(m for _, o, m in margins if o == order)
                                   for order in sorted({o for _, o, _ in margins})},
    }


def representative_call(run: Run) -> int:
    """The steady call whose period is the median one (the timed run's only call)."""
    origins = run.steady()
    calls = sorted(origins)
    if len(calls) < 2:
        return calls[0]
    periods = {b: origins[b] - origins[a] for a, b in zip(calls, calls[1:]) if b == a + 1} or {calls[0]: 0.0}
    mid = float(np.median(list(periods.values())))
    return min(periods, key=lambda c: abs(periods[c] - mid))


# ----------------------------------------------------------------------------- the timed emulator
def load_submission(path: Path):
    from harness.verdict import load_submission as load

    return load(path)


def profiling_config(sub, shape: tuple, name: str | None):
    """The config to profile: NAME (a PROFILE_SPACE name, or a config name whose twin is taken) or custom_kernel's
    choice for the shape, as its profiling twin."""
    if name is None:
        cfg = sub.config_for(*shape)
    else:
        pool = list(sub.PROFILE_SPACE) + list(sub.TUNE_SPACE) + list(sub.CONFIG_TABLE.values())
        cfg = next((c for c in pool if c.name == name), None)
        if cfg is None:
            raise SystemExit(f"no config named {name} in PROFILE_SPACE, TUNE_SPACE or CONFIG_TABLE")
    cfg = dataclasses.replace(cfg, profile=True)
    ok, why = sub.DualGemmKernel.can_implement(cfg, *shape)
    if not ok:
        raise SystemExit(f"{cfg.name} cannot run {shape}: {why}")
    return cfg


def predict(shape: tuple, config: str, overrides: dict, submission: Path, label: str = "timed") -> Run:
    """The timed emulator's run of one call of the profiling config: a Run of one steady-state call."""
    from emu.timing import costs as cost_table
    from harness.timed import timed_emulate

    m, n, k, l = shape
    res, timed = timed_emulate(m, n, k, l, config_name=config, submission=submission,
                               costs=cost_table.load(overrides=overrides, prior=True))
    if timed is None or timed.status != "completed" or res.profile is None or res.status != "match":
        raise RuntimeError(f"timed emulation of {config} at {shape} did not complete: {res.status} {res.message[:500]}")
    sub = load_submission(submission)
    cfg = next(c for c in sub.PROFILE_SPACE if c.name == config)
    return Run(label, tuple(shape), config, cfg.pdl, pb.read_layout(submission), res.profile[None],
               timed.per_call_us, period_ns=timed.per_call_us * 1000,
               info={"costs_overridden": dict(overrides), "timed_line": timed.line(),
                     "clusters_simulated": timed.clusters_simulated, "clusters_total": timed.clusters_total})


def stand_in(shape: tuple, config: str, overrides: dict, submission: Path, calls: int = CALLS) -> Run:
    """A measurement's stand-in: the timed emulator's call (at `overrides`) repeated `calls` times back to back,
    %globaltimer and %clock64 advancing by its period each call. It has no jitter and no launch stagger: it checks
    the pipeline (decode, report, fit recovers the rows it was made with), never the hardware."""
    from emu.timing import costs as cost_table

    one = predict(shape, config, overrides, submission, label="timed stand-in (not a measurement)")
    ghz = cost_table.load(overrides=overrides, prior=True).clock_ghz
    layout = one.layout
    words = np.repeat(one.words, calls, axis=0)
    stamp = np.zeros(layout.words, bool)
    stamp[:layout.sm_word] = True
    stamp[layout.ring_word:] = True
    ns_cols = stamp & (np.arange(layout.words) % 2 == 0)
    clk_cols = stamp & (np.arange(layout.words) % 2 == 1)
    for i in range(calls):
        w = words[i]
        for cols, step in ((ns_cols, round(i * one.period_ns)), (clk_cols, round(i * one.period_ns * ghz))):
            block = w[:, cols]
            block[block != pb.NOT_WRITTEN] += step
            w[:, cols] = block
    return Run(one.label, one.shape, config, one.pdl, layout, words, one.per_call_us, None,
               {**one.info, "stand_in_for": "measured"})


# ----------------------------------------------------------------------------- the fit
def fit_closed_form(measured: dict, timed: dict, pdl: bool, costs) -> dict:
    """Rows that shift the profile by a known amount: clock, the launch rows, the PDL release. Each entry: value,
    prior, how, identified (False: the prior is kept). A timed time is the engine's row (its start, its release) plus
    what the timed run spends after it in cycles (instructions, latencies, and the frame's offset: the previous call's
    stores after its last exit stamp); those cycles are carried to the measured clock."""
    out = {}
    ghz_prior = costs.clock_ghz
    ghz = measured["clock_ghz"] or ghz_prior
    scale = ghz_prior / ghz
    out["clock_ghz"] = {"value": ghz, "prior": ghz_prior, "identified": bool(measured["clock_ghz"]),
                        "how": "median over SMs of the %clock64 rate against %globaltimer"}
    gap_row = "pdl_cta_start_us" if pdl else "launch_gap_us"
    gap_prior = getattr(costs, gap_row)
    start_prior_ns = gap_prior * 1000 + costs.cta_start_cycles / ghz_prior
    start_ns = measured["entry_mean_ns"] - (timed["entry_mean_ns"] - start_prior_ns) * scale
    stagger = (measured["entry_mean_ns"] - measured["entry_first_ns"]) - (timed["entry_mean_ns"] - timed["entry_first_ns"])
    cta_ns = min(max(stagger, 0.0), max(start_ns, 0.0))
    out[gap_row] = {"value": (start_ns - cta_ns) / 1000, "prior": gap_prior, "identified": True,
                    "how": "the mean CTA's entry after the previous call's last exit, less cta_start_cycles"}
    out["cta_start_cycles"] = {"value": cta_ns * ghz, "prior": costs.cta_start_cycles, "identified": True,
                               "how": "the mean CTA's entry lag behind the first one, beyond the timed run's"}
    if pdl:
        r_prior = costs.pdl_wait_release_us
        if measured["release_ns"] is None:
            out["pdl_wait_release_us"] = {
                "value": r_prior, "prior": r_prior, "identified": False,
                "how": f"no TMA warp waited at griddepcontrol.wait (the release came before it arrived, median "
                       f"{measured['phases_ns'].get('wait_begin')} ns): prior kept"}
        else:
            if timed["release_ns"] is not None:
                after = timed["release_ns"] - r_prior * 1000
            else:  # the timed warps arrived after the release: only the frame's offset lies between (an idle wait)
                after = timed["period_ns"] - timed["exit_last_ns"]
            out["pdl_wait_release_us"] = {
                "value": (measured["release_ns"] - after * scale) / 1000, "prior": r_prior, "identified": True,
                "how": "the first TMA warp out of a blocking griddepcontrol.wait"}
    return out


def fit_rate(target_ns: float, base: dict, shape: tuple, config: str, submission: Path, costs, iterations: int) -> dict:
    """Secant on log(l2_to_sm_bytes_per_clk) against log(mainloop): the rate at which the timed mainloop matches the
    measured one, re-running the timed emulator (each run one point of the trail)."""
    prior = base.get(RATE_ROW, getattr(costs, RATE_ROW))
    trail = []

    def mainloop(rate):
        print(f"[{_tag(shape)}] the timed emulator at {RATE_ROW} = {rate:.2f}", flush=True)
        run = predict(shape, config, {**base, RATE_ROW: rate}, submission)
        s = statistics(run)["mainloop_ns"]
        trail.append({"rate": rate, "mainloop_ns": s, "per_call_us": run.per_call_us})
        return s

    out = {"value": prior, "prior": getattr(costs, RATE_ROW), "identified": False, "trail": trail,
           "how": "secant on log(rate) against the median MMA-issuing CTA's mainloop"}
    if iterations <= 0 or not target_ns:
        out["how"] += ": not run (--fit-iterations 0)" if iterations <= 0 else ": no measured mainloop"
        return out
    r1, s1 = prior, mainloop(prior)
    slope = -1.0  # a load-bound mainloop scales as 1 / rate
    for _ in range(iterations):
        if abs(s1 - target_ns) <= RATE_TOLERANCE * target_ns:
            break
        r_next = r1 * math.exp((math.log(target_ns) - math.log(s1)) / slope)
        r_next = min(max(r_next, r1 / 4), r1 * 4)
        s_next = mainloop(r_next)
        if r_next != r1 and s_next > 0 and s1 > 0:
            slope = (math.log(s_next) - math.log(s1)) / (math.log(r_next) - math.log(r1))
        r1, s1 = r_next, s_next
        if abs(slope) < 0.05:
            out["how"] += f": the timed mainloop hardly depends on the rate here (d log / d log = {slope:.3f})"
            break
    best = min(trail, key=lambda p: abs(p["mainloop_ns"] - target_ns))
    out["value"] = best["rate"]
    out["identified"] = abs(best["mainloop_ns"] - target_ns) <= RATE_TOLERANCE * target_ns
    out["sensitivity"] = slope
    if out["identified"]:
        # Past some rate another resource binds and the mainloop stops moving: then the match is only a lower bound.
        above = mainloop(best["rate"] * 1.2)
        if abs(above - best["mainloop_ns"]) <= RATE_TOLERANCE * target_ns:
            out.update(identified=False, bound="lower",
                       how=out["how"] + f": the timed mainloop no longer depends on the rate above {best['rate']:.1f} "
                                        "(another resource binds): a lower bound")
    return out


def analyse_shape(job: dict) -> dict:
    """One shape: the timed prediction, both statistics, the report rows and this shape's fit (runs in a worker)."""
    from emu.timing import costs as cost_table

    measured = job["measured"]
    submission, base = Path(job["submission"]), job["base_overrides"]
    costs = cost_table.load(overrides=base, prior=True)  # a B200 profile refits the fitted rows from their priors
    print(f"[{_tag(measured.shape)}] the timed emulator on {measured.config} (prior costs)", flush=True)
    timed = predict(measured.shape, measured.config, base, submission)
    sm, st = statistics(measured), statistics(timed)
    fit = fit_closed_form(sm, st, measured.pdl, costs)
    fitted = {**base, **{k: v["value"] for k, v in fit.items() if v["identified"]}}
    fit[RATE_ROW] = fit_rate(sm["mainloop_ns"], fitted, measured.shape, measured.config, submission, costs,
                             job["iterations"])
    return {"timed": timed, "measured_stats": sm, "timed_stats": st, "fit": fit}


def pool(per_shape: list) -> dict:
    """One value per row: the median over the shapes that identify it; else the largest lower bound where it exceeds
    the prior (the least rate the measurement allows); else the prior. `write`: whether the overrides file gets it."""
    rows = {}
    for fit in per_shape:
        for name, entry in fit.items():
            rows.setdefault(name, []).append(entry)
    out = {}
    for name, entries in rows.items():
        prior = entries[0]["prior"]
        good = [e["value"] for e in entries if e["identified"]]
        bounds = [e["value"] for e in entries if e.get("bound") == "lower"]
        value, write = prior, False
        if good:
            value, write = float(np.median(good)), True
        elif bounds and max(bounds) > prior:
            value, write = max(bounds), True
        out[name] = {"value": value, "prior": prior, "write": write, "identified_in": len(good),
                     "lower_bound": max(bounds) if bounds else None, "shapes": len(entries),
                     "per_shape": [e["value"] for e in entries], "how": entries[0]["how"]}
    return out


def write_overrides(path: Path, pooled: dict, provenance: str) -> dict:
    chosen = {name: round(row["value"], 6) for name, row in pooled.items() if row["write"]}
    lines = [f"# tools/profile.py fit: {provenance}", "# per row: the median over the shapes that identify it (or the "
             "largest lower bound above the prior); the evidence per shape is in profile.json ('fit').", "overrides:"]
    lines += [f"  {name}: {value}" for name, value in chosen.items()]
    path.write_text("\n".join(lines) + "\n")
    return chosen


# ----------------------------------------------------------------------------- output
def report_rows(sm: dict, st: dict) -> list:
    rows = []
    for name in list(sm["phases_ns"]):
        a, b = sm["phases_ns"][name], st["phases_ns"].get(name)
        rows.append({"phase": name, "measured_ns": a, "timed_ns": b,
                     "timed_minus_measured_ns": None if a is None or b is None else b - a})
    for name in ("entry_first_ns", "entry_mean_ns", "release_ns", "mainloop_ns", "tile_epilogue_ns", "kernel_ns",
                 "period_ns"):
        a, b = sm[name], st[name]
        rows.append({"phase": name[:-3], "measured_ns": a, "timed_ns": b,
                     "timed_minus_measured_ns": None if a is None or b is None else b - a})
    return rows


def print_report(measured: Run, timed: Run, rows: list) -> None:
    m, n, k, l = measured.shape
    print(f"{m}x{n}x{k}x{l} {measured.config}: {measured.label} {measured.per_call_us:.2f} us per call, timed "
          f"{timed.per_call_us:.2f} us")
    print(f"  {'ns since the previous call last exit (median)':<48}{'measured':>10}{'timed':>10}{'timed-meas':>12}")
    fmt = lambda v: f"{v:10.0f}" if v is not None else f"{'-':>10}"  # noqa: E731
    for r in rows:
        d = r["timed_minus_measured_ns"]
        print(f"  {r['phase']:<48}{fmt(r['measured_ns'])}{fmt(r['timed_ns'])}{fmt(d):>12}")


def stamp_warning(stats: dict) -> str | None:
    """A line where statistics' stamp checks found stamps out of order."""
    tick = stats["globaltimer_tick_ns"]
    late = {o: round(m) for o, m in stats["boundary_margin_min_ns"].items() if m < -tick}
    if any(stats["records_out_of_order"].values()) or late:
        return (f"WARNING: stamps out of order: CTA records {stats['records_out_of_order']}; launch orders between "
                f"calls below minus one tick ({tick:.0f} ns): {late}")
    return None


def write_trace(path: Path, measured: Run, timed: Run, meta: dict, max_ctas: int = 4) -> None:
    """One Chrome trace (and PATH.png) with the measured median call's CTAs and the timed call's CTAs interleaved
    (measured CTA 0, timed CTA 0, ...), both in ns since the previous call's last exit."""
    from emu.timing.trace import Trace

    call = representative_call(measured)
    m_origin = measured.steady()[call]
    t_origin = timed.steady()[0]
    m_ctas = sorted((p for p in measured.profiles if p.call == call), key=lambda p: p.cta)
    t_ctas = {p.cta: p for p in timed.profiles}
    tr = Trace(role_of=None)
    for p in m_ctas:
        tr.spans += pb.spans(p, measured.timebase, m_origin, f"{measured.label.split(' (')[0]} call {call} CTA {p.cta} "
                                                           f"on SM{p.sm}")
        if p.cta in t_ctas:
            q = t_ctas.pop(p.cta)
            tr.spans += pb.spans(q, timed.timebase, t_origin, f"timed CTA {q.cta} on SM{q.sm}")
    for q in t_ctas.values():
        tr.spans += pb.spans(q, timed.timebase, t_origin, f"timed CTA {q.cta} on SM{q.sm}")
    tr.chrome(path, 1e-3, {}, meta)
    tr.png(path.with_suffix(".png"), 1e-3, f"{measured.label} (median call, {measured.config}) beside timed (the timed "
           "emulator), CTA by CTA: the phases of the kernel's profile stamps", max_ctas=max_ctas)


# ----------------------------------------------------------------------------- measurement (SM100 GPU)
def sm100_or_exit() -> None:
    try:
        import torch
    except ImportError:
        why = "torch is not importable"
    else:
        if not torch.cuda.is_available():
            why = f"no CUDA GPU is visible (torch {torch.__version__})"
        elif torch.cuda.get_device_capability()[0] != 10:
            major, minor = torch.cuda.get_device_capability()
            why = f"{torch.cuda.get_device_name()} is sm_{major}{minor}"
        else:
            return
    print(f"tools/profile.py: {why}; profiling the kernel needs an SM100 GPU (B200) (anywhere: --from-bundle DIR, "
          "or --stand-in to check the pipeline on the timed emulator's profile)", file=sys.stderr)
    sys.exit(2)


def measure(S, submission: Path, shape: tuple, config, repeats: int, seed: int, progress) -> Run:
    """The leaderboard loop with the profiling config of the submission module S; the buffer after the last repeat
    (its 50 calls)."""
    import torch

    import test_benchmark

    launch = S.compile_config(config)
    buf = torch.full((CALLS, S.SM_COUNT, S.PROFILE_WORDS), pb.NOT_WRITTEN, dtype=torch.int64, device="cuda")
    slices = list(buf.unbind(0))
    calls = [0]

    def profiled_call(data):
        a, b1, b2, _, _, _, sfa, sfb1, sfb2, c = data
        launch(a, b1, b2, sfa, sfb1, sfb2, c, slices[calls[0] % CALLS])
        calls[0] += 1
        return c

    m, n, k, l = shape
    info = {"check": "50 outputs checked against the reference"}
    try:
        stats = test_benchmark.benchmark_callable(profiled_call, m, n, k, l, seed, progress=progress,
                                                  max_repeats=repeats, max_time_ns=30e9)
    except test_benchmark.CheckFailed as e:
        info["check"] = f"FAILED: {e}"
        calls[0] = 0
        stats = test_benchmark.benchmark_callable(profiled_call, m, n, k, l, seed, progress=progress, check=False,
                                                  max_repeats=repeats, max_time_ns=30e9)
    torch.cuda.synchronize()
    label = f"measured ({torch.cuda.get_device_name()})"
    return Run(label, tuple(shape), config.name, config.pdl, pb.read_layout(submission), buf.cpu().numpy(),
               stats["mean_us"], None, {**info, "benchmark": stats})


# ----------------------------------------------------------------------------- bundle
def save_measured(out: Path, runs: list, meta: dict) -> None:
    for r in runs:
        np.savez_compressed(out / f"measured_{_tag(r.shape)}.npz", words=r.words)
    (out / "measured.json").write_text(json.dumps({
        **meta, "layout": runs[0].layout.as_dict() if runs else None,
        "runs": [{"label": r.label, "shape": list(r.shape), "config": r.config, "pdl": r.pdl,
                  "per_call_us": r.per_call_us, "info": r.info, "words": f"measured_{_tag(r.shape)}.npz"}
                 for r in runs]}, indent=1, default=str))


def load_measured(bundle: Path) -> list:
    doc = json.loads((bundle / "measured.json").read_text())
    layout = pb.Layout.from_dict(doc["layout"])
    return [Run(r["label"], tuple(r["shape"]), r["config"], r["pdl"], layout,
                np.load(bundle / r["words"])["words"], r["per_call_us"], None, r.get("info", {}))
            for r in doc["runs"]]


def _tag(shape) -> str:
    return "x".join(str(x) for x in shape)


def parse_shape(text: str) -> tuple:
    parts = [int(x) for x in text.split(",")]
    if len(parts) == 3:
        parts.append(1)
    if len(parts) != 4:
        raise argparse.ArgumentTypeError("--shape takes M,N,K or M,N,K,L")
    return tuple(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=parse_shape, action="append", help="M,N,K[,L] (repeatable; default: task.yml's benchmarks)")
    ap.add_argument("--config", default=None, help="a config name (default: custom_kernel's choice), profiled as its twin")
    ap.add_argument("--out", default=str(REPO / "build" / "profile"), help="the bundle directory")
    ap.add_argument("--repeats", type=int, default=20, help="leaderboard-loop repeats per shape (measured)")
    ap.add_argument("--costs", default=None, metavar="FILE", help="overrides for the timed prediction (prior)")
    ap.add_argument("--fit-iterations", type=int, default=3, help="timed re-runs per shape for the L2->SM rate (0: skip)")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="shapes analysed in parallel")
    ap.add_argument("--no-timed", action="store_true", help="measure and save only (analyse later with --from-bundle)")
    ap.add_argument("--from-bundle", default=None, metavar="DIR", help="analyse the measurement saved in DIR")
    ap.add_argument("--stand-in", action="store_true", help="the timed emulator's profile as the measurement")
    ap.add_argument("--stand-in-cost", action="append", default=[], metavar="NAME=VALUE",
                    help="with --stand-in: cost rows the stand-in measurement is made with")
    ap.add_argument("--submission", default=str(REPO / "submission.py"), help="the kernel file (measured and timed)")
    args = ap.parse_args(argv)
    os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")
    out = Path(args.out)
    submission = Path(args.submission).resolve()
    from emu.timing import costs as cost_table

    base = cost_table.read_overrides(args.costs) if args.costs else {}

    if args.from_bundle:
        runs = load_measured(Path(args.from_bundle))
        saved = json.loads((Path(args.from_bundle) / "measured.json").read_text())
        meta = {k: v for k, v in saved.items() if k not in ("runs", "layout")}
        out.mkdir(parents=True, exist_ok=True)
    else:
        if not args.stand_in:
            sm100_or_exit()
        from utils import load_task

        task = load_task(REPO / "task.yml")
        shapes = args.shape or [(c["m"], c["n"], c["k"], c["l"]) for c in task["benchmarks"]]
        seeds = {(c["m"], c["n"], c["k"], c["l"]): c["seed"] for c in task["benchmarks"] + task["tests"]}
        sub = load_submission(submission)
        configs = [profiling_config(sub, s, args.config) for s in shapes]
        out.mkdir(parents=True, exist_ok=True)
        runs = []
        if args.stand_in:
            made_with = {}
            for item in args.stand_in_cost:
                name, _, value = item.partition("=")
                made_with[name] = float(value)
            meta = {"measured_on": "timed stand-in (not a measurement)", "stand_in_costs": made_with}
            for s, cfg in zip(shapes, configs):
                print(f"[{_tag(s)}] stand-in: the timed emulator's profile of {cfg.name}", flush=True)
                runs.append(stand_in(s, cfg.name, made_with, submission))
        else:
            import test_benchmark

            meta = {"measured_on": "SM100 GPU", **test_benchmark.environment_info()}
            for s, cfg in zip(shapes, configs):
                runs.append(measure(sub, submission, s, cfg, args.repeats, seeds.get(s, 1111),
                                    lambda msg: print(f"  {msg}", flush=True)))
                print(f"[{_tag(s)}] {runs[-1].label}: {runs[-1].per_call_us:.3f} us per call ({cfg.name})", flush=True)
        meta.update({"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                     "submission_sha256": hashlib.sha256(submission.read_bytes()).hexdigest()})
        save_measured(out, runs, meta)
        print(f"wrote {out / 'measured.json'} and the raw buffers", flush=True)
    if args.no_timed:
        return 0

    jobs = [{"measured": r, "submission": str(submission), "base_overrides": base, "iterations": args.fit_iterations}
            for r in runs]
    if args.jobs > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(args.jobs, len(jobs))) as ex:
            results = list(ex.map(analyse_shape, jobs))
    else:
        results = [analyse_shape(j) for j in jobs]

    shapes_out = []
    for r, res in zip(runs, results):
        rows = report_rows(res["measured_stats"], res["timed_stats"])
        print_report(r, res["timed"], rows)
        warning = stamp_warning(res["measured_stats"])
        if warning:
            print("  " + warning)
        trace = out / f"trace_{_tag(r.shape)}.json"
        write_trace(trace, r, res["timed"], {"label": f"{r.label} beside timed", "shape": list(r.shape),
                                             "config": r.config})
        np.savez_compressed(out / f"timed_{_tag(r.shape)}.npz", words=res["timed"].words)
        shapes_out.append({"shape": list(r.shape), "config": r.config, "pdl": r.pdl,
                           "measured": {"label": r.label, "per_call_us": r.per_call_us, "stats": res["measured_stats"],
                                        "info": r.info},
                           "timed": {"label": "timed", "per_call_us": res["timed"].per_call_us,
                                     "stats": res["timed_stats"], "info": res["timed"].info},
                           "report": rows, "fit": res["fit"], "trace": trace.name})
    pooled = pool([res["fit"] for res in results])
    provenance = f"{meta.get('measured_on')} {meta.get('device', '')}, {meta.get('created')}, bundle {out}"
    chosen = write_overrides(out / "costs_fitted.yaml", pooled, provenance)
    print("fit (rows of emu/timing/b200.yaml; median over the shapes that identify each):")
    for name, row in pooled.items():
        mark = "" if row["identified_in"] else "  (a lower bound)" if row["write"] else "  (not identified: prior kept)"
        print(f"  {name:<26} {row['value']:10.4g}  (prior {row['prior']:g}; {row['identified_in']}/{row['shapes']} shapes)"
              f"{mark}")
    doc = {"label": f"tools/profile.py bundle: {meta.get('measured_on')} beside timed", **meta,
           "layout": runs[0].layout.as_dict() if runs else None, "base_costs": base, "shapes": shapes_out,
           "fit": {"rows": pooled, "overrides": chosen, "overrides_file": "costs_fitted.yaml"}}
    (out / "profile.json").write_text(json.dumps(doc, indent=1, default=_json_default))
    print(f"wrote {out / 'profile.json'}, {out / 'costs_fitted.yaml'} and the traces (Chrome JSON + PNG)")
    return 0


def _json_default(o):
    if isinstance(o, (np.integer, np.floating)):
        return o.item()
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
