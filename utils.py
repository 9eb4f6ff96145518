"""Helpers for the nvfp4 dual-GEMM package.

A superset of the leaderboard's problems/nvidia/utils.py (same names, same behaviour: set_seed, get_device,
verbose_allclose, verbose_allequal, match_reference, make_match_reference, DeterministicContext,
clear_l2_cache, clear_l2_cache_large), plus `load_task`, which reads a task.yml, and `clone_data`. It imports no file of
this package (reference.py imports it); where each problem's files are is problem_files.py's.
numpy is optional here (the leaderboard's image has it; our minimal environment may not).
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import torch

try:  # the leaderboard seeds numpy too; keep that when numpy is present
    import numpy as np
except ImportError:  # pragma: no cover - depends on the environment
    np = None

REPO_DIR = Path(__file__).resolve().parent


def set_seed(seed=42):
    random.seed(seed)
    if np is not None:
        np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)


def get_device(use_cuda: bool = True) -> torch.device:
    """The GPU if there is one (CUDA, else MPS), otherwise the CPU."""
    if use_cuda:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        print("No compatible GPU found. Falling back to CPU.")
    return torch.device("cpu")


def _describe_mismatches(received, expected, mismatched, max_print):
    count = int(mismatched.count_nonzero().item())
    if count == 0:
        return []
    lines = [f"Number of mismatched elements: {count}"]
    for index in torch.nonzero(mismatched)[:max_print]:
        i = tuple(index.tolist())
        lines.append(f"ERROR AT {i}: {received[i]} {expected[i]}")
    if count > max_print:
        lines.append(f"... and {count - max_print} more mismatched elements.")
    return lines


@torch.no_grad()
def verbose_allclose(received: torch.Tensor, expected: torch.Tensor, rtol=1e-05, atol=1e-08,
                     max_print=5) -> list[str]:
    """Element-wise |received - expected| <= atol + rtol*|expected|, NaN and +/-inf must match.

    Returns a list of lines describing the first `max_print` mismatches (empty when all match),
    exactly as the leaderboard's helper does (arithmetic in the tensors' own dtype).
    """
    if received.shape != expected.shape:
        return ["SIZE MISMATCH"]
    too_far = torch.abs(received - expected) > atol + rtol * torch.abs(expected)
    nan_differs = torch.logical_xor(torch.isnan(received), torch.isnan(expected))
    posinf_differs = torch.logical_xor(torch.isposinf(received), torch.isposinf(expected))
    neginf_differs = torch.logical_xor(torch.isneginf(received), torch.isneginf(expected))
    mismatched = too_far | nan_differs | posinf_differs | neginf_differs
    return _describe_mismatches(received, expected, mismatched, max_print)


@torch.no_grad()
def verbose_allequal(received: torch.Tensor, expected: torch.Tensor, max_print: int = 5):
    """Element-wise exact equality; returns mismatch lines as verbose_allclose does."""
    return _describe_mismatches(received, expected, torch.not_equal(received, expected), max_print)


def match_reference(data, output, reference: callable, rtol=1e-05, atol=1e-08) -> tuple[bool, str]:
    """The leaderboard's default check_implementation: compare `output` with `reference(data)`."""
    expected = reference(data)
    reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    if reasons:
        return False, "mismatch found! custom implementation doesn't match reference: " + " ".join(reasons)
    return True, ""


def make_match_reference(reference: callable, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)
    return wrapped


class DeterministicContext:
    """Deterministic cuDNN/cuBLAS settings inside a `with` block (as on the leaderboard)."""

    def __init__(self):
        self.allow_tf32 = None
        self.deterministic = None
        self.cublas = None

    def __enter__(self):
        self.cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
        self.allow_tf32 = torch.backends.cudnn.allow_tf32
        self.deterministic = torch.backends.cudnn.deterministic
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        torch.backends.cudnn.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.deterministic = self.deterministic
        torch.use_deterministic_algorithms(False)
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = self.cublas


def clear_l2_cache():
    """The leaderboard's small flush: a 4 GiB randn tensor on the GPU."""
    dummy = torch.randn((1024, 1024, 1024), device="cuda")
    del dummy


def clear_l2_cache_large():
    """The leaderboard's flush in eval_better_bench.py: a 16000x1024x1024 fp32 randn (~67 GB)."""
    dummy = torch.randn((16000, 1024, 1024), device="cuda")
    del dummy


# --------------------------------------------------------------------------------------------------
# Package additions
# --------------------------------------------------------------------------------------------------
_CASE_KEYS = ("m", "n", "k", "l", "seed")


def load_task(path: str | os.PathLike = "task.yml") -> dict:
    """Read task.yml: {"tests": [...], "benchmarks": [...]} with each case a dict of int m, n, k, l, seed
    (benchmarks also carry float "sol_us", the speed-of-light time in microseconds).

    A relative path that does not exist from the current directory is looked up next to this file,
    so scripts work from any working directory.
    """
    import yaml

    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = REPO_DIR / p
    if not p.exists():
        raise FileNotFoundError(f"task file not found: {path} (also looked in {REPO_DIR})")
    with open(p) as f:
        raw = yaml.safe_load(f)
    if not isinstance(raw, dict):
        raise ValueError(f"{p}: expected a mapping at top level")
    task = {}
    for section in ("tests", "benchmarks"):
        entries = raw.get(section)
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"{p}: '{section}' must be a non-empty list")
        cases = []
        for idx, entry in enumerate(entries):
            missing = [key for key in _CASE_KEYS if key not in entry]
            if missing:
                raise ValueError(f"{p}: {section}[{idx}] lacks {missing}")
            case = {}
            for key in _CASE_KEYS:
                value = entry[key]
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{p}: {section}[{idx}].{key} must be an int, got {value!r}")
                case[key] = value
            if section == "benchmarks":
                if "sol_us" not in entry:
                    raise ValueError(f"{p}: benchmarks[{idx}] lacks sol_us")
                case["sol_us"] = float(entry["sol_us"])
            cases.append(case)
        task[section] = cases
    return task


def clone_data(data):
    """Recursively clone every tensor in a (nested) tuple/list/dict, as the leaderboard's eval does."""
    if isinstance(data, tuple):
        return tuple(clone_data(x) for x in data)
    if isinstance(data, list):
        return [clone_data(x) for x in data]
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data
