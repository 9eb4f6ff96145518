#!/usr/bin/env python3
"""The public B200-run kernels the emulator is judged on, as data, each run unmodified through harness.runner.

Every point of calibration/b200_points.json (and of the declared sets heldout.json, heldout2.json, heldout3.json)
names the file its time was measured on: `design_from` (repository, commit, path), or for gau-nernst's points the
blob address in `source.design_from`. That file is a complete leaderboard submission, run as the leaderboard runs it
(harness.runner: its own host code, its own launches, in the emulator); nothing of its author's host code is
re-implemented here. The only author-specific knowledge left is which file of a point's list is the submission
(SUBMISSION_FILE) and none of the shims the generic path could not avoid: there are none today (the runner's bridges
are generic: harness/bridges.py names them).

Sources stay out of the repository. They live in a folder, default $PUBLIC_SOURCES or /tmp/public_sources, at
<folder>/<owner>/<name>/<commit>/<path> (the commit in full). `python -m calibration.public sources` lists what
belongs there with the git command that puts each file in place from a clone; `--from-clone owner/name=DIR` runs
them. Tests and tools skip a point whose file is absent, with that reason.

    python -m calibration.public sources [--from-clone OWNER/NAME=CLONE ...]
    python -m calibration.public run --points all|fit|holdout|holdout2|holdout3|ID,... [--shape M,N,K]
                                     [--modes leaderboard,strict] [--schedules N] [--timing]
    python -m calibration.public table [--clusters N] [--benchmarks breadth|all|none] [--reports R.json ...]
                                       [--only TEXT]
    python -m calibration.public outcomes [--only TEXT] [--sets issue38,added,listed,points]
Without --shape a point runs at its benchmark shape (with --timing: the timed emulator, as calibration/timing.py
times it); with --shape every selected point's file runs at that shape (functional verdict). One line per run.
`table` runs every public file (the points', calibration/public_files.json's and calibration/outcomes.json's) at its
problem's smallest test shape (every cluster, both input generators) and, for the files that are not points
(--benchmarks breadth, the default; all: every file), at each benchmark shape (--clusters N of each launch, the
leaderboard's generator), functional verdicts only, and writes docs/public_files.md: which run unmodified, which need
a named bridge, which fail and why, and each file's published B200 outcome (calibration/outcomes.py scores the
verdicts against them in the file's last section, which the table keeps). A point's
file is run at its benchmark shapes by the timed calibration, which checks C on the clusters it simulates: the table
takes those verdicts from the reports named (--reports, default docs/timing_calibration.json), each labelled so.
`outcomes` runs every file calibration/outcomes.json declares (those of the sets named, whose owner/name/path contains
TEXT) by the declaration's plan and scores each verdict against the file's published B200 outcome
(calibration/outcomes.py): docs/public_outcomes.json and the last section of docs/public_files.md; a re-run of some
files keeps the other rows.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import outcomes

REPO = Path(__file__).resolve().parents[1]
POINTS = Path(__file__).with_name("b200_points.json")
BREADTH = Path(__file__).with_name("public_files.json")  # public files that are not points (the table runs them)
TABLE_MD = REPO / "docs" / "public_files.md"
TABLE_JSON = REPO / "docs" / "public_files.json"
DECLARED = {name: Path(__file__).with_name(f"{name}.json") for name in ("heldout", "heldout2", "heldout3")}
DEFAULT_SOURCES = Path("/tmp/public_sources")
ENV_VAR = "PUBLIC_SOURCES"
# a point whose design_from lists several files (novus677's kernel 9: the .cu his repository keeps beside it) runs its
# submission: the file the leaderboard was given
SUBMISSION_FILE = "submission.py"


@dataclass(frozen=True)
class PublicFile:
    """A leaderboard submission file at a commit of a public repository."""

    repo: str  # owner/name
    commit: str
    path: str  # inside the repository

    def local(self, sources: Path) -> Path:
        return Path(sources) / self.repo / self.commit / self.path

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/blob/{self.commit}/{self.path}"


def sources_dir(given=None) -> Path:
    return Path(given or os.environ.get(ENV_VAR) or DEFAULT_SOURCES)


def all_points() -> list[dict]:
    """Every point that names a file: the points file's own (gau-nernst's), its novus677 and heldout3 records, and
    heldout.json's new points (arseni_ivanov's, novus677's kernel 9), each with its author; a point its log records
    but does not use (a mix of two versions, an output its author calls invalid) is left out."""
    data = json.loads(POINTS.read_text())
    points = [dict(p, author=p.get("author", "gau-nernst")) for p in data["points"]]
    points += data.get("novus677_points", []) + data.get("heldout3_points", [])
    points += json.loads(DECLARED["heldout"].read_text())["new_points"]
    return [p for p in points if p.get("use", True) and p.get("runnable", True)]  # as calibration.timing loads them


def file_of(point: dict) -> PublicFile:
    """The submission file a point's time was measured on."""
    design = point.get("design_from")
    if isinstance(design, dict):
        paths = [p.strip() for p in design["path"].split("(")[0].split(",")]
        path = next((p for p in paths if Path(p).name == SUBMISSION_FILE), paths[0]) if len(paths) > 1 else paths[0]
        return PublicFile(design["repo"], design["commit"], path)
    url = point["source"]["design_from"]
    m = re.fullmatch(r"https://github.com/([^/]+/[^/]+)/blob/([0-9a-f]{40})/(.+)", url)
    if not m:
        raise ValueError(f"{point['id']}: cannot read the file's repository, commit and path from {url}")
    return PublicFile(*m.groups())


