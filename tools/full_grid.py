#!/usr/bin/env python3
"""CONFIG_TABLE's configs at their benchmark shapes, every cluster, both input generators, in the SM100 emulator.

    python tools/full_grid.py [--problem nvfp4_gemm] [--shapes M,N,K[,L];...] [--schedules N] [--jobs N] [--json PATH]

For each benchmark shape of the problem's CONFIG_TABLE: the config's verdict over every cluster of the real launch
(148 SMs), strict data under the default verdict (six schedules; --schedules N for N) and the leaderboard's data under
one schedule, as test_correctness.py judges its small shapes. The runs are independent and take one worker process
per CPU (--jobs); each prints a progress line as its clusters finish, then the verdicts come in table order with
their times. Every result is "emulated". Hours of CPU at six schedules: a tool for a kernel change, not for CI.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


class Progress:
    """Prints a run's progress from its worker process: a line at most every `every` seconds, and at the end."""

    def __init__(self, label: str, every: float = 30.0):
        self.label, self.every, self.start, self.last = label, every, None, 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.time()
        if self.start is None:
            self.start = now
        if done == total or now - self.last >= self.every:
            self.last = now
            print(f"....  {self.label}: {done}/{total} clusters ({now - self.start:.0f} s)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", choices=("nvfp4_dual_gemm", "nvfp4_gemm"), default="nvfp4_dual_gemm")
    ap.add_argument("--shapes", default=None, help="M,N,K[,L] separated by ';' (default: every CONFIG_TABLE shape)")
    ap.add_argument("--schedules", type=int, default=None, help="strict data's schedules (default: the six-schedule "
                                                                 "verdict)")
    ap.add_argument("--modes", default="strict,leaderboard")
    ap.add_argument("--jobs", type=int, default=None, help="runs at once, a worker process each (default: one per CPU)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from harness.verdict import emulate_in_order, load_submission
    from test_correctness import LEADERBOARD_SCHEDULES

    sub = load_submission(REPO / "submission.py")
    table = sub.GEMM_CONFIG_TABLE if args.problem == "nvfp4_gemm" else sub.CONFIG_TABLE
    shapes = list(table)
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
        shapes = [shape + (1,) * (4 - len(shape)) for shape in shapes]
    calls = []
    for shape in shapes:
        config = table.get(shape) or (sub.config_for(*shape, args.problem) if args.problem == "nvfp4_gemm"
                                      else sub.config_for(*shape))
        for mode in args.modes.split(","):
            m, n, k, l = shape
            label = f"{config.name} {m}x{n}x{k}x{l} {mode}"
            calls.append({"m": m, "n": n, "k": k, "l": l, "config_name": config.name, "mode": mode,
                          "clusters": "all", "problem": args.problem, "progress": Progress(label),
                          "schedules": args.schedules if mode == "strict" else LEADERBOARD_SCHEDULES})
    start, rows, failed = time.time(), [], 0
    for call, res in zip(calls, emulate_in_order(calls, args.jobs)):
        print(f"{'PASS' if res.passed else 'FAIL'}  {res.summary()}", flush=True)
        for line in res.note_lines():
            print("      " + line)
        if not res.passed and res.status != "match":
            print("      " + " ".join(res.message.split())[:400], flush=True)
        failed += not res.passed
        rows.append({"config": res.config, "shape": list(res.shape), "mode": res.mode, "verdict": res.verdict,
                     "clusters": f"{res.clusters_run}/{res.clusters_total}",
                     "schedules": [r.schedule for r in res.runs],
                     "warp_instructions": sum(r.stats.get("warp_instructions", 0) for r in res.runs),
                     "seconds": round(res.seconds, 1)})
    print(f"emulated full grid: {len(rows) - failed} of {len(rows)} runs pass ({time.time() - start:.0f} s wall, "
          f"{args.jobs or 'one per CPU'} worker(s))")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"label": "emulated", "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
