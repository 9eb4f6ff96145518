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
Without --shape a point runs at its benchmark shape (with --timing: the timed emulator, as calibration/timing.py
times it); with --shape every selected point's file runs at that shape (functional verdict). One line per run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POINTS = Path(__file__).with_name("b200_points.json")
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


# ----------------------------------------------------------------------------- the sources folder
def needed_files(points=None) -> list[PublicFile]:
    return sorted({file_of(p) for p in (points or all_points())}, key=lambda f: (f.repo, f.commit, f.path))


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
    ap.add_argument("command", choices=("sources", "run"))
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