def local_file(point: dict, sources=None) -> tuple[Path | None, str]:
    """(the point's file on this machine, "") or (None, why not)."""
    f = file_of(point)
    path = f.local(sources_dir(sources))
    if path.is_file():
        return path, ""
    return None, (f"{point['id']}: {path} is absent (the public file {f.url}; sources stay out of the repository: "
                  f"python -m calibration.public sources says how to fetch them)")


def problem_of(point: dict) -> str:
    return point.get("problem", "nvfp4_dual_gemm")


# ----------------------------------------------------------------------------- running a point
def run_point(point: dict, sources=None, shape=None, mode: str = "leaderboard", schedules=1, timing: bool = False,
              costs: dict | None = None, allow_notes: bool = True, progress=None):
    """harness.runner on the point's file: at `shape` (default: the point's), functional or timed. A
    harness.runner.RunnerResult; status "cannot-run" with the reason where the file is absent."""
    from harness.runner import RunnerResult, run_submission

    shape = tuple(shape or point["shape"])
    path, why = local_file(point, sources)
    if path is None:
        return RunnerResult("cannot-run", str(file_of(point).path), problem_of(point), shape, mode, construct=why)
    return run_submission(path, shape, problem=problem_of(point), mode=mode, schedules=schedules, timing=timing,
                          costs=costs, allow_notes=allow_notes, progress=progress)


def select(points: list[dict], which: str) -> list[dict]:
    """all, fit, holdout, holdout2, holdout3 (the split), or point ids separated by commas."""
    if which == "all":
        return points
    if which in ("fit", "holdout", "holdout2", "holdout3"):
        return [p for p in points if p.get("split") == which]
    ids = set(which.split(","))
    picked = [p for p in points if p["id"] in ids]
    missing = ids - {p["id"] for p in picked}
    if missing:
        raise SystemExit(f"no point {sorted(missing)}")
    return picked


# ----------------------------------------------------------------------------- every public file, at small and benchmark shapes
def task_shapes(problem: str) -> tuple[tuple, list]:
    """(the smallest test shape, the benchmark shapes) of the problem's task.yml."""
    from problem_files import task_path
    from utils import load_task

    task = load_task(task_path(problem))
    shape = lambda c: (c["m"], c["n"], c["k"], c["l"])  # noqa: E731
    return min((shape(c) for c in task["tests"]), key=lambda s: s[0] * s[1] * s[2]), [shape(c) for c in task["benchmarks"]]


