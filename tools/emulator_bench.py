#!/usr/bin/env python3
"""The SM100 emulator's own speed on fixed workloads, and the schedules it runs as digests.

    python tools/emulator_bench.py [--workloads verdicts,public,timed] [--tree DIR ...] [--rounds N] [--json PATH]
    python tools/emulator_bench.py hashes [--write | --tree DIR] [--jobs N]

bench (the default): each workload in a fresh process, its CPU time (user time of the emulation alone: compiles are
cached beforehand and left out), the warp-instructions it emulated and their rate, one line per run, then a table
with the median per workload, and the machine (CPUs, CPU model, Python, numpy, load average before and after: a
machine others use gives noisy rates). With several --tree (checkouts of this repository, e.g. the commit before a
change exported with `git archive REV | tar -x -C DIR`), each round runs every workload on every tree in turn (A B A
B ...), so a before/after comparison shares the machine's load; the table gives each tree's median and its speed-up
over the first tree. The workloads (every figure "emulated": what the emulator did, nothing about a B200):
  verdicts  each CONFIG_TABLE config's six-schedule default verdict at the small shape test_correctness.py runs
            (strict inputs), as the README's no-GPU job runs it;
  public    two public leaderboard files through the generic runner (harness/runner.py) at the problem's smallest
            test shape, six schedules, every cluster: novus677's kernel 9 (CUDA, load_inline) and arseni_ivanov's
            (CuTe DSL); sources from $PUBLIC_SOURCES (calibration/public.py; skipped where absent); the CPU time is
            the runner's worker's less that of a capture-only run of the same file (its imports, build and host
            code);
  timed     one timed leaderboard call of CONFIG_TABLE's 256x3072x4096 entry (harness.timed, representative
            clusters), with its timed figure (which must not move).

hashes: what each schedule ran, as digests (emu.machine.TraceHash: every (CTA, warp, PC) issued and every
asynchronous completion, and the C left), for each CONFIG_TABLE config at its small shape over seven schedules (every
policy of emu.machine.POLICIES), against tests/data/trace_hashes.json (--write records it; a kernel whose PTX differs
from the recorded one cannot be compared: re-record it with a trusted emulator); --tree DIR compares this tree's
digests with those DIR's emulator gives (the same kernel). Work on the emulator's speed must leave every digest
unchanged. Exit 0 when all are equal.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "trace_hashes.json"
HASH_SCHEDULES = 7  # harness.verdict.schedules_for(7): the default verdict's six, then starve_warp: every policy once
TIMED_SHAPE = (256, 3072, 4096, 1)
SMALLEST_TEST_SHAPE = (256, 512, 256, 1)
# Public files (calibration/b200_points.json names both): (label, repository, commit, path)
PUBLIC = (("cuda", "novus677/nvfp4_dual_gemm", "4670b25423deb35866db475bfd1cc0bd9f34a6e4", "submission.py"),
          ("dsl", "Ozamatash/nvfp4_gpumode", "1dc9713c534731093125c3ce7adb180da2bcfe9c", "dual_gemm/others/arseni.py"))


# ----------------------------------------------------------------------------- the machine
def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy

    return {"cpus": os.cpu_count(), "cpu_model": model, "python": platform.python_version(),
            "numpy": numpy.__version__, "load_average": list(os.getloadavg())}


def machine_line(info: dict, after: dict | None = None) -> str:
    load = " / ".join(f"{x:.2f}" for x in info["load_average"])
    tail = f", after {' / '.join(f'{x:.2f}' for x in after['load_average'])}" if after else ""
    return (f"machine: {info['cpus']} CPUs ({info['cpu_model']}), Python {info['python']}, numpy {info['numpy']}; "
            f"load average (1/5/15 min) before {load}{tail}")


# ----------------------------------------------------------------------------- workloads (run in a worker process)
def _user_time(who=resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_utime


def _table_configs():
    import submission

    return list(submission.CONFIG_TABLE.values())


def workload_names(kinds) -> list[str]:
    names = []
    for kind in kinds:
        if kind == "verdicts":
            names += [f"verdict:{c.name}" for c in _table_configs()]
        elif kind == "public":
            names += [f"public:{label}" for label, *_ in PUBLIC]
        elif kind == "timed":
            names.append("timed")
        else:
            raise SystemExit(f"unknown workload kind {kind!r} (verdicts, public, timed)")
    return names


def small_shape(config) -> tuple:
    """test_correctness.py's small shape for config in this process's tree (harness.verdict.small_shape; trees before
    the first-contact work of 2026-11-29, such as the base 2222f4d, kept it as test_correctness.emulator_small_shape)."""
    try:
        from harness.verdict import small_shape as shape_of
    except ImportError:
        from test_correctness import emulator_small_shape as shape_of
    return shape_of(config)


def run_workload(name: str) -> dict:
    """Run one workload in this process (its tree on sys.path); what it did and its CPU time."""
    kind, _, arg = name.partition(":")
    if kind == "verdict":
        from harness.verdict import emulate, prepare

        config = next(c for c in _table_configs() if c.name == arg)
        shape = small_shape(config)
        prepare(*shape, config_name=arg)  # the compile and capture, cached, outside the timed part
        t0 = _user_time()
        res = emulate(*shape, config_name=arg)
        cpu = _user_time() - t0
        return {"verdict": res.verdict, "cpu_s": cpu, "warp_instructions": sum(r.stats.get("warp_instructions", 0)
                                                                               for r in res.runs),
                "schedules": len(res.runs), "shape": list(shape)}
    if kind == "public":
        from calibration.public import sources_dir
        from harness.runner import run_cases, run_submission
        from harness.verdict import schedules_for

        label, repo, commit, path = next(p for p in PUBLIC if p[0] == arg)
        local = sources_dir() / repo / commit / path
        if not local.exists():
            return {"skipped": f"{local} is absent (python -m calibration.public sources)"}
        run_submission(local, SMALLEST_TEST_SHAPE, emulate=False)  # build and capture once, outside the timed part
        t0 = _user_time(resource.RUSAGE_CHILDREN)
        run_submission(local, SMALLEST_TEST_SHAPE, emulate=False)
        host = _user_time(resource.RUSAGE_CHILDREN) - t0
        # the default verdict's six schedules, a case each (one worker): each case's result counts its own instructions
        cases = [(SMALLEST_TEST_SHAPE, "strict", 1111, [s.name]) for s in schedules_for(None)]
        t0 = _user_time(resource.RUSAGE_CHILDREN)
        results = run_cases(local, cases, allow_notes=True)
        cpu = _user_time(resource.RUSAGE_CHILDREN) - t0 - host
        verdicts = sorted({r.verdict for r in results})
        return {"verdict": ", ".join(verdicts), "cpu_s": cpu, "schedules": len(results), "host_cpu_s": host,
                "warp_instructions": sum(r.stats.get("warp_instructions", 0) for r in results),
                "file": f"{repo}@{commit[:8]} {path}"}
    if kind == "timed":
        from harness.timed import timed_emulate
        from harness.verdict import prepare

        prepare(*TIMED_SHAPE)
        t0 = _user_time()
        res, timed = timed_emulate(*TIMED_SHAPE)
        cpu = _user_time() - t0
        return {"verdict": res.verdict, "cpu_s": cpu, "warp_instructions": res.stats.get("warp_instructions", 0),
                "schedules": 1, "timed_us": timed.per_call_us if timed else None}
    raise SystemExit(f"unknown workload {name}")


def worker(name: str, tree: str) -> int:
    os.chdir(tree)
    sys.path.insert(0, tree)
    os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")
    out = run_workload(name)
    print("EMU_BENCH " + json.dumps(out), flush=True)
    return 0


def spawn(args: list[str], tree: Path) -> dict:
    """This file's worker in a fresh process, importing `tree`'s emulator; its JSON line."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args, "--worker-tree", str(tree)],
                          cwd=str(tree), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1"))
    for line in proc.stdout.splitlines():
        if line.startswith("EMU_BENCH "):
            return json.loads(line[len("EMU_BENCH "):])
    return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"}


