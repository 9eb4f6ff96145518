"""novus677's kernels 1-9 (novus677/nvfp4_dual_gemm), each from its own commit: where its sources come from, his
host code per version (LAUNCH arguments, dispatch, kernel template, grid, parameters) and the fingerprints that hold
it to what calibration/novus.py re-does in Python. Kernel 9 stays calibration/novus.py's default (its folder, its
DISPATCH and HOST_FINGERPRINTS); this module adds kernels 1-8 (and can read kernel 9 the same way).

    python -m calibration.novus --kernel N [--configs test|bench1..bench4|all] [--modes strict,leaderboard]

Sources (read at run time, never copied here): $NOVUS_DUAL_GEMM_VERSIONS, a folder with k1/ ... k9/ each holding
nvfp4_dual_gemm.cu, tcgen05-interface.cuh, tma-interface.cuh and submission.py of that kernel's commit; else
$NOVUS_DUAL_GEMM_GIT, a git directory of the repository (`git show COMMIT:FILE`), default the mirror
/work/.mirror/novus677+nvfp4_dual_gemm/repo.

Steps per version, beyond calibration/novus.py's (each mechanical):
1. Source. What the leaderboard compiled is submission.py: load_inline(cuda_sources=CUDA_HEADERS + [CUDA_SRC]), which
   joins them with newlines; that text is used (read with `ast`). The commit's nvfp4_dual_gemm.cu and .cuh files are
   compared with it and each difference is reported (whitespace and `#pragma once` ignored): kernel 1's .cu launches
   1 stage where submission.py launches 4; kernel 4's .cu fixes the A/B cache policy where submission.py picks it by
   M > N; kernels 6-8's submission.py tcgen05 header has tcgen05.ld forms the .cuh lacks; kernel 9's renames a
   template parameter (calibration/novus.py's default kernel 9 reads the .cu and .cuh files, as before).
2. Host code: the version's fingerprints (whitespace ignored) must all be in the source, else "unsupported": the
   tensor maps (as kernel 9's), the shared-memory formula, the LAUNCH macro with the version's argument names, the
   kernel launch statement (kernel, template arguments, grid, parameter list), the entry's M / N / K, and
   submission.py's custom_kernel passing the *_blocked (permuted) scales.
3. Dispatch, parsed from cuda_nvfp4_dual_gemm: one LAUNCH for every shape (kernel 1), `switch (M)` with cases and a
   default (kernel 2), `case hash(M, N, K): LAUNCH(...)` (kernels 3-9); every LAUNCH of the entry must be parsed.
   A launch with SWAP true (kernels 4, 5: a swapped-operand kernel none of his cases picks) is "unsupported".
4. The LAUNCH arguments are normalized to kernel 9's order (K, BLOCK_M, BLOCK_N, BLOCK_K, PIPE_DEPTH, FAST_SILU,
   FAST_SILU2, TRANSPOSE, GRID_DIM): K the shape's where it is not a template argument (kernels 1, 2: a kernel
   parameter after N), absent flags false, grid CEIL_DIV(M, BLOCK_M) * CEIL_DIV(N, BLOCK_N) where the version
   launches one CTA per tile (kernels 1-5).
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_NAME = "novus677/nvfp4_dual_gemm"
VERSIONS_ENV = "NOVUS_DUAL_GEMM_VERSIONS"
GIT_ENV = "NOVUS_DUAL_GEMM_GIT"
DEFAULT_GIT = Path("/work/.mirror/novus677+nvfp4_dual_gemm/repo")
FILES = ("nvfp4_dual_gemm.cu", "tcgen05-interface.cuh", "tma-interface.cuh", "submission.py")
NORMALIZED = ("K", "BLOCK_M", "BLOCK_N", "BLOCK_K", "PIPE_DEPTH", "FAST_SILU", "FAST_SILU2", "TRANSPOSE", "GRID_DIM")

# kernel N -> (commit, its commit message: the B200 figures per benchmark shape, task.yml's order)
COMMITS = {
    1: ("6a45b6d76a961a44dc595b2f17ec985c32ed0384", "kernel 1: 16.6/27.1/12.5/26.8"),
    2: ("231d7a1a9d9d416ae73a907c4262a4229cd783ba", "kernel 2: 15.0/18.8/11.0/18.7"),
    3: ("41343af3bf79fb901b0eaf3d80c4f93ae599e735", "kernel 3: 14.6/18.8/10.6/18.6"),
    4: ("f1223363c731a5ed5744e9c63807aef73b757df7", "kernel 4: 14.4/18.6/10.3/18.6"),
    5: ("3889b9149120c0b559604a929bf075d811911e28", "kernel 5: 14.4/18.5/10.3/18.0"),
    6: ("669b84db29815d1f5ae1a9e2e9c6225c5a3c4753", "kernel 6: 14.4/18.5/10.3/16.6"),
    7: ("153df3029101339459f8c28f1d9fcf890e81875e", "kernel 7: 14.4/17.4/10.3/16.6"),
    8: ("a0aab01b749b47daeb25aca4018f33fb59cbacce", "kernel 8: 14.4/16.6/10.3/16.5"),
    9: ("7405f535ae04963bb6ff751b26516e74c4a86cde", "kernel 9: 14.4/16.5/10.3/16.5"),
}
BENCH_SHAPES = ((256, 4096, 7168), (512, 4096, 7168), (256, 3072, 4096), (512, 3072, 7168))
TEST_SHAPE = (256, 512, 256)

_MAPS = [
    "const cuuint64_t globalDimA[2] = {K, M};",
    "const cuuint64_t globalStridesA[1] = {K / 2};",
    "const cuuint64_t globalDimB[2] = {K, N};",
    "const cuuint64_t globalStridesB[1] = {K / 2};",
    "const cuuint32_t elementStridesA[2] = {1, 1};",
    "const cuuint32_t elementStridesB[2] = {1, 1};",
    "&tensorMapA, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 2, A_ptr, globalDimA,",
    "globalStridesA, boxDimA, elementStridesA, CU_TENSOR_MAP_INTERLEAVE_NONE,",
    "&tensorMapB1, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 2, B1_ptr, globalDimB,",
    "&tensorMapB2, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 2, B2_ptr, globalDimB,",
    "globalStridesB, boxDimB, elementStridesB, CU_TENSOR_MAP_INTERLEAVE_NONE,",
    "CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,",
    "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));",
    "constexpr int32_t BLOCK_DIM = WARPGROUP_SIZE + 2 * WARP_SIZE;",
    "constexpr int32_t shmem_size_sfa = PIPE_DEPTH * (BLOCK_K / SF_VEC_SIZE) * 128;",
    "constexpr int32_t shmem_size_sfb = PIPE_DEPTH * (BLOCK_K / SF_VEC_SIZE) * 128;",
    "shmem_size_a + 2 * shmem_size_b + shmem_size_sfa + 2 * shmem_size_sfb;",
    "const int M = A.size(0);",
    "const int N = B1.size(0);",
    "const int K = A.size(1) * 2;",
    "a, b1, b2, _, _, _, sfa_blocked, sfb1_blocked, sfb2_blocked, c = data",
    "a, b1, b2, sfa_blocked, sfb1_blocked, sfb2_blocked, c",
]
_BLOCKS_MN = [
    "const cuuint32_t boxDimA[2] = {BLOCK_K, BLOCK_M};",
    "const cuuint32_t boxDimB[2] = {BLOCK_K, BLOCK_N};",
    "constexpr int32_t shmem_size_a = PIPE_DEPTH * (BLOCK_K * BLOCK_M) / 2;",
    "constexpr int32_t shmem_size_b = PIPE_DEPTH * (BLOCK_K * BLOCK_N) / 2;",
]
_BLOCKS_SWAP = [  # kernels 4, 5: A_BLOCK / B_BLOCK, BLOCK_M / BLOCK_N unless SWAP (refused)
    "constexpr int32_t A_BLOCK = SWAP ? BLOCK_N : BLOCK_M;",
    "constexpr int32_t B_BLOCK = SWAP ? BLOCK_M : BLOCK_N;",
    "const cuuint32_t boxDimA[2] = {BLOCK_K, A_BLOCK};",
    "const cuuint32_t boxDimB[2] = {BLOCK_K, B_BLOCK};",
    "constexpr int32_t shmem_size_a = PIPE_DEPTH * (BLOCK_K * A_BLOCK) / 2;",
    "constexpr int32_t shmem_size_b = PIPE_DEPTH * (BLOCK_K * B_BLOCK) / 2;",
    "const int32_t num_rows = CEIL_DIV(M, A_BLOCK);",
    "const int32_t num_cols = CEIL_DIV(N, B_BLOCK);",
    "if constexpr (SWAP) {",
]
_TILES = ["const int32_t num_rows = CEIL_DIV(M, BLOCK_M);", "const int32_t num_cols = CEIL_DIV(N, BLOCK_N);"]
_PARAMS = "tensorMapA, tensorMapB1, tensorMapB2, SFA_ptr, SFB1_ptr, SFB2_ptr, C_ptr);"
_TRANSPOSED_RETURN = "return C.view({N, M, 1}).transpose(0, 1);"


@dataclass(frozen=True)
class KernelVersion:
    n: int
    launch_args: tuple  # the LAUNCH macro's parameters, in order
    kernel: str  # the __global__ function his dispatch launches
    kernel_targs: tuple  # its template arguments (names of launch_args)
    k_param: bool  # K a kernel parameter after N (kernels 1, 2)
    grid: str  # "tiles" or "GRID_DIM"
    dispatch: str  # "single", "by_m", "hash"
    extra: tuple = ()  # fingerprints of this version only

    @property
    def commit(self) -> str:
        return COMMITS[self.n][0]

    @property
    def message(self) -> str:
        return COMMITS[self.n][1]

    def fingerprints(self) -> list:
        blocks = _BLOCKS_SWAP if "SWAP" in self.launch_args else _BLOCKS_MN + (_TILES if self.grid == "tiles" else [])
        grid = "num_rows * num_cols" if self.grid == "tiles" else "GRID_DIM"
        params = "M, N, K, " if self.k_param else "M, N, "
        args = ", ".join(self.launch_args)
        return _MAPS + blocks + list(self.extra) + [
            f"{self.kernel}<{', '.join(self.kernel_targs)}><<<{grid}, BLOCK_DIM, shmem_size>>>({params}{_PARAMS}",
            f"#define LAUNCH({args}) launch_nvfp4_dual_gemm<{args}>({params}A_ptr, B1_ptr, B2_ptr, SFA_ptr, SFB1_ptr, "
            "SFB2_ptr, C_ptr)",
        ]


_A4 = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "PIPE_DEPTH")
_K6 = ("K",) + _A4
VERSIONS = {v.n: v for v in (
    KernelVersion(1, _A4, "nvfp4_dual_gemm", _A4, True, "tiles", "single"),
    KernelVersion(2, _A4, "nvfp4_dual_gemm", _A4, True, "tiles", "by_m"),
    KernelVersion(3, _K6 + ("FAST_SILU",), "nvfp4_dual_gemm", _K6 + ("FAST_SILU",), False, "tiles", "hash"),
    KernelVersion(4, _K6 + ("FAST_SILU", "SWAP", "TRANSPOSE"), "nvfp4_dual_gemm", _K6 + ("FAST_SILU", "TRANSPOSE"),
                  False, "tiles", "hash", (_TRANSPOSED_RETURN,)),
    KernelVersion(5, _K6 + ("FAST_SILU", "SWAP", "TRANSPOSE"), "nvfp4_dual_gemm", _K6 + ("FAST_SILU", "TRANSPOSE"),
                  False, "tiles", "hash", (_TRANSPOSED_RETURN,)),
    KernelVersion(6, _K6 + ("FAST_SILU", "TRANSPOSE", "GRID_DIM"), "nvfp4_dual_gemm", _K6 + ("FAST_SILU", "TRANSPOSE"),
                  False, "GRID_DIM", "hash", (_TRANSPOSED_RETURN,)),
    KernelVersion(7, _K6 + ("FAST_SILU", "FAST_SILU2", "TRANSPOSE", "GRID_DIM"), "nvfp4_dual_gemm_cutlass",
                  _K6 + ("FAST_SILU", "FAST_SILU2", "TRANSPOSE"), False, "GRID_DIM", "hash", (_TRANSPOSED_RETURN,)),
    KernelVersion(8, _K6 + ("FAST_SILU", "FAST_SILU2", "TRANSPOSE", "GRID_DIM"), "nvfp4_dual_gemm_cutlass",
                  _K6 + ("FAST_SILU", "FAST_SILU2", "TRANSPOSE", "GRID_DIM"), False, "GRID_DIM", "hash",
                  (_TRANSPOSED_RETURN,)),
    KernelVersion(9, _K6 + ("FAST_SILU", "FAST_SILU2", "TRANSPOSE", "GRID_DIM"), "nvfp4_dual_gemm_cutlass",
                  _K6 + ("FAST_SILU", "FAST_SILU2", "TRANSPOSE", "GRID_DIM"), False, "GRID_DIM", "hash",
                  (_TRANSPOSED_RETURN,)),
)}


class Unsupported(RuntimeError):
    """His source at this version differs from what this module re-implements."""


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s.replace("\\\n", " "))


# ============================================================================ sources
def find_source() -> tuple[Path | None, str]:
    """(where, "") or (None, why): $NOVUS_DUAL_GEMM_VERSIONS (a folder with k1/ ... k9/), else $NOVUS_DUAL_GEMM_GIT or
    the mirror (a git directory)."""
    folder = os.environ.get(VERSIONS_ENV)
    if folder:
        return (Path(folder), "") if Path(folder).is_dir() else (None, f"${VERSIONS_ENV}={folder} is not a folder")
    git = Path(os.environ.get(GIT_ENV) or DEFAULT_GIT)
    if not (git / "HEAD").is_file():
        return None, (f"novus677's kernels 1-9 are not available: no git directory at {git} (set ${GIT_ENV} to a clone "
                      f"of {REPO_NAME}, or ${VERSIONS_ENV} to a folder with k1/ ... k9/ holding {', '.join(FILES)})")
    try:
        _git_show(git, COMMITS[1][0], FILES[0])
    except Unsupported as e:
        return None, str(e)
    return git, ""


def _git_show(git: Path, commit: str, name: str) -> str:
    p = subprocess.run(["git", f"--git-dir={git}", "show", f"{commit}:{name}"], capture_output=True, text=True)
    if p.returncode:
        raise Unsupported(f"git show {commit[:12]}:{name} in {git} failed: {p.stderr.strip()[:200]}")
    return p.stdout


def read_files(where: Path, n: int) -> dict:
    """The four files of kernel n, by name."""
    where = Path(where)
    if (where / "HEAD").is_file() and (where / "objects").is_dir():
        return {f: _git_show(where, COMMITS[n][0], f) for f in FILES}
    d = where / f"k{n}"
    missing = [f for f in FILES if not (d / f).is_file()]
    if missing:
        raise Unsupported(f"{d}: {', '.join(missing)} missing (kernel {n} = {REPO_NAME}@{COMMITS[n][0][:12]})")
    return {f: (d / f).read_text() for f in FILES}


def _submission_strings(text: str) -> dict:
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id in ("CUDA_HEADERS", "CUDA_SRC"):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def compose_source(files: dict) -> tuple[str, list]:
    """Step 1: the source the leaderboard compiled (submission.py's CUDA_HEADERS and CUDA_SRC, joined as load_inline
    joins them) and the differences of the commit's .cu / .cuh files from it. Returns (text, notes)."""
    sub = _submission_strings(files["submission.py"])
    if set(sub) != {"CUDA_HEADERS", "CUDA_SRC"} or len(sub["CUDA_HEADERS"]) != 2:
        raise Unsupported("submission.py: CUDA_HEADERS (two) / CUDA_SRC not found")
    strip = lambda t: _squash(t.replace("#pragma once", ""))  # noqa: E731
    notes = []
    body = files[FILES[0]]
    for h in FILES[1:3]:
        body = body.replace(f'#include "{h}"\n', "")
    if strip(body) != strip(sub["CUDA_SRC"]):
        notes.append("nvfp4_dual_gemm.cu differs from submission.py's CUDA_SRC (CUDA_SRC used)")
    if sorted(strip(h) for h in sub["CUDA_HEADERS"]) != sorted(strip(files[h]) for h in FILES[1:3]):
        notes.append("the .cuh files differ from submission.py's CUDA_HEADERS (CUDA_HEADERS used)")
    return "\n".join(list(sub["CUDA_HEADERS"]) + [sub["CUDA_SRC"]]), notes