def public_files() -> list[dict]:
    """Every public file once: {file: PublicFile, problem, points: ids measured on it, published: ...}, the points'
    files first (in the points' order), then public_files.json's, then the files calibration/outcomes.json declares
    besides them (a B200 outcome and no published time)."""
    out = {}
    for point in all_points():
        f = file_of(point)
        entry = out.setdefault(f, {"file": f, "problem": problem_of(point), "points": [], "author": point["author"]})
        entry["points"].append(point["id"])
    for b in json.loads(BREADTH.read_text())["files"]:
        f = PublicFile(b["repo"], b["commit"], b["path"])
        out.setdefault(f, {"file": f, "problem": b["problem"], "points": [], "author": b["repo"].split("/")[0],
                           "published": b["published"]})
    for e in outcomes.declared()["files"]:
        f = PublicFile(e["repo"], e["commit"], e["path"])
        out.setdefault(f, {"file": f, "problem": e["problem"], "points": [], "author": e["repo"].split("/")[0]})
    return list(out.values())


def table(sources=None, clusters: int = 2, benchmarks: str = "breadth", progress=print, only: str | None = None,
          done=None) -> list[dict]:
    """Run every public file (module docstring's `table`), or those whose "owner/name/path" contains `only`; a row per
    file with each run's verdict. benchmarks: "breadth" (the benchmark shapes of the files that are not points), "all"
    or "none". done(rows) after each file (the caller writes what is finished, so a stopped run keeps it)."""
    from harness.runner import run_cases

    if benchmarks not in ("breadth", "all", "none"):
        raise ValueError(f"benchmarks: breadth, all or none, not {benchmarks!r}")
    rows = []
    for entry in public_files():
        f, problem = entry["file"], entry["problem"]
        if only and only not in f"{f.repo}/{f.path}":
            continue
        small, bench = task_shapes(problem)
        path = f.local(sources_dir(sources))
        row = {"repo": f.repo, "commit": f.commit, "path": f.path, "problem": problem, "author": entry["author"],
               "points": entry["points"], "runs": []}
        rows.append(row)
        if not path.is_file():
            row["absent"] = str(path)
            progress(f"{f.repo}@{f.commit[:8]} {f.path}: absent ({path})")
            continue
        plans = [((small, mode, 1111, 1), "all") for mode in ("leaderboard", "strict")]
        at_bench = benchmarks == "all" or (benchmarks == "breadth" and not entry["points"])
        plans += [((shape, "leaderboard", 1111, 1), clusters) for shape in (bench if at_bench else [])]
        for which in ("all", clusters):
            cases = [case for case, c in plans if c == which]
            if not cases:
                continue
            for res in run_cases(path, cases, problem, clusters=which, allow_notes=True):
                row["runs"].append({"shape": list(res.shape), "mode": res.mode, "clusters": which,
                                    "status": res.status, "verdict": res.verdict, "construct": res.construct,
                                    "where": res.where, "message": " ".join(res.message.split())[:300],
                                    "notes": sorted({n["rule"] for n in res.notes}),
                                    "bridges": [b.split(":")[0].removeprefix("bridge ") for b in res.bridges],
                                    "launches": len(res.launches), "seconds": round(res.seconds, 1)})
                progress(f"{f.repo}@{f.commit[:8]} {f.path} {res.summary()}")
        if done:
            done(rows)
    return rows


def merged(rows: list[dict], js: Path = TABLE_JSON) -> list[dict]:
    """`rows` in place of the same files' rows of the table already written (js), the others kept, in public_files()'s
    order: a re-run of some files (--only) updates the table."""
    old = json.loads(js.read_text())["rows"] if Path(js).is_file() else []
    key = lambda r: (r["repo"], r["commit"], r["path"])  # noqa: E731
    new = {key(r): r for r in rows}
    keep = {key(r): r for r in old if key(r) not in new}
    order = [(e["file"].repo, e["file"].commit, e["file"].path) for e in public_files()]
    every = {**keep, **new}
    return [every[k] for k in order if k in every]


