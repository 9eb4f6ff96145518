"""Run the kernel of a submission file in the emulator on reference inputs and compare with reference.py.

    result = emulate(m, n, k, l, config_name=None, mode="strict", seed=1111, sched_seed=0,
                     submission="submission.py", clusters="all", schedules=None, problem="nvfp4_dual_gemm")

problem: the leaderboard problem (harness.problems: "nvfp4_dual_gemm", the default, or "nvfp4_gemm"), which picks the
reference, the operands the host function takes and the submission's configs (TUNE_SPACE / CONFIG_TABLE or
GEMM_TUNE_SPACE / GEMM_CONFIG_TABLE).

Flow: reference.generate_input (CPU) -> the tensors' bytes in emulated global memory (C poisoned NaN)
-> harness.capture.capture_launch (the submission's real host code: grid, cluster, shared memory, parameter
bytes with the TMA descriptors it encoded for these addresses; a launch a B200 refuses ends here) -> for each
schedule of the verdict, emu.run_kernel runs every warp of the chosen clusters -> C read back ->
harness.problems.compare (the leaderboard's tolerance) on the tiles those clusters wrote.

The verdict: MATCH only if every schedule matched. By default (schedules=None) DEFAULT_SCHEDULES, one run per
policy of emu.machine.POLICIES that large skews need (their seeds offset by sched_seed); schedules=N runs N
schedules, the default ones first, then every policy in turn; a list of emu.machine.Schedule runs exactly those. The first schedule
that fails ends the verdict (stop_at_failure=False runs them all: the mutation table's catch rates).
Small shapes run by default on a reduced SM count (default_sm_count) so each cluster walks several tiles and
the shared-memory ring and the accumulator stages wrap.
"""
from __future__ import annotations

import hashlib
import importlib.util
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from emu import GlobalMemory, Schedule, run_kernel
from emu.machine import POLICIES

from .capture import CompileError, capture_launch, default_host_path
from .host import LaunchError
from .problems import DT_I64, compare, get_problem, place_inputs, prerequisite_writes_for

REPO = Path(__file__).resolve().parents[1]


# The default verdict: the uniform schedule and one of each policy that makes a large skew (seeds 0-5, shifted by
# sched_seed). Cost (emulated, 2-CPU machine): 3-5x one schedule (one compile, capture and input set serve all six).
DEFAULT_SCHEDULES = (Schedule("uniform", 0), Schedule("producer_first", 1), Schedule("consumer_first", 2),
                     Schedule("late_wake", 3), Schedule("slow_async", 4), Schedule("starve_role", 5))
# Small shapes: at most this many CTA tiles run by default on a reduced SM count, TILES_PER_CLUSTER tiles per cluster.
SMALL_SHAPE_TILES = 32
TILES_PER_CLUSTER = 4


@dataclass(frozen=True)
class B200Timing:
    """The B200's modeled timing as a schedule of a verdict: the launch runs on the timed emulator's machine
    (emu.timing: every warp issues when its sub-partition and operands allow, each asynchronous operation completes
    when its modeled latency and bandwidth say, a spinning try_wait wakes at its modeled latency), not on the seeded
    scheduler's adversarial turns. What a kernel computes there is what the model of a B200 predicts; a failure that
    only the seeded schedules reach is a race the B200's timing hides (harness.runner: verdict RACE; design.md
    "Verdict and schedules"). spread: a seed for spread global-load latencies (emu.timing.engine, "Spread loads"):
    `b200~N`, the same machine with warps that leave their loads in different orders."""

    seed: int = 0
    policy: str = "b200"
    spread: int | None = None

    @property
    def name(self) -> str:
        return "b200" if self.spread is None else f"b200~{self.spread}"

    @staticmethod
    def parse(name: str):
        """"b200" or "b200~N" -> its B200Timing; None for any other name."""
        if name == "b200":
            return B200
        if name.startswith("b200~") and name[5:].isdigit():
            return B200Timing(spread=int(name[5:]))
        return None


B200 = B200Timing()
# What an author's file runs first (harness.runner, --b200): the modeled timing, then twice with spread loads
B200_SCHEDULES = (B200, B200Timing(spread=1), B200Timing(spread=2))


