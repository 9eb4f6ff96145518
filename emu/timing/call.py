"""One leaderboard call, timed: which clusters are simulated, what share of the chip they get, when they start.

The leaderboard times 50 back-to-back calls between two events after an L2 flush; a call costs the kernel plus the
gap between one kernel's end and the next one's start (docs/leaderboard.md §3). So a call is simulated in steady
state, in the frame where the previous kernel ended at cycle 0:
- without programmatic dependent launch every CTA starts `launch_gap_us` later;
- with it the CTAs start `pdl_cta_start_us` later and griddepcontrol.wait returns at `pdl_wait_release_us`
  (both measured on an H200 by probes/pdl.py; a B200 may differ: the table says so).
The timed call ends when the last simulated CTA has exited and its stores have reached L2.

Representative clusters, with shares (the issue's "a representative cluster with bandwidth shares"): the kernels
this package times are grids of identical clusters (one tile, or the same number of tiles, per cluster; a persistent
grid's first cluster has the most tiles), so one cluster per wave of the grid is simulated in full, on its own SMs,
and the chip-wide resources (HBM, L2) are Bandwidths scaled to those SMs' share of the SMs that run at the same
time. Which bytes come from HBM: all the grid's reads of a global allocation ask for reuse x its size bytes, and only
its size comes from HBM, so each read's HBM part is 1 / reuse of it. The reuse of each allocation comes from a first,
functional pass over the same clusters (their requested bytes per allocation, scaled by the grid's CTAs over the
simulated CTAs). `--full-grid` simulates every cluster instead (its error against the representative: docs/design.md "One leaderboard call").

What the machine issues: the launch's cubin is disassembled (emu.timing.sass) and, for the copy kinds its SASS issues
once per warp, identical lanes are charged once, in both passes; TimedCall.corrections says what applied, or why the
PTX's per-lane charge stands (no cubin, no disassembler, issue_from_sass=False).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .. import ptx as ptx_mod
from ..device import occupancy as device_occupancy
from ..machine import Deadlock, Machine, role_of
from ..state import EmulatorError, Hazard
from .costs import load
from .engine import ProbeMachine, TimedMachine, utilisation
from .resources import SM, Bandwidth
from .sass import issue_rules
from .trace import Trace



@dataclass
class TimedCall:
    """The result of a timed call. Times in microseconds at the table's clock; all of it "timed" (the timed
    emulator), never a measurement."""

    status: str  # "completed", "deadlock", "hazard", "unsupported"
    message: str = ""
    per_call_us: float = 0.0
    kernel_us: float = 0.0
    start_us: float = 0.0
    phases_us: dict = field(default_factory=dict)
    utilisation: dict = field(default_factory=dict)
    binds: str = ""
    clusters_simulated: int = 0
    clusters_total: int = 0
    waves: int = 1
    active_sms: int = 0
    reuse: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    costs: str = ""
    corrections: list = field(default_factory=list)  # what the SASS changed in the charge, or why nothing did
    sass: dict = field(default_factory=dict)  # emu.timing.sass's report: counts, issue modes, hot loops' R2UR/S2UR
    machine: object = None

    def line(self) -> str:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in self.phases_us.items())
        return (f"timed: {self.per_call_us:.2f} us per call (kernel {self.kernel_us:.2f} us after a {self.start_us:.2f} us "
                f"start; {parts}; binds: {self.binds})")


def occupancy(cap) -> int:
    """CTAs of this launch resident on one SM at once, as the hardware admits them (emu.device.occupancy: threads,
    the cubin's registers per thread, static plus dynamic shared memory); tensor memory is allocated at run time, so
    it does not count here (a launch whose resident CTAs over-subscribe it gets the note emu.device says). At least 1:
    a launch that fits none is refused before it is timed."""
    threads = cap.block[0] * cap.block[1] * cap.block[2]
    smem = cap.dynamic_smem + (getattr(cap, "static_smem", None) or 0)
    return max(1, device_occupancy(threads, getattr(cap, "registers", None), smem))


def plan(machine: Machine, costs, full_grid: bool = False) -> tuple[list, int, int]:
    """(the clusters to simulate, one per wave unless full_grid; the number of waves; SMs busy per wave)."""
    ids = list(machine.clusters())
    per_cluster = len(machine.build_cluster(ids[0]).ctas)
    capacity = int(costs.sm_count) * occupancy(machine.launch) // per_cluster  # clusters resident at once
    waves = -(-len(ids) // capacity)
    active = min(len(ids), capacity) * per_cluster
    if full_grid:
        return ids, waves, active
    return [ids[w * capacity] for w in range(waves)], waves, active


def timed_run(cap, gmem, costs=None, seed: int = 0, full_grid: bool = False, trace: bool = False,
              progress=None, issue_from_sass: bool = True, prerequisite_writes=None, unknown=(),
              load_spread: int | None = None) -> TimedCall:
    """Time one call of the captured launch on gmem (inputs placed, C poisoned); gmem ends holding the timed pass's
    C for the clusters simulated. issue_from_sass=False keeps the PTX's per-lane charge of every copy (and says so).
    prerequisite_writes, unknown: as emu.run_kernel's (what the grid before this one in the stream writes; bytes whose
    contents are not known: the timed pass's clusters that read them are in its machine's `tainted`). load_spread: a
    seed for the engine's spread global-load latencies (emu.timing.engine; None, as every timed figure: off)."""
    costs = costs or load()
    out = TimedCall("completed", costs=costs.describe())
    try:
        # parsing and decoding the kernel (in the machine's constructor) may meet a form the emulator lacks: a status,
        # as in run_kernel
        kernel = ptx_mod.parse_module(cap.ptx)
        if issue_from_sass:
            rules = issue_rules(cap, kernel)
            merge, out.corrections, out.sass = rules.merge, rules.corrections, rules.report
        else:
            merge = frozenset()
            out.corrections = ["PTX charge (per lane) for every copy: SASS not read (issue_from_sass=False)"]
        probe = ProbeMachine(kernel, cap, copy.deepcopy(gmem), seed=seed, merge_kinds=merge,
                             prerequisite_writes=prerequisite_writes)
        ids, waves, active = plan(probe, costs, full_grid)
        out.clusters_total, out.clusters_simulated, out.waves, out.active_sms = (len(list(probe.clusters())), len(ids),
                                                                                 waves, active)
        # pass 1 (functional): bytes each global allocation is asked for by the simulated clusters. It runs under the
        # seeded scheduler, which may reach a race the timed pass's order does not (a parity wait lapped): the timed
        # pass is the call's, so a pass-1 failure only leaves its reuse counted from the traffic before it
        try:
            probe.run(ids)
        except EmulatorError as e:
            out.corrections.append(f"the functional pass that counts reuse stopped ({type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:200]}); reuse from the traffic before it")
        simulated_ctas = sum(len(probe.build_cluster(c).ctas) for c in ids)
        grid_ctas = out.clusters_total * simulated_ctas // len(ids)
        out.reuse = {base: nbytes * grid_ctas / simulated_ctas / gmem.allocation(base)[1]
                     for base, nbytes in probe.traffic.items() if base is not None}
        # pass 2 (timed)
        pdl = probe.pdl
        start = costs.cycles(costs.pdl_cta_start_us if pdl else costs.launch_gap_us)
        release = costs.cycles(costs.pdl_wait_release_us) if pdl else 0.0
        per_wave = len(ids) // waves if not full_grid else len(ids)
        sms_needed = per_wave * simulated_ctas // len(ids)
        sms = [SM(i, costs) for i in range(sms_needed)]
        share = sms_needed / active
        shares = {"hbm": Bandwidth("HBM share", costs.hbm_bytes_per_clk * share),
                  "l2": Bandwidth("L2 share", costs.l2_bytes_per_clk * share)}
        tr = Trace(role_of) if trace else None
        machine = None
        wave_start = start
        store_log, store_clusters, atomic_log, tainted = [], [], [], {}
        for w in range(waves if not full_grid else 1):
            wave_ids = ids[w * per_wave:(w + 1) * per_wave] if not full_grid else ids
            placement, i = {}, 0
            for cid in wave_ids:
                n = len(probe.build_cluster(cid).ctas)
                placement[cid] = (wave_start, sms[i:i + n])
                i += n
            machine = TimedMachine(kernel, cap, gmem, costs, placement, shares, out.reuse, release, seed=seed,
                                   trace=tr, progress=progress, merge_kinds=merge,
                                   prerequisite_writes=prerequisite_writes, load_spread=load_spread)
            # every wave's stores and tainted clusters, for the check of C
            machine.store_log, machine.store_clusters, machine.atomic_log, machine.tainted = (
                store_log, store_clusters, atomic_log, tainted)
            machine.watch_unknown(unknown)
            machine.run()
            ends = [m["end"] for m in machine.marks.values()]
            out.machine = machine
            out.stats = _merge(out.stats, machine.stats)
            if w + 1 < waves:  # the next wave's CTAs take the SMs as this wave's CTAs leave them
                wave_start = max(ends) + costs.cycles(costs.pdl_cta_start_us)
        end = max(m["end"] for m in machine.marks.values())
        out.per_call_us = costs.us(end)
        out.start_us = costs.us(start)
        out.kernel_us = costs.us(end - start)
        out.phases_us = _phases(machine.marks, costs, start)
        out.utilisation = utilisation(sms, end - start)
        out.utilisation["HBM share"] = shares["hbm"].busy / max(end - start, 1.0)
        out.utilisation["L2 share"] = shares["l2"].busy / max(end - start, 1.0)
        out.binds = _binds(out.utilisation)
        out.trace = tr
    except Deadlock as e:
        out.status, out.message = "deadlock", str(e)
    except Hazard as e:
        out.status, out.message = "hazard", str(e)
    except EmulatorError as e:
        out.status, out.message = "unsupported", f"{type(e).__name__}: {e}"
    return out


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _phases(marks: dict, costs, start: float) -> dict:
    """Mean over the simulated CTAs that issue MMAs: start -> first load, -> first MMA, -> last MMA done, -> end."""
    rows = [m for m in marks.values() if "first_mma" in m and "end" in m]
    if not rows:
        return {}
    mean = lambda key: sum(m[key] for m in rows) / len(rows)  # noqa: E731
    first_load = sum(m.get("first_load", m["first_mma"]) for m in rows) / len(rows)
    return {"to first load": costs.us(first_load - start), "to first MMA": costs.us(mean("first_mma") - first_load),
            "mainloop": costs.us(mean("last_mma") - mean("first_mma")), "tail": costs.us(mean("end") - mean("last_mma"))}


def _binds(util: dict) -> str:
    top = sorted(util.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} {v:.0%}" for k, v in top)