# ----------------------------------------------------------------------------- bench
def bench(args) -> int:
    trees = [Path(t).resolve() for t in (args.tree or [REPO])]
    sys.path.insert(0, str(trees[-1]))
    names = workload_names(args.workloads.split(","))
    before = machine()
    print(machine_line(before), flush=True)
    runs = {}  # (workload, tree) -> [result]
    for rnd in range(args.rounds):
        for name in names:
            for tree in trees:
                r = spawn(["--worker", name], tree)
                runs.setdefault((name, str(tree)), []).append(r)
                if "cpu_s" in r:
                    rate = r["warp_instructions"] / r["cpu_s"] if r["cpu_s"] > 0 else 0
                    extra = f", timed {r['timed_us']} us" if r.get("timed_us") is not None else ""
                    print(f"round {rnd + 1} {name} [{tree}]: {r['verdict']}, {r['warp_instructions']} "
                          f"warp-instructions in {r['cpu_s']:.2f} s CPU ({rate:,.0f} per s; {r['schedules']} "
                          f"schedule(s){extra})", flush=True)
                else:
                    print(f"round {rnd + 1} {name} [{tree}]: {r.get('skipped') or r.get('error')}", flush=True)
    after = machine()
    print(machine_line(before, after))
    rows = []
    header = "| workload | " + " | ".join(
        f"{t.name or t}: verdict, warp-instr., CPU s, warp-instr./s" + ("" if i == 0 else ", speed-up")
        for i, t in enumerate(trees)) + " |"
    print("\n" + header)
    print("|" + "---|" * (1 + len(trees)))
    for name in names:
        cells, base = [], None
        for i, tree in enumerate(trees):
            done = [r for r in runs[(name, str(tree))] if "cpu_s" in r]
            if not done:
                cells.append("skipped")
                continue
            cpu = statistics.median(r["cpu_s"] for r in done)
            wi = done[0]["warp_instructions"]
            cell = f"{done[0]['verdict']}, {wi}, {cpu:.1f}, {wi / cpu:,.0f}" if cpu > 0 else f"{done[0]['verdict']}"
            if done[0].get("timed_us") is not None:
                cell += f" (timed {done[0]['timed_us']} us)"
            if i == 0:
                base = cpu
            elif base:
                cell += f", {base / cpu:.2f}x"
            cells.append(cell)
            rows.append({"workload": name, "tree": str(tree), "runs": done, "median_cpu_s": cpu,
                         "warp_instructions": wi})
        print(f"| {name} | " + " | ".join(cells) + " |")
    verdicts = [n for n in names if n.startswith("verdict:")]
    if len(verdicts) > 1:
        print("| verdicts together | " + " | ".join(together(rows, [str(t) for t in trees], verdicts)) + " |")
    print("\nCPU s: user time of the emulation alone (median of the rounds), on the machine above: emulated work, "
          "CPU-timed")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine_before": before, "machine_after": after, "rows": rows},
                                              indent=1))
    return 0 if all("error" not in r for rs in runs.values() for r in rs) else 1


