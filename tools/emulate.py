#!/usr/bin/env python3
"""Run submission.py's compiled kernel in the SM100 emulator (no GPU needed) and check C; with --timing, time it.

    python tools/emulate.py --shape M,N,K[,L] [--config NAME] [--mode strict|leaderboard] [--seed S]
                            [--schedules N | --schedule POLICY:SEED ...] [--submission PATH]
                            [--clusters all|N] [--sm-count N] [--json PATH]
    python tools/emulate.py --timing --shape M,N,K[,L] [--config NAME] [--submission PATH] [--json PATH]
                            [--trace PATH] [--full-grid] [--costs FILE] [--cost NAME=VALUE ...]
    python tools/emulate.py --timing --calibration --sources DIR [--jobs N] [--no-refit] [--cost NAME=VALUE ...]
                            [--report PREFIX]
    python tools/emulate.py --problem nvfp4_gemm --shape M,N,K [--timing] ...   # the single GEMM (leaderboard 597)

Compiles the kernel from PATH (default submission.py) with config NAME (default: config_for(shape)),
captures its real host-side launch (a launch a B200 would refuse ends there), runs every warp of the chosen
clusters in the emulator (emu/) under several schedules, and compares C with reference.py under the
leaderboard's tolerance after each. The verdict is MATCH only if every schedule matched.
Schedules: by default harness.verdict.DEFAULT_SCHEDULES (uniform, producer_first, consumer_first, late_wake,
slow_async, starve_role; seeds 0-5 shifted by --seed); --schedules N runs N schedules, those six first, then
every policy of emu.machine.POLICIES in turn; --schedule POLICY:SEED (repeatable) runs exactly those.
Small shapes (at most 32 CTA tiles) run on a reduced SM count unless --sm-count is given, so each cluster
walks several tiles and the shared-memory ring and accumulator stages wrap.
Exit 0: match; 1: mismatch (first mismatches shown); 2: deadlock, hazard, launch refused or unsupported
instruction (with the report). Every result is "emulated": it says what the PTX computes under the PTX ISA's
semantics as the emulator implements them, nothing about B200 timing.
A file that is not this package's kernel runs through harness/runner.py (its own host code and launches): first
under the B200-timing schedules `b200` (the launch on the timed emulator's machine), `b200~1` and `b200~2` (the
same, each warp's global loads spread between an L2 hit's and a first HBM read's latency; --no-b200 skips the
three), then the seeded ones. Its verdicts add RACE (matched under all three, a seeded schedule reached a failure:
the race named with that schedule; passes with --allow-notes, as notes do), REFUSED (the CUDA driver refused the
host code's arguments, exit 2) and UNCHECKED (with --clusters N, no checked element whose inputs were all
emulated; exit 3); design.md "Verdict and schedules", "Any submission".

--timing runs the timed emulator (emu/timing): one leaderboard call in steady state (the launch gap and what
programmatic dependent launch overlaps included), representative clusters with bandwidth shares (--full-grid: every
cluster), costs from emu/timing/b200.yaml with its fitted rows at their fitted values (--prior-costs: at their
priors; --costs FILE: an overrides file such as tools/profile.py's fit; --cost NAME=VALUE overrides a row, after
FILE). It also checks C for the clusters it
simulates. It prints "timed: X.XX us per call (...; binds: ...)": a timed figure, not a measurement, and the error
band docs/timing_calibration.md measured for it.
--trace PATH writes a Chrome trace (open in https://ui.perfetto.dev) and PATH.png (matplotlib, the test extra): a row
per warp role and unit of each simulated CTA, what the warps issue by kind, the call's phases, the binding resources.
--json PATH writes the timed call (tools/phases.py reads it back).
--calibration judges the timed emulator on public B200 version logs (calibration/timing.py): every point of
calibration/b200_points.json timed from its public source in DIR, the fit on the fit points, the report in
docs/timing_calibration.md (and .json).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# Every timed figure of nvfp4_gemm carries this (docs/timing_calibration.md: the timed emulator's two fitted rows were
# fitted on public B200 points of gau-nernst's nvfp4_gemm kernels).
GEMM_TIMED_CAVEAT = ("nvfp4_gemm: the timed emulator's fitted constants were fitted on gau-nernst's nvfp4_gemm v0, v3b "
                     "and v4 (public B200 points), so these figures are not independent of that kernel family")


def parse_shape(text: str) -> tuple:
    parts = [int(x) for x in text.split(",")]
    if len(parts) == 3:
        parts.append(1)
    if len(parts) != 4:
        raise argparse.ArgumentTypeError("--shape takes M,N,K or M,N,K,L")
    return tuple(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=parse_shape, default=None, help="M,N,K[,L] (required except with --calibration)")
    ap.add_argument("--config", default=None, help="a TUNE_SPACE / CONFIG_TABLE config name (default: config_for)")
    ap.add_argument("--mode", choices=("strict", "leaderboard"), default="strict", help="input generator")
    ap.add_argument("--problem", choices=("nvfp4_dual_gemm", "nvfp4_gemm"), default="nvfp4_dual_gemm",
                    help="the leaderboard problem: its reference, operands and configs (default nvfp4_dual_gemm; "
                         "nvfp4_gemm: GEMM_TUNE_SPACE / GEMM_CONFIG_TABLE names)")
    ap.add_argument("--seed", type=int, default=0, help="added to every schedule's seed (warp order, async completion "
                                                        "order)")
    ap.add_argument("--schedules", type=int, default=None,
                    help="run N schedules: the default verdict's 6 first, then every scheduling policy in turn")
    ap.add_argument("--schedule", action="append", default=None, metavar="POLICY:SEED",
                    help="run this schedule (repeatable); policies: emu.machine.POLICIES")
    ap.add_argument("--input-seed", type=int, default=1111, help="reference.generate_input seed")
    ap.add_argument("--submission", default=str(REPO / "submission.py"),
                    help="the kernel file: this package's submission.py or a modified copy (run config by config), or "
                         "any leaderboard submission file (run as the leaderboard runs it: README, 'Your own "
                         "submission without a B200')")
    ap.add_argument("--generic", action="store_true",
                    help="run this package's submission.py as any other file (custom_kernel with its own launches)")
    ap.add_argument("--clusters", default="all", help="'all' or N: emulate N clusters chosen by the seed; "
                                                      "only the tiles they write are checked")
    ap.add_argument("--sm-count", type=int, default=None,
                    help="compile with this SM count (fewer SMs: every CTA runs several tiles); default: reduced for "
                         "small shapes, 148 otherwise. With --timing: the grid a GPU holding fewer clusters gets "
                         "(submission.max_active_clusters), the engine still a B200 of 148 SMs")
    ap.add_argument("--dsl", default="default", metavar="VERSION",
                    help="compile with the venv's nvidia-cutlass-dsl (default) or with release VERSION, installed in "
                         ".venv/dsl by `bash tools/setup.sh --dsl VERSION` (harness.dsl)")
    ap.add_argument("--host-path", choices=("tvm_ffi", "pointer"), default=None,
                    help="the launcher to capture: custom_kernel's TVM-FFI entry or its pointer fallback (default: the "
                         "one custom_kernel takes here: TVM-FFI where apache-tvm-ffi imports, else the pointer path)")
    ap.add_argument("--b200", action=argparse.BooleanOptionalAction, default=True,
                    help="another author's file (not with --timing): run the B200-timing schedules (the timed "
                         "emulator's machine: b200, and b200~1, b200~2 with spread global-load latencies) before the "
                         "seeded ones; a failure only the seeded ones reach is RACE, not the "
                         "failure (design.md \"Verdict and schedules\"); --no-b200: the seeded schedules alone")
    ap.add_argument("--allow-notes", action="store_true",
                    help="a MATCH with notes passes (exit 0): for third-party kernels; by default notes fail, as they "
                         "must for the kernel under development")
    ap.add_argument("--prior-costs", action="store_true",
                    help="with --timing: the cost table's prior values for its fitted rows (the default is the fitted "
                         "values, to which the published error band belongs)")
    ap.add_argument("--json", default=None, help="write the result here")
    ap.add_argument("--timing", action="store_true", help="time one leaderboard call in the timed emulator")
    ap.add_argument("--trace", default=None, help="with --timing: write a Chrome trace here and a PNG beside it")
    ap.add_argument("--full-grid", action="store_true", help="with --timing: simulate every cluster, not one per wave")
    ap.add_argument("--costs", default=None, metavar="FILE",
                    help="with --timing: an overrides file ('overrides: {row: value}', e.g. tools/profile.py's fit)")
    ap.add_argument("--cost", action="append", default=[], metavar="NAME=VALUE",
                    help="with --timing: override a row of emu/timing/b200.yaml (repeatable)")
    ap.add_argument("--variants", default="all",
                    help="with --timing: the kept engine variants to time beside the adopted engine "
                         "(calibration/engine_variants.json): all (default), none, or names separated by commas")
    ap.add_argument("--calibration", action="store_true",
                    help="with --timing: judge the timed emulator on the public B200 points (needs --sources)")
    ap.add_argument("--sources", default=None, help="with --calibration: folder of the public kernels' sources")
    ap.add_argument("--jobs", type=int, default=1, help="with --calibration: points timed in parallel")
    ap.add_argument("--no-refit", action="store_true", help="with --calibration: prior table only, no fit")
    ap.add_argument("--no-prior", action="store_true",
                    help="with --calibration: skip the prior table's pass (a hypothesis run judges the fitted times)")
    ap.add_argument("--set", default=None, choices=["heldout2", "heldout3"], dest="point_set",
                    help="with --calibration: time only the fit points and this declared set's points "
                         "(heldout2: calibration/heldout2.json, with the kernel-9 points its deltas end on; heldout3: "
                         "calibration/heldout3.json, with the first set's 512-row points its pairs name)")
    ap.add_argument("--report", default=None, metavar="PREFIX",
                    help="with --calibration: write PREFIX.json and PREFIX.md instead of docs/timing_calibration.* "
                         "(a hypothesis run: --cost NAME=VALUE sets its switches, docs/timing_hypotheses.md)")
    args = ap.parse_args(argv)
    os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")
    if args.calibration:
        if not (args.timing and args.sources):
            ap.error("--calibration goes with --timing and --sources DIR")
        if args.point_set and not args.report:
            ap.error("--set goes with --report PREFIX (docs/timing_calibration.* is the whole judgement's report)")
        from calibration import timing as judge

        switches = {name: float(value) for name, _, value in (item.partition("=") for item in args.cost)}
        report = (Path(f"{args.report}.json"), Path(f"{args.report}.md")) if args.report else None
        result = judge.run(args.sources, jobs=args.jobs, refit=not args.no_refit, switches=switches, report=report,
                           with_prior=not args.no_prior, point_set=args.point_set)
        s = result["summary"]
        if not args.point_set:
            print(f"timed vs measured (B200): held-out median |error| {s['timed_fitted_us:holdout'].get('median_abs', 0):.1%}, "
                  f"max {s['timed_fitted_us:holdout'].get('max_abs', 0):.1%}; held-out delta RMS "
                  f"{s['timed_fitted_us:deltas'].get('rms', 0):.1%} (no change {s['no_change:deltas'].get('rms', 0):.1%}); "
                  f"report {report[1] if report else judge.REPORT_MD.relative_to(REPO)}")
        if "heldout:timed_fitted_us" in s:
            print(judge.heldout_line(s["heldout:timed_fitted_us"]))
        if "heldout2:timed_fitted_us" in s:
            print(judge.set_line(s["heldout2:timed_fitted_us"]))
        if "heldout3:timed_fitted_us" in s:
            print(judge.set_line(s["heldout3:timed_fitted_us"], "third set"))
        return 0
    if args.shape is None:
        ap.error("--shape M,N,K[,L] is required")

    m, n, k, l = args.shape
    from harness.runner import is_package_kernel

    if args.generic or not is_package_kernel(args.submission):
        for flag, default in (("config", None), ("sm_count", None), ("dsl", "default"), ("host_path", None)):
            if getattr(args, flag) != default:
                ap.error(f"--{flag.replace('_', '-')} is for this package's kernel; {args.submission} runs as the "
                         f"leaderboard runs it (custom_kernel, its own launches)")
        return _generic(args)
    if args.timing:
        return _timed(args)
    from harness.verdict import emulate

    t0 = time.time()

    def progress(done, total):
        if time.time() - t0 > 3:
            print(f"  cluster {done}/{total} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    if args.schedules is not None and args.schedule:
        ap.error("--schedules and --schedule are alternatives")
    res = emulate(m, n, k, l, config_name=args.config, mode=args.mode, sched_seed=args.seed,
                  submission=args.submission, clusters=args.clusters, sm_count=args.sm_count,
                  progress=progress, input_seed=args.input_seed, dsl=args.dsl, host_path=args.host_path,
                  schedules=args.schedule if args.schedule else args.schedules, allow_notes=args.allow_notes,
                  problem=args.problem)
    print(res.summary())
    for line in res.note_lines():
        print("  " + line)
    if res.status != "match":
        print(res.message)
    elif not res.passed:
        print("notes fail the kernel under development (each names a rule of the PTX ISA it breaks and the "
              "B200-verified kernel that breaks it too); --allow-notes accepts them")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "label": "emulated", "status": res.status, "config": res.config, "shape": res.shape, "mode": res.mode,
            "message": res.message, "seconds": round(res.seconds, 2), "clusters_run": res.clusters_run,
            "clusters_total": res.clusters_total, "checked_elements": res.checked_elements, "stats": res.stats,
            "launch": res.launch, "notes": [vars(n) for n in res.notes], "scheduler_seed": args.seed,
            "schedules": [{"schedule": r.schedule, "status": r.status, "seconds": round(r.seconds, 2)} for r in res.runs],
            "input_seed": args.input_seed, "submission": args.submission, "problem": args.problem}, indent=2))
    return res.exit_code


def _generic(args) -> int:
    """Any submission file through harness.runner: its custom_kernel, its own launches (tools/emulate.py's docstring)."""
    from harness.runner import run_submission

    t0 = time.time()
    schedules = args.schedule if args.schedule else args.schedules
    overrides = {}
    if args.timing:
        from emu.timing import costs as cost_table

        overrides = cost_table.read_overrides(args.costs) if args.costs else {}
        overrides.update({name: float(value) for name, _, value in (item.partition("=") for item in args.cost)})
    res = run_submission(args.submission, args.shape, problem=args.problem, mode=args.mode,
                         input_seed=args.input_seed, schedules=schedules, sched_seed=args.seed,
                         clusters=args.clusters, allow_notes=args.allow_notes, timing=args.timing, costs=overrides,
                         prior_costs=args.prior_costs, full_grid=args.full_grid, trace=args.trace,
                         variants=_other_variants(args), b200=args.b200,
                         progress=lambda line: print(f"  {line} ({time.time() - t0:.0f} s)", file=sys.stderr,
                                                     flush=True))
    print(res.summary())
    for launch in res.launches:
        print(f"  launch: {launch['kernel'][:80]} grid {tuple(launch['grid'])} block {tuple(launch['block'])} cluster "
              f"{tuple(launch['cluster'])} dynamic smem {launch['dynamic_smem']} B, static {launch['static_smem']} B, "
              f"{launch['registers']} registers ({launch['built_by']})")
    for line in res.bridges + res.refusals + res.note_lines() + res.printed_lines():
        print("  " + line)
    if res.status not in ("match", "cannot-run"):
        print(res.message)
    elif res.status == "match" and not res.passed:
        print("notes fail unless --allow-notes (each names a rule of the PTX ISA it breaks and the B200-run kernel "
              "that breaks it too)")
    if res.status == "cannot-run" and res.message and res.message != res.construct:
        print("  " + " ".join(res.message.split())[:600])
    if not args.timing and args.b200:  # the verdict class's record against published B200 outcomes
        from calibration.outcomes import track_record

        record = track_record(res.status)
        if record:
            print(record)
    if args.timing and res.timed:
        for launch in res.timed["launches"]:
            print(f"  launch {launch['launch']}: {launch['line']}")
        print(f"timed: {res.timed['per_call_us']:.2f} us per call ({len(res.timed['launches'])} launch"
              f"{'es' if len(res.timed['launches']) != 1 else ''}; a model of a B200, not a measurement)")
        if res.timed.get("variants"):
            from calibration.timing import variants_line

            print("  " + variants_line({_adopted_name(): res.timed["per_call_us"], **res.timed["variants"]}))
        if res.torch_work:
            ops = ", ".join(f"{name} x{n}" for name, n in sorted(res.torch_work.items()))
            print(f"  not in that figure: the call's torch work ({ops}), kernels of their own on a B200")
        from calibration.timing import band_line, error_band

        print("  " + band_line(error_band()) + (" (measured without these overrides)" if overrides else ""))
    if args.json:
        from dataclasses import asdict

        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"label": "timed" if args.timing else "emulated", **asdict(res)},
                                              indent=2, default=str))
    return res.exit_code


