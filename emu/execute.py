"""The emulator's one public entry point: run a PTX module's kernel with a launch and global memory, return how it
ended and the machine it ran on.

    from emu import CapturedLaunch, GlobalMemory, run_kernel
    gmem = GlobalMemory(); base = gmem.alloc_array(...)
    run = run_kernel(launch, gmem)            # every cluster, the uniform schedule
    run.status                                # "completed", "deadlock", "hazard" or "unsupported"
    run.machine.notes, run.machine.stats      # what the run saw
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ptx as ptx_mod
from .launch import CapturedLaunch
from .machine import Deadlock, Machine, Schedule
from .state import EmulatorError, GlobalMemory, Hazard, Unsupported


def choose_clusters(machine: Machine, clusters, rng_seed: int) -> list:
    """Every cluster id of the launch ("all" or None), or `clusters` of them drawn with rng_seed, in launch order."""
    ids = list(machine.clusters())
    if clusters in (None, "all"):
        return ids
    count = int(clusters)
    if count >= len(ids):
        return ids
    rng = np.random.default_rng(rng_seed)
    picked = sorted(rng.choice(len(ids), size=count, replace=False).tolist())
    return [ids[i] for i in picked]


@dataclass
class Execution:
    """How one run_kernel call ended."""

    status: str  # "completed", "deadlock", "hazard", "unsupported"
    message: str = ""
    machine: Machine | None = None
    clusters_run: int = 0
    clusters_total: int = 0


def run_kernel(launch: CapturedLaunch, gmem: GlobalMemory, sched_seed: int = 0, clusters="all", progress=None,
               max_quantum: int = 24, schedule: Schedule | None = None, prerequisite_writes=None,
               unknown=(), digest: bool = False) -> Execution:
    """The emulator's public entry point: parse the launch's PTX and run it on gmem (every cluster, or a seeded choice
    of `clusters` of them) under `schedule` (default: the uniform policy with sched_seed and max_quantum); report how
    it ended. The machine it ran on (memory, stores, notes, stats) is in the result. prerequisite_writes: addresses
    in the global allocations the grid before this one in the stream may write (Machine.check_global_access; None:
    not known). unknown: global (address, bytes) whose contents the caller does not know (Machine.watch_unknown: a
    cluster that reads them is in machine.tainted). digest: keep a digest of every instruction issued and asynchronous
    operation completed (run.machine.digest, emu.machine.TraceHash)."""
    run = Execution("completed")
    try:
        kernel = ptx_mod.parse_module(launch.ptx)
        run.machine = Machine(kernel, launch, gmem, seed=sched_seed, progress=progress, max_quantum=max_quantum,
                              schedule=schedule, prerequisite_writes=prerequisite_writes, digest=digest)
        run.machine.watch_unknown(unknown)
        ids = choose_clusters(run.machine, clusters, run.machine.schedule.seed)
        run.clusters_total = len(list(run.machine.clusters()))
        run.clusters_run = len(ids)
        run.machine.run(ids)
    except Deadlock as e:
        run.status, run.message = "deadlock", str(e)
    except Hazard as e:
        run.status, run.message = "hazard", str(e)
    except EmulatorError as e:  # Unsupported, or a PTX syntax the parser does not know
        run.status, run.message = "unsupported", f"{type(e).__name__}: {e}" if not isinstance(e, Unsupported) else str(e)
    return run
