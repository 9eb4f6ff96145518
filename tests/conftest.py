"""Shared pytest setup: the repo root on sys.path, and offline compiles target the B200.

CUTE_DSL_ARCH must be set before cutlass is first imported; on a machine with an SM100 GPU the value
is the one the DSL would pick itself.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
