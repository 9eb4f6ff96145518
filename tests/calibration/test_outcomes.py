"""calibration/outcomes.py: the B200 outcomes declared for public files (issue 38) and the scoring of the emulator's
verdicts against them. No run here: the runs are `python -m calibration.public outcomes` (docs/public_files.md)."""
from __future__ import annotations

import json

from calibration import outcomes

# jIab-b/nvfp4_gemm commits this package may read (docs/public_files.md's and issue 38's); every other commit of that
# repository is an outside check
ALLOWED = {"5a340df5", "014f4b73", "78a14cfe", "f7c89a6c", "33224fdc", "2aa318ce", "0d7b1d56", "6e2d2ef5", "92166a3d",
           "8ae2f9d0", "03c5db54", "7541e506", "9d1caaf5", "7c3f3278", "f9ad67aa", "04e4da4f", "784f0189", "feab2193",
           "72943f30", "4cb0ef02", "ae1da779", "f77b0d15"}

HEADER = '"**NVIDIA on GitHub ✅ success**\n> Workflow [1](<x>) completed\n> Downloading artifacts... done\n'
PASSED = HEADER + """> ✅ Benchmarking successful

## Benchmarks:
```
k: 7168; l: 1; m: 128; n: 4096; seed: 1111
 ⏱ 112 ± 0.1 µs
 ⚡ 112 µs 🐌 113 µs
```"
"""
MISMATCH = HEADER + """> ❌ Benchmarking failed

## Benchmarks:
```
❌ k: 7168; l: 1; m: 128; n: 4096; seed: 1111 failed testing:

mismatch found! custom implementation doesn't match reference: Number of mismatched elements: 99 ERROR AT (32, 640, 0): -787.5 -1104.0 ERROR AT (32, 641, 0): 1.0 2.0 ... and 97 more mismatched elements.
```"
"""
STOPPED = HEADER + """> ❌ Running benchmarks failed (internal error 1)
# Running failed
## Program stderr:
```
Traceback (most recent call last):
  File \\"/runner/eval.py\\", line 228, in _run_single_benchmark
    output = custom_kernel(_clone_data(data))
  File \\"/runner/submission.py\\", line 615, in custom_kernel
    return module.gemm(
{last}
\\"\\"\\"

The above exception was the direct cause of the following exception:
```"
"""
AFTER = HEADER + """> ❌ Running benchmarks failed (internal error 1)
## Program stderr:
```
Traceback (most recent call last):
  File \\"/runner/eval.py\\", line 233, in _run_single_benchmark
    good, message = check_implementation(reference_output, custom_output)
  File \\"/runner/reference.py\\", line 44, in ref_kernel
    res = torch._scaled_mm(
{last}
```"
"""


def test_runner_outputs_parse_into_their_classes():
    ok = outcomes.parse_runner_output(PASSED)
    assert ok["class"] == "passed" and ok["shapes"] == [{"shape": [128, 4096, 7168, 1], "result": "passed",
                                                         "mean_us": 112.0}]
    bad = outcomes.parse_runner_output(MISMATCH)
    assert bad["class"] == "mismatch" and bad["shapes"][0]["mismatched"] == 99
    assert bad["shapes"][0]["first"][0] == [32, 640, 0, -787.5, -1104.0]  # row, column, batch, got, expected
    host = outcomes.parse_runner_output(STOPPED.format(last="RuntimeError: Scale tensormap failed: invalid argument"))
    assert host["class"] == "host-error" and "submission.py:615 in custom_kernel" in host["where"]
    ima = outcomes.parse_runner_output(AFTER.format(
        last="torch.AcceleratorError: CUDA error: an illegal memory access was encountered"))
    assert ima["class"] == "illegal-memory-access"
    crash = outcomes.parse_runner_output(AFTER.format(
        last="RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"))
    assert crash["class"] == "crash-after-kernel"


