"""Offline and B200 tooling for the NVFP4 dual GEMM: preflight (compile checks), model (modeled
times), tune (B200 autotuner). See skills/nvfp4-dual-gemm-optimizer/SKILL.md."""
