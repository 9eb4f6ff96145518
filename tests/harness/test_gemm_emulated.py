"""The single GEMM (nvfp4_gemm, issue 23) in the SM100 emulator (emulated, no GPU): every GEMM_TUNE_SPACE config under
the default verdict with both generators, CTAs that run several tiles, the pointer fallback, the real test shapes on a
cluster subset, planted bugs in its paths (harness.mutants.GEMM_MUTANTS), and the CLIs' --problem.

Runs of the kernel take seconds to minutes on 2 CPUs: those are marked slow; the quick set keeps one config, one
planted bug and the cheap CLI checks."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from emu.machine import Schedule  # noqa: E402
from harness.mutants import GEMM_MUTANTS, MUTANTS, beside_the_kernel, problems  # noqa: E402
from harness.problems import GEMM, get_problem  # noqa: E402
from harness.verdict import DEFAULT_SCHEDULES, emulate, load_submission  # noqa: E402
from problem_files import task_path  # noqa: E402
from utils import load_task  # noqa: E402

SUB = load_submission(REPO / "submission.py")
PROBLEM = "nvfp4_gemm"
QUICK = "gemm_m128n64_c1x1_e32"


def small_shape(cfg) -> tuple:
    """Two N tiles' worth of one cluster, a k-tile per slice of a K split at least twice over."""
    cm, cn = cfg.cluster_mn
    return (128 * cm, max(256, 2 * cfg.cta_tile_mn[1] * cn), max(512, 512 * cfg.split_k), 1)


def test_the_problem_is_registered_with_its_operands():
    assert get_problem(PROBLEM) is GEMM and get_problem(None).name == "nvfp4_dual_gemm"
    assert GEMM.operands == ("a", "b", "sfa", "sfb", "c")
    data = GEMM.reference().generate_input(128, 128, 256, 1, 1, device="cpu")
    assert [tuple(data[GEMM.data_index[o]].shape) for o in GEMM.operands] == [
        spec[1] for spec in (GEMM.tensors(128, 128, 256, 1)[o] for o in GEMM.operands)]
    assert {c.name for c in GEMM.configs(SUB)} == {c.name for c in SUB.GEMM_TUNE_SPACE}