def together(rows: list, trees: list, verdicts: list) -> list:
    """A cell per tree: the verdict workloads' warp-instructions, CPU s and rate together (issue 37's target is stated
    on them together), and the speed-up over the first tree; "incomplete" where a workload has no run."""
    cells, base = [], None
    for i, tree in enumerate(trees):
        mine = [r for r in rows if r["tree"] == tree and r["workload"] in verdicts]
        cpu, wi = sum(r["median_cpu_s"] for r in mine), sum(r["warp_instructions"] for r in mine)
        if len(mine) < len(verdicts) or cpu <= 0:
            cells.append("incomplete")
            continue
        base = cpu if i == 0 else base
        cells.append(f"{wi}, {cpu:.1f}, {wi / cpu:,.0f}" + (f", {base / cpu:.2f}x" if i and base else ""))
    return cells


# ----------------------------------------------------------------------------- hashes
def config_hashes(name: str, schedules=None) -> dict:
    """The digests of one CONFIG_TABLE config's HASH_SCHEDULES schedules at its small shape (this process's tree), or
    of `schedules` ("policy:seed" names) only."""
    from harness.verdict import emulate, prepare

    config = next(c for c in _table_configs() if c.name == name)
    shape = small_shape(config)
    prep = prepare(*shape, config_name=name)
    res = emulate(*shape, config_name=name, schedules=schedules or HASH_SCHEDULES, stop_at_failure=False, digest=True)
    return {"shape": list(shape), "ptx": hashlib.blake2b(prep.cap.ptx.encode(), digest_size=16).hexdigest(),
            "dsl": prep.cap.dsl_version,
            "schedules": {r.schedule: {"status": r.status, "notes": len(r.notes), **r.digest} for r in res.runs}}


