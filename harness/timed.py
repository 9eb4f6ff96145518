"""One leaderboard call of this package's kernel, timed: the submission's real launch at one shape (harness.verdict's
prepare) through the timed emulator (emu.timing.call.timed_run), its C checked on the clusters simulated.

    res, timed = timed_emulate(256, 3072, 4096)     # res: EmulationResult of C; timed: emu.timing.call.TimedCall
    timed.line()                                     # "timed: X.XX us per call (...)"

Every figure is "timed" (a model of a B200 running the kernel's PTX), never a measurement.
"""
from __future__ import annotations

import time

from emu.timing.call import timed_run

from .capture import default_host_path
from .problems import compare, get_problem
from .verdict import REPO, EmulationResult, launch_summary, prepare


def timed_emulate(m: int, n: int, k: int, l: int = 1, config_name: str | None = None, mode: str = "strict",
                  seed: int = 1111, submission=None, costs=None, full_grid: bool = False, trace: bool = False,
                  progress=None, sched_seed: int = 0, dsl: str = "default", host_path: str | None = None,
                  problem=None, prerequisite_writes="config", sm_count: int | None = None):
    """Our kernel (submission.py or a copy) at one shape: (EmulationResult of the simulated clusters' C, TimedCall).
    problem: the leaderboard problem (harness.problems.get_problem; default nvfp4_dual_gemm); prerequisite_writes:
    as harness.verdict.emulate's; sm_count: compile the grid for this many SMs (a GPU that holds fewer clusters than
    the B200's 148 SMs make: submission.max_active_clusters), while the engine keeps its cost table's SMs."""
    t0 = time.time()
    problem = get_problem(problem)
    submission = submission or REPO / "submission.py"
    host_path = host_path or default_host_path()
    prep = prepare(m, n, k, l, config_name, mode, seed, submission, sm_count, None, dsl, host_path, problem)
    if isinstance(prep, EmulationResult):
        return prep, None
    reference = problem.reference()

    timed = timed_run(prep.cap, prep.gmem, costs, sched_seed, full_grid, trace, progress,
                      prerequisite_writes=prep.prerequisite_addresses(prerequisite_writes))
    res = EmulationResult(timed.status, prep.config.name, (m, n, k, l), mode, message=timed.message)
    res.launch = launch_summary(prep.cap, host_path, sm_count)
    res.clusters_run, res.clusters_total = timed.clusters_simulated, timed.clusters_total
    res.stats = timed.stats
    if timed.status == "completed":
        res.notes = list(timed.machine.notes.values())
        res.profile = prep.profile_words()
        res.status, res.message, res.checked_elements = compare(
            reference, prep.config, prep.data, prep.gmem, prep.addresses, timed.machine, m, n, l,
            res.clusters_run == res.clusters_total, problem)
    res.seconds = time.time() - t0
    return res, timed
