#!/usr/bin/env python3
"""The kernel under every nvidia-cutlass-dsl release a runner may have: compiled and emulated, one table.

    python tools/dsl_matrix.py [--releases matrix|4.3.0,4.8.1] [--install] [--schedules N] [--no-emulate]
                               [--json docs/dsl_matrix.json] [--markdown docs/dsl_matrix.md]

For each release (harness.dsl.MATRIX: every 4.3 patch and the newest patch of each later minor; installed into
.venv/dsl by `bash tools/setup.sh --dsl matrix`, or here with --install), `tools/preflight.py --dsl RELEASE --quick`
compiles every config the first call may run for a task shape of either problem (submission.config_chain: the table's
choice, its fallback, the default rule's, the safe config) and keeps its PTX. Then per config the releases are grouped
by their PTX (identical text up to the kernel's mangled name), and each distinct PTX is emulated once, at the config's
small shape (harness.verdict.small_shape) with strict data under the default verdict (six schedules, --schedules N
fewer), compiled by the first release of its group whose host function the emulator can capture: the verdict belongs
to the PTX, so every release of the group shares it. A release whose PTX no capturable release shares is "not
emulated" with the reason.

Every number is compiled (registers, spills) or emulated (the verdict); nothing ran on a B200. Prints a line per
step and the table last; writes JSON and Markdown; exit 0 only if every release compiles every config without spills
and every emulated PTX MATCHes without notes.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from harness import dsl as dsl_release  # noqa: E402

BUILD = REPO / "build" / "dsl_matrix"


def say(text: str) -> None:
    print(f"dsl_matrix: {text}", flush=True)


def normalised_ptx(path: Path) -> str:
    """The PTX without its kernel names (they carry the DSL's mangling, not the code) and comments."""
    text = path.read_text(errors="replace").replace("\x00", "")
    names = set(re.findall(r"\.entry\s+([\w$]+)", text))
    for i, name in enumerate(sorted(names, key=len, reverse=True)):
        text = text.replace(name, f"KERNEL{i}")
    return re.sub(r"//[^\n]*", "", text)


def compile_release(release: str, jobs: int) -> dict:
    """preflight --quick under `release`, keeping each config's PTX: {config name: record}."""
    keep = BUILD / release
    report = BUILD / f"preflight-{release}.json"
    cmd = [sys.executable, str(REPO / "tools" / "preflight.py"), "--dsl", release, "--quick", "--jobs", str(jobs),
           "--keep", str(keep), "--json", str(report)]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if not report.exists():
        raise RuntimeError(f"preflight under {release} wrote no report (rc {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    rep = json.loads(report.read_text())
    out = {}
    for rec in rep["configs"]:
        summary = rec.get("summary", {})
        ptxs = sorted((keep / rec["name"]).glob("*.ptx")) if (keep / rec["name"]).is_dir() else []
        ptxs = [p for p in ptxs if not p.name.endswith(".clean.ptx")] or ptxs
        digest = hashlib.sha256(normalised_ptx(ptxs[0]).encode()).hexdigest()[:12] if ptxs else None
        out[rec["name"]] = {"ok": rec["ok"], "status": rec.get("status"), "problems": rec.get("problems", []),
                            "registers": summary.get("registers"), "spill_bytes": summary.get("spill_bytes"),
                            "ptx": digest, "roles": rec.get("roles", [])}
    say(f"{release}: {sum(r['ok'] for r in out.values())}/{len(out)} configs compiled clean ({time.time() - t0:.0f} s)")
    return out


def emulate_group(config_name: str, releases: list, schedules=None) -> dict:
    """The verdict of one PTX: emulated under the first release of `releases` whose launch can be captured."""
    from harness.verdict import emulate, load_submission, small_shape

    sub = load_submission(REPO / "submission.py")
    config = next(c for c in (*sub.TUNE_SPACE, *sub.GEMM_TUNE_SPACE) if c.name == config_name)
    shape = small_shape(config)
    tried = []
    for release in releases:
        t0 = time.time()
        res = emulate(*shape, config_name=config_name, mode="strict", sched_seed=0, schedules=schedules,
                      dsl=release, problem=config.problem)
        if res.status in ("unsupported", "compile") and ("export" in res.message or "rc -11" in res.message):
            tried.append(f"{release}: {res.message.splitlines()[0][:160]}")
            continue
        return {"release": release, "shape": list(shape), "status": res.status, "passed": res.passed,
                "notes": res.note_lines(), "summary": res.summary(), "seconds": round(time.time() - t0, 1)}
    return {"release": None, "shape": list(shape), "status": "not emulated", "passed": False, "notes": [],
            "summary": "no release of this PTX can be captured: " + "; ".join(tried), "seconds": 0}


def markdown(result: dict) -> str:
    releases, configs = result["releases"], result["configs"]
    lines = [
        "# The kernel under every nvidia-cutlass-dsl release",
        "",
        "Made by `python tools/dsl_matrix.py` (its docstring says how); every figure is **compiled** (registers, "
        "spills: ptxas on the release's PTX) or **emulated** (the verdict of that PTX in this package's SM100 "
        f"emulator, strict data, {result['schedules_label']}); nothing here ran on a B200. Configs: every one the "
        "first call may run for a task shape of either problem (`submission.config_chain`). A cell: compile result, "
        "registers / spill bytes, the PTX's group (one letter per distinct PTX of that config: releases sharing a "
        "letter compile to the same text, up to the kernel's name) and the group's verdict.",
        "",
        f"Submission digest {result['submission_sha'][:12]}; {result['date']}.",
        "",
        "| config | " + " | ".join(releases) + " |",
        "|---|" + "---|" * len(releases),
    ]
    for name, row in configs.items():
        cells = []
        for release in releases:
            rec = row["compiled"].get(release)
            if rec is None:
                cells.append("not installed")
                continue
            if not rec["ok"]:
                cells.append(f"FAIL: {'; '.join(rec['problems'])[:80]}")
                continue
            group = row["groups"].get(rec["ptx"], {})
            verdict = group.get("verdict", {})
            word = {True: "MATCH"}.get(verdict.get("passed"), verdict.get("status", "?").upper())
            cells.append(f"ok {rec['registers']}r/{rec['spill_bytes']}B {group.get('letter', '?')} {word}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lines += ["", "Per PTX group, the emulated verdict and the release it was captured under:", ""]
    for name, row in configs.items():
        for digest, group in row["groups"].items():
            v = group["verdict"]
            lines.append(f"- `{name}` {group['letter']} ({', '.join(group['releases'])}): {v['summary']}"
                         + (f"; notes: {' / '.join(v['notes'])}" if v["notes"] else ""))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", default="matrix", help="'matrix' (harness.dsl.MATRIX) or comma-separated releases")
    ap.add_argument("--install", action="store_true", help="install the releases that are missing (pip, ~200 MB each)")
    ap.add_argument("--schedules", type=int, default=None, help="schedules per verdict (default: the default verdict's)")
    ap.add_argument("--no-emulate", action="store_true", help="compile only")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="compiles in parallel per release, and verdicts in parallel (default: one per CPU)")
    ap.add_argument("--json", default=str(REPO / "docs" / "dsl_matrix.json"))
    ap.add_argument("--markdown", default=str(REPO / "docs" / "dsl_matrix.md"))
    args = ap.parse_args(argv)
    releases = list(dsl_release.MATRIX) if args.releases == "matrix" else args.releases.split(",")
    missing = [r for r in releases if not dsl_release.is_installed(r)]
    if missing and args.install:
        for release in missing:
            say(f"installing nvidia-cutlass-dsl {release}")
            dsl_release.install(release)
        missing = []
    if missing:
        say(f"not installed (left out): {', '.join(missing)}; `bash tools/setup.sh --dsl matrix` installs them")
    releases = [r for r in releases if r not in missing]
    BUILD.mkdir(parents=True, exist_ok=True)

    compiled = {release: compile_release(release, args.jobs) for release in releases}
    names = list(dict.fromkeys(name for rel in compiled.values() for name in rel))
    configs = {}
    for name in names:
        groups = {}
        for release in releases:
            rec = compiled[release].get(name)
            if rec and rec["ok"] and rec["ptx"]:
                groups.setdefault(rec["ptx"], {"releases": []})["releases"].append(release)
        for letter, group in zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", groups.values()):
            group["letter"] = letter
        configs[name] = {"compiled": {r: compiled[r].get(name) for r in releases}, "groups": groups}
    ok = all(rec and rec["ok"] for row in configs.values() for rec in row["compiled"].values())
    groups = [(name, group) for name, row in configs.items() for group in row["groups"].values()]
    if args.no_emulate:
        for _, group in groups:
            group["verdict"] = {"status": "not emulated", "passed": None, "notes": [], "summary": "--no-emulate"}
    else:
        from harness.verdict import run_in_order

        say(f"emulating {len(groups)} distinct PTX, {args.jobs} at a time")
        calls = [{"config_name": name, "releases": group["releases"], "schedules": args.schedules}
                 for name, group in groups]
        for (name, group), verdict in zip(groups, run_in_order(emulate_group, calls, args.jobs)):
            group["verdict"] = verdict
            say(f"{name} PTX {group['letter']} ({', '.join(group['releases'])}): {verdict['summary']}")
            ok &= bool(verdict["passed"])
    from datetime import date

    result = {"label": "compiled and emulated", "releases": releases, "configs": configs,
              "schedules_label": f"{args.schedules} schedule(s)" if args.schedules else "the default verdict's six schedules",
              "submission_sha": hashlib.sha256((REPO / "submission.py").read_bytes()).hexdigest(),
              "date": date.today().isoformat(), "ok": ok}
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    Path(args.markdown).write_text(markdown(result))
    print(markdown(result))
    say(f"wrote {args.json} and {args.markdown}; {'all compiled and matched' if ok else 'FAILURES above'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