def check_host(v: KernelVersion, src: str) -> list:
    """Step 2: the fingerprints missing from the source (whitespace ignored)."""
    text = _squash(src)
    return [f for f in v.fingerprints() if _squash(f) not in text]


# ============================================================================ dispatch
def _value(s: str):
    return {"true": True, "false": False}.get(s) if s in ("true", "false") else int(s)


def parse_dispatch(v: KernelVersion, src: str) -> dict:
    """Step 3: {(M, N, K) or "M=256" or "default" or "any": {name: value}} from cuda_nvfp4_dual_gemm."""
    text = _squash(src)
    start = text.find("cuda_nvfp4_dual_gemm(constat::Tensor")
    if start < 0:
        start = text.find("cuda_nvfp4_dual_gemm(consttorch::Tensor")
    if start < 0:
        raise Unsupported("cuda_nvfp4_dual_gemm's definition not found")
    entry = text[start:]
    calls = entry.count("LAUNCH(")
    args = lambda a: dict(zip(v.launch_args, map(_value, a.split(","))))  # noqa: E731
    out = {}
    if v.dispatch == "single":
        found = re.findall(r"LAUNCH\(([^)]*)\);", entry)
        if "switch(" in entry or len(found) != 1:
            raise Unsupported(f"kernel {v.n}: expected one unconditional LAUNCH")
        out["any"] = args(found[0])
    elif v.dispatch == "by_m":
        if "switch(M){" not in entry:
            raise Unsupported(f"kernel {v.n}: expected switch (M)")
        for m, a in re.findall(r"case(\d+):LAUNCH\(([^)]*)\);break;", entry):
            out[f"M={m}"] = args(a)
        for a in re.findall(r"default:LAUNCH\(([^)]*)\);break;", entry):
            out["default"] = args(a)
    else:
        for m, n, k, a in re.findall(r"casehash\((\d+),(\d+),(\d+)\):LAUNCH\(([^)]*)\);", entry):
            out[(int(m), int(n), int(k))] = args(a)
    if len(out) != calls or any(len(a) != len(v.launch_args) for a in out.values()):
        raise Unsupported(f"kernel {v.n}: {calls} LAUNCH calls in the entry, {len(out)} parsed")
    return out


