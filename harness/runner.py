"""Any leaderboard submission file in the emulator, unmodified: imported as the leaderboard imports it, its
custom_kernel(data) called on the problem's inputs, every kernel launch its host code makes run in the emulator the
moment it is made, C checked by the problem's rule.

    result = run_submission("path/to/submission.py", (256, 512, 512, 1), problem="nvfp4_dual_gemm")
    result.status, result.summary(), result.exit_code

How (each step in a fresh process, `python -m harness.runner --worker JOB.json`: the file's module-level code, the DSL
and the bridges stay out of the caller's process, and a crash of the file's host code is reported, not suffered):
1. The bridges (harness/bridges.py) go in: torch presents host memory as cuda:0, a compiled CuTe DSL function is called
   through its exported host code, a load_inline extension is built with the nvcc wheel against the CUDA stand-ins
   (harness/host.py), and the DSL 4.3 names a leaderboard-era file uses resolve under the installed DSL.
2. The file is imported as module `submission`, with the problem's task.py, reference.py and utils.py first on the path
   (the leaderboard puts its own beside the file).
3. Per schedule of the verdict (harness.verdict.schedules_for): the reference's inputs for the shape (C filled with
   NaN), then custom_kernel(data). Each launch (grid, block, cluster, shared memory, parameter bytes: the stand-ins'
   record, checked against the B200's launch limits and the kernel's cubin resources) runs in the emulator on global
   memory that is the process's own memory: every torch tensor's storage and every cudaMalloc, at its host address.
   Host code after a launch sees its results, as after a synchronising launch. The launches of one call run in
   order; the first grid's prerequisite writes (programmatic dependent launch) are this call's C, as in the
   leaderboard's loop, each later grid's those of the grid before it.
4. The output custom_kernel returns is checked against the reference under the leaderboard's tolerance: all of it, or
   with `clusters` (a seeded choice of clusters per launch) the elements the emulated clusters stored whose inputs
   were all emulated. A sampled launch's clusters not emulated may write any byte of an allocation its emulated ones
   wrote, and a sampled atomic sum is the other clusters' too: those bytes are unknown to later launches, and a
   cluster that reads them (emu.Machine.watch_unknown), or an element an atomic of a sampled launch wrote, is left
   out of the check, the report saying how many and why (`unchecked`); nothing left: status "unchecked".
With timing, one call instead, each launch through the timed emulator (emu.timing.call.timed_run), its C checked on the
clusters simulated; per call = the sum over the call's launches.

What the runner cannot run ends the run with status "cannot-run": one line naming the construct and where the file
uses it (file:line), exit code 3.
"""
from __future__ import annotations

import ast
import ctypes
import functools
import gc
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKER_TIMEOUT_S = 24 * 3600
# What a seeded schedule may reach after the B200-timing one matched, and the verdict then calls a race: C wrong, no
# progress, an access the ISA leaves undefined (each one an interleaving the seeded scheduler drew)
RACES = ("mismatch", "deadlock", "hazard")


@dataclass
class LaunchRecord:
    """One launch of the file's first call, as the emulator received it."""

    kernel: str
    grid: tuple
    block: tuple
    cluster: tuple
    dynamic_smem: int
    registers: int | None
    static_smem: int | None
    built_by: str
    params: int
    forms: tuple | None = None  # the kernel's PTX instruction forms (emu.forms), sorted; None where its PTX does not parse


PRINTED_KEPT = 200  # device printf calls whose text a result keeps (a debugging kernel may print millions)


