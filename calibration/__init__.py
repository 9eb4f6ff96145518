"""The calibration layer: the emulator judged against hardware and hardware-verified code (its audience: whoever
changes emu/ or the harness). Only tools, probes and tests import it; it imports emu/ and the harness.

Each module is one calibration family, runnable from the repository root as `python -m calibration.NAME`:
  alu            the non-tcgen05 instruction forms against a lent H100/H200 (fixture tests/data/emu_alu_probe_h200.npz)
  tma_gpu        TMA tile loads and tensor-map encodings against a lent H100/H200 (fixtures in tests/data)
  gpu_probes     the GPU probes' own kernels (probes/tma_loads.py, probes/epilogue.py) run in the emulator
  nvidia_example NVIDIA's B200-verified CuTe DSL persistent block-scaled GEMM example
  gau            gau-nernst's B200-measured CUDA + inline-PTX kernels, every version of his nvfp4_dual_gemm and
                 nvfp4_gemm logs (gau_versions: his host code per version); b200_points.json: their B200 times,
                 designs and the fit/holdout split the timed emulator is judged on
  arseni         arseni_ivanov's B200-verified CuTe DSL kernel for this problem (three kernels by shape)
  novus          novus677's B200-verified CUDA + inline-PTX kernel 9 for this problem (novus_versions: his
                 kernels 1-8 from their commits, the second declared set calibration/heldout2.json)
  mufu           ex2/rcp/tanh .approx on a lent H100/H200 (fixture tests/data/mufu_<card>.npz), and SiLU forms on C
  launch_limits  whether a kernel's 1 KiB of cubin static shared memory counts against the opt-in maximum per block
                 (the launch stand-ins' rule) on a lent H100/H200
  timing         the timed emulator against public B200 times (b200_points.json): the fit, the held-out report,
                 the later declared sets (heldout2.json; heldout3.json: teelaitila's six versions and
                 NaregAmirianMegan's submission_ptx.py, run through issue 28's generic runner)
  ptx_launch     load a plain-PTX module with the CUDA driver and launch it (the MUFU and %globaltimer probes)
Public sources are fetched by path at a pinned commit and never copied into this repository.
Neither emu/ nor the harness imports this package.
"""