def is_b200(schedule) -> bool:
    return isinstance(schedule, B200Timing)


def schedules_for(schedules=None, sched_seed: int = 0) -> list:
    """The schedules a verdict runs: None -> DEFAULT_SCHEDULES (seeds + sched_seed); an int N -> the first N of
    DEFAULT_SCHEDULES, then (N > 6) starve_warp and every policy in turn, each with the next seed: every policy of
    POLICIES appears from N = 7 on; a list of Schedule, "policy:seed", "b200" or "b200~N" (B200Timing) -> those."""
    if schedules is None:
        return [Schedule(s.policy, s.seed + sched_seed) for s in DEFAULT_SCHEDULES]
    if isinstance(schedules, int):  # the default verdict's first, then the other policies in turn
        extra = ["starve_warp"] + list(POLICIES)
        plan = schedules_for(None, sched_seed)[:schedules]
        return plan + [Schedule(extra[i % len(extra)], sched_seed + len(DEFAULT_SCHEDULES) + i)
                       for i in range(schedules - len(plan))]
    return [s if isinstance(s, (Schedule, B200Timing)) else B200Timing.parse(s) or Schedule.parse(s)
            for s in schedules]


def default_sm_count(config, m: int, n: int, l: int) -> int | None:
    """For a small problem (at most SMALL_SHAPE_TILES CTA tiles): the SM count that leaves each cluster about
    TILES_PER_CLUSTER tiles, so persistent CTAs wrap their shared-memory ring and accumulator stages; None (the
    B200's 148) for larger problems."""
    tm, tn = config.cta_tile_mn
    # a K split or a product pair puts tile_ctas CTAs on one tile, in a launch cluster that many times larger
    cm, cn = getattr(config, "launch_cluster_mn", config.cluster_mn)
    ctas = cm * cn
    tiles = (m // tm) * (n // tn) * l * getattr(config, "tile_ctas", 1)
    if tiles > SMALL_SHAPE_TILES:
        return None
    clusters = -(-tiles // ctas)
    return ctas * max(1, clusters // TILES_PER_CLUSTER)


def small_shape(config) -> tuple:
    """A small shape for `config` in the emulator: two clusters' worth of tiles along M and N, two k-tiles per tile,
    or one per slice of a K split (leaderboard-valid: M, N multiples of 128)."""
    cm, cn = config.cluster_mn
    return (2 * 128 * cm, max(128, 2 * config.cta_tile_mn[1] * cn), max(512, 256 * config.split_k), 1)


@dataclass
class ScheduleRun:
    """One schedule's outcome within a verdict."""

    schedule: str
    status: str  # "match", "mismatch", "deadlock", "hazard", "unsupported"
    message: str = ""
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    # with emulate(digest=True): {"trace": digest of what ran (emu.machine.TraceHash), "events": how many, "c": digest
    # of the C the schedule left}; equal before and after a change to the emulator's speed: the same schedule
    digest: dict = field(default_factory=dict)


@dataclass
class EmulationResult:
    # "match", "mismatch", "deadlock", "hazard", "unsupported", "launch" (a B200 would not launch it), "compile" (it
    # does not compile)
    status: str
    config: str
    shape: tuple
    mode: str
    message: str = ""
    seconds: float = 0.0
    clusters_run: int = 0
    clusters_total: int = 0
    checked_elements: int = 0
    stats: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)  # emu.state.Note: model violations with a hardware-verified precedent
    runs: list = field(default_factory=list)  # ScheduleRun per schedule run, in order
    schedules: list = field(default_factory=list)  # names of the schedules the verdict asked for
    profile: object = None  # KernelConfig.profile's buffer after the run: int64 (CTAs, words) (tools/profile_buffer.py)
    # A note is a model violation that some B200-verified kernel also commits: the right verdict for a third-party
    # kernel, a failure for the kernel being developed here. False (the default): a MATCH with notes fails.
    allow_notes: bool = False

    @property
    def passed(self) -> bool:
        """C matched on every schedule, and either no note was raised or notes were allowed."""
        return self.status == "match" and (self.allow_notes or not self.notes)

    @property
    def exit_code(self) -> int:
        """0: passed; 1: C mismatched; 2: anything else (deadlock, hazard, unsupported, launch refused, or notes the
        run did not allow)."""
        if self.passed:
            return 0
        return {"mismatch": 1}.get(self.status, 2)

    @property
    def verdict(self) -> str:
        """MATCH, MATCH with notes, MISMATCH, DEADLOCK, HAZARD, UNSUPPORTED, LAUNCH REFUSED or COMPILE FAILED."""
        if self.status == "match" and self.notes:
            return (f"MATCH with {len(self.notes)} note{'s' if len(self.notes) > 1 else ''}"
                    + ("" if self.allow_notes else " (FAILED: notes are not allowed for this kernel)"))
        return {"launch": "LAUNCH REFUSED", "compile": "COMPILE FAILED"}.get(self.status, self.status.upper())

    def note_lines(self) -> list:
        """One line per note rule: how many places, their PTX lines, the first one's detail and the precedent."""
        by_rule = {}
        for note in self.notes:
            by_rule.setdefault(note.rule, []).append(note)
        out = []
        for rule, notes in by_rule.items():
            lines = [n.where.split(":")[0].replace("PTX line ", "") for n in notes]
            first = notes[0]
            out.append(f"note [{rule}] x{len(notes)} at PTX line{'s' if len(notes) > 1 else ''} {', '.join(lines)}: "
                       f"{first.detail} (precedent: {first.precedent})")
        return out

    @property
    def failed_schedule(self) -> str | None:
        return next((r.schedule for r in self.runs if r.status != "match"), None)

    def summary(self) -> str:
        m, n, k, l = self.shape
        dsl = f" (DSL {self.launch['dsl_version']})" if self.launch.get("dsl_version") else ""
        if self.launch.get("host_path") == "pointer":
            dsl = dsl[:-1] + ", pointer fallback)" if dsl else " (pointer fallback)"
        sms = f", {self.launch['sm_count']} SMs" if self.launch.get("sm_count") else ""
        where = f" at schedule {self.failed_schedule}" if self.failed_schedule else ""
        plan = f", {len(self.runs)}/{len(self.schedules)} schedules" if self.schedules else ""
        return (f"emulated {self.verdict}{where}: {self.config}{dsl} {m}x{n}x{k}x{l} {self.mode}, "
                f"{self.clusters_run}/{self.clusters_total} clusters{sms}{plan}, "
                f"{self.checked_elements} elements checked, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs, "
                f"{self.seconds:.1f} s")


def load_submission(path: Path):
    path = Path(path).resolve()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    name = f"_emu_submission_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def find_config(sub, m: int, n: int, k: int, l: int, config_name: str | None, submission, problem=None):
    """The submission's config by name (the problem's tuning space and config table: TUNE_SPACE, CONFIG_TABLE or
    PROFILE_SPACE for the dual GEMM, GEMM_TUNE_SPACE or GEMM_CONFIG_TABLE for nvfp4_gemm), or the one it picks for the
    shape."""
    problem = get_problem(problem)
    if config_name is None:
        if problem.name == "nvfp4_dual_gemm":
            return sub.config_for(m, n, k, l)
        return sub.config_for(m, n, k, l, problem.name)
    pool = problem.configs(sub) + (list(getattr(sub, "PROFILE_SPACE", ())) if problem.name == "nvfp4_dual_gemm" else [])
    matches = [c for c in pool if c.name == config_name]
    if not matches:
        raise SystemExit(f"no config named {config_name} in {problem.tune_space}, {problem.config_table}"
                         f"{' or PROFILE_SPACE' if problem.name == 'nvfp4_dual_gemm' else ''} of {submission}")
    return matches[0]


@dataclass
class Prepared:
    """A submission's kernel ready to run: its config, inputs in emulated global memory (C poisoned NaN) and the
    launch its real host code makes for them."""

    config: object
    data: tuple
    gmem: GlobalMemory
    addresses: dict
    cap: object
    profile_shape: tuple | None = None  # (CTAs, words) of the profile buffer at addresses["profile"], if any
    problem: object = None  # harness.problems.Problem (None: the dual GEMM)

    def profile_words(self):
        """The profile buffer as the kernel left it, or None for a config that does not profile."""
        if self.profile_shape is None:
            return None
        rows, words = self.profile_shape
        return self.gmem.read(self.addresses["profile"], rows * words * 8).view(np.int64).reshape(rows, words).copy()

    def prerequisite_addresses(self, names):
        """emu.run_kernel's prerequisite_writes: the operands `names` ("config": the config's stream,
        harness.problems.prerequisite_writes_for; None: not known)."""
        if names == "config":
            names = prerequisite_writes_for(self.config)
        return None if names is None else [self.addresses[name] for name in names]


def prepare(m: int, n: int, k: int, l: int = 1, config_name: str | None = None, mode: str = "strict",
            seed: int = 1111, submission: str | Path = REPO / "submission.py", sm_count: int | None = None,
            input_seed: int | None = None, dsl: str = "default", host_path: str | None = None, problem=None):
    """Prepared, or an EmulationResult saying why it cannot run: the config cannot implement this shape
    ("unsupported"), the kernel does not compile ("compile"), a B200 would refuse the launch ("launch"), or the capture
    cannot be made here ("unsupported")."""
    problem = get_problem(problem)
    sub = load_submission(submission)
    config = find_config(sub, m, n, k, l, config_name, submission, problem)
    host_path = host_path or default_host_path()
    ok, why = sub.DualGemmKernel.can_implement(config, m, n, k, l)
    if not ok:
        return EmulationResult("unsupported", config.name, (m, n, k, l), mode,
                               message=f"{config.name} cannot implement {m}x{n}x{k}x{l}: {why}")
    reference = problem.reference()
    data = reference.generate_input(m, n, k, l, seed if input_seed is None else input_seed, mode=mode, device="cpu")
    data[problem.data_index["c"]].fill_(float("nan"))
    gmem = GlobalMemory()
    addresses = place_inputs(gmem, data, m, n, k, l, problem)
    extra, profile_shape = (), None
    if getattr(config, "profile", False):
        # One record per CTA for the largest persistent grid, every word -1 (not written), as tools/profile.py has it.
        profile_shape = (sub.SM_COUNT, sub.PROFILE_WORDS)
        addresses["profile"] = gmem.alloc_array(np.full(profile_shape, -1, np.int64))
        extra = (("profile", DT_I64, profile_shape, (profile_shape[1], 1)),)
    try:
        cap = capture_launch(str(submission), config, m, n, k, l, addresses, sm_count=sm_count, dsl=dsl,
                             host_path=host_path, extra=extra, problem=problem)
    except CompileError as e:
        return EmulationResult("compile", config.name, (m, n, k, l), mode, message=str(e))
    except LaunchError as e:
        return EmulationResult("launch", config.name, (m, n, k, l), mode, message=str(e))
    except RuntimeError as e:  # the capture cannot be made here (e.g. a host function this DSL cannot export)
        return EmulationResult("unsupported", config.name, (m, n, k, l), mode, message=str(e))
    return Prepared(config, data, gmem, addresses, cap, profile_shape, problem)


def launch_summary(cap, host_path: str = "tvm_ffi", sm_count: int | None = None) -> dict:
    return {"grid": cap.grid, "block": cap.block, "cluster": cap.cluster, "dynamic_smem": cap.dynamic_smem,
            "dsl_version": cap.dsl_version, "params": len(cap.params), "host_path": host_path,
            "sm_count": sm_count, "registers": cap.registers, "static_smem": cap.static_smem}


def emulate(m: int, n: int, k: int, l: int = 1, config_name: str | None = None, mode: str = "strict",
            seed: int = 1111, sched_seed: int = 0, submission: str | Path = REPO / "submission.py",
            clusters="all", sm_count: int | None = None, progress=None, input_seed: int | None = None,
            dsl: str = "default", host_path: str | None = None, schedules=None,
            stop_at_failure: bool = True, allow_notes: bool = False, problem=None,
            prerequisite_writes="config", digest: bool = False) -> EmulationResult:
    """The verdict over `schedules` (schedules_for) of the kernel of `submission` on an (m, n, k, l) problem.
    sm_count None: default_sm_count for small problems, the B200's 148 otherwise. allow_notes: a MATCH with notes
    passes (EmulationResult.passed); by default it fails, as it must for the kernel under development. problem: the
    leaderboard problem (harness.problems.get_problem; default nvfp4_dual_gemm). prerequisite_writes: the operands
    the grid before the call writes (None: not known, so under PDL every global access before griddepcontrol.wait
    races; "config": the stream the config states, harness.problems.prerequisite_writes_for). digest: each schedule's
    ScheduleRun.digest (digests of what ran and of C)."""
    t0 = time.time()
    problem = get_problem(problem)
    host_path = host_path or default_host_path()
    if sm_count is None:
        sm_count = default_sm_count(find_config(load_submission(submission), m, n, k, l, config_name, submission,
                                                problem), m, n, l)
    prep = prepare(m, n, k, l, config_name, mode, seed, submission, sm_count, input_seed, dsl, host_path, problem)
    if isinstance(prep, EmulationResult):
        prep.seconds = time.time() - t0
        return prep
    reference = problem.reference()

    config, data, gmem, addresses, cap = prep.config, prep.data, prep.gmem, prep.addresses, prep.cap
    plan = schedules_for(schedules, sched_seed)
    res = EmulationResult("match", config.name, (m, n, k, l), mode, allow_notes=allow_notes)
    res.schedules = [s.name for s in plan]
    res.launch = launch_summary(cap, host_path, sm_count)
    c_poison = gmem.read(addresses["c"], m * n * l * 2)
    profile_blank = prep.profile_words()
    notes = {}
    for schedule in plan:
        t1 = time.time()
        gmem.write(addresses["c"], c_poison)
        if profile_blank is not None:  # every schedule starts from an unwritten profile buffer, as from a poisoned C
            gmem.write(addresses["profile"], profile_blank)
        run = run_kernel(cap, gmem, clusters=clusters, progress=progress, schedule=schedule,
                         prerequisite_writes=prep.prerequisite_addresses(prerequisite_writes), digest=digest)
        one = ScheduleRun(schedule.name, run.status, run.message)
        if digest and run.machine is not None:
            c_bytes = gmem.read(addresses["c"], m * n * l * 2).tobytes()
            one.digest = {"trace": run.machine.digest.hexdigest(), "events": run.machine.digest.events,
                         "c": hashlib.blake2b(c_bytes, digest_size=16).hexdigest()}
        res.clusters_run, res.clusters_total = run.clusters_run, run.clusters_total
        if run.machine is not None:
            one.stats = dict(run.machine.stats)
            one.notes = list(run.machine.notes.values())
            for note in one.notes:
                notes.setdefault((note.rule, note.where), note)
        if run.status == "completed":
            one.status, one.message, res.checked_elements = compare(reference, config, data, gmem, addresses,
                                                                    run.machine, m, n, l,
                                                                    run.clusters_run == run.clusters_total, problem)
        one.seconds = time.time() - t1
        res.runs.append(one)
        if one.status != "match" and res.status == "match":
            res.status, res.message, res.stats = one.status, one.message, one.stats
        if res.status == "match":
            res.stats = one.stats
        if one.status != "match" and stop_at_failure:
            break
    res.notes = list(notes.values())
    res.profile = prep.profile_words()
    res.seconds = time.time() - t0
    return res


def emulate_in_order(calls: list, jobs: int | None = None):
    """emulate(**call) for each call, `jobs` worker processes at once (default one per CPU; 1: in this process, one
    after the other): the results in the calls' order, each as soon as it and all before it are done. A verdict is
    the one emulate gives alone (each runs whole in one process, with the same arguments)."""
    yield from run_in_order(emulate, calls, jobs)


def run_in_order(fn, calls: list, jobs: int | None = None):
    """fn(**call) for each call (fn a module-level function: it crosses to the workers by name), `jobs` worker
    processes at once (default one per CPU; 1: in this process): the results in the calls' order. The workers compute
    with one thread each (OMP_NUM_THREADS=1, as pytest-xdist's workers do): a BLAS or torch thread pool per worker only
    contends for the CPUs the other workers use."""
    jobs = min(jobs or os.cpu_count() or 1, len(calls))
    if jobs <= 1:
        for call in calls:
            yield fn(**call)
        return
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # read by each worker as it starts (spawned: a fresh interpreter)
    try:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for future in [pool.submit(fn, **call) for call in calls]:
                yield future.result()
    finally:
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = threads
