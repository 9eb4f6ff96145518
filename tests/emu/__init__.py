"""Tests of the generic SM100 emulator (emu/): hand-written PTX through tests/emu/ptx_kit.py, and its units."""