def launch_for(v: KernelVersion, dispatch: dict, shape: tuple) -> tuple:
    """Step 4: his LAUNCH for `shape`, normalized to kernel 9's order (calibration/novus.py's launch tuple)."""
    m, n, k = shape
    a = dispatch.get("any") or dispatch.get(tuple(shape)) or dispatch.get(f"M={m}") or dispatch.get("default")
    if a is None:
        raise Unsupported(f"kernel {v.n}: no dispatch entry for {m}x{n}x{k}")
    if a.get("SWAP"):
        raise Unsupported(f"kernel {v.n}: the SWAP kernel (not re-implemented) for {m}x{n}x{k}")
    if "K" in a and a["K"] != k:
        raise Unsupported(f"kernel {v.n}: its launch for {m}x{n}x{k} is instantiated for K {a['K']}")
    bm, bn = a["BLOCK_M"], a["BLOCK_N"]
    grid = a["GRID_DIM"] if v.grid == "GRID_DIM" else -(-m // bm) * -(-n // bn)
    return (k, bm, bn, a["BLOCK_K"], a["PIPE_DEPTH"], bool(a.get("FAST_SILU", False)),
            bool(a.get("FAST_SILU2", False)), bool(a.get("TRANSPOSE", False)), grid)


def instantiation(v: KernelVersion, launch: tuple) -> str:
    named = dict(zip(NORMALIZED, launch))
    fmt = lambda x: ("true" if x else "false") if isinstance(x, bool) else str(x)  # noqa: E731
    return f"{v.kernel}<{', '.join(fmt(named[t]) for t in v.kernel_targs)}>"


def describe(launch: tuple) -> str:
    """One line of design for a points record, from the normalized launch."""
    k, bm, bn, bk, depth, fast, fast2, transpose, grid = launch
    silu = "tanh(0.49995x) SiLU (FAST_SILU2)" if fast2 else ("tanh SiLU (FAST_SILU)" if fast else "exact SiLU")
    return (f"BLOCK_M {bm}, BLOCK_N {bn}, BLOCK_K {bk}, {depth} stages, {silu}"
            f"{', transposed C' if transpose else ''}, grid {grid}")


def load(n: int, where: Path | None = None) -> tuple:
    """(KernelVersion, source text, dispatch, notes) of kernel n; raises Unsupported (with the reason)."""
    if n not in VERSIONS:
        raise Unsupported(f"kernel {n}: not one of {sorted(VERSIONS)}")
    if where is None:
        where, why = find_source()
        if where is None:
            raise Unsupported(why)
    v = VERSIONS[n]
    files = read_files(where, n)
    src, notes = compose_source(files)
    missing = check_host(v, src + "\n" + files["submission.py"])
    if missing:
        raise Unsupported(f"kernel {n}: his host code differs from what this tool re-implements; missing: "
                          + " | ".join(missing))
    return v, src, parse_dispatch(v, src), notes
