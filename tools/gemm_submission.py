#!/usr/bin/env python3
"""Write nvfp4_gemm/submission.py, the file a user submits to the nvfp4_gemm leaderboard, from submission.py.

    python tools/gemm_submission.py            # (re)write nvfp4_gemm/submission.py
    python tools/gemm_submission.py --check    # exit 1 if nvfp4_gemm/submission.py is not what submission.py gives

One kernel source serves both leaderboards: submission.py's custom_kernel takes nvfp4_dual_gemm's 10-tuple or
nvfp4_gemm's 7-tuple (KernelConfig.problem). What differs is the first header line, which names the leaderboard
(popcorn-cli refuses a --leaderboard that differs from the header's; docs/leaderboard.md §5-§6): the generated file is
submission.py byte for byte with `#!POPCORN leaderboard nvfp4_dual_gemm` replaced by `#!POPCORN leaderboard
nvfp4_gemm`. tests/package/test_gemm_submission.py fails when the two drift apart.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "submission.py"
TARGET = REPO / "nvfp4_gemm" / "submission.py"
DUAL_HEADER = "#!POPCORN leaderboard nvfp4_dual_gemm"
GEMM_HEADER = "#!POPCORN leaderboard nvfp4_gemm"


def render(text: str) -> str:
    """nvfp4_gemm's submittable file from submission.py's text: the leaderboard header line swapped, nothing else."""
    first, sep, rest = text.partition("\n")
    if first != DUAL_HEADER:
        raise ValueError(f"submission.py must start with {DUAL_HEADER!r}, got {first!r}")
    return GEMM_HEADER + sep + rest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check that the file is up to date (exit 1 if not)")
    args = ap.parse_args(argv)
    want = render(SOURCE.read_text())
    have = TARGET.read_text() if TARGET.exists() else None
    if args.check:
        if have != want:
            print(f"{TARGET.relative_to(REPO)} is out of date: run python tools/gemm_submission.py", file=sys.stderr)
            return 1
        print(f"{TARGET.relative_to(REPO)} is up to date")
        return 0
    if have != want:
        TARGET.write_text(want)
        print(f"wrote {TARGET.relative_to(REPO)}")
    else:
        print(f"{TARGET.relative_to(REPO)} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
