#!/usr/bin/env python3
"""Correctness check for submission.custom_kernel.

On an SM100 GPU (B200): every test case of task.yml with both input generators ("leaderboard" and "strict"),
then the leaderboard's benchmark-mode check (50 input sets, seed += 42 each) on every benchmark shape. The
output tensor c is filled with NaN before every call, so an element the kernel does not write fails.
With --configs all, every config of submission.TUNE_SPACE then runs on every test case it can implement.
One line per case, then a summary; exit 0 only if every case passes. A case that runs longer than
NVFP4_CASE_TIMEOUT_S (default 180 s; a deadlocked kernel never returns) ends the run with a traceback after
its "...." line.

Anywhere else the kernel cannot run. The script says why, then runs the offline and emulated checks:
  1. tools/preflight.py --quick: cross-compiles the kernel for sm_100a for every config the test and
     benchmark shapes use (no GPU needed);
  2. the reference's dequantisation path on small shapes in both modes, against an independent float64
     computation that decodes the raw bits and reads the scales from the permuted (kernel) tensors;
  3. the compiled kernel of each of those configs (with --configs all: of every TUNE_SPACE config) in the
     SM100 emulator (emu/, tools/emulate.py) on a small shape, both generators, under the emulator's default
     verdict (several schedules), through the launcher custom_kernel takes here: TVM-FFI, or its pointer
     fallback where apache-tvm-ffi is missing (as on the Modal runner); lines labelled "emulated". The runs are
     independent and take one worker process per CPU (--jobs N; 1 runs them here), their lines in the same order.
Exit 0 only if all pass.

--problem nvfp4_gemm checks the single GEMM (leaderboard nvfp4_gemm) the same way: nvfp4_gemm/task.yml's shapes, its
reference (nvfp4_gemm/reference.py, both generators), custom_kernel with the 7-tuple, GEMM_TUNE_SPACE for
--configs all. The dual GEMM (nvfp4_dual_gemm) is the default.

--submission FILE checks another leaderboard file (any author's, CuTe DSL or CUDA, unmodified): on a B200 the same
cases through its custom_kernel; elsewhere the reference's self-check, then the file in the SM100 emulator
(harness/runner.py, as tools/emulate.py --submission runs it) on every test case with both generators: its own
launches, `--clusters N` of each launch (default 2; `all` for every cluster) checked where they stored, the strict
generator under the default verdict, the leaderboard's under one schedule. --allow-notes passes a MATCH with notes
(for code that is not this package's, as in tools/emulate.py). Exit 3 when the emulator cannot run the file.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")  # as the leaderboard's eval sets it

import torch  # noqa: E402

import reference  # noqa: E402
from problem_files import load_reference, task_path  # noqa: E402
from utils import clone_data, load_task, verbose_allclose  # noqa: E402

PREFLIGHT = REPO / "tools" / "preflight.py"
NUM_BENCHMARK_INPUT_SETS = 50
# A kernel that deadlocks never returns control to Python: a watchdog thread (faulthandler's, which needs no
# GIL) ends the process after this many seconds in one case, naming the case on the way out.
CASE_TIMEOUT_S = float(os.environ.get("NVFP4_CASE_TIMEOUT_S", "180"))
SELF_CHECK_SHAPES = ((128, 128, 256, 1), (256, 384, 512, 2), (384, 256, 1024, 1), (128, 256, 7168, 1))


# --------------------------------------------------------------------------------------------------
# An independent float64 computation (shares no code with reference.py)
# --------------------------------------------------------------------------------------------------
def decode_e2m1_bits(codes: torch.Tensor) -> torch.Tensor:
    """4-bit e2m1 codes (any int tensor) -> float64 values, from the bit fields."""
    codes = codes.to(torch.int64)
    sign = 1.0 - 2.0 * ((codes >> 3) & 1).double()
    exp = ((codes >> 1) & 3).double()
    man = (codes & 1).double()
    magnitude = torch.where(exp == 0, 0.5 * man, torch.exp2(exp - 1) * (1.0 + 0.5 * man))
    return sign * magnitude


def decode_e4m3_bits(raw: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn bytes (uint8) -> float64 values, from the bit fields (0x7F/0xFF are NaN)."""
    raw = raw.to(torch.int64)
    sign = 1.0 - 2.0 * ((raw >> 7) & 1).double()
    exp = ((raw >> 3) & 15).double()
    man = (raw & 7).double()
    magnitude = torch.where(exp == 0, 2.0 ** -6 * man / 8.0, torch.exp2(exp - 7) * (1.0 + man / 8.0))
    magnitude = torch.where((exp == 15) & (man == 7), torch.full_like(magnitude, float("nan")), magnitude)
    return sign * magnitude


