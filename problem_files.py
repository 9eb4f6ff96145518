"""Where each leaderboard problem's files are, and its reference module.

The dual GEMM's gpumode files (task.yml, task.py, reference.py, submission.py) sit at the top of the repository,
nvfp4_gemm's in nvfp4_gemm/ (its submission.py generated from the top-level one; docs/leaderboard.md §9). The scripts
and tools that take `--problem` find a problem's shapes and reference here. It sits above reference.py (which imports
utils.py), so no import circle runs through utils.py, and it imports nothing but reference modules, so it travels with
the harness scripts (test_correctness.py, test_benchmark.py) wherever they are copied.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent
DUAL_GEMM = "nvfp4_dual_gemm"
GEMM = "nvfp4_gemm"
PROBLEM_DIRS = {DUAL_GEMM: REPO_DIR, GEMM: REPO_DIR / "nvfp4_gemm"}


def problem_dir(problem: str = DUAL_GEMM) -> Path:
    if problem not in PROBLEM_DIRS:
        raise ValueError(f"problem must be one of {sorted(PROBLEM_DIRS)}, got {problem!r}")
    return PROBLEM_DIRS[problem]


def task_path(problem: str = DUAL_GEMM) -> Path:
    """The problem's task.yml (its test and benchmark shapes; utils.load_task reads it)."""
    return problem_dir(problem) / "task.yml"


def load_reference(problem: str = DUAL_GEMM):
    """The problem's reference module (generate_input, ref_kernel, check_implementation): `reference` for the dual
    GEMM, nvfp4_gemm/reference.py (as module nvfp4_gemm_reference) for the single one."""
    if problem_dir(problem) == REPO_DIR:
        return importlib.import_module("reference")
    name = f"{problem}_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, problem_dir(problem) / "reference.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