def compare(name: str, want: dict, got: dict, schedules=None) -> list[str]:
    """Lines saying where two records of one config differ ([] when equal); `schedules`: only those of want's."""
    if want.get("ptx") != got.get("ptx"):
        return [f"{name}: the kernel's PTX differs from the recorded one (DSL {want.get('dsl')} -> {got.get('dsl')}): "
                "its schedules cannot be compared; re-record with a trusted emulator (tools/emulator_bench.py hashes "
                "--write)"]
    out = []
    for sched, w in want["schedules"].items():
        if schedules is not None and sched not in schedules:
            continue
        g = got["schedules"].get(sched)
        if g != w:
            out.append(f"{name} {sched}: recorded {w}, now {g}")
    return out


def hashes(args) -> int:
    sys.path.insert(0, str(REPO))
    names = [c.name for c in _table_configs()] if not args.configs else args.configs.split(",")
    from concurrent.futures import ThreadPoolExecutor

    def one(job):
        name, tree = job
        return spawn(["--worker-hashes", name], tree)

    jobs = [(n, REPO) for n in names] + ([(n, Path(args.tree).resolve()) for n in names] if args.tree else [])
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=args.jobs or os.cpu_count()) as pool:  # each job is its own process
        results = list(pool.map(one, jobs))
    mine = dict(zip(names, results[:len(names)]))
    errors = [f"{n}: {r['error']}" for n, r in mine.items() if "error" in r]
    if args.tree:
        theirs = dict(zip(names, results[len(names):]))
        errors += [f"{n} ({args.tree}): {r['error']}" for n, r in theirs.items() if "error" in r]
        reference, what = theirs, f"the emulator of {args.tree}"
    elif args.write:
        about = ("tools/emulator_bench.py hashes --write: each CONFIG_TABLE config at its small shape, seven schedules "
                 "(emu.machine.TraceHash digests of what ran, and of C)")
        FIXTURE.write_text(json.dumps({"about": about, "configs": mine}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {FIXTURE.relative_to(REPO)}: {len(mine)} configs x {HASH_SCHEDULES} schedules "
              f"({time.time() - t0:.0f} s)")
        return 1 if errors else 0
    else:
        reference, what = json.loads(FIXTURE.read_text())["configs"], str(FIXTURE.relative_to(REPO))
    diffs = list(errors)
    for n in names:
        if n in reference and "error" not in mine[n] and "error" not in reference[n]:
            diffs += compare(n, reference[n], mine[n])
    total = sum(len(r.get("schedules", {})) for r in mine.values())
    for line in diffs:
        print("DIFF  " + line)
    print(f"{'identical' if not diffs else 'DIFFERENT'}: {len(names)} configs, {total} schedules against {what} "
          f"({time.time() - t0:.0f} s)")
    return 0 if not diffs else 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker-tree" in argv:  # a worker process: run one workload or one config's hashes, print one JSON line
        i = argv.index("--worker-tree")
        tree = argv[i + 1]
        del argv[i:i + 2]
        if argv[0] == "--worker":
            return worker(argv[1], tree)
        os.chdir(tree)
        sys.path.insert(0, tree)
        print("EMU_BENCH " + json.dumps(config_hashes(argv[1])), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="bench", choices=("bench", "hashes"))
    ap.add_argument("--workloads", default="verdicts,public,timed", help="bench: kinds, comma-separated")
    ap.add_argument("--tree", action="append", default=None,
                    help="bench: a checkout to measure (repeatable; default this one); hashes: compare with this "
                         "checkout's emulator")
    ap.add_argument("--rounds", type=int, default=1, help="bench: runs of every workload on every tree")
    ap.add_argument("--json", default=None, help="bench: write the runs here")
    ap.add_argument("--write", action="store_true", help="hashes: record tests/data/trace_hashes.json")
    ap.add_argument("--configs", default=None, help="hashes: CONFIG_TABLE config names (default all)")
    ap.add_argument("--jobs", type=int, default=None, help="hashes: processes at once (default one per CPU)")
    args = ap.parse_args(argv)
    if args.command == "hashes":
        if args.tree and len(args.tree) > 1:
            ap.error("hashes takes one --tree")
        args.tree = args.tree[0] if args.tree else None
        return hashes(args)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