def _fp4_matrix_f64(packed: torch.Tensor) -> torch.Tensor:
    """[r, k//2] float4_e2m1fn_x2 -> [r, k] float64; element 2p is the low nibble of byte p."""
    raw = packed.view(torch.uint8).to(torch.int64)
    codes = torch.stack([raw & 15, raw >> 4], dim=-1).reshape(raw.shape[0], -1)
    return decode_e2m1_bits(codes)


def _scales_from_permuted_f64(permuted: torch.Tensor, mn: int, sf_k: int, b: int) -> torch.Tensor:
    """Read scale (i, j, b) from the [32, 4, rest_mn, 4, rest_k, l] tensor at
    [i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b] -> float64 [mn, sf_k]."""
    i = torch.arange(mn, device=permuted.device)[:, None]
    j = torch.arange(sf_k, device=permuted.device)[None, :]
    raw = permuted.view(torch.uint8)[i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b]
    return decode_e4m3_bits(raw)


def independent_reference(data) -> torch.Tensor:
    """float64 silu(A @ B1^T) * (A @ B2^T) [m, n, l] (nvfp4_gemm's 7-tuple: A @ B^T), scales taken from the permuted
    tensors."""
    if len(data) == 7:
        return _independent_gemm(data)
    a, b1, b2 = data[0], data[1], data[2]
    sfa_p, sfb1_p, sfb2_p = data[6], data[7], data[8]
    m, n, l = data[9].shape
    k = a.shape[1] * 2
    out = torch.empty((m, n, l), dtype=torch.float64, device=a.device)
    for b in range(l):
        def operand(packed, permuted, rows):
            scales = _scales_from_permuted_f64(permuted, rows, k // 16, b)
            return _fp4_matrix_f64(packed[:, :, b]) * scales.repeat_interleave(16, dim=1)
        a64 = operand(a, sfa_p, m)
        c1 = a64 @ operand(b1, sfb1_p, n).T
        c2 = a64 @ operand(b2, sfb2_p, n).T
        out[:, :, b] = c1 / (1.0 + torch.exp(-c1)) * c2
    return out


def _independent_gemm(data) -> torch.Tensor:
    """float64 A @ B^T [m, n, l] of nvfp4_gemm's 7-tuple (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)."""
    a, b, sfa_p, sfb_p, c = data[0], data[1], data[4], data[5], data[6]
    m, n, l = c.shape
    k = a.shape[1] * 2
    out = torch.empty((m, n, l), dtype=torch.float64, device=a.device)
    for batch in range(l):
        def operand(packed, permuted, rows):
            scales = _scales_from_permuted_f64(permuted, rows, k // 16, batch)
            return _fp4_matrix_f64(packed[:, :, batch]) * scales.repeat_interleave(16, dim=1)
        out[:, :, batch] = operand(a, sfa_p, m) @ operand(b, sfb_p, n).T
    return out


# --------------------------------------------------------------------------------------------------
# Where are we?
# --------------------------------------------------------------------------------------------------
def sm100_status() -> tuple[bool, str]:
    """(True, device description) on an SM100 GPU, else (False, why the kernel cannot run here)."""
    if not torch.cuda.is_available():
        return False, (f"no CUDA GPU is visible (torch {torch.__version__}, torch.cuda.is_available() is False); "
                       "the kernel is tcgen05 code for sm_100a and needs an SM100 GPU (B200)")
    major, minor = torch.cuda.get_device_capability()
    name = torch.cuda.get_device_name()
    if (major, minor) != (10, 0):
        return False, (f"the GPU is {name} (sm_{major}{minor}); the kernel is compiled for sm_100a and runs only "
                       "on SM100 (B200)")
    return True, f"{name} (sm_{major}{minor}), torch {torch.__version__}"


def _case_label(case, extra=""):
    return f"m={case['m']:<5} n={case['n']:<5} k={case['k']:<5} l={case['l']} seed={case['seed']}{extra}"


def _first_line(message: str, limit: int = 400) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= limit else message[:limit] + " ..."


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _call_poisoned(fn, data):
    """Run fn on a clone of data whose c (the last tensor, in both problems' tuples) is NaN-filled; return the output
    (synchronised)."""
    inputs = clone_data(data)
    inputs[-1].fill_(float("nan"))
    _sync()
    out = fn(inputs)
    _sync()
    return out


# --------------------------------------------------------------------------------------------------
# SM100: run the kernel
# --------------------------------------------------------------------------------------------------
def run_gpu_checks(task, modes=reference.MODES, kernel=None, ref=reference) -> tuple[int, int]:
    """Run `kernel` (default: submission.custom_kernel) on every case; print one line each; (passed, failed). `ref`: the
    problem's reference module."""
    custom_kernel = kernel
    if custom_kernel is None:
        try:
            from submission import custom_kernel
        except Exception as err:  # noqa: BLE001 - report any import failure as a failed case
            print(f"FAIL  import submission: {type(err).__name__}: {_first_line(err)}")
            return 0, 1
    passed = failed = 0

    def watch(label):
        print(f"....  {label}", flush=True)
        faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True, file=sys.__stderr__)

    def report(ok, label, message, seconds):
        faulthandler.cancel_dump_traceback_later()
        nonlocal passed, failed
        passed += ok
        failed += not ok
        tail = f"  {_first_line(message)}" if message else ""
        print(f"{'PASS' if ok else 'FAIL'}  {label}  ({seconds:.1f} s){tail}", flush=True)

    for idx, case in enumerate(task["tests"]):
        for mode in modes:
            label = f"test {idx:<2} {mode:<11} {_case_label(case)}"
            watch(label)
            start = time.perf_counter()
            try:
                data = ref.generate_input(**case, mode=mode)
                ok, message = ref.check_implementation(data, _call_poisoned(custom_kernel, data))
            except Exception as err:  # noqa: BLE001
                ok, message = False, f"{type(err).__name__}: {err}"
            report(ok, label, message, time.perf_counter() - start)

    for idx, case in enumerate(task["benchmarks"]):
        label = f"bench {idx} 50 sets     {_case_label(case, ' (seed+42*i)')}"
        watch(label)
        start = time.perf_counter()
        try:
            ok, message = True, ""
            seed = case["seed"]
            data_list = []
            for _ in range(NUM_BENCHMARK_INPUT_SETS):
                seed += 42  # the leaderboard bumps the seed before generating each set
                data_list.append(ref.generate_input(case["m"], case["n"], case["k"], case["l"], seed))
            outputs = [_call_poisoned(custom_kernel, data) for data in data_list]
            for set_idx, (data, out) in enumerate(zip(data_list, outputs)):
                good, why = ref.check_implementation(data, out)
                if not good:
                    ok, message = False, f"input set {set_idx}: {why}"
                    break
        except Exception as err:  # noqa: BLE001
            ok, message = False, f"{type(err).__name__}: {err}"
        report(ok, label, message, time.perf_counter() - start)
    return passed, failed


# --------------------------------------------------------------------------------------------------
# Offline checks
# --------------------------------------------------------------------------------------------------
def run_preflight(extra_args=("--quick",)) -> tuple[bool, str]:
    if not PREFLIGHT.exists():
        return False, (f"{PREFLIGHT.relative_to(REPO)} not found: the sm_100a cross-compile check is missing, so "
                       "nothing shows that the kernel compiles (the tools worker provides it)")
    cmd = [sys.executable, str(PREFLIGHT), *extra_args]
    print(f"---- {' '.join(['python', str(PREFLIGHT.relative_to(REPO)), *extra_args])}", flush=True)
    rc = subprocess.run(cmd, cwd=REPO).returncode
    print("---- end of preflight", flush=True)
    return rc == 0, f"exit code {rc}"


def reference_self_check(shapes=SELF_CHECK_SHAPES, device=None, ref=reference) -> tuple[int, int]:
    """The reference's dequantisation path against independent_reference, both modes (`ref`: the problem's reference
    module)."""
    passed = failed = 0
    for shape in shapes:
        for mode in ref.MODES:
            start = time.perf_counter()
            data = ref.generate_input(*shape, seed=7, mode=mode, device=device)
            got = ref.ref_kernel_dequant(data)
            want = independent_reference(data)
            reasons = verbose_allclose(got.double(), want, rtol=ref.RTOL, atol=ref.ATOL)
            if mode == "strict" and not torch.isfinite(want).all():
                reasons.append("strict data produced a non-finite output")
            ok = not reasons
            passed += ok
            failed += not ok
            m, n, k, l = shape
            tail = f"  {_first_line(' '.join(reasons))}" if reasons else ""
            print(f"{'PASS' if ok else 'FAIL'}  reference dequant vs float64  {mode:<11} m={m} n={n} k={k} l={l}  "
                  f"({time.perf_counter() - start:.2f} s){tail}", flush=True)
    return passed, failed


def config_kernel(config):
    """custom_kernel with its config forced to `config` (the tune space check); same checks first."""
    import submission

    def run(data):
        submission.check_inputs(data)
        launch = submission.compile_config(config)
        if len(data) == 7:  # nvfp4_gemm: (a, b, sfa_permuted, sfb_permuted, c)
            launch(data[0], data[1], data[4], data[5], data[6])
            return data[6]
        launch(data[0], data[1], data[2], data[6], data[7], data[8], data[9])
        return data[9]

    return run


def tune_space(problem: str = "nvfp4_dual_gemm") -> tuple:
    """The problem's TUNE_SPACE (nvfp4_gemm: GEMM_TUNE_SPACE)."""
    import submission

    return submission.GEMM_TUNE_SPACE if problem == "nvfp4_gemm" else submission.TUNE_SPACE


def tasks_per_config(task, configs):
    """(config, the test cases it can implement) for each config; benchmarks are left to tools/tune.py."""
    from submission import DualGemmKernel

    out = []
    for config in configs:
        tests = [c for c in task["tests"] if DualGemmKernel.can_implement(config, c["m"], c["n"], c["k"], c["l"])[0]]
        out.append((config, {"tests": tests, "benchmarks": []}))
    return out


def run_tune_space_checks(task, problem: str = "nvfp4_dual_gemm") -> tuple[int, int]:
    """Every config of submission.TUNE_SPACE (GEMM_TUNE_SPACE) on every test case it can implement, both generators."""
    passed = failed = 0
    for config, sub_task in tasks_per_config(task, tune_space(problem)):
        print(f"---- config {config.name}: {len(sub_task['tests'])} test shapes", flush=True)
        p, f = run_gpu_checks(sub_task, kernel=config_kernel(config), ref=load_reference(problem))
        passed += p
        failed += f
    return passed, failed


# The leaderboard's generator runs one schedule: its point is the leaderboard's data within tolerance, and the
# kernel's C does not depend on the schedule, while a race shows at least as well on strict data (every FP4 code,
# scales >= 1), which gets the default verdict.
LEADERBOARD_SCHEDULES = 1


def run_emulator_checks(configs, modes=reference.MODES, schedules=None, problem="nvfp4_dual_gemm",
                        jobs: int | None = 1) -> tuple[int, int]:
    """The compiled kernel of each config in the SM100 emulator (emu/), on a small shape, every generator, through
    the launcher custom_kernel uses here (harness.capture.default_host_path: its TVM-FFI entry where apache-tvm-ffi
    imports, else the pointer fallback): strict data under the emulator's default verdict (several schedules;
    harness.verdict.DEFAULT_SCHEDULES, or `schedules` of them), the leaderboard's data under LEADERBOARD_SCHEDULES. A
    capture the emulator cannot make on this machine is a SKIP line with the reason, not a failure. The runs are
    independent: `jobs` worker processes take them (None: one per CPU; 1: this process), the lines come in the same
    order either way (harness.verdict.emulate_in_order)."""
    from harness.capture import default_host_path
    from harness.verdict import emulate_in_order, small_shape

    host_path = default_host_path()
    if host_path == "pointer":
        print("emulator: apache-tvm-ffi is not importable here, so custom_kernel takes its pointer fallback: the "
              "emulated checks run that launcher", flush=True)
    calls = [{"m": m, "n": n, "k": k, "l": l, "config_name": config.name, "mode": mode, "sched_seed": 0,
              "host_path": host_path, "schedules": schedules if mode == "strict" else LEADERBOARD_SCHEDULES,
              "problem": problem}
             for config in configs for (m, n, k, l) in [small_shape(config)] for mode in modes]
    passed = failed = 0
    for res in emulate_in_order(calls, jobs):
        if res.status == "unsupported" and "cannot export" in res.message:
            print(f"SKIP  {res.summary()}\n      {_first_line(res.message)}", flush=True)
            continue
        ok = res.passed  # a MATCH with notes fails: the ISA does not promise what a note names
        print(f"{'PASS' if ok else 'FAIL'}  {res.summary()}", flush=True)
        for line in res.note_lines():
            print("      " + line)
        if not ok and res.status != "match":
            print("      " + _first_line(res.message))
        passed += ok
        failed += not ok
    return passed, failed


def run_file_checks(path, task, problem: str, clusters, allow_notes: bool,
                    schedules: int | None = None, b200: bool = True) -> tuple[int, int, bool]:
    """Another leaderboard file in the SM100 emulator (harness.runner, one worker for every case): each test case with
    both generators, strict data under the default verdict (or `schedules` schedules), the leaderboard's under
    LEADERBOARD_SCHEDULES, each after the B200-timing schedules (b200: b200, b200~1, b200~2, as tools/emulate.py runs
    them: a failure only the seeded schedules reach is RACE); one line per case, labelled emulated. (passed, failed,
    whether every failure was "cannot run")."""
    from harness.runner import run_cases

    cases = [((c["m"], c["n"], c["k"], c["l"]), mode, c["seed"], schedules if mode == "strict" else LEADERBOARD_SCHEDULES)
             for c in task["tests"] for mode in reference.MODES]
    print(f"emulator: {Path(path).name} on {len(cases)} cases (its own launches; {clusters} cluster(s) of each launch)",
          flush=True)

    def progress(line):
        if line.startswith("case "):
            print(f"....  {line}", flush=True)

    results = run_cases(path, cases, problem, clusters=clusters, allow_notes=allow_notes, progress=progress,
                        b200=b200)
    passed = failed = 0
    for res in results:
        ok = res.passed
        print(f"{'PASS' if ok else 'FAIL'}  {res.summary()}", flush=True)
        for line in res.note_lines():
            print("      " + line)
        if res.status not in ("match", "cannot-run"):
            print("      " + _first_line(res.message))
        passed += ok
        failed += not ok
    for line in results[0].bridges if results else []:
        print("      " + line)
    if b200:  # each verdict class met, with its record against published B200 outcomes
        from calibration.outcomes import track_record

        for status in dict.fromkeys(r.status for r in results):
            record = track_record(status)
            if record:
                print("      " + record)
    return passed, failed, all(r.passed or r.exit_code == 3 for r in results) and failed > 0


def configs_used_by(task, problem: str = "nvfp4_dual_gemm") -> list:
    """Every config custom_kernel may run for a test or benchmark shape, each once: the first call's chain
    (submission.config_chain: the table's choice on this GPU, its fallback where a GPU holds fewer clusters, the
    default rule's, the safe last resort)."""
    import submission

    seen = {}
    for case in task["tests"] + task["benchmarks"]:
        for cfg in submission.config_chain(case["m"], case["n"], case["k"], case["l"], problem):
            seen.setdefault(cfg.name, cfg)
    return list(seen.values())


def _is_this_package(path, problem: str) -> bool:
    """Whether --submission names the file this script checks by default (the problem's submission.py)."""
    own = REPO / ("nvfp4_gemm/submission.py" if problem == "nvfp4_gemm" else "submission.py")
    return Path(path).resolve() == own.resolve()


def check_file(args, task, ref, on_sm100: bool, where: str, start: float) -> int:
    """--submission FILE: another leaderboard file, on a B200 through its custom_kernel, elsewhere in the emulator."""
    import importlib.util

    if on_sm100 and not args.offline:
        print(f"device: {where}")
        spec = importlib.util.spec_from_file_location("submission", args.submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        passed, failed = run_gpu_checks(task, kernel=module.custom_kernel, ref=ref)
        print(f"summary: {passed} passed, {failed} failed ({time.perf_counter() - start:.0f} s)")
        return 0 if failed == 0 and passed > 0 else 1
    print(f"{Path(args.submission).name} cannot run here: {where}. Running the offline checks instead.")
    passed, failed = reference_self_check(ref=ref)
    clusters = args.clusters if args.clusters == "all" else int(args.clusters)
    p, f, cannot = run_file_checks(args.submission, task, args.problem, clusters, args.allow_notes, args.schedules,
                                   args.b200)
    passed, failed = passed + p, failed + f
    print(f"summary: {passed} passed, {failed} failed (reference and emulated checks; "
          f"{time.perf_counter() - start:.0f} s)")
    return 0 if failed == 0 else (3 if cannot else 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", choices=("nvfp4_dual_gemm", "nvfp4_gemm"), default="nvfp4_dual_gemm",
                        help="the leaderboard problem (default nvfp4_dual_gemm; nvfp4_gemm: the single GEMM, its "
                             "nvfp4_gemm/task.yml and reference)")
    parser.add_argument("--task", default=None, help="task file with the shapes (default: the problem's task.yml)")
    parser.add_argument("--offline", action="store_true", help="run the offline checks even on an SM100 GPU")
    parser.add_argument("--submission", default=None,
                        help="another leaderboard file to check (any author's, unmodified; default: this package's "
                             "submission.py): on a B200 its custom_kernel, elsewhere the SM100 emulator")
    parser.add_argument("--clusters", default="2",
                        help="with --submission off a B200: clusters emulated per launch (N, or 'all')")
    parser.add_argument("--allow-notes", action="store_true",
                        help="with --submission: a MATCH with notes passes (for code that is not this package's)")
    parser.add_argument("--b200", action=argparse.BooleanOptionalAction, default=True,
                        help="with --submission off a B200: run the B200-timing schedules (b200, b200~1, b200~2) "
                             "before the seeded ones, as tools/emulate.py does: a failure only the seeded ones reach "
                             "is RACE (passed with --allow-notes); --no-b200: the seeded schedules alone")
    parser.add_argument("--schedules", type=int, default=None,
                        help="off a B200: schedules of each emulated run on strict data (default: the emulator's "
                             "six-schedule verdict; fewer is quicker and finds fewer races)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="off a B200: emulated runs at once, each in a worker process (default: one per CPU, "
                             f"{os.cpu_count()} here; 1: one after the other in this process)")
    parser.add_argument("--configs", choices=("default", "all"), default="default",
                        help="default: custom_kernel as submitted; all: also every TUNE_SPACE config on every test "
                             "shape it can implement (after a kernel change; the tuner covers benchmark shapes)")
    args = parser.parse_args(argv)

    task = load_task(args.task or task_path(args.problem))
    ref = load_reference(args.problem)
    on_sm100, where = sm100_status()
    start = time.perf_counter()
    if args.submission is not None and not _is_this_package(args.submission, args.problem):
        return check_file(args, task, ref, on_sm100, where, start)
    if on_sm100 and not args.offline:
        print(f"device: {where}")
        gemm = {} if args.problem == "nvfp4_dual_gemm" else {"ref": ref}  # (the dual GEMM's calls keep their form)
        passed, failed = run_gpu_checks(task, **gemm)
        if args.configs == "all":
            p, f = run_tune_space_checks(task, *([] if args.problem == "nvfp4_dual_gemm" else [args.problem]))
            passed, failed = passed + p, failed + f
        print(f"summary: {passed} passed, {failed} failed ({time.perf_counter() - start:.0f} s)")
        return 0 if failed == 0 and passed > 0 else 1

    if on_sm100:
        print("offline checks requested (--offline)")
    else:
        print(f"the kernel cannot run here: {where}. Running the offline checks instead.")
    if args.configs == "all":
        print("--configs all: every TUNE_SPACE config runs in the SM100 emulator on a small shape (emulated, not "
              "measured); on a B200 the same flag runs them on the test shapes")
    passed = failed = 0
    ok, why = run_preflight()
    print(f"{'PASS' if ok else 'FAIL'}  preflight (sm_100a cross-compile of every test/benchmark config): {why}")
    passed += ok
    failed += not ok
    p, f = reference_self_check() if args.problem == "nvfp4_dual_gemm" else reference_self_check(ref=ref)
    passed += p
    failed += f
    try:
        import harness.verdict  # noqa: F401
        import submission
    except ImportError as e:
        print(f"FAIL  emulator: cannot import it ({e}); run from the repository root after tools/setup.sh")
        failed += 1
        print(f"summary: {passed} passed, {failed} failed (offline and emulated checks; {time.perf_counter() - start:.0f} s)")
        return 1
    configs = list(tune_space(args.problem)) if args.configs == "all" else configs_used_by(task, args.problem)
    jobs = args.jobs or os.cpu_count() or 1
    print(f"emulator: the compiled kernel of {len(configs)} config(s) on the CPU (tools/emulate.py; "
          f"{'every TUNE_SPACE config' if args.configs == 'all' else 'the configs the test and benchmark shapes use'}"
          f"; {jobs} worker process{'es' if jobs > 1 else ''})", flush=True)
    p, f = (run_emulator_checks(configs, schedules=args.schedules, jobs=jobs) if args.problem == "nvfp4_dual_gemm"
            else run_emulator_checks(configs, schedules=args.schedules, problem=args.problem, jobs=jobs))
    passed += p
    failed += f
    print(f"summary: {passed} passed, {failed} failed (offline and emulated checks; {time.perf_counter() - start:.0f} s)")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