def test_quick_config_matches_leaderboard_data():
    """The quick set's one run: the default verdict (six schedules) on the leaderboard's data (all 16 codes, zero
    scales), a CTA walking several tiles."""
    res = emulate(128, 512, 512, 1, config_name=QUICK, mode="leaderboard", sched_seed=2, problem=PROBLEM)
    assert res.passed, res.summary() + "\n" + res.message
    assert [r.status for r in res.runs] == ["match"] * len(DEFAULT_SCHEDULES)
    assert res.checked_elements == 128 * 512 and res.stats["mma"] == (512 // 64) * (512 // 64)


TABLE_NAMES = {c.name for c in SUB.GEMM_CONFIG_TABLE.values()}
# The gate: every config with our strict generator; the table's configs with the leaderboard's generator too (the quick
# set runs one config on it). CI's time (about 30 minutes on 2 CPUs) is why not every config twice.
GATE = [(c, "strict") for c in SUB.GEMM_TUNE_SPACE] + [(c, "leaderboard") for c in SUB.GEMM_TUNE_SPACE
                                                       if c.name in TABLE_NAMES]


@pytest.mark.slow
@pytest.mark.parametrize("cfg, mode", GATE, ids=lambda x: getattr(x, "name", x))
def test_every_gemm_tune_space_config_matches(cfg, mode):
    """The gate of the single GEMM: every schedule of the default verdict matches, no notes."""
    shape = small_shape(cfg)
    res = emulate(*shape, config_name=cfg.name, mode=mode, sched_seed=1, problem=PROBLEM)
    assert res.status == "match", res.summary() + "\n" + res.message
    assert [r.status for r in res.runs] == ["match"] * len(DEFAULT_SCHEDULES)
    assert res.checked_elements == shape[0] * shape[1]
    assert res.stats["mma"] == (shape[1] // cfg.mma_tile_mn[1]) * (shape[2] // 64) * (shape[0] // 128)
    assert not res.notes, "\n".join(res.note_lines())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted({c.name for c in SUB.GEMM_CONFIG_TABLE.values()}))
def test_table_configs_run_several_tiles_per_cta(name):
    """sm_count 2: each CTA (or K-split cluster) walks several tiles, so the ring and accumulator stages wrap."""
    cfg = next(c for c in SUB.GEMM_TUNE_SPACE if c.name == name)
    res = emulate(128, 1024, 2048, 1, config_name=name, mode="strict", sm_count=2 * cfg.split_k, problem=PROBLEM,
                  schedules=[Schedule("uniform", 3), Schedule("late_wake", 4)])
    assert res.passed, res.summary() + "\n" + res.message
    grid = res.launch["grid"]
    assert grid[0] * grid[1] * grid[2] <= 2 * cfg.split_k


@pytest.mark.slow
@pytest.mark.parametrize("name", [QUICK, "gemm_m128n64_c1x1_e16_sk2"])
def test_pointer_fallback_launch_matches(name):
    res = emulate(128, 256, 1024, 1, config_name=name, host_path="pointer", problem=PROBLEM, schedules=2)
    assert res.passed, res.summary() + "\n" + res.message
    assert res.launch["host_path"] == "pointer"


def one_test_shape_per_config() -> list:
    """The first test shape of nvfp4_gemm/task.yml for each config custom_kernel picks there (5 of the 10 shapes).
    Every shape with both generators: `python tools/emulate.py --problem nvfp4_gemm --shape M,N,K --clusters 2`."""
    seen = {}
    for case in load_task(task_path(PROBLEM))["tests"]:
        seen.setdefault(SUB.default_gemm_config(case["m"], case["n"], case["k"], case["l"]).name, case)
    return list(seen.values())


@pytest.mark.slow
@pytest.mark.parametrize("case", one_test_shape_per_config(), ids=lambda c: f"{c['m']}x{c['n']}x{c['k']}")
def test_the_leaderboards_test_shapes_on_two_clusters(case, mode="leaderboard"):
    """A test shape of nvfp4_gemm/task.yml per config custom_kernel picks there, with the leaderboard's generator, two
    clusters, one schedule."""
    shape = (case["m"], case["n"], case["k"], case["l"])
    res = emulate(*shape, mode=mode, clusters=2, problem=PROBLEM, schedules=1, input_seed=case["seed"])
    assert res.passed, res.summary() + "\n" + res.message
    assert res.checked_elements > 0


def test_gemm_mutants_apply_once_and_are_valid_python(tmp_path):
    import ast

    text = (REPO / "submission.py").read_text()
    names = [m.name for m in MUTANTS + GEMM_MUTANTS]
    assert len(set(names)) == len(names)
    for m in GEMM_MUTANTS:
        assert m.problem == PROBLEM and any(c.name == m.config for c in SUB.GEMM_TUNE_SPACE)
        ast.parse(m.source(text))


@pytest.mark.parametrize("mutant", [m if m.name == "gemm_store_wrong_column" else pytest.param(m, marks=pytest.mark.slow)
                                    for m in GEMM_MUTANTS], ids=lambda m: m.name)
def test_gemm_planted_bug_is_reported(mutant, tmp_path):
    """By the default verdict (it stops at the first schedule that catches the bug), with the failure it states
    (Mutant.expect), beside the unmutated kernel, which passes at the same shape, inputs, seeds, SM count and
    schedules."""
    assert mutant.problem == PROBLEM  # beside_the_kernel runs both as the mutant's problem
    res, kernel = beside_the_kernel(mutant, tmp_path)
    assert not problems(mutant, res, kernel), "\n".join(problems(mutant, res, kernel))


def test_emulate_cli_takes_the_problem(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(REPO / "tools/emulate.py"), "--problem", PROBLEM, "--shape", "128,256,512",
                        "--config", QUICK, "--schedules", "1", "--json", str(out)], capture_output=True, text=True,
                       cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "emulated MATCH: gemm_m128n64_c1x1_e32" in p.stdout
    assert json.loads(out.read_text())["problem"] == PROBLEM
    p = subprocess.run([sys.executable, str(REPO / "tools/emulate.py"), "--problem", PROBLEM, "--shape", "128,256,512",
                        "--config", "m128n64_c1x1_e32"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode != 0 and "no config named m128n64_c1x1_e32 in GEMM_TUNE_SPACE" in p.stdout + p.stderr


@pytest.mark.slow
def test_timed_emulator_takes_the_problem_and_says_where_its_constants_come_from():
    p = subprocess.run([sys.executable, str(REPO / "tools/emulate.py"), "--problem", PROBLEM, "--timing", "--shape",
                        "128,7168,2048", "--variants", "none"], capture_output=True, text=True, cwd=REPO, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "timed:" in p.stdout and "fitted on gau-nernst's nvfp4_gemm v0, v3b and v4" in p.stdout
