"""Tests of this package's kernels in the emulator (harness/): verdicts, planted bugs, capture, knobs, timed runs."""
