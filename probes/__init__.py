"""GPU measurement probes (audience: whoever has a lent CUDA GPU, H100/H200 or B200).

Each is a script run from the repository root, e.g. `.venv/bin/python probes/dispatch.py`; without a fitting GPU
it prints one line saying so and exits 2:
  dispatch     host cost per custom_kernel call (any CUDA GPU; stub device body, real host path)
  pdl          time per call over 50 back-to-back calls with and without programmatic dependent launch (sm_90+)
  views        the kernel's operand views address the right bytes (any CUDA GPU)
  tma_loads    the kernel's own TMA loads bring the right tiles (sm_90+; all six loads on a B200)
  epilogue     the epilogue's stores put every element where C needs it (any CUDA GPU)
  profile_stamps  KernelConfig.profile's stamps, buffer and decode with a stub body (sm_90+; --emulate: on the CPU)
  device_stub  the stub kernel they share: the kernel's real host side with a replaceable device body
  cluster_occupancy  clusters of n whole-SM CTAs the GPU holds at once (any cluster-capable GPU; no CuTe DSL)
  first_call   what the first call's check of C on a sample costs per benchmark shape (any CUDA GPU; torch alone)
"""