@dataclass
class RunnerResult:
    """A file's verdict: status "match", "mismatch", "deadlock", "hazard", "unsupported" (the emulator does not
    implement a PTX form), "launch" (a B200 refuses a launch), "refused" (the CUDA driver refused an argument of the
    file's host code, as a B200's would, and the host code failed on it), "race" (C matched under the B200's modeled
    timing, schedule b200, and a seeded schedule reached a failure: `race` says which and what; harness.verdict.
    B200Timing), "cannot-run" (construct, where), with timing
    "unchecked" (the timed clusters' stores do not finish elements of the output, as a K slice of a split), or
    without emulation "captured" (the launches recorded, none run)."""

    status: str
    submission: str
    problem: str
    shape: tuple
    mode: str
    message: str = ""
    construct: str = ""
    where: str = ""
    launches: list = field(default_factory=list)  # LaunchRecord of the first call, as dicts
    runs: list = field(default_factory=list)  # per schedule: {schedule, status, message, seconds, launches}
    notes: list = field(default_factory=list)  # emu.state.Note as dicts (rule, where, precedent, detail)
    printed: list = field(default_factory=list)  # device printf's text (emu Machine.printed), the first PRINTED_KEPT
    printed_count: int = 0  # how many printf calls the run made in all (its first schedule)
    bridges: list = field(default_factory=list)  # harness.bridges.Bridges.lines()
    refusals: list = field(default_factory=list)  # tensor maps the driver's encoder refused (its documented rules)
    race: dict = field(default_factory=dict)  # status "race": {"schedule", "status", "message"} of the seeded failure
    unchecked: str = ""  # how many elements the emulated clusters stored are left out of the check, and why
    checked_elements: int = 0
    clusters_run: int = 0
    clusters_total: int = 0
    stats: dict = field(default_factory=dict)
    timed: dict = field(default_factory=dict)  # with timing: per_call_us, per launch lines
    torch_work: dict = field(default_factory=dict)  # aten operator -> calls in the (last) call: kernels of their own on
    # a B200, not emulated as such and not timed (harness.bridges.DeviceWork)
    allow_notes: bool = False
    seconds: float = 0.0
    output: str = ""  # what the file and its build printed (tail)

    @property
    def passed(self) -> bool:
        """C matched, and neither a note nor a race unless allowed: a race, like a note, breaks a rule of the PTX ISA
        that B200-run kernels survive (design.md "Notes and hazards"); this package's kernel is failed on either."""
        return (self.status == "match" and (self.allow_notes or not self.notes)) or (
            self.status == "race" and self.allow_notes)

    @property
    def exit_code(self) -> int:
        """0 passed, 1 C mismatched, 3 cannot tell here (cannot-run, an unsupported PTX form, no element checkable),
        2 anything else."""
        if self.passed:
            return 0
        return {"mismatch": 1, "cannot-run": 3, "unsupported": 3, "unchecked": 3}.get(self.status, 2)

    @property
    def verdict(self) -> str:
        if self.status == "match" and self.notes:
            return (f"MATCH with {len(self.notes)} note{'s' if len(self.notes) > 1 else ''}"
                    + ("" if self.allow_notes else " (FAILED: notes are not allowed unless --allow-notes)"))
        if self.status == "race":
            return (f"RACE (MATCH under b200, {self.race['status'].upper()} under {self.race['schedule']})"
                    + ("" if self.allow_notes else " (FAILED: races are not allowed unless --allow-notes)"))
        return {"launch": "LAUNCH REFUSED", "cannot-run": "CANNOT RUN"}.get(self.status, self.status.upper())

    def summary(self) -> str:
        m, n, k, l = self.shape
        if self.status in ("cannot-run", "refused"):
            return f"emulated {self.verdict}: {Path(self.submission).name}: {self.construct or self.message}" + (
                f" ({self.where})" if self.where else "")
        kernels = ", ".join(sorted({x["kernel"][:60] for x in self.launches})) or "no launch"
        return (f"emulated {self.verdict}: {Path(self.submission).name} {m}x{n}x{k}x{l} {self.mode}, "
                f"{len(self.launches)} launch{'es' if len(self.launches) != 1 else ''} per call ({kernels}), "
                f"{self.clusters_run}/{self.clusters_total} clusters, {len(self.runs)} schedule"
                f"{'s' if len(self.runs) != 1 else ''}, {self.checked_elements} elements checked"
                f"{' (' + self.unchecked.split(':')[0] + ')' if self.unchecked else ''}, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs, "
                f"{self.seconds:.1f} s")

    def printed_lines(self) -> list[str]:
        """What the kernel's device printf wrote (its first schedule), a line each, with how many calls in all."""
        if not self.printed_count:
            return []
        lines = "".join(self.printed).splitlines()
        return [f"device printf: {self.printed_count} call{'s' if self.printed_count != 1 else ''}"
                + (f", the first {len(self.printed)}:" if len(self.printed) < self.printed_count else ":")] + [
            "  | " + line for line in lines]

    def note_lines(self) -> list[str]:
        by_rule = {}
        for note in self.notes:
            by_rule.setdefault(note["rule"], []).append(note)
        return [f"note [{rule}] x{len(ns)} at {ns[0]['where']}: {ns[0]['detail']} (precedent: {ns[0]['precedent']})"
                for rule, ns in by_rule.items()]


# ----------------------------------------------------------------------------- the caller's side
def run_submission(submission, shape: tuple, problem: str = "nvfp4_dual_gemm", mode: str = "strict",
                   input_seed: int = 1111, **options) -> RunnerResult:
    """Run the file at `submission` for one (m, n, k, l) shape (run_cases' options); the result."""
    return run_cases(submission, [(tuple(shape), mode, input_seed)], problem, **options)[0]


