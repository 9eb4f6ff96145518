"""The quick/full split of tests/conftest.py (issue 16): slow tests are deselected without --full or -m, the end of a
quick run names them by group with the command that runs them, and the real quick set still touches every layer.

The mechanism is checked on a throwaway suite (this conftest, a pyproject registering the marker, two modules) run
by pytest in a subprocess; the last test collects the real suite."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.mutants import MUTANTS

REPO = Path(__file__).resolve().parents[2]

MODULE_A = '''import pytest

def test_cheap():
    pass

@pytest.mark.slow
@pytest.mark.parametrize("case", [1, 2])
def test_heavy(case):
    pass

@pytest.mark.parametrize("case", [pytest.param(1), pytest.param(2, marks=pytest.mark.slow)])
def test_mixed(case):
    pass
'''
MODULE_B = '''import pytest

@pytest.mark.slow
def test_calibration():
    pass
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    (root / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", root / "tests" / "conftest.py")
    (root / "tests" / "test_a.py").write_text(MODULE_A)
    (root / "tests" / "test_b.py").write_text(MODULE_B)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\nmarkers = ["slow: heavy"]\n'
                                         'addopts = "--strict-markers -p no:cacheprovider"\n')
    return root


def pytest_in(root: Path, *args: str) -> tuple[str, dict]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = proc.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|deselected|skipped|failed)", final)}
    return proc.stdout, counts


def test_quick_run_deselects_slow_tests_and_says_how_to_run_them(suite):
    out, counts = pytest_in(suite)
    assert counts == {"passed": 2, "deselected": 4}, out  # deselected, not skipped
    assert "quick set: 4 slow tests in 2 groups left out" in out
    assert "tests/test_a.py (3): test_heavy 2, test_mixed" in out and "tests/test_b.py (1): test_calibration" in out
    assert f"run them too (the full suite, as CI does): {sys.executable} -m pytest -q --full" in out
    assert f"only these: {sys.executable} -m pytest -q -m slow" in out


@pytest.mark.parametrize("args,passed", [(["--full"], 6), (["-m", "slow"], 4), (["-m", "slow or not slow"], 6),
                                         (["-m", "not slow"], 2)])
def test_full_and_explicit_marker_expressions_are_obeyed(suite, args, passed):
    out, counts = pytest_in(suite, *args)
    assert counts["passed"] == passed, out
    assert "left out" not in out


def test_a_slow_test_named_by_node_id_runs(suite):
    out, counts = pytest_in(suite, "tests/test_a.py::test_heavy", "tests/test_a.py::test_mixed[2]")
    assert counts == {"passed": 3}, out


def test_only_what_k_selected_is_reported(suite):
    out, counts = pytest_in(suite, "-k", "calibration or cheap")
    assert counts == {"passed": 1, "deselected": 5}, out
    assert "quick set: 1 slow test in 1 group left out" in out and "test_heavy" not in out.split("left out")[1]


def test_quick_run_under_xdist_reports_the_slow_groups_too(suite):
    """With pytest-xdist (-n 2) the workers collect and deselect, and the controller prints their list."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install -e '.[test]' installs it)")
    out, counts = pytest_in(suite, "-n", "2")
    assert counts["passed"] == 2, out
    assert "quick set: 4 slow tests in 2 groups left out" in out
    assert "tests/test_a.py (3): test_heavy 2, test_mixed" in out and "tests/test_b.py (1): test_calibration" in out


@pytest.mark.slow  # collecting the whole suite takes ~8 s; CI (the full suite) is where a change to the markers lands
def test_the_real_quick_set_touches_every_layer():
    """The issue's contract for `pytest -q`: reference, harness, preflight of one config, the emulator on a 1-CTA,
    a 2-CTA and an A-collector config, a planted bug; and the slow tests exist (the full suite is larger)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    modules = {i.split("::")[0] for i in ids}
    assert {"tests/package/test_reference.py", "tests/package/test_scripts.py",
            "tests/package/test_submission.py"} <= modules
    assert "tests/package/test_tools.py::test_preflight_quick_passes_and_lint_fails" in ids
    # the kernel emulated on a 1-CTA and a 2-CTA config, one with the A collector, and a planted bug (the TUNE_SPACE
    # gate itself runs six schedules per config and is slow: tests/harness/test_verdict.py)
    emulated = ("::test_leaderboard_generator_on_table_configs[", "::test_pointer_fallback_launch_matches[")
    configs = [re.search(r"\[(.*)\]", i).group(1) for i in ids if any(t in i for t in emulated)]
    planted = [re.search(r"\[(.*)\]", i).group(1) for i in ids if "::test_planted_bug_is_reported[" in i]
    assert planted
    configs += [m.config for m in MUTANTS if m.name in planted]
    assert any(c.startswith("m128") for c in configs) and any(c.startswith("m256") for c in configs), configs
    assert any("_ac" in c for c in configs), configs
    assert re.search(r"\d+/\d+ tests collected \((\d+) deselected\)", proc.stdout), proc.stdout[-500:]
