"""The planted bugs of harness/mutants.py in the emulator (emulated, no GPU): each produces the failure it states
(Mutant.expect: its status, its hazard's rule or its Note's rule) under the default verdict, beside the unmutated kernel,
which passes at the same shape, inputs, seeds, SM count and schedules; the launch and static ones before anything runs;
the race-like ones over ten schedules. Every mutant is valid Python and states a well-formed failure, and the mutants
cover the issue's kinds. The verdict itself: tests/harness/test_verdict.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.mutants import FAILURES, GEMM_MUTANTS, MUTANTS, beside_the_kernel, problems
from harness.verdict import emulate
from tests.harness.test_verdict import quick_if

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mutant", [
    pytest.param(m, marks=[pytest.mark.slow, pytest.mark.xfail(strict=True, reason=m.missed_because)])
    if m.missed_because
    else quick_if([m], m.name == "swap_b") for m in MUTANTS], ids=lambda m: m.name)
def test_planted_bug_is_reported(mutant, tmp_path):
    """By the default verdict (it stops at the first schedule that catches the bug), with the failure it states."""
    res, kernel = beside_the_kernel(mutant, tmp_path)
    assert not problems(mutant, res, kernel), "\n".join(problems(mutant, res, kernel))


@pytest.mark.parametrize("name", ["smem_over_capacity", "cluster_over_limit", "mixed_cta_group"])
def test_launch_and_static_mutants_are_caught_before_running(name, tmp_path):
    """The cheap ones: a launch a B200 refuses, a kernel-wide ISA rule; neither needs a schedule."""
    mutant = next(m for m in MUTANTS if m.name == name)
    res = emulate(*mutant.shape, config_name=mutant.config, submission=mutant.write(tmp_path))
    assert mutant.caught(res), res.summary() + "\n" + res.message
    assert res.stats.get("warp_instructions", 0) == 0


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.family in ("schedule", "init", "wrap")],
                         ids=lambda m: m.name)
def test_mutant_catch_rate_over_ten_schedules(mutant, tmp_path):
    """Each race-like mutant over up to 10 schedules cycling through every policy: caught, with a failure it states, by
    at least one, beside the kernel over the same schedules. The run stops at the first failing schedule (the catch
    rate, every schedule run to its end, is a tool's: python -m harness.mutants --schedules 10, MEMORY.md's table),
    which keeps CI's time down."""
    res, kernel = beside_the_kernel(mutant, tmp_path, sched_seed=0, schedules=10)
    assert [r.schedule for r in res.runs if mutant.caught(r)], [(r.schedule, r.status) for r in res.runs]
    assert not problems(mutant, res, kernel), "\n".join(problems(mutant, res, kernel))


def test_every_mutant_states_a_failure_the_verdict_can_report():
    """Each form of Mutant.expect names a status the verdict reports, with the rule or limit where it needs one, and
    every Note rule named is one the emulator raises (its name in emu/'s source)."""
    emu_source = "\n".join(p.read_text() for p in (REPO / "emu").rglob("*.py"))
    for m in MUTANTS + GEMM_MUTANTS:
        assert m.expect, f"{m.name} states no failure"
        for form in m.expect:
            status, _, detail = form.partition(":")
            assert status in FAILURES and (detail or status in ("mismatch", "deadlock")), (m.name, form)
            assert status != "note" or f'"{detail}"' in emu_source, (m.name, form)


def test_a_verdict_with_another_failure_does_not_count():
    """shows(): the status and, where stated, the rule must both be the mutant's; a Note only counts on a MATCH."""
    from types import SimpleNamespace

    from harness.mutants import shows

    note = SimpleNamespace(rule="tcgen05-mma-then-cp-unordered")
    hazard = SimpleNamespace(status="hazard", message="[tcgen05-ld-then-mma-unordered] tcgen05.mma ...", notes=[])
    assert shows(hazard, "hazard:[tcgen05-ld-then-mma-unordered]")
    assert not shows(hazard, "hazard:[cta-group]") and not shows(hazard, "mismatch") and not shows(hazard, "deadlock")
    assert shows(SimpleNamespace(status="match", message="", notes=[note]), "note:tcgen05-mma-then-cp-unordered")
    assert not shows(SimpleNamespace(status="mismatch", message="", notes=[note]), "note:tcgen05-mma-then-cp-unordered")
    assert not shows(SimpleNamespace(status="match", message="", notes=[]), "note:tcgen05-mma-then-cp-unordered")


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
