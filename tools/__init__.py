"""The user's command-line tools (run from the repository root with .venv/bin/python tools/NAME.py):
setup.sh, preflight (offline sm_100a compile checks), emulate (the kernel in the SM100 emulator), sweep
(every config on the test shapes in the emulator), tune (B200 autotuner), model (modeled times).
README.md's file table lists every folder; skills/nvfp4-dual-gemm-optimizer/SKILL.md says when to use which."""