def run_cases(submission, cases: list, problem: str = "nvfp4_dual_gemm", schedules=None, sched_seed: int = 0,
              clusters="all", allow_notes: bool = False, timing: bool = False, costs: dict | None = None,
              prior_costs: bool = False, full_grid: bool = False, trace: str | None = None, emulate: bool = True,
              variants=(), progress=None, b200: bool = False) -> list[RunnerResult]:
    """Run the file at `submission` on each case ((m, n, k, l), mode, input seed[, schedules]) in one fresh worker
    process (the file is imported and compiled once); a result per case, in order. schedules (a case's own, else this
    one): as harness.verdict.schedules_for (None: the default verdict's six); with timing one schedule, timed.
    clusters: "all" or N, a seeded choice of N clusters of each launch (the output is then checked where they
    stored). emulate=False records the launches (status "captured") and runs none: what the file launches at a shape,
    in the time its host code takes. With timing, `variants` ([{name, overrides}], calibration.timing.variants) adds
    one timed call per engine variant, on top of `costs`: result.timed["variants"] = {name: us per call}. b200 (not
    with timing): the B200-timing schedules (harness.verdict.B200_SCHEDULES) first, then the seeded ones: a failure
    only they reach is the verdict RACE."""
    from .verdict import B200_SCHEDULES, schedules_for

    def plan(which):
        names = [s.name for s in schedules_for(which, sched_seed)][:1 if timing else None]
        first = [s.name for s in B200_SCHEDULES]
        return first + [n for n in names if n not in first] if b200 and not timing else names
    with tempfile.TemporaryDirectory(prefix="emu_runner_") as tmp:
        job = {"submission": str(Path(submission).resolve()), "problem": problem,
               "cases": [{"shape": list(case[0]), "mode": case[1], "input_seed": case[2],
                          "schedules": plan(case[3] if len(case) > 3 else schedules)} for case in cases],
               "clusters": clusters, "allow_notes": allow_notes, "timing": timing,
               "costs": costs or {}, "prior_costs": prior_costs, "full_grid": full_grid, "trace": trace,
               "emulate": emulate, "variants": list(variants) if timing else [],
               "out": str(Path(tmp) / "results.json")}
        (Path(tmp) / "job.json").write_text(json.dumps(job))
        log = Path(tmp) / "output.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log, "w") as out:
            proc = subprocess.Popen([sys.executable, "-m", "harness.runner", "--worker", str(Path(tmp) / "job.json")],
                                    cwd=str(REPO), env=env, stdout=out, stderr=subprocess.STDOUT)
            rc = _wait(proc, log, progress)
        printed = log.read_text(errors="replace")
        result_file = Path(job["out"])
        if result_file.exists():
            results = [RunnerResult(**{**r, "shape": tuple(r["shape"])}) for r in json.loads(result_file.read_text())]
        else:  # the worker died before it wrote (a crash in the file's host code, the emulator killed)
            results = [RunnerResult("cannot-run", str(submission), problem, tuple(shape), mode,
                                    construct=f"the worker process ended with exit status {rc} before its verdict "
                                              f"(a crash in the file's host code?)", message=printed[-2000:])
                       for shape, mode, *_ in cases]
        for r in results:
            r.output = printed[-6000:]
        return results


def _wait(proc, log: Path, progress) -> int:
    """Wait for the worker, passing its progress lines ("runner: ...") to `progress`."""
    seen = 0
    while True:
        try:
            rc = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        if progress:
            text = log.read_text(errors="replace")
            for line in text[seen:].splitlines():
                if line.startswith("runner: "):
                    progress(line[len("runner: "):])
            seen = len(text) - len(text.rsplit("\n", 1)[-1])
        if rc is not None:
            return rc


# ----------------------------------------------------------------------------- the worker
@functools.lru_cache(maxsize=32)  # a file launches the same few kernels on every call and schedule
def kernel_forms(ptx: str) -> tuple | None:
    """emu.forms of a launched kernel's PTX, sorted (calibration/ptx_ledger.py compares kernels by them)."""
    from emu.forms import forms
    from emu.state import EmulatorError

    try:
        return tuple(sorted(forms(ptx)))
    except EmulatorError:
        return None


def is_package_kernel(path) -> bool:
    """Whether the file is this package's kernel (submission.py or a modified copy: it defines DualGemmKernel and
    compile_config), which tools/emulate.py runs config by config through harness.verdict; any other file goes
    through the runner."""
    tree = ast.parse(Path(path).read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    return {"DualGemmKernel", "compile_config"} <= names


def say(text: str) -> None:
    print(f"runner: {text}", flush=True)


def uses_module(path: Path, name: str) -> bool:
    """Whether the file imports `name` (or a submodule of it) anywhere."""
    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == name for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == name and not node.level:
            return True
    return False


def host_regions(standins: list) -> list[tuple[int, int]]:
    """(address, bytes), disjoint and sorted, of every memory a kernel may be handed: each live torch tensor's storage
    (the file's, the inputs, whatever its host code allocated and still holds), each cudaMalloc of the stand-ins, and
    of a storage harness.bridges made lazily (LAZY_STORAGES: tens of gigabytes, mostly never touched) the extents of
    the tensors that view it. Overlapping ranges merge (a storage within a cudaMalloc)."""
    import torch

    from .bridges import LAZY_STORAGES

    ranges = []
    with warnings.catch_warnings():  # isinstance asks some of gc's objects for a deprecated __class__
        warnings.simplefilter("ignore")
        tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
    for obj in tensors:
        if obj.device.type != "cpu" or obj.is_meta:
            continue
        try:
            storage = obj.untyped_storage()
        except (RuntimeError, NotImplementedError):
            continue
        if not storage.data_ptr() or not storage.nbytes():
            continue
        if storage.data_ptr() not in LAZY_STORAGES:
            ranges.append((storage.data_ptr(), storage.nbytes()))
        elif obj.numel() and obj.nbytes < storage.nbytes():  # a view of a lazy storage: its own extent
            span = 1 + sum((n - 1) * abs(st) for n, st in zip(obj.shape, obj.stride()))
            ranges.append((obj.data_ptr(), span * obj.element_size()))
    for s in standins:
        ranges += s.allocations()
    merged = []
    for base, size in sorted(ranges):
        if merged and base <= merged[-1][0] + merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], base + size - merged[-1][0]))
        else:
            merged.append((base, size))
    return merged


