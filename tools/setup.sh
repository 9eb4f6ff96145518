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
#   4. nvidia-cutlass-dsl 4.3.0 (the oldest release a runner may have) and 4.3.5 (the leaderboard's era) beside the
#      venv's own, each into .venv/dsl/VERSION (harness/dsl.py: --no-deps --target, with the nvidia-cutlass-dsl-libs-*
#      wheels a release's metapackage names), used by `tools/preflight.py --dsl VERSION`, `tools/emulate.py --dsl
#      VERSION` and tools/dsl_matrix.py; `--dsl VERSION` (repeatable) installs other releases too, e.g.
#      `bash tools/setup.sh --dsl 4.6.3`; `--dsl matrix` every release of harness.dsl.MATRIX (about 200 MB each).
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
want="$(cat pyproject.toml tools/setup.sh harness/dsl.py | sha256sum | cut -d' ' -f1)"
releases=(4.3.0 4.3.5)  # harness.dsl.DEFAULT
while [ $# -gt 0 ]; do
    case "$1" in
        --dsl) [ $# -ge 2 ] || { echo "tools/setup.sh: --dsl needs a release (e.g. 4.6.3) or 'matrix'" >&2; exit 2; }
               releases+=("$2"); shift 2 ;;
        *) echo "usage: bash tools/setup.sh [--dsl VERSION|matrix]..." >&2; exit 2 ;;
    esac
done
dsl_complete() {  # every requested release installed (the venv's own counts as installed)
    "${VPY}" -c 'import sys; from harness import dsl
want = [v for r in sys.argv[1:] for v in (dsl.MATRIX if r == "matrix" else [r])]
sys.exit(0 if all(dsl.is_installed(v) for v in want) else 1)' "${releases[@]}"
}

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
if [ -x "${VPY}" ] && [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${want}" ] && dsl_complete 2>/dev/null \
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

step="install nvidia-cutlass-dsl ${releases[*]} into .venv/dsl"
"${VPY}" -m harness.dsl install "${releases[@]}"

step="final import check"
"${VPY}" -c "${IMPORTS}"
echo "${want}" > "${stamp}"  # written last: the fast path above trusts only a run that got this far
echo "tools/setup.sh: .venv ready" >&2
