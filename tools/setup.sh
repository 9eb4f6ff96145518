#!/usr/bin/env bash
# Set up .venv for this package. Idempotent: when nothing changed, a re-run is one import check
# (about 2 s on a 2-CPU machine, importing torch and the CuTe DSL) and touches nothing.
#   1. python3 -m venv --system-site-packages .venv   (reuses a machine's existing, e.g. CUDA, torch)
#   2. ${TORCH_SPEC} (default torch==2.13.0) only if `import torch` fails in the venv, with pip's own
#      configuration plus ${TORCH_PIP_ARGS}. Which build that is depends on the indexes pip is configured
#      with: the default index's Linux x86_64 torch wheel is the CUDA build, which also pulls the NVIDIA
#      CUDA runtime wheels (several GB). For the CPU-only build, point pip at PyTorch's CPU wheel index, e.g.
#      TORCH_PIP_ARGS="--index-url <PyTorch's CPU wheel index>" bash tools/setup.sh  (README, "Setup").
#      On a GPU machine, install your CUDA torch first (system-wide is fine): it is reused.
#   3. pip install -e '.[test]'                        (torch, nvidia-cutlass-dsl>=4.3.5,<4.9, apache-tvm-ffi,
#                                                       pyyaml, pytest, pytest-xdist, matplotlib, the CUDA binary
#                                                       tool wheels)
#   4. nvidia-cutlass-dsl==4.3.5 into .venv/dsl435 (--no-deps --target), the leaderboard-era DSL, used as
#      PYTHONPATH=.venv/dsl435:.venv/dsl435/nvidia_cutlass_dsl/python_packages .venv/bin/python tools/preflight.py --dsl-label 4.3.5
#      Both entries are needed: 4.8.1's .pth in .venv runs `import nvidia_cutlass_dsl` and puts that package's
#      dsl_packages first on sys.path; with .venv/dsl435 on PYTHONPATH that import finds 4.3.5 instead, so 4.8.1's
#      cutlass never enters the path (with only python_packages on PYTHONPATH, 4.8.1 would still be imported).
# Environment: PYTHON (default python3) picks the interpreter for the venv; TORCH_SPEC and TORCH_PIP_ARGS
# (above) choose the torch that step 2 installs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step="start"
trap 'echo "tools/setup.sh: FAILED during: ${step} (see the messages above)" >&2' ERR
PIP_FLAGS=(-qq --disable-pip-version-check --no-input)  # -qq: errors only
PY="${PYTHON:-python3}"
VPY=.venv/bin/python
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
read -r -a TORCH_ARGS <<< "${TORCH_PIP_ARGS:-}"
IMPORTS="import torch, yaml, pytest, xdist, cutlass, tvm_ffi, matplotlib"
stamp=.venv/.setup-stamp
DSL435=.venv/dsl435
want="$(cat pyproject.toml tools/setup.sh | sha256sum | cut -d' ' -f1)"

# The SM100 emulator (harness/capture.py) links the kernel's exported host code with a C compiler: install one
# where none is found and we may (root with apt-get, as on CI machines); otherwise say what is missing.
step="find a C compiler for the emulator's launch capture"
if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "tools/setup.sh: no C compiler found; installing gcc (the emulator's launch capture needs one)" >&2
        apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null
    else
        echo "tools/setup.sh: no C compiler (cc/gcc) found and cannot install one: install gcc, or the emulator" \
             "(tools/emulate.py and its tests) cannot capture the kernel's launch" >&2
        exit 1
    fi
fi

# Fast path: the same pyproject.toml and setup.sh as the last complete run, 4.3.5 in place, and one import check.
step="check the existing .venv"
if [ -x "${VPY}" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ] && [ -f "${DSL435}/.complete" ] \
        && "${VPY}" -c "${IMPORTS}" >/dev/null 2>&1; then
    echo "tools/setup.sh: .venv is up to date" >&2
    exit 0
fi

step="create .venv with ${PY}"
if [ ! -x "${VPY}" ]; then
    "${PY}" -m venv --system-site-packages .venv
fi

step="install ${TORCH_SPEC}"
if ! "${VPY}" -c "import torch" >/dev/null 2>&1; then
    echo "tools/setup.sh: no torch importable in .venv; installing ${TORCH_SPEC}${TORCH_PIP_ARGS:+ with ${TORCH_PIP_ARGS}}" \
         "(the build pip's indexes offer: see the comment at the top of tools/setup.sh)" >&2
    "${VPY}" -m pip install "${PIP_FLAGS[@]}" ${TORCH_ARGS[@]+"${TORCH_ARGS[@]}"} "${TORCH_SPEC}"
fi

step="pip install -e '.[test]'"
if [ ! -f "${stamp}" ] || [ "$(cat "${stamp}")" != "${want}" ] || ! "${VPY}" -c "${IMPORTS}" >/dev/null 2>&1; then
    rm -f "${stamp}"
    "${VPY}" -m pip install "${PIP_FLAGS[@]}" -e '.[test]'
fi

step="install nvidia-cutlass-dsl==4.3.5 into ${DSL435}"
if [ ! -f "${DSL435}/.complete" ]; then
    rm -rf "${DSL435}"
    "${VPY}" -m pip install "${PIP_FLAGS[@]}" --no-deps --target "${DSL435}" "nvidia-cutlass-dsl==4.3.5"
    test -d "${DSL435}/nvidia_cutlass_dsl/python_packages/cutlass"
    touch "${DSL435}/.complete"
fi

step="final import check"
"${VPY}" -c "${IMPORTS}"
echo "${want}" > "${stamp}"  # written last: the fast path above trusts only a run that got this far
echo "tools/setup.sh: .venv ready" >&2