def host_memory(regions):
    """An emulator GlobalMemory whose allocations are the host memory of `regions` (live views, no copy)."""
    import numpy as np

    from emu import GlobalMemory

    gmem = GlobalMemory()
    for base, size in regions:
        gmem.attach(base, np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(base)))
    return gmem


class Worker:
    """The runner's process: the bridges, the file, the launches of each call, the verdict."""

    def __init__(self, job: dict):
        from .bridges import Bridges
        from .problems import get_problem

        self.job = job
        self.path = Path(job["submission"])
        self.problem = get_problem(job["problem"])
        self.bridges = Bridges()
        self.standins = []  # every StandIns of this process (the CUDA one, one per exported DSL function)
        self.extensions = []  # harness.cuda_build.Extension built for the file
        self.exports = {}  # id(compiled DSL function) -> (compiled, ExportedFunction)
        self.cuda = None  # the StandIns of libemu_cuda.so, loaded with the first extension
        self.result = None  # the current case's RunnerResult
        self.variant = {}  # the engine variant's cost overrides a timed call runs under (job["variants"])
        self.case = None  # the current case: {"shape", "mode", "input_seed"}
        self.call = None  # the current call's state (begin_call)

    # ---- the bridges' callbacks
    def exported(self, compiled):
        from .dsl_export import ExportedFunction

        hit = self.exports.get(id(compiled))
        if hit is None:
            import cutlass

            folder = Path(tempfile.mkdtemp(prefix="dsl_export_", dir=self.tmp))
            fn = ExportedFunction(compiled, folder, self.on_launch, str(getattr(cutlass, "__version__", "")))
            hit = self.exports[id(compiled)] = (compiled, fn)
            self.standins.append(fn.standins)
        return hit[1]

    def loaded(self, extension) -> None:
        from .host import StandIns, cuda_standin_dir

        self.extensions.append(extension)
        if self.cuda is None:
            lib = ctypes.CDLL(str(cuda_standin_dir() / "libemu_cuda.so"), mode=ctypes.RTLD_GLOBAL)
            self.cuda = StandIns(lib, self.find_cuda_code, self.on_launch)
            self.standins.append(self.cuda)

    def find_cuda_code(self, name: str, image: bytes, module_path: str):
        from emu.ptx import select_entry

        from .host import code_from_image

        for ext in self.extensions:
            if module_path and Path(module_path).resolve() != ext.library.resolve():
                continue
            ptx = ext.kernel_ptx(name)
            if ptx is not None:
                return code_from_image(select_entry(ptx, name), name, image, ext.compiler)
        raise LookupError(f"no PTX of kernel {name} among the extensions built ({module_path})")

    # ---- one call of custom_kernel
    def begin_call(self, schedule, c_address: int) -> None:
        # stores: (address, bytes) the check of C trusts; excluded: those it must not (a cluster that read what no
        # emulated cluster wrote, an atomic sum other clusters add to); unknown: merged (start, end) of global bytes a
        # later launch cannot know, with why (clusters of an earlier launch not emulated write them)
        self.call = {"schedule": schedule, "launches": [], "stopped": None, "previous_writes": [c_address],
                     "stores": [], "excluded": [], "unknown": [], "why": "", "per_call_us": 0.0, "timed": []}

    def on_launch(self, cap) -> None:
        """A launch the file's host code just made: run it (or, after a failed one, record it only), with torch as it
        is (the file's calls run under harness.bridges.TorchAsCuda)."""
        import torch
        from torch.utils._python_dispatch import _disable_current_modes

        with torch._C.DisableTorchFunction(), _disable_current_modes():
            self.run_launch(cap)

    def run_launch(self, cap) -> None:
        from emu import run_kernel

        from .verdict import is_b200

        call = self.call
        if call is None:
            raise RuntimeError("a kernel launch outside custom_kernel (at import): the emulator runs the calls only")
        index = len(call["launches"])
        call["launches"].append(LaunchRecord(cap.kernel_name, tuple(cap.grid), tuple(cap.block), tuple(cap.cluster),
                                             cap.dynamic_smem, cap.registers, cap.static_smem, cap.dsl_version,
                                             len(cap.params), kernel_forms(cap.ptx)))
        if call["stopped"] is not None or not self.job["emulate"]:
            return
        say(f"launch {index}: {cap.kernel_name[:70]} grid {cap.grid} block {cap.block} cluster {cap.cluster} "
            f"smem {cap.dynamic_smem}")
        gmem = host_memory(host_regions(self.standins))
        if self.job["timing"] or is_b200(call["schedule"]):
            self.timed_launch(cap, gmem, index)
            return
        run = run_kernel(cap, gmem, clusters=self.job["clusters"], schedule=call["schedule"],
                         prerequisite_writes=call["previous_writes"], unknown=spans(call["unknown"]))
        self.after_run(run.status, run.message, run.machine, run.clusters_run, run.clusters_total, index)

    def timed_launch(self, cap, gmem, index: int) -> None:
        from emu.timing import costs as cost_table
        from emu.timing.call import timed_run

        call = self.call
        costs = cost_table.load(overrides={**self.variant, **self.job["costs"]}, prior=self.job["prior_costs"])
        trace = self.job["trace"]
        # the B200-timing schedule of a verdict on every cluster simulates every cluster, not one per wave
        full = self.job["full_grid"] or (not self.job["timing"] and self.job["clusters"] == "all")
        timed = timed_run(cap, gmem, costs, call["schedule"].seed, full, bool(trace),
                          prerequisite_writes=call["previous_writes"], unknown=spans(call["unknown"]),
                          load_spread=getattr(call["schedule"], "spread", None))
        if timed.status == "completed":
            call["per_call_us"] += timed.per_call_us
            call["timed"].append({"launch": index, "line": timed.line(), "per_call_us": round(timed.per_call_us, 3),
                                  "kernel_us": round(timed.kernel_us, 3), "start_us": round(timed.start_us, 3),
                                  "phases_us": {k: round(v, 3) for k, v in timed.phases_us.items()},
                                  "utilisation": {k: round(v, 4) for k, v in timed.utilisation.items()},
                                  "binds": timed.binds, "waves": timed.waves})
            if trace:
                path = Path(trace) if index == 0 else Path(trace).with_name(f"{Path(trace).stem}.{index}"
                                                                           f"{Path(trace).suffix}")
                path.parent.mkdir(parents=True, exist_ok=True)
                meta = {"label": "timed", "kernel": cap.kernel_name, "line": timed.line()}
                timed.trace.chrome(path, costs.us(1), timed.machine.marks, meta)
                timed.trace.png(path.with_suffix(".png"))
        self.after_run(timed.status, timed.message, timed.machine, timed.clusters_simulated, timed.clusters_total,
                       index)

    def after_run(self, status, message, machine, clusters_run, clusters_total, index: int) -> None:
        call = self.call
        if machine is not None:
            call.setdefault("notes", {}).update({(n.rule, n.where): n for n in machine.notes.values()})
            call["printed"] = call.get("printed", []) + machine.printed[:PRINTED_KEPT]
            call["printed_count"] = call.get("printed_count", 0) + len(machine.printed)
            for key, value in machine.stats.items():
                call.setdefault("stats", {})[key] = call.get("stats", {}).get(key, 0) + value
            self.sort_stores(machine, clusters_run < clusters_total, index)
            written = sorted({machine.gmem.allocation(addr)[0] for addr, _ in machine.store_log})
            call["previous_writes"] = written
        call["clusters"] = (call.get("clusters", (0, 0))[0] + clusters_run, call.get("clusters", (0, 0))[1]
                            + clusters_total)
        if status != "completed":
            call["stopped"] = (status, f"launch {index}: {message}")

    def sort_stores(self, machine, sampled: bool, index: int) -> None:
        """The launch's stores split into what the check of C may trust and what it may not, and the global bytes a
        later launch of the call cannot know (harness/runner.py's module docstring, step 4): a sampled launch's
        clusters not emulated may write any byte of an allocation its emulated clusters wrote; a tainted cluster's
        stores (it read such bytes) and, sampled, an atomic's bytes (a sum the other clusters add to) are unknown too."""
        call = self.call
        tainted = machine.tainted
        clean = [st for st, cid in zip(machine.store_log, machine.store_clusters) if cid not in tainted]
        dirty = [st for st, cid in zip(machine.store_log, machine.store_clusters) if cid in tainted]
        atomics = list(machine.atomic_log) if sampled else []
        call["stores"] += clean
        call["excluded"] += dirty + atomics
        if tainted and not call["why"]:
            cid, read = next(iter(tainted.items()))
            call["why"] = (f"launch {index}'s cluster {cid} {read}, which clusters of an earlier launch that were not "
                           "emulated write")
        elif atomics and not call["why"]:
            call["why"] = f"launch {index} adds to them with atomics from clusters that were not emulated too"
        if not (sampled or dirty or call["unknown"]):
            return  # every cluster ran on known memory: nothing later launches cannot know
        unknown = merge_spans(call["unknown"] + to_spans(dirty) + to_spans(atomics))
        if sampled:
            allocations = {machine.gmem.allocation(addr) for addr, _ in clean}
            unknown = merge_spans(unknown + [(base, base + size) for base, size in allocations])
        atomic = set(atomics)
        call["unknown"] = subtract_spans(unknown, to_spans([st for st in clean if st not in atomic]))

    # ---- the file and its verdict
    def run(self) -> list[RunnerResult]:
        """Import the file once, then run every case of the job; a result per case."""
        from .bridges import DeviceBridge, dsl_environment, install_dsl, install_load_inline

        t0 = time.time()
        self.tmp = tempfile.mkdtemp(prefix="emu_runner_work_")
        self.start_case(self.job["cases"][0])
        try:
            if uses_module(self.path, "cutlass"):
                dsl_environment(Path(self.tmp) / "dsl_dump")
                install_dsl(self.bridges, self.exported)
            install_load_inline(self.bridges, self.loaded)
            for folder in (self.problem_dir(), REPO):
                if str(folder) not in sys.path:
                    sys.path.insert(0, str(folder))
            say(f"importing {self.path.name}")
            with DeviceBridge(self.bridges):
                spec = importlib.util.spec_from_file_location("submission", self.path)
                module = importlib.util.module_from_spec(spec)
                sys.modules["submission"] = module
                spec.loader.exec_module(module)
            if not hasattr(module, "custom_kernel"):
                self.cannot_run("the file defines no custom_kernel(data)", "")
        except Exception as e:  # noqa: BLE001 (whatever the file or its build raises is reported, not a traceback)
            self.failed(e)
        if self.result.status == "cannot-run":  # the import failed: every case with it
            self.finish_case(t0)
            return [RunnerResult(**{**asdict(self.result), "shape": tuple(c["shape"]), "mode": c["mode"]})
                    for c in self.job["cases"]]
        results = []
        for case in self.job["cases"]:
            t1 = time.time()
            if results:
                self.start_case(case)
            self.run_case(module)
            self.finish_case(t1 if results else t0)
            results.append(self.result)
        return results

    def start_case(self, case: dict) -> None:
        self.case = case
        self.result = RunnerResult("match", str(self.path), self.problem.name, tuple(case["shape"]), case["mode"],
                                   allow_notes=self.job["allow_notes"])
        self.call = None
        for s in self.standins:
            s.errors.clear()
            s.refusals.clear()
            s.limits.clear()

    def finish_case(self, t0: float) -> None:
        self.result.seconds = time.time() - t0
        self.result.bridges = self.bridges.lines()
        self.result.refusals = [r for s in self.standins for r in s.refusals]

    def run_case(self, module) -> None:
        """The verdict's schedules on the current case, each one call of custom_kernel. With the B200-timing schedules
        first: a failure under any of them is the verdict; a failure only a seeded schedule reaches after they matched
        is RACE, the schedule and the failure named (design.md "Verdict and schedules")."""
        from .verdict import is_b200, schedules_for

        m, n, k, l = self.case["shape"]
        say(f"case {m}x{n}x{k}x{l} {self.case['mode']}")
        try:
            plan = schedules_for(self.case["schedules"])
            checked = 0
            for schedule in plan:
                if not self.one_call(module, schedule):
                    timed_ones = ", ".join(s.name for s in plan[:plan.index(schedule)] if is_b200(s))
                    if is_b200(plan[0]) and not is_b200(schedule) and self.result.status in RACES:
                        self.result.race = {"schedule": schedule.name, "status": self.result.status,
                                            "message": self.result.message}
                        self.result.status, self.result.checked_elements = "race", checked
                        self.result.message = (f"C matched under the B200's modeled timing ({timed_ones}); under "
                                               f"{schedule.name}: {self.result.message}")
                    elif is_b200(schedule) and schedule.spread is not None:
                        self.result.message = (f"under {schedule.name} (the B200's modeled timing, each warp's global "
                                               f"loads taking between an L2 hit's and a first HBM read's latency; "
                                               f"C matched under {timed_ones}): {self.result.message}")
                    break
                checked = self.result.checked_elements
            figures = {}
            for variant in self.job.get("variants", []):  # each a call of its own, on fresh inputs
                adopted = self.result.timed
                self.variant = variant["overrides"]
                self.one_call(module, schedules_for(self.case["schedules"])[0])
                self.result.runs.pop()  # the verdict's runs are the adopted engine's
                figures[variant["name"]] = self.result.timed.get("per_call_us")
                self.result.timed, self.variant = adopted, {}
            if figures:
                self.result.timed["variants"] = figures
        except Exception as e:  # noqa: BLE001
            self.failed(e)

    def problem_dir(self) -> Path:
        from problem_files import problem_dir

        return problem_dir(self.problem.name)

    def one_call(self, module, schedule) -> bool:
        """One call of custom_kernel under `schedule`, checked; whether the verdict goes on."""
        import torch

        from .bridges import DeviceBridge, DeviceWork

        t1 = time.time()
        reference = self.problem.reference()
        m, n, k, l = self.case["shape"]
        data = reference.generate_input(m, n, k, l, self.case["input_seed"], mode=self.case["mode"], device="cpu")
        c = data[self.problem.data_index["c"]]
        c.fill_(float("nan"))
        say(f"schedule {schedule.name}: custom_kernel")
        self.begin_call(schedule, c.data_ptr())
        work = DeviceWork()
        with DeviceBridge(self.bridges), work:
            out = module.custom_kernel(data)
        call = self.call
        self.result.torch_work = dict(work.ops)
        for s in self.standins:
            if s.errors:
                raise RuntimeError(s.errors[0])
        run = {"schedule": schedule.name, "launches": len(call["launches"])}
        if not self.result.launches:
            self.result.launches = [asdict(x) for x in call["launches"]]
        self.result.notes = list({(n["rule"], n["where"]): n for n in self.result.notes + [
            {"rule": n.rule, "where": n.where, "precedent": n.precedent, "detail": n.detail}
            for n in call.get("notes", {}).values()]}.values())
        self.result.stats = call.get("stats", {})
        self.result.clusters_run, self.result.clusters_total = call.get("clusters", (0, 0))
        if not self.result.runs and call.get("printed_count"):  # what the first schedule's threads printed
            self.result.printed = call["printed"][:PRINTED_KEPT]
            self.result.printed_count = call["printed_count"]
        refusal = next((s.last_refusal() for s in self.standins if s.last_refusal()), "")
        if refusal:
            status, message, checked = "launch", f"a B200 refuses this launch: {refusal}", 0
        elif not call["launches"]:
            status, message, checked = "mismatch", "custom_kernel launched no kernel", 0
        elif not self.job["emulate"]:
            status, message, checked = "captured", f"{len(call['launches'])} launch(es) recorded, none run", 0
        elif call["stopped"] is not None:
            (status, message), checked = call["stopped"], 0
        elif not isinstance(out, torch.Tensor):
            status, message, checked = "mismatch", f"custom_kernel returned a {type(out).__name__}, not a tensor", 0
        else:
            status, message, checked = self.check(reference, data, out, call)
            if status == "mismatch" and self.job["timing"] and call["clusters"][0] < call["clusters"][1]:
                # the timed emulator runs some clusters: where the output is finished by others (a K slice of a
                # split), what they stored cannot be told from a wrong element
                status, message = "unchecked", f"(the simulated clusters' stores are not all finished elements) {message}"
        if self.job["timing"] and status in ("match", "mismatch", "unchecked"):
            self.result.timed = {"per_call_us": round(call["per_call_us"], 3), "launches": call["timed"]}
        run.update(status=status, message=message, seconds=round(time.time() - t1, 2))
        self.result.runs.append(run)
        self.result.checked_elements = checked
        say(f"schedule {schedule.name}: {status} ({run['seconds']} s)")
        if status not in ("match", "captured"):
            self.result.status, self.result.message = status, message
            return False
        self.result.status = status
        return status == "match"

    def check(self, reference, data, out, call):
        """(status, message, elements checked): `out` against the reference, all of it when every cluster of every
        launch ran, else the elements the emulated clusters stored."""
        import numpy as np
        import torch

        from .problems import check_c, wrong_elements

        all_clusters = call["clusters"][0] == call["clusters"][1]
        if all_clusters and not call["excluded"]:
            expected = reference.ref_kernel(data)
            ok, msg = check_c(out, expected)
            return ("match" if ok else "mismatch"), msg, out.numel()
        written = written_elements(out, call["stores"])
        excluded = written_elements(out, call["excluded"]) if call["excluded"] else np.zeros_like(written)
        written &= ~excluded
        left_out = int(excluded.sum())
        self.result.unchecked = (f"{left_out} elements the emulated clusters stored are not checked: {call['why']}"
                                 if left_out else "")
        if not written.any():
            if left_out:
                return "unchecked", f"no element can be checked: {self.result.unchecked}", 0
            return "mismatch", "the emulated clusters stored no element of the output", 0
        m, n, l = out.shape
        checked = 0
        block = 128
        for b in range(l):
            for i in range(0, m, block):
                for j in range(0, n, block):
                    mask = written[i:i + block, j:j + block, b]
                    if not mask.any():
                        continue
                    rs, cs = slice(i, min(i + block, m)), slice(j, min(j + block, n))
                    want = self.problem.reference_tile(reference, data, rs, cs, b)
                    got = out[rs, cs, b]
                    sel = torch.from_numpy(np.ascontiguousarray(mask))
                    bad = wrong_elements(got, want) & sel
                    checked += int(mask.sum())
                    if bad.any():  # named by their coordinates in C, as the leaderboard's check names them
                        at = torch.nonzero(bad)
                        first = ", ".join(f"({i + int(r)}, {j + int(c)}, {b}) got {got[r, c].item():.6g} want "
                                          f"{want[r, c].item():.6g}" for r, c in at[:5])
                        rows, cols = at[:, 0] + i, at[:, 1] + j
                        return "mismatch", (f"rows {i}:{rs.stop} cols {j}:{cs.stop}: {len(at)} of {int(mask.sum())} "
                                            f"elements differ, rows {int(rows.min())}-{int(rows.max())}, columns "
                                            f"{int(cols.min())}-{int(cols.max())}; first at {first}"), checked
        return "match", f"{checked} elements stored by the emulated clusters" + (
            f"; {self.result.unchecked}" if left_out else ""), checked

    def cannot_run(self, construct: str, where: str, message: str = "") -> RunnerResult:
        self.result.status, self.result.construct, self.result.where = "cannot-run", construct, where
        self.result.message = message or construct
        return self.result

    def failed(self, e: BaseException) -> RunnerResult:
        """What the file (or its build, or the runner's host side) raised, as one line with where the file was."""
        from .bridges import where_in
        from .cuda_build import BuildError, UnsupportedHostCall, missing_symbol

        where = where_in(self.path, e)
        if isinstance(e, UnsupportedHostCall):
            symbol = missing_symbol(e.detail) or ""
            return self.cannot_run(e.construct, e.where or find_in_file(self.path, symbol) or where, str(e))
        if isinstance(e, BuildError):
            first = next((line for line in e.output.splitlines() if "error" in line.lower()), e.output[-300:])
            return self.cannot_run(f"the CUDA extension does not build with nvcc for sm_100a: {first.strip()}", where,
                                   e.output[-3000:])
        symbol = missing_symbol(str(e))
        if symbol:
            return self.cannot_run(f"the host code calls {symbol}, which the emulator's CUDA stand-ins do not "
                                   f"provide", where or find_in_file(self.path, symbol), str(e))
        if self.call is not None and self.call["stopped"] is not None:
            status, message = self.call["stopped"]
            self.result.status, self.result.message = status, message
            return self.result
        raised = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        limit = next((x for st in self.standins for x in st.limits), "")
        if limit:  # a B200's driver takes these arguments; the emulator cannot encode what it would
            return self.cannot_run(f"the emulator's stand-in cannot encode what a B200's driver would: {limit}", where,
                                   f"{limit}; the host code then raised {raised}")
        driver = next((x for st in self.standins for x in st.refusals), "")
        if driver:  # the driver refuses what the file asked, by its documented rules: the file's own failure
            self.result.status, self.result.where = "refused", where
            self.result.message = f"{driver}; the host code then raised {raised}"
            return self.result
        refusal = next((s.last_refusal() for s in self.standins if s.last_refusal()), "")
        if refusal:
            self.result.status, self.result.message = "launch", f"a B200 refuses this launch: {refusal}"
            return self.result
        inner = next((err for st in self.standins for err in st.errors), "")  # what failed inside a callback
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]
        return self.cannot_run(why + (f" ({inner[:400]})" if inner else ""), where, str(e)[-3000:])


