#!/usr/bin/env python3
"""What B200s said about public leaderboard files, as data, and the emulator's verdicts scored against it: the outcome
each file's author published (passed, mismatch, illegal memory access, crash after the kernel, host error, timeout, or
none), read from GPU MODE's runner output committed beside the kernel and declared in calibration/outcomes.json
before the verdicts scored against it were run.

    python -m calibration.outcomes parse OUTPUT.txt          # the outcome a runner output states, as JSON

The verdicts are run and scored by `python -m calibration.public outcomes` (calibration/public.py): every declared
file through harness.runner as the declaration's plan says (the shape per problem, the leaderboard's generator, one
cluster of each launch, the B200-timing schedule b200 then the seeded uniform:0; design.md "Verdict and schedules"),
each verdict scored here (score, confusion) against the file's outcome, the rows in docs/public_outcomes.json and the
section "B200 outcomes against emulated verdicts" of docs/public_files.md (section_lines). Every verdict is emulated;
every outcome measured (B200, as its source says).

The runner's words (gpu-mode/discord-cluster-manager's report, as committed in jIab-b/nvfp4_gemm): a header line
"✅ Benchmarking successful", "❌ Benchmarking failed" or "❌ Running benchmarks failed (internal error N)"; per
benchmark shape "k: K; l: L; m: M; n: N; seed: S" with "⏱ mean ± err µs" when it passed, or "❌ ... failed testing:"
and "mismatch found! ... Number of mismatched elements: COUNT ERROR AT (i, j, l): GOT EXPECTED ..." when C was wrong;
when the run stopped, the program's stderr (a Python traceback) and its last line.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

DECLARED = Path(__file__).with_name("outcomes.json")

# Outcome classes, each a failure of the file on a B200 but "passed" and "none" (nothing published about C).
CLASSES = ("passed", "mismatch", "illegal-memory-access", "crash-after-kernel", "host-error", "timeout", "none")

_SHAPE = re.compile(r"k: (\d+); l: (\d+); m: (\d+); n: (\d+); seed: (\d+)")
_ERROR_AT = re.compile(r"ERROR AT \((\d+), (\d+), (\d+)\): (\S+) (\S+)")


def parse_runner_output(text: str) -> dict:
    """{"class", "status" (the header's words), "shapes": [{"shape": [m, n, k, l], "result": "passed" | "mismatch",
    "mean_us" | "mismatched", "first": [[i, j, l, got, expected], ...]}], "error": the last stderr line, "where": the
    frames of the traceback (file:line in function)} of one runner output."""
    text = text.replace('\\"', '"')
    status = next((m.group(1).strip() for m in re.finditer(r"> ([✅❌][^\n]*)", text)
                   if "success" not in m.group(1) or "Benchmark" in m.group(1)), "")
    shapes = []
    blocks = re.split(r"\n(?=(?:❌ )?k: \d+; l: \d+; m: \d+; n: \d+; seed: \d+)", text)
    for block in blocks[1:]:
        m = _SHAPE.search(block)
        k, l, mm, n, _ = (int(x) for x in m.groups())
        entry = {"shape": [mm, n, k, l]}
        count = re.search(r"Number of mismatched elements: (\d+)", block)
        mean = re.search(r"⏱ ([\d.]+) ± ([\d.]+) ([µm]?s)", block)
        if count:
            entry.update(result="mismatch", mismatched=int(count.group(1)),
                         first=[[int(a), int(b), int(c), float(g), float(e)]
                                for a, b, c, g, e in _ERROR_AT.findall(block)])
        elif mean:
            scale = {"µs": 1.0, "ms": 1e3, "s": 1e6}[mean.group(3)]
            entry.update(result="passed", mean_us=float(mean.group(1)) * scale)
        else:
            entry["result"] = "unknown"
        shapes.append(entry)
    stderr = text.split("## Program stderr:", 1)[1] if "## Program stderr:" in text else ""
    error = next((line.strip().rstrip("`\"") for line in reversed(stderr.splitlines())
                  if re.match(r"\s*[\w.]+(Error|Exception)\b.*:", line)), "")
    where = [f"{Path(f).name}:{line} in {fn}" for f, line, fn in
             re.findall(r'File "([^"]+)", line (\d+), in (\w+)', stderr.split("The above exception")[0])]
    return {"class": outcome_class(status, shapes, error, where), "status": status, "shapes": shapes,
            "error": error, "where": where}


def outcome_class(status: str, shapes: list, error: str, where: list) -> str:
    """The class of an output: passed (every shape timed, so every check passed: benchmark mode checks C first),
    mismatch (a shape failed its check), timeout, illegal-memory-access (the CUDA error a faulting kernel leaves,
    wherever it is reported), crash-after-kernel (custom_kernel returned; a later CUDA call failed: a context the
    kernel poisoned), host-error (custom_kernel raised from the file's own host code), none (no output)."""
    if shapes and all(s["result"] == "passed" for s in shapes) and "success" in status:
        return "passed"
    if any(s["result"] == "mismatch" for s in shapes):
        return "mismatch"
    if re.search(r"time(d)? ?out", status + error, re.I):
        return "timeout"
    if "illegal memory access" in error:
        return "illegal-memory-access"
    if error and any("submission.py" in w and "custom_kernel" in w for w in where) and not any(
            "check_implementation" in w or "ref_kernel" in w for w in where):
        return "host-error"
    if error:
        return "crash-after-kernel"
    return "none"


def declared() -> dict:
    return json.loads(DECLARED.read_text())


def text(value) -> str:
    """A declared text: a string, or its lines (outcomes.json stores long texts as lists)."""
    return " ".join(value) if isinstance(value, list) else value


# ----------------------------------------------------------------------------- scoring
REPO = Path(__file__).resolve().parents[1]
TABLE_JSON = REPO / "docs" / "public_outcomes.json"
SECTION = "## B200 outcomes against emulated verdicts"
# What a verdict predicts of a B200 run: it passes (MATCH, with notes or a race), it fails, or nothing (the emulator's
# limit: an unsupported form, a host call it lacks, no element it could check)
PREDICTS = {"match": "pass", "race": "pass", "mismatch": "fail", "deadlock": "fail", "hazard": "fail",
            "refused": "fail", "launch": "fail", "unsupported": "none", "cannot-run": "none", "unchecked": "none",
            "absent": "none"}
# The failing verdicts that name the failure a B200 outcome reports (the target): wrong C as MISMATCH or as a
# HAZARD naming the unwritten data the MMA read; an illegal access as a HAZARD naming the address; a host error as the
# driver's REFUSED; a crash after the kernel as any failure of the kernel; a timeout as DEADLOCK
SAME_KIND = {"passed": {"match", "race"}, "mismatch": {"mismatch", "hazard"}, "illegal-memory-access": {"hazard"},
             "host-error": {"refused", "launch"}, "crash-after-kernel": {"hazard", "mismatch", "deadlock"},
             "timeout": {"deadlock"}}


# An earlier verdict's words (outcomes.json earlier_verdict) -> the status it stands for
EARLIER = {"MATCH": "match", "MISMATCH": "mismatch", "HAZARD": "hazard", "DEADLOCK": "deadlock",
           "UNSUPPORTED": "unsupported", "CANNOT RUN": "cannot-run"}


def b200_side(outcome_class: str) -> str:
    return {"passed": "pass", "none": "none"}.get(outcome_class, "fail")


def at_shape(outcome: dict, shape) -> str:
    """The outcome at the scored shape, in a few words (the first wrong coordinates of a mismatch)."""
    for s in outcome.get("shapes", ()):
        if list(s["shape"][:3]) == list(shape[:3]):
            if s.get("result") == "mismatch":
                first = s["first"][0] if s.get("first") else None
                return (f"{s['mismatched']} wrong" + (f", first ({first[0]}, {first[1]}): {first[3]:g} for {first[4]:g}"
                                                       if first else ""))
            if "mean_us" in s or "us" in s:
                return f"{s.get('mean_us', s.get('us'))} us"
    if outcome.get("error"):
        return outcome["error"][:110]
    return ""


def earlier_verdict(entry: dict, shape) -> str:
    """The verdict an earlier emulator gave at the scored shape (outcomes.json's earlier_verdict), if one did."""
    verdicts = entry.get("earlier_verdict", {}).get("verdicts", {})
    m, n, k = shape[:3]
    return next((v for key, v in verdicts.items() if key.startswith(f"{m}x{n}x{k} leaderboard")), "")


def score(row: dict) -> dict:
    row["predicts"] = PREDICTS.get(row["status"], "none")
    b200 = b200_side(row["outcome"])
    row["scored"] = b200 != "none" and row["predicts"] != "none"
    row["agrees"] = row["scored"] and b200 == row["predicts"]
    row["same_kind"] = row["agrees"] and row["status"] in SAME_KIND.get(row["outcome"], set())
    return row


def confusion(rows: list[dict]) -> dict:
    """{(outcome, verdict class): count}, and the agreement over the rows both sides of which say pass or fail."""
    cells = {}
    for r in rows:
        cells[(r["outcome"], r["status"])] = cells.get((r["outcome"], r["status"]), 0) + 1
    scored = [r for r in rows if r["scored"]]
    return {"cells": cells, "scored": len(scored), "agree": sum(r["agrees"] for r in scored),
            "same_kind": sum(r["same_kind"] for r in scored)}


def track_record(status: str, js: Path = TABLE_JSON) -> str:
    """How the verdict class `status` ("match", "race", "mismatch", ...) has fared: of the declared public files the
    confusion table gave it, how many passed and how many failed on a B200 (docs/public_files.md); "" where the table
    has none or is absent. What a user deciding on a B200 hour wants beside a verdict: how sure it is."""
    if not js.exists():
        return ""
    rows = [r for r in json.loads(js.read_text())["rows"] if r["status"] == status and r["scored"]]
    if not rows:
        return ""
    passed = sum(b200_side(r["outcome"]) == "pass" for r in rows)
    files = f"the {len(rows)} public files" if len(rows) > 1 else "the one public file"
    return (f"track record: of {files} the emulator called {status.upper()} whose B200 outcome is published, "
            f"{passed} passed and {len(rows) - passed} failed on a B200 (emulated vs measured, docs/public_files.md)")


# ----------------------------------------------------------------------------- the report
def merged(rows: list[dict], js: Path = TABLE_JSON) -> list[dict]:
    """`rows` in place of the same files' rows of the table already written, the others kept, in declared order."""
    key = lambda r: (r["repo"], r["commit"], r["path"])  # noqa: E731
    old = json.loads(js.read_text())["rows"] if js.is_file() else []
    every = {**{key(r): r for r in old}, **{key(r): r for r in rows}}
    order = [(e["repo"], e["commit"], e["path"]) for e in declared()["files"]]
    return [every[k] for k in order if k in every]


def write(rows: list[dict], js: Path = TABLE_JSON) -> None:
    doc = declared()
    js.write_text(json.dumps({"label": "emulated verdicts against measured (B200) outcomes", "plan": doc["plan"],
                              "rows": rows}, indent=1, ensure_ascii=False) + "\n")


VERDICTS = ("match", "race", "mismatch", "hazard", "deadlock", "refused", "launch", "unchecked", "unsupported",
            "cannot-run", "absent")
OUTCOMES = ("passed", "mismatch", "illegal-memory-access", "crash-after-kernel", "host-error", "timeout", "none")


def section_lines(js: Path = TABLE_JSON) -> list[str]:
    """The markdown section docs/public_files.md ends with: the confusion table and a row per declared file run."""
    if not js.is_file():
        return []
    data = json.loads(js.read_text())
    rows, plan = data["rows"], data["plan"]
    shapes = ", ".join(f"{p} {'x'.join(map(str, s[:3]))}" for p, s in plan["shapes"].items())
    lines = [SECTION, "",
             f"The B200 outcome each file's author published (calibration/outcomes.json, declared before these runs, "
             f"with its source quoted and how the output was paired with the file) against the emulated verdict "
             f"`python -m calibration.public outcomes` gives it: {shapes}, the leaderboard's generator, "
             f"{plan['clusters']} cluster of each launch, schedules {' then '.join(plan['schedules'])} (b200: the "
             f"launch on the timed emulator's machine, design.md 'Verdict and schedules'). A verdict predicts a "
             f"pass (MATCH, with notes or a RACE the B200's timing hides), a failure (MISMATCH, HAZARD, DEADLOCK, "
             f"REFUSED, LAUNCH REFUSED) or nothing (UNSUPPORTED, CANNOT RUN, UNCHECKED: the emulator's limits; "
             f"ABSENT: the file's source is not on the machine that ran the table). Outcomes: measured (B200); "
             f"verdicts: emulated.", ""]
    for title, subset in (("every declared file", rows),
                          ("pairs of strong or moderate evidence", [r for r in rows if r["pairing"] != "weak"]),
                          ("jIab-b/nvfp4_gemm only", [r for r in rows if r["repo"] == "jIab-b/nvfp4_gemm"])):
        c = confusion(subset)
        rate = f"{c['agree']}/{c['scored']} ({100 * c['agree'] / c['scored']:.0f}%)" if c["scored"] else "-"
        lines.append(f"- {title} ({len(subset)} files): pass/fail agreement {rate}; the failure named as the B200 "
                     f"reported it (same kind) {c['same_kind']}/{c['scored']}.")
    before = [score({**r, "status": EARLIER.get(r["earlier"].split(":")[0].split(" (")[0].split(" with")[0], "none")})
              for r in rows if r["earlier"]]
    c = confusion(before)
    if c["scored"]:
        lines.append(f"- the same files' earlier verdicts (the emulator before issue 38, at the same shape: the issue's "
                     f"table and docs/public_files.json of 2222f4d; {len(before)} files): pass/fail agreement "
                     f"{c['agree']}/{c['scored']} ({100 * c['agree'] / c['scored']:.0f}%).")
    c = confusion(rows)
    used = [v for v in VERDICTS if any(k[1] == v for k in c["cells"])]
    lines += ["", "| B200 outcome \\ emulated | " + " | ".join(v.upper() for v in used) + " | files |",
              "|---|" + "---|" * (len(used) + 1)]
    for o in OUTCOMES:
        counts = [c["cells"].get((o, v), 0) for v in used]
        if any(counts):
            lines.append(f"| {o} | " + " | ".join(str(x) if x else "" for x in counts) + f" | {sum(counts)} |")
    lines += ["", "| file | set | pairing | B200 outcome | at the shape | emulated | agrees | earlier verdict | why |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = (f"[{r['repo']}@{r['commit'][:8]} `{r['path']}`](https://github.com/{r['repo']}/blob/{r['commit']}/"
                f"{r['path']})")
        agrees = ("yes" + ("" if r["same_kind"] else " (not the same kind)")) if r["agrees"] else (
            "no" if r["scored"] else "no verdict" if r["predicts"] == "none" else "-")
        why = r.get("message", "") if r["status"] not in ("match",) else (r.get("unchecked") or "")
        if r["status"] == "race":
            why = f"{r['race']['status'].upper()} under {r['race']['schedule']}: {r['race']['message']}"
        why = " ".join(why.split())[:240].replace("|", "/")
        lines.append(f"| {name} | {r['set']} | {r['pairing']} | {r['outcome']} | {r['outcome_at_shape']} | "
                     f"{r['verdict']} | {agrees} | {r['earlier'][:90]} | {why} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("parse",))
    ap.add_argument("output", help="a runner output file")
    args = ap.parse_args(argv)
    print(json.dumps(parse_runner_output(Path(args.output).read_text()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
