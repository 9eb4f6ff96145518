"""The planted bugs of harness/mutants.py in the emulator (emulated, no GPU): each reported by the default verdict,
the launch and static ones before anything runs, the race-like ones over ten schedules; every mutant valid Python,
and the mutants cover the issue's kinds. The verdict itself: tests/harness/test_verdict.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.mutants import MUTANTS
from harness.verdict import emulate
from tests.harness.test_verdict import quick_if

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mutant", [
    pytest.param(m, marks=[pytest.mark.slow, pytest.mark.xfail(strict=True, reason=m.missed_because)])
    if m.missed_because
    else quick_if([m], m.name == "swap_b") for m in MUTANTS], ids=lambda m: m.name)
def test_planted_bug_is_reported(mutant, tmp_path):
    """By the default verdict (it stops at the first schedule that catches the bug)."""
    path = mutant.write(tmp_path)
    res = emulate(*mutant.shape, config_name=mutant.config, mode="strict", submission=path, sm_count=mutant.sm_count,
                  sched_seed=7)
    assert mutant.caught(res), f"{mutant.name} ({mutant.kind}) not caught: {res.summary()}"


@pytest.mark.parametrize("name,status,words", [
    ("smem_over_capacity", "launch", "shared memory per block"),
    ("cluster_over_limit", "launch", "cluster of 32 CTAs"),
    ("mixed_cta_group", "hazard", "[cta-group]"),
])
def test_launch_and_static_mutants_are_caught_before_running(name, status, words, tmp_path):
    """The cheap ones: a launch a B200 refuses, a kernel-wide ISA rule; neither needs a schedule."""
    mutant = next(m for m in MUTANTS if m.name == name)
    res = emulate(*mutant.shape, config_name=mutant.config, submission=mutant.write(tmp_path))
    assert res.status == status and words in res.message, res.summary() + "\n" + res.message
    assert res.stats.get("warp_instructions", 0) == 0


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.family in ("schedule", "init", "wrap")],
                         ids=lambda m: m.name)
def test_mutant_catch_rate_over_ten_schedules(mutant, tmp_path):
    """Each race-like mutant over up to 10 schedules cycling through every policy: caught by at least one. The run
    stops at the first failing schedule (the catch rate, every schedule run to its end, is a tool's:
    python -m harness.mutants --schedules 10, MEMORY.md's table), which keeps CI's time down."""
    res = emulate(*mutant.shape, config_name=mutant.config, submission=mutant.write(tmp_path), sm_count=mutant.sm_count,
                  schedules=10, stop_at_failure=True)
    caught = [r.schedule for r in res.runs if mutant.caught(r)]
    assert caught, f"{mutant.name}: caught by none of {[r.schedule for r in res.runs]}"


def test_every_mutant_is_valid_python():
    """A mutant that does not parse fails to compile: under a strict xfail that would pass for the wrong reason."""
    import ast

    text = (REPO / "submission.py").read_text()
    for m in MUTANTS:
        ast.parse(m.source(text), filename=f"submission_{m.name}.py")


def test_mutants_cover_the_issue_kinds():
    kinds = {m.kind for m in MUTANTS}
    assert len(kinds) >= 8
    for want in ("wrong expect-tx bytes", "missing consumer release", "doubled consumer release", "B1/B2 swapped",
                 "SFB1/SFB2 swapped", "64-wide-N scale shift wrong", "stage index off by one",
                 "accumulator stage phase wrong", "wrong C coordinates for the peer CTA of a pair"):
        assert want in kinds
    # issue 14's classes: launch limits, kernel-wide ISA rules, init ordering, large skews, wrapping stages
    assert {"launch", "lint", "init", "schedule", "wrap", "ordering"} <= {m.family for m in MUTANTS}
