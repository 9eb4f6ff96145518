#!/usr/bin/env python3
"""One picture per problem: each benchmark shape's timed leaderboard call, split into its phases, beside the best
public entry's measured time and the speed of light.

    python tools/phases.py [--problem nvfp4_gemm] [--results FILE] [--timed JSON ...] [--retime] [--out PNG]

Per benchmark shape of the problem's task.yml (problem_files.task_path), three bars, each labelled with where its
number comes from:
- timed: submission.py's config for the shape in the timed emulator (tools/emulate.py --timing), one leaderboard call
  stacked by phase: the CTAs' start after the previous kernel, to the first load, to the first MMA, the mainloop,
  the tail (each the mean over the simulated CTAs, emu.timing.call), and what the slowest CTA adds to the mean one;
- measured (B200): the best public entry's time (tools/sol.py public_best: gau-nernst v2 for nvfp4_dual_gemm,
  docs/leaderboard.md §7; gau-nernst's mix (4+3b) for nvfp4_gemm, §9), GPU MODE leaderboard;
- speed of light: task.yml's sol_us (docs/leaderboard.md §2);
then the same three as geometric means (the leaderboard's score). The footnote gives the timed emulator's error band.

The timed runs take seconds to minutes each on 2 CPUs; their results are kept in FILE (default
docs/phases_<problem>.json, tools/emulate.py --timing --json's records) and reused while they were timed on the same
submission.py and cost table (their digests); --timed JSON adds a record tools/emulate.py wrote; --retime times every
shape again (after a change to the timed engine, whose code the digests do not cover).
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

# The timed bar's segments, bottom to top (a record's start_us, its phases_us in emu.timing.call's order, the rest)
PHASES = ("start", "to first load", "to first MMA", "mainloop", "tail", "slowest CTA after the mean one")
PHASE_COLOURS = ("#bdbdbd", "#9ecae1", "#6baed6", "#2171b5", "#fd8d3c", "#fdd0a2")
MEASURED_COLOUR, SOL_COLOUR = "#41ab5d", "#ffffff"


def default_paths(problem: str) -> tuple[Path, Path]:
    """(results JSON, picture) under docs/ for the problem."""
    return REPO / "docs" / f"phases_{problem}.json", REPO / "docs" / f"phases_{problem}.png"


def segments(record: dict) -> list[float]:
    """The timed call's phases in PHASES order, μs; they add up to the record's per_call_us."""
    phases = record["phases_us"]
    parts = [record["start_us"]] + [phases[name] for name in PHASES[1:5]]
    return parts + [max(record["per_call_us"] - sum(parts), 0.0)]


def is_current(record: dict, problem: str, shape: tuple, digests: dict) -> bool:
    """A record of this shape and problem, timed on the same submission and cost table, C matched, no overrides."""
    return (record.get("label") == "timed" and record.get("problem") == problem and tuple(record["shape"]) == shape
            and record.get("status") == "match" and not record.get("costs_overridden") and not record.get("full_grid")
            and all(record.get(k) == v for k, v in digests.items()))


def time_shape(problem: str, shape: tuple) -> dict:
    """Time submission.py at one shape (its table's config), as tools/emulate.py --timing --json records it."""
    from emu.timing import costs as cost_table
    from harness.timed import timed_emulate
    from tools.emulate import timed_record

    t0 = time.time()
    res, timed = timed_emulate(*shape, costs=cost_table.load(), problem=problem)
    if timed is None or timed.status != "completed" or res.status != "match":
        raise RuntimeError(f"{shape}: the timed run did not complete with C matched: {res.summary()}\n{res.message}")
    return timed_record(res, timed, problem, REPO / "submission.py", {}, False, time.time() - t0)


def figure(problem: str, records: list[dict], sol: dict, best: dict, best_geo: float, whose: str, notes: list[str]):
    """The picture (matplotlib Figure): per shape of `records` (in order) the timed bar stacked by PHASES, the measured
    bar and the speed of light; then their geometric means."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from tools.sol import geomean

    fig = Figure(figsize=(13, 7), dpi=110)
    ax = fig.add_axes((0.06, 0.33, 0.92, 0.57))
    width, offsets = 0.26, (-0.28, 0.0, 0.28)
    ticks, labels = [], []

    def label(x, y, text):
        ax.text(x, y + 0.15, text, ha="center", va="bottom", fontsize=7.5)

    for i, r in enumerate(records):
        shape = tuple(r["shape"])
        bottom = 0.0
        for part, colour in zip(segments(r), PHASE_COLOURS):
            ax.bar(i + offsets[0], part, width, bottom=bottom, color=colour, edgecolor="black", linewidth=0.4)
            bottom += part
        label(i + offsets[0], bottom, f"timed\n{r['per_call_us']:.2f}")
        ax.bar(i + offsets[1], best[shape], width, color=MEASURED_COLOUR, edgecolor="black", linewidth=0.4)
        label(i + offsets[1], best[shape], f"measured\n(B200)\n{best[shape]:.2f}")
        ax.bar(i + offsets[2], sol[shape], width, color=SOL_COLOUR, edgecolor="black", linewidth=0.8, hatch="//")
        label(i + offsets[2], sol[shape], f"speed of\nlight\n{sol[shape]:.2f}")
        ticks.append(i)
        labels.append(f"{shape[0]}×{shape[1]}×{shape[2]}\n{r['config']}")
    g = len(records) + 0.3
    timed_geo = geomean(r["per_call_us"] for r in records)
    sol_geo = geomean(sol[tuple(r["shape"])] for r in records)
    for x, value, colour, hatch, text in ((g + offsets[0], timed_geo, PHASE_COLOURS[3], None, "timed"),
                                          (g + offsets[1], best_geo, MEASURED_COLOUR, None, "measured\n(B200)"),
                                          (g + offsets[2], sol_geo, SOL_COLOUR, "//", "speed of\nlight")):
        ax.bar(x, value, width, color=colour, edgecolor="black", linewidth=0.4, hatch=hatch)
        label(x, value, f"{text}\n{value:.2f}")
    ticks.append(g)
    labels.append("geometric mean\n(the leaderboard's score)")
    ax.axvline(len(records) - 0.35, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel("μs per call")
    ax.set_ylim(0, max([sum(segments(r)) for r in records] + list(best.values())) * 1.2)
    handles = [Patch(facecolor=c, edgecolor="black", linewidth=0.4, label=f"timed: {p}")
               for p, c in zip(PHASES, PHASE_COLOURS)]
    handles += [Patch(facecolor=MEASURED_COLOUR, edgecolor="black", label=f"measured (B200): {whose}, GPU MODE leaderboard"),
                Patch(facecolor=SOL_COLOUR, edgecolor="black", hatch="//", label="speed of light (task.yml)")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, fontsize=8, frameon=False)
    fig.suptitle(f"{problem}: one leaderboard call per benchmark shape, timed (the timed emulator: a model of a B200, "
                 "not a measurement)\nbeside the best public entry's measured (B200) time and the speed of light",
                 fontsize=10, x=0.02, ha="left")
    fig.text(0.02, 0.02, "\n".join(notes), fontsize=7.5, va="bottom", ha="left")
    return fig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", choices=("nvfp4_dual_gemm", "nvfp4_gemm"), default="nvfp4_dual_gemm")
    ap.add_argument("--results", default=None, help="timed results to reuse and extend (default docs/phases_<problem>.json)")
    ap.add_argument("--timed", action="append", default=[], metavar="JSON",
                    help="a record of tools/emulate.py --timing --json for one benchmark shape (repeatable)")
    ap.add_argument("--retime", action="store_true", help="time every benchmark shape again")
    ap.add_argument("--out", default=None, help="the picture (default docs/phases_<problem>.png)")
    args = ap.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("tools/phases.py: the picture needs matplotlib, an optional dependency: pip install matplotlib (or "
              "pip install -e '.[test]')", file=sys.stderr)
        return 2
    from emu.timing import costs as cost_table
    from problem_files import task_path
    from tools.emulate import GEMM_TIMED_CAVEAT, file_digest
    from tools.sol import benchmark_shapes, public_best, sol_table

    results_path, out = default_paths(args.problem)
    results_path = Path(args.results or results_path)
    out = Path(args.out or out)
    stored = [] if args.retime or not results_path.exists() else json.loads(results_path.read_text())["records"]
    stored += [json.loads(Path(p).read_text()) for p in args.timed]
    digests = {"submission_sha256": file_digest(REPO / "submission.py"), "cost_table_sha256": file_digest(cost_table.TABLE)}
    records = []
    for shape in benchmark_shapes(task_path(args.problem)):
        record = next((r for r in reversed(stored) if is_current(r, args.problem, shape, digests)), None)
        if record is None:
            print(f"tools/phases.py: timing {args.problem} {'x'.join(map(str, shape[:3]))} (seconds to minutes on 2 "
                  "CPUs)", file=sys.stderr, flush=True)
            record = time_shape(args.problem, shape)
        else:
            print(f"tools/phases.py: {'x'.join(map(str, shape[:3]))}: reusing the timed record of {record['config']}",
                  file=sys.stderr)
        records.append(record)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps({"label": "timed", "problem": args.problem, "records": records}, indent=1) + "\n")

    from calibration.timing import band_line, error_band

    best, best_geo, whose = public_best(args.problem)
    notes = [f"timed: {band_line(error_band())}.",
             f"measured (B200): {whose}, GPU MODE leaderboard, as docs/leaderboard.md "
             f"{'§9' if args.problem == 'nvfp4_gemm' else '§7'} cites it; speed of light: the problem's task.yml "
             "(docs/leaderboard.md §2). Nothing of this kernel has run on a B200.",
             f"timed records: {results_path.relative_to(REPO) if results_path.is_relative_to(REPO) else results_path} "
             f"(submission.py {digests['submission_sha256']}, cost table {digests['cost_table_sha256']}); made by "
             f"tools/phases.py --problem {args.problem}."]
    if args.problem == "nvfp4_gemm":
        notes.insert(1, GEMM_TIMED_CAVEAT + ".")
    fig = figure(args.problem, records, sol_table(task_path(args.problem)), best, best_geo, whose, notes)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    for r in records:
        shape = tuple(r["shape"])
        print(f"{'x'.join(map(str, shape[:3]))}: timed {r['per_call_us']:.2f} us ({r['config']}), measured (B200) "
              f"{best[shape]:.2f} us ({whose}), speed of light {sol_table(task_path(args.problem))[shape]:.3f} us")
    print(f"picture: {out}; timed records: {results_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