def timed_checks(reports) -> dict:
    """{point id: (status, report)} from timed calibration reports (calibration/timing.py's JSON): the check of C a
    timed run makes on the clusters it simulates ("match", "unchecked" where those clusters finish no element)."""
    out = {}
    for report in reports:
        data = json.loads(Path(report).read_text())
        name = Path(report).name
        for row in data["rows"]:
            out.setdefault(row["id"], (row["status"], name))
    return out


def write_table(rows: list[dict], md: Path = TABLE_MD, js: Path = TABLE_JSON, timed: dict | None = None,
                section: list | None = None) -> None:
    """docs/public_files.md (and .json): per file, unmodified / bridges / fails and why, its published B200 outcome.
    timed: timed_checks(), the benchmark-shape verdicts of the points' files; section: lines the file ends with
    (outcomes.section_lines(): the verdicts scored against the outcomes)."""
    timed = timed or {}
    published = {(e["repo"], e["commit"], e["path"]): e for e in outcomes.declared()["files"]}
    for r in rows:
        e = published.get((r["repo"], r["commit"], r["path"]))
        if e:
            r["b200_outcome"] = {"class": e["outcome"]["class"], "pairing": e["pairing"]["strength"],
                                 "source": "calibration/outcomes.json"}
        old = r.get("timed_checks", {})  # a report not given keeps the checks the table last took from it
        r["timed_checks"] = {p: list(timed[p]) if p in timed else old[p] for p in r["points"] if p in timed or p in old}
    js.write_text(json.dumps({"label": "emulated", "rows": rows}, indent=1) + "\n")
    lines = ["# Public leaderboard files in the emulator", "",
             "Every public file the package knows (the calibration points' files, calibration/public_files.json's and "
             "calibration/outcomes.json's), "
             "run unmodified through harness/runner.py by `python -m calibration.public table`: at its problem's "
             "smallest test shape (every cluster, both input generators) and, for the files that are not calibration "
             "points, at each benchmark shape (clusters of each launch as the table's command says, the leaderboard's "
             "generator); a point's file at its benchmark shapes: the check of C its timed calibration run makes on "
             "the clusters it simulates (`timed check`, from the report named; `unchecked`: those clusters finish no "
             "element of C, a K slice of a split). Every verdict is **emulated** (what the file's PTX computes "
             "in this package's SM100 emulator), nothing about speed. `bridges`: the runner's named changes the file "
             "needed (harness/bridges.py says why each exists; `dsl-export`, `load-inline` and `torch-as-cuda` are "
             "how every file of its kind runs); `notes`: ISA rules the file breaks that a B200-run kernel breaks too "
             "(harness/runner.py's verdict allows them for code that is not this package's).", "",
             "`B200 outcome`: what the file's author published of its run on GPU MODE's B200 runner "
             "(calibration/outcomes.json: the runner's words quoted, the output's pairing with the file; measured), "
             "scored against the emulator's verdicts in the last section.", "",
             "| file | problem | points | B200 outcome | small shape | benchmark shapes | bridges | notes | why not |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = f"[{r['repo']}@{r['commit'][:8]} `{r['path']}`](https://github.com/{r['repo']}/blob/{r['commit']}/{r['path']})"
        e = published.get((r["repo"], r["commit"], r["path"]))
        outcome = (f"{e['outcome']['class']} ({e['pairing']['strength'].split(' ')[0]} pairing)" if e else "-")
        if "absent" in r:
            lines.append(f"| {name} | {r['problem']} | {len(r['points'])} | {outcome} | not run: source absent | | | | |")
            continue
        small = [x for x in r["runs"] if x["clusters"] == "all"]
        bench = [x for x in r["runs"] if x["clusters"] != "all"]
        verdict = lambda runs: ", ".join(sorted({x["verdict"].split(" (")[0] for x in runs})) or "-"  # noqa: E731
        bench_verdict = verdict(bench)
        if not bench and r.get("timed_checks"):
            checks = sorted({f"{status.upper()} ({report})" for status, report in r["timed_checks"].values()})
            bench_verdict = f"timed check, {len(r['timed_checks'])} points: " + ", ".join(checks)
        bridges = sorted({b for x in r["runs"] for b in x["bridges"]})
        notes = sorted({n for x in r["runs"] for n in x["notes"]})
        why = "; ".join(sorted({(x["construct"] or x["message"])[:160] + (f" ({x['where']})" if x["where"] else "")
                                for x in r["runs"] if x["status"] not in ("match",)}))
        lines.append(f"| {name} | {r['problem']} | {len(r['points'])} | {outcome} | {verdict(small)} | {bench_verdict} | "
                     f"{', '.join(bridges)} | {', '.join(notes)} | {why} |")
    md.write_text("\n".join(lines + ([""] + section if section else [])) + "\n")


# ----------------------------------------------------------------------------- verdicts against B200 outcomes
def run_outcome(entry: dict, plan: dict, sources=None) -> dict:
    """One file calibration/outcomes.json declares, through harness.runner by the declaration's plan: its row of the
    outcomes table, scored (outcomes.score)."""
    from harness.runner import run_cases

    f = PublicFile(entry["repo"], entry["commit"], entry["path"])
    shape = tuple(plan["shapes"][entry["problem"]])
    row = {"repo": f.repo, "commit": f.commit, "path": f.path, "problem": entry["problem"], "set": entry["set"],
           "pairing": entry["pairing"]["strength"], "outcome": entry["outcome"]["class"], "shape": list(shape),
           "outcome_at_shape": outcomes.at_shape(entry["outcome"], shape),
           "earlier": outcomes.earlier_verdict(entry, shape)}
    path = f.local(sources_dir(sources))
    if not path.is_file():
        row.update(status="absent", verdict="not run: source absent", message=str(path))
        return outcomes.score(row)
    res = run_cases(path, [(shape, plan["mode"], plan["input_seed"])], entry["problem"], schedules=plan["schedules"],
                    clusters=plan["clusters"], allow_notes=True, b200="b200" in plan["schedules"])[0]
    row.update(status=res.status, verdict=res.verdict, message=" ".join((res.message or res.construct).split())[:400],
               where=res.where, race=res.race, notes=sorted({n["rule"] for n in res.notes}),
               checked=res.checked_elements, unchecked=res.unchecked, clusters=[res.clusters_run, res.clusters_total],
               runs=[{k: r[k] for k in ("schedule", "status", "seconds")} for r in res.runs],
               seconds=round(res.seconds, 1))
    return outcomes.score(row)


def run_outcomes(sources=None, sets=("issue38", "added", "listed", "points"), only=None, progress=print) -> list:
    """Every declared file of `sets` (whose owner/name/path contains `only`) run and scored; the table re-written after
    each (docs/public_outcomes.json, docs/public_files.md's last section), the rows of files not run kept."""
    doc = outcomes.declared()
    done = []
    for entry in doc["files"]:
        if entry["set"] not in sets or (only and only not in f"{entry['repo']}/{entry['path']}"):
            continue
        t0 = time.time()
        row = run_outcome(entry, doc["plan"], sources)
        done.append(row)
        said = "agrees" if row["agrees"] else "DISAGREES" if row["scored"] else "no verdict"
        progress(f"{entry['repo']}@{entry['commit'][:8]} {entry['path']} ({entry['set']}): B200 {row['outcome']}, "
                 f"emulated {row['verdict']} -> {said} ({time.time() - t0:.0f} s)")
        outcomes.write(outcomes.merged(done))
    rows = outcomes.merged(done)
    outcomes.write(rows)
    old = json.loads(TABLE_JSON.read_text())["rows"] if TABLE_JSON.is_file() else []
    write_table(merged(old), timed=timed_checks([REPO / "docs" / "timing_calibration.json"]),
                section=outcomes.section_lines())
    return rows


# ----------------------------------------------------------------------------- the sources folder
def needed_files() -> list[PublicFile]:
    return sorted({e["file"] for e in public_files()}, key=lambda f: (f.repo, f.commit, f.path))


def fill_from_clone(clone: Path, repo: str, sources: Path) -> list[str]:
    """Write every needed file of `repo` from a local clone (git show commit:path); what was written."""
    done = []
    for f in needed_files():
        if f.repo != repo:
            continue
        out = f.local(sources)
        blob = subprocess.run(["git", "-C", str(clone), "show", f"{f.commit}:{f.path}"], capture_output=True)
        if blob.returncode:
            raise SystemExit(f"{clone}: {f.commit[:12]}:{f.path}: {blob.stderr.decode().strip()}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(blob.stdout)
        done.append(str(out))
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("sources", "run", "table", "outcomes"))
    ap.add_argument("--sets", default="issue38,added,listed,points",
                    help="with outcomes: the declared sets of calibration/outcomes.json to run")
    ap.add_argument("--clusters", type=int, default=2, help="with table: clusters of each launch at benchmark shapes")
    ap.add_argument("--only", default=None, metavar="TEXT",
                    help="with table / outcomes: only the files whose owner/name/path contains TEXT; the table keeps "
                         "the others' rows")
    ap.add_argument("--benchmarks", choices=("breadth", "all", "none"), default="breadth",
                    help="with table: which files run at the benchmark shapes (breadth: those that are not points)")
    ap.add_argument("--reports", nargs="*", default=[str(REPO / "docs" / "timing_calibration.json")],
                    help="with table: timed calibration reports whose checks of C stand for the points' benchmark runs")
    ap.add_argument("--sources", default=None, help=f"the sources folder (default ${ENV_VAR} or {DEFAULT_SOURCES})")
    ap.add_argument("--from-clone", action="append", default=[], metavar="OWNER/NAME=CLONE",
                    help="with sources: fill the folder from a local clone of that repository")
    ap.add_argument("--points", default="all", help="with run: all, fit, holdout, holdout2, holdout3 or ids")
    ap.add_argument("--shape", default=None, help="with run: M,N,K (default: each point's benchmark shape)")
    ap.add_argument("--modes", default="leaderboard", help="with run: input generators, comma-separated")
    ap.add_argument("--schedules", type=int, default=1, help="with run: schedules of the verdict")
    ap.add_argument("--timing", action="store_true", help="with run: the timed emulator at each point's shape")
    args = ap.parse_args(argv)
    sources = sources_dir(args.sources)
    if args.command == "sources":
        for item in args.from_clone:
            repo, _, clone = item.partition("=")
            for line in fill_from_clone(Path(clone), repo, sources):
                print(f"wrote {line}")
        for f in needed_files():
            state = "present" if f.local(sources).is_file() else "absent "
            print(f"{state} {f.local(sources)}\n        git -C <clone of {f.repo}> show {f.commit}:{f.path} > "
                  f"{f.local(sources)}")
        return 0
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if args.command == "table":
        timed = timed_checks(args.reports)
        rows = table(sources, args.clusters, args.benchmarks, lambda line: print(line, flush=True), args.only,
                     lambda done: write_table(merged(done), timed=timed, section=outcomes.section_lines()))
        write_table(merged(rows), timed=timed, section=outcomes.section_lines())
        print(f"wrote {TABLE_MD.relative_to(REPO)}")
        return 0
    if args.command == "outcomes":
        rows = run_outcomes(sources, set(args.sets.split(",")), args.only, lambda line: print(line, flush=True))
        c = outcomes.confusion(rows)
        print(f"agreement {c['agree']}/{c['scored']}, same kind {c['same_kind']}/{c['scored']} over {len(rows)} files; "
              f"wrote {outcomes.TABLE_JSON.relative_to(REPO)} and {TABLE_MD.relative_to(REPO)}")
        return 0
    shape = tuple(int(x) for x in args.shape.split(",")) + (1,) if args.shape else None
    failed = 0
    done = set()
    for point in select(all_points(), args.points):
        for mode in args.modes.split(","):
            key = (file_of(point), shape or tuple(point["shape"]), mode)
            if key in done:  # a file at a shape once, whatever number of points share it
                continue
            done.add(key)
            res = run_point(point, sources, shape, mode, args.schedules, args.timing)
            timed = f" timed {res.timed['per_call_us']:.2f} us" if res.timed else ""
            print(f"{point['id']}: {res.summary()}{timed}", flush=True)
            failed += not res.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