def to_spans(stores) -> list:
    """(address, bytes) -> merged (start, end)."""
    return merge_spans([(a, a + n) for a, n in stores if n])


def merge_spans(spans) -> list:
    """Sorted disjoint (start, end) covering every span given."""
    out = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def subtract_spans(spans, cut) -> list:
    """Merged `spans` less merged `cut`."""
    out, j = [], 0
    for lo, hi in spans:
        while j < len(cut) and cut[j][1] <= lo:
            j += 1
        k = j
        while lo < hi:
            if k >= len(cut) or cut[k][0] >= hi:
                out.append((lo, hi))
                break
            if cut[k][0] > lo:
                out.append((lo, cut[k][0]))
            lo = max(lo, cut[k][1])
            k += 1
    return out


def spans(merged) -> list:
    """Merged (start, end) -> (address, bytes)."""
    return [(lo, hi - lo) for lo, hi in merged]


def written_elements(out, stores):
    """Boolean [shape of out]: the elements of `out` whose first byte one of `stores` ((address, bytes), the
    machines' store logs) wrote."""
    import numpy as np
    import torch

    base = out.data_ptr()
    span = (1 + sum((n - 1) * st for n, st in zip(out.shape, out.stride()))) * out.element_size()  # the view's bytes
    hit = np.zeros(span + 1, np.int32)
    for addr, size in stores:
        lo, hi = max(addr, base), min(addr + size, base + span)
        if lo < hi:
            hit[lo - base] += 1
            hit[hi - base] -= 1
    covered = np.cumsum(hit[:-1]) > 0
    # each element's offset from out's first, in elements: out's own view over an arange
    offsets = torch.as_strided(torch.arange(span // out.element_size()), out.shape, out.stride())
    return covered[offsets.numpy() * out.element_size()]


def find_in_file(path: Path, symbol: str) -> str:
    """file:line of the first line of the file that names the function `symbol` (its name without arguments)."""
    name = symbol.split("(")[0].split("::")[-1]
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if name and name in line:
            return f"{Path(path).name}:{i}"
    return ""


def worker_main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    results = Worker(job).run()
    Path(job["out"]).write_text(json.dumps([asdict(r) for r in results], default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(worker_main(sys.argv[2]))
    print("usage: python -m harness.runner --worker JOB.json (internal: harness.runner.run_submission)", file=sys.stderr)
    sys.exit(2)
