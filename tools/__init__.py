"""The user's command-line tools (run from the repository root with .venv/bin/python tools/NAME.py):
setup.sh, preflight (offline sm_100a compile checks), emulate (the kernel in the SM100 emulator; --timing: the timed
emulator), sweep (every config on the test shapes in the emulator), tune (B200 autotuner; --dry-run: compile every
candidate and rank it by the timed emulator), sol (the speed of light per shape and the best public results), profile
(B200: the leaderboard loop with KernelConfig.profile beside the timed emulator, and a fit of its cost rows;
profile_buffer decodes the buffer), b200_session.sh (the first B200 hour in one command: one bundle to share).
README.md's file table lists every folder; skills/nvfp4-dual-gemm-optimizer/SKILL.md says when to use which."""