def _adopted_name() -> str:
    from calibration.timing import variants

    return variants()[0]["name"]


def _other_variants(args) -> list:
    """The kept engine variants --variants asks for beside the adopted engine (--timing only)."""
    if not args.timing or args.variants == "none":
        return []
    from calibration.timing import variants

    chosen = variants(None if args.variants == "all" else args.variants.split(","))
    return [v for v in chosen if v["name"] != _adopted_name()]


def file_digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def timed_record(res, timed, problem: str, submission, overrides: dict, full_grid: bool, seconds: float) -> dict:
    """What --timing --json writes (tools/phases.py reads it back): the timed call, labelled "timed", with the digests
    of the submission and the cost table it was timed with."""
    from emu.timing import costs as cost_table

    return {"label": "timed", "problem": problem, "status": res.status, "config": res.config, "shape": list(res.shape),
            "mode": res.mode, "per_call_us": round(timed.per_call_us, 3), "kernel_us": round(timed.kernel_us, 3),
            "start_us": round(timed.start_us, 3), "phases_us": {k: round(v, 3) for k, v in timed.phases_us.items()},
            "utilisation": {k: round(v, 4) for k, v in timed.utilisation.items()}, "binds": timed.binds,
            "clusters_simulated": timed.clusters_simulated, "clusters_total": timed.clusters_total,
            "waves": timed.waves, "active_sms": timed.active_sms, "costs_overridden": overrides,
            "full_grid": full_grid, "submission_sha256": file_digest(submission),
            "cost_table_sha256": file_digest(cost_table.TABLE), "seconds": round(seconds, 1)}


