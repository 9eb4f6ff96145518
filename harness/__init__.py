"""The harness: this package's kernels in the SM100 emulator (emu/), problem-aware.

  problems   each leaderboard problem's tensors, input placement and the check of C (DUAL_GEMM today)
  capture    compile a submission's config and capture the launch its real host code makes (export_to_c, stand-ins
             for the CUDA runtime in launch_stubs.c); the compile worker runs as a script (compile_worker.py)
  verdict    emulate(): inputs -> the captured launch -> emu.run_kernel under the verdict's schedules -> C checked
  timed      timed_emulate(): one leaderboard call of a config, timed by emu.timing
  mutants    planted single-line bugs in copies of submission.py that the verdict must report

It imports emu/ and the package's reference.py (never the calibration, the tools or the probes).
"""
