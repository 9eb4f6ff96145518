#!/usr/bin/env bash
# Set up .venv for this package. Idempotent: a second run with nothing changed takes about a second.
#   1. python3 -m venv --system-site-packages .venv   (reuses a machine's existing, e.g. CUDA, torch)
#   2. torch==2.13.0 only if `import torch` fails in the venv (on a GPU machine, install your CUDA torch first)
#   3. pip install -e '.[test]'                        (torch, nvidia-cutlass-dsl>=4.3.5,<5, apache-tvm-ffi, pyyaml, pytest)
#   4. nvidia-cutlass-dsl==4.3.5 into .venv/dsl435 (--no-deps --target), the leaderboard-era DSL, used as
#      PYTHONPATH=.venv/dsl435:.venv/dsl435/nvidia_cutlass_dsl/python_packages .venv/bin/python tools/preflight.py --dsl-label 4.3.5
#      Both entries are needed: 4.8.1's .pth in .venv runs `import nvidia_cutlass_dsl` and puts that package's
#      dsl_packages first on sys.path; with .venv/dsl435 on PYTHONPATH that import finds 4.3.5 instead, so 4.8.1's
#      cutlass never enters the path (with only python_packages on PYTHONPATH, 4.8.1 would still be imported).
# Environment: PYTHON (default python3) picks the interpreter for the venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step="start"
trap 'echo "tools/setup.sh: FAILED during: ${step} (see the messages above)" >&2' ERR
PIP_FLAGS=(-qq --disable-pip-version-check --no-input)  # -qq: errors only
PY="${PYTHON:-python3}"
VPY=.venv/bin/python

step="create .venv with ${PY}"
if [ ! -x "${VPY}" ]; then
    "${PY}" -m venv --system-site-packages .venv
fi

step="install torch==2.13.0"
if ! "${VPY}" -c "import torch" >/dev/null 2>&1; then
    echo "tools/setup.sh: no torch importable in .venv; installing torch==2.13.0" >&2
    "${VPY}" -m pip install "${PIP_FLAGS[@]}" "torch==2.13.0"
fi

step="pip install -e '.[test]'"
stamp=.venv/.setup-stamp
want="$(cat pyproject.toml tools/setup.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "${stamp}" ] || [ "$(cat "${stamp}")" != "${want}" ] \
        || ! "${VPY}" -c "import torch, yaml, pytest, cutlass, tvm_ffi" >/dev/null 2>&1; then
    "${VPY}" -m pip install "${PIP_FLAGS[@]}" -e '.[test]'
    echo "${want}" > "${stamp}"
fi

step="install nvidia-cutlass-dsl==4.3.5 into .venv/dsl435"
DSL435=.venv/dsl435
if [ ! -f "${DSL435}/.complete" ]; then
    rm -rf "${DSL435}"
    "${VPY}" -m pip install "${PIP_FLAGS[@]}" --no-deps --target "${DSL435}" "nvidia-cutlass-dsl==4.3.5"
    test -d "${DSL435}/nvidia_cutlass_dsl/python_packages/cutlass"
    touch "${DSL435}/.complete"
fi

step="final import check"
"${VPY}" -c "import torch, yaml, pytest, cutlass, tvm_ffi"