def _timed(args) -> int:
    from emu.timing import costs as cost_table
    from harness.timed import timed_emulate

    overrides = cost_table.read_overrides(args.costs) if args.costs else {}
    for item in args.cost:
        name, _, value = item.partition("=")
        overrides[name] = float(value)
    costs = cost_table.load(overrides=overrides, prior=args.prior_costs)
    t0 = time.time()

    def progress(cycle, instructions, seconds):
        print(f"  {costs.us(cycle):.2f} us simulated, {instructions} warp-instructions ({seconds:.0f} s)",
              file=sys.stderr, flush=True)

    m, n, k, l = args.shape
    res, timed = timed_emulate(m, n, k, l, config_name=args.config, mode=args.mode, seed=args.input_seed,
                               submission=args.submission, costs=costs, full_grid=args.full_grid,
                               trace=bool(args.trace), progress=progress, sched_seed=args.seed, dsl=args.dsl,
                               host_path=args.host_path, problem=args.problem, sm_count=args.sm_count)
    print(res.summary())
    if res.status != "match":
        print(res.message)
    if timed is None or timed.status != "completed":
        return res.exit_code
    for name, value in sorted(timed.utilisation.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<22} busy {value:6.1%}")
    if args.trace:
        from emu.timing.trace import phase_bands

        Path(args.trace).parent.mkdir(parents=True, exist_ok=True)
        meta = {"label": "timed", "shape": [m, n, k, l], "config": res.config, "line": timed.line()}
        timed.trace.chrome(Path(args.trace), costs.us(1), timed.machine.marks, meta)
        picture = Path(args.trace).with_suffix(".png")
        title = (f"timed (the timed emulator: a model of a B200, not a measurement): {args.problem} {m}×{n}×{k}, "
                 f"{res.config}, {timed.per_call_us:.2f} μs per call\nbinding resources (busiest units): {timed.binds}; "
                 f"{timed.clusters_simulated} of {timed.clusters_total} clusters simulated (one per wave, with "
                 f"bandwidth shares)")
        try:
            timed.trace.png(picture, costs.us(1), title, phase_bands(timed.start_us, timed.phases_us))
        except RuntimeError as e:  # matplotlib missing: the JSON is written, the picture cannot be
            print(f"  trace: {args.trace} (Chrome trace JSON); no picture: {e}")
            return 2
        print(f"  trace: {args.trace} (Chrome trace JSON) and {picture}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        record = timed_record(res, timed, args.problem, args.submission, overrides, args.full_grid, time.time() - t0)
        Path(args.json).write_text(json.dumps(record, indent=2))
    print(timed.line())
    figures = {_adopted_name(): timed.per_call_us}
    for variant in _other_variants(args):
        _, other = timed_emulate(m, n, k, l, config_name=args.config, mode=args.mode, seed=args.input_seed,
                                 submission=args.submission, full_grid=args.full_grid, sched_seed=args.seed,
                                 dsl=args.dsl, host_path=args.host_path, problem=args.problem, sm_count=args.sm_count,
                                 costs=cost_table.load(overrides={**variant["overrides"], **overrides},
                                                       prior=args.prior_costs))
        if other is not None and other.status == "completed":
            figures[variant["name"]] = other.per_call_us
    if len(figures) > 1:
        from calibration.timing import variants_line

        print("  " + variants_line(figures))
    if args.problem == "nvfp4_gemm":
        print("  " + GEMM_TIMED_CAVEAT)
    if not args.prior_costs:  # the band belongs to the fitted table, not to the prior or to overridden rows
        from calibration.timing import band_line, error_band

        print("  " + band_line(error_band()) + (" (measured without these overrides)" if overrides else ""))
    return res.exit_code


if __name__ == "__main__":
    sys.exit(main())
