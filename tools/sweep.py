#!/usr/bin/env python3
"""Every TUNE_SPACE config on the leaderboard's test shapes, in the SM100 emulator (no GPU).

    python tools/sweep.py [--clusters 2] [--modes strict,leaderboard] [--configs NAME,...] [--jobs N] [--json PATH]

Each test shape of task.yml keeps its real M, N, K (so the grid, the persistent schedule and the
k-loop are the real ones); to stay affordable only --clusters clusters of each run are emulated, chosen
by the seed, and only the C tiles they write are compared with reference.py. Configs that cannot
implement a shape are listed as such. The runs take one worker process per CPU (--jobs). Prints one line per run
(labelled "emulated", in the same order whatever the workers) and a table; exit 0 only if every run matches.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", default="2", help="clusters emulated per run ('all' for every one)")
    ap.add_argument("--modes", default="strict,leaderboard")
    ap.add_argument("--configs", default=None, help="comma-separated config names (default: all of TUNE_SPACE)")
    ap.add_argument("--shapes", default="tests", choices=("tests", "benchmarks", "both"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--submission", default=str(REPO / "submission.py"))
    ap.add_argument("--jobs", type=int, default=None, help="runs at once, a worker process each (default: one per CPU)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from harness.verdict import emulate_in_order, load_submission
    from utils import load_task

    sub = load_submission(Path(args.submission))
    task = load_task(REPO / "task.yml")
    shapes = []
    if args.shapes in ("tests", "both"):
        shapes += [(c["m"], c["n"], c["k"], c.get("l", 1)) for c in task["tests"]]
    if args.shapes in ("benchmarks", "both"):
        shapes += [(c["m"], c["n"], c["k"], c.get("l", 1)) for c in task["benchmarks"]]
    shapes = list(dict.fromkeys(shapes))
    configs = list(sub.TUNE_SPACE)
    if args.configs:
        wanted = set(args.configs.split(","))
        configs = [c for c in configs if c.name in wanted]
    plan, calls = [], []  # (a row of a pair the config cannot implement, or the call of a run), in sweep order
    for cfg in configs:
        for shape in shapes:
            ok, why = sub.DualGemmKernel.can_implement(cfg, *shape)
            if not ok:
                plan.append({"config": cfg.name, "shape": shape, "status": "n/a", "why": why})
                continue
            for mode in args.modes.split(","):
                m, n, k, l = shape
                calls.append({"m": m, "n": n, "k": k, "l": l, "config_name": cfg.name, "mode": mode,
                              "sched_seed": args.seed, "submission": args.submission, "clusters": args.clusters})
                plan.append(calls[-1])
    rows, failed, results = [], 0, emulate_in_order(calls, args.jobs)
    for item in plan:
        if "status" in item:
            rows.append(item)
            continue
        res = next(results)
        print(f"{'PASS' if res.status == 'match' else 'FAIL'}  {res.summary()}", flush=True)
        if res.status != "match":
            failed += 1
            print("      " + res.message.splitlines()[0][:300], flush=True)
        rows.append({"config": item["config_name"], "shape": res.shape, "mode": item["mode"], "status": res.status,
                     "clusters": f"{res.clusters_run}/{res.clusters_total}", "seconds": round(res.seconds, 1),
                     "checked_elements": res.checked_elements})
    ran = [r for r in rows if r["status"] != "n/a"]
    print(f"\nemulated sweep: {len(ran) - failed} of {len(ran)} runs match, {failed} fail; "
          f"{len(rows) - len(ran)} (config, shape) pairs the config cannot implement")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"label": "emulated", "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
