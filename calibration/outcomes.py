#!/usr/bin/env python3
"""What B200s said about public leaderboard files, as data: the outcome each file's author published (passed,
mismatch, illegal memory access, crash after the kernel, host error, timeout, or none), read from GPU MODE's runner
output committed beside the kernel, and declared in calibration/outcomes.json before the emulator's verdicts that are
scored against it were run.

    python -m calibration.outcomes parse OUTPUT.txt     # the outcome a runner output states, as JSON

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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("parse",))
    ap.add_argument("output", nargs="?", help="with parse: a runner output file")
    args = ap.parse_args(argv)
    print(json.dumps(parse_runner_output(Path(args.output).read_text()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
