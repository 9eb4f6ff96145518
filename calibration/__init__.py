"""The calibration layer: the emulator judged against hardware and hardware-verified code (its audience: whoever
changes emu/ or the harness). Only tools, probes and tests import it; it imports emu/ and the harness.

Each module is one calibration family, runnable from the repository root as `python -m calibration.NAME`:
  alu            the non-tcgen05 instruction forms against a lent H100/H200 (fixture tests/data/emu_alu_probe_h200.npz)
  tma_gpu        TMA tile loads and tensor-map encodings against a lent H100/H200 (fixtures in tests/data)
  gpu_probes     the GPU probes' own kernels (probes/tma_loads.py, probes/epilogue.py) run in the emulator
  nvidia_example NVIDIA's B200-verified CuTe DSL persistent block-scaled GEMM example
  public         the public B200-run leaderboard files, as data (each point's repository, commit and path;
                 public_files.json for files that are not points), every one run unmodified through
                 harness.runner; b200_points.json: their B200 times, designs and the fit/holdout split the timed
                 emulator is judged on; `table` writes docs/public_files.md
  mufu           ex2/rcp/tanh .approx on a lent H100/H200 (fixture tests/data/mufu_<card>.npz), and SiLU forms on C
  launch_limits  whether a kernel's 1 KiB of cubin static shared memory counts against the opt-in maximum per block
                 (the launch stand-ins' rule) on a lent H100/H200
  timing         the timed emulator against public B200 times (b200_points.json): the fit, the held-out report,
                 the later declared sets (heldout2.json; heldout3.json: teelaitila's six versions and
                 NaregAmirianMegan's submission_ptx.py), every point timed through calibration.public
  ptx_launch     load a plain-PTX module with the CUDA driver and launch it (the MUFU and %globaltimer probes)
Public sources live in a folder of the user's (calibration.public), never in this repository.
Neither emu/ nor the harness imports this package.
"""