def test_every_declared_outcome_has_its_source_and_pairing():
    doc = outcomes.declared()
    assert {"issue38", "added", "listed", "points"} == {e["set"] for e in doc["files"]}
    assert sum(e["set"] == "issue38" for e in doc["files"]) == 8
    for e in doc["files"]:
        assert e["outcome"]["class"] in outcomes.CLASSES and e["pairing"]["evidence"], e["path"]
        if e["repo"] == "jIab-b/nvfp4_gemm":
            assert e["commit"][:8] in ALLOWED and e["source"]["quote"] and e["source"]["output"], e
            assert e["pairing"]["strength"].split(" ")[0] in ("strong", "moderate", "weak")
    assert doc["plan"]["schedules"] == ["b200", "b200~1", "b200~2", "uniform:0"] and doc["plan"]["clusters"] == 1


def test_a_verdict_is_scored_by_what_it_predicts():
    row = lambda outcome, status, pairing="strong": outcomes.score(  # noqa: E731
        {"outcome": outcome, "status": status, "pairing": pairing, "repo": "r/r"})
    assert row("passed", "race")["agrees"] and row("passed", "race")["same_kind"]
    assert row("mismatch", "hazard")["same_kind"] and not row("mismatch", "race")["agrees"]
    assert row("host-error", "refused")["same_kind"] and not row("host-error", "cannot-run")["scored"]
    assert row("illegal-memory-access", "mismatch")["agrees"] and not row("illegal-memory-access", "mismatch")["same_kind"]
    assert not row("none", "match")["scored"]
    c = outcomes.confusion([row("passed", "match"), row("mismatch", "race"), row("passed", "unsupported")])
    assert (c["scored"], c["agree"], c["cells"][("mismatch", "race")]) == (2, 1, 1)


def test_the_section_shows_the_confusion_table(tmp_path):
    base = {"repo": "jIab-b/nvfp4_gemm", "commit": "0" * 40, "path": "k.py", "set": "issue38", "pairing": "strong",
            "outcome_at_shape": "", "earlier": "", "verdict": "", "message": ""}
    rows = [outcomes.score({**base, "outcome": "passed", "status": "race", "verdict": "RACE",
                            "race": {"status": "deadlock", "schedule": "uniform:0", "message": "lapped"}}),
            outcomes.score({**base, "path": "m.py", "outcome": "mismatch", "status": "hazard", "verdict": "HAZARD"})]
    js = tmp_path / "o.json"
    js.write_text(json.dumps({"plan": outcomes.declared()["plan"], "rows": rows}))
    text = "\n".join(outcomes.section_lines(js))
    assert text.startswith(outcomes.SECTION) and "pass/fail agreement 2/2 (100%)" in text
    assert "| passed | 1 |  | 1 |" in text and "DEADLOCK under uniform:0: lapped" in text


def test_a_verdict_class_comes_with_its_record_against_b200_outcomes(tmp_path):
    """track_record: of the scored rows the table gave a verdict class, how many passed and failed on a B200; nothing
    for a class the table never gave (or rows without a published outcome), or without the table."""
    from calibration.outcomes import track_record

    rows = [{"status": "race", "outcome": "passed", "scored": True},
            {"status": "race", "outcome": "mismatch", "scored": True},
            {"status": "race", "outcome": "none", "scored": False},
            {"status": "hazard", "outcome": "illegal-memory-access", "scored": True}]
    js = tmp_path / "outcomes.json"
    js.write_text(json.dumps({"rows": rows}))
    assert track_record("race", js).startswith("track record: of the 2 public files the emulator called RACE")
    assert "1 passed and 1 failed on a B200" in track_record("race", js)
    assert "the one public file the emulator called HAZARD" in track_record("hazard", js)
    assert "0 passed and 1 failed" in track_record("hazard", js)
    assert track_record("deadlock", js) == "" and track_record("race", tmp_path / "absent.json") == ""
