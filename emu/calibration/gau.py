#!/usr/bin/env python3
"""Calibrate the SM100 emulator (emu/) on gau-nernst's B200-verified raw CUDA+PTX NVFP4 dual-GEMM kernels
for THIS problem (gau-nernst/gpu-mode-kernels @ aee9cda6b6444f774ce5eaee1ec1a5c84acaa521,
nvidia/nvfp4_dual_gemm/submission_v1b.py: 1-SM MMA, A kept in the collector (collector::a::fill/lastuse);
submission_v2.py: 2-SM MMA, 13.30 us geomean on B200). Their source is NOT copied into this repository:
pass the downloaded files.

    python -m emu.calibration.gau --v1b PATH --v2 PATH [--shape M,N,K] [--modes strict,leaderboard]
    python -m emu.calibration.gau --v1b PATH             (one kernel only)

Defaults: $GAU_DUAL_GEMM_V1B / $GAU_DUAL_GEMM_V2, else /tmp/gau/submission_v1b.py / /tmp/gau/submission_v2.py.
There is no --fetch-to: fetching needs the network, which CI does not have (tests skip with the reason).

Steps per kernel (each one mechanical and listed, so a reviewer can redo it by hand):
1. Source. The string assigned to CUDA_SRC in the .py (the `cuda_sources=CUDA_SRC` of its load_inline call),
   read with `ast` (the file is never executed: it imports torch.utils.cpp_extension and compiles on import).
2. Device-only edits (DEVICE_EDITS below): drop the two `#include <torch/...>` / `#include <ATen/...>` lines
   (host-only; torch headers are not usable for device code here), cut the text at `void check_cu(` (all that
   follows is host code: check_cu/check_cuda use TORCH_CHECK, init_*_tmap call the driver, dual_gemm_launch /
   dual_gemm / TORCH_LIBRARY use at::Tensor), add `#include <algorithm>` first (v2 uses std::min, which the
   dropped torch headers brought in), and append `void *__emu_instantiate[] = {(void *)&kernel<...>};` to
   instantiate the template with the arguments his dispatch picks for the shape (his LAUNCH table).
3. Compile with the pip nvcc: `nvcc -arch=sm_100a --ptx` + his own device flags (-O3 --use_fast_math
   --expt-relaxed-constexpr --relocatable-device-code=false -lineinfo; -gencode=compute_100a,sm_100a ->
   -arch=sm_100a since only PTX is produced; -Xptxas=-v dropped: ptxas does not run) and -I for the wheel's
   headers plus a CCCL include dir holding <nv/target> (cuda_fp16.h needs it; the wheel lacks it).
4. Host side, re-done in Python from his host code (the source is checked to still contain each line this
   relies on, HOST_FINGERPRINTS, else "unsupported"): his dispatch (M, K) -> template arguments; his grid,
   block, dynamic smem formulas; tensor maps encoded by emu.tma.encode_tensor_map from exactly the arguments
   his init_AB_tmap / init_SF_tmap pass to cuTensorMapEncodeTiled (driver enum -> hardware code per emu/tma.py:
   16U4_ALIGN8B -> 11, INT64 -> 5; SWIZZLE_128B -> 3; interleave / L2 promotion / OOB fill NONE -> 0); the
   parameter bytes in PTX order: each CUtensorMap by value (128 bytes, __grid_constant__), pointers as 8-byte
   data_ptr() values, M and N as int32. v2's cluster (2,1,1) comes from its __cluster_dims__(2, 1, 1)
   (PTX .reqnctapercluster 2, 1, 1); v1b launches without a cluster (1,1,1).
5. Inputs: reference.generate_input(M, N, K, 1, seed, mode) in both "strict" and "leaderboard" modes, laid out
   in emulated global memory exactly as the leaderboard's torch tensors (emu.run.place_inputs: a/b1/b2
   [rows, K/2, L] fp4x2, scales permuted [32, 4, rest, 4, rest_k, L], C [M, N, L] fp16 poisoned NaN); he reads
   data[0], data[1], data[2], data[6], data[7], data[8], data[9] -- the same tensors.
6. emu.run.execute -> C read back -> compared with reference.ref_kernel under the leaderboard tolerance
   (emu.run._check: |out - ref| <= 1e-3 + 1e-3 |ref|, NaN/inf must match).

Prints one line per kernel and mode: "emulated MATCH|MISMATCH|DEADLOCK|HAZARD|UNSUPPORTED: ...". Exit 0 only if
all MATCH. Every result is "emulated": what the PTX computes under the PTX ISA semantics as emu/ implements them.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GAU_COMMIT = "aee9cda6b6444f774ce5eaee1ec1a5c84acaa521"
GAU_REPO = "gau-nernst/gpu-mode-kernels"
DEFAULT_PATHS = {"v1b": Path("/tmp/gau/submission_v1b.py"), "v2": Path("/tmp/gau/submission_v2.py")}
ENV_VARS = {"v1b": "GAU_DUAL_GEMM_V1B", "v2": "GAU_DUAL_GEMM_V2"}
NVCC_FLAGS = ["-O3", "--use_fast_math", "--expt-relaxed-constexpr", "--relocatable-device-code=false", "-lineinfo"]
WARP = 32

# cuTensorMapEncodeTiled enums (cuda.h) -> the tensor-map hardware fields of emu/tma.py
DRIVER_DTYPE_TO_HW = {"CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B": 11, "CU_TENSOR_MAP_DATA_TYPE_INT64": 5}
DRIVER_SWIZZLE_TO_HW = {"CU_TENSOR_MAP_SWIZZLE_NONE": 0, "CU_TENSOR_MAP_SWIZZLE_128B": 3}

# Lines of his host code that the Python re-implementation below relies on (whitespace-normalised).
HOST_FINGERPRINTS = {
    "common": [
        "uint64_t globalDim[rank] = {256, global_height, global_width / 256};",
        "uint64_t globalStrides[rank-1] = {global_width / 2, 128};",
        "uint32_t boxDim[rank] = {256, shared_height, shared_width / 256};",
        "uint32_t elementStrides[rank] = {1, 1, 1};",
        "CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,",
        "CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,",
        "CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,",
        "CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,",
        "CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
        "constexpr int BLOCK_M = 128;",
        "constexpr int BLOCK_K = 256;",
        "else if (K == 512) LAUNCH( 512, 128",
    ],
    "v1b": [
        "init_AB_tmap(&A_tmap, A_ptr, M, K, BLOCK_M, BLOCK_K);",
        "init_AB_tmap(&B1_tmap, B1_ptr, N, K, BLOCK_N, BLOCK_K);",
        "init_AB_tmap(&B2_tmap, B2_ptr, N, K, BLOCK_N, BLOCK_K);",
        "int grid = (M / BLOCK_M) * (N / BLOCK_N);",
        "int tb_size = BLOCK_M + 2 * WARP_SIZE;",
        "int AB_size = (BLOCK_M + BLOCK_N * 2) * (BLOCK_K / 2);",
        "int SFAB_size = 128 * (BLOCK_K / 16) * (1 + 2);",
        "int mbar_size = (2 * NUM_STAGES + 1) * 8;",
        "int smem_size = (AB_size + SFAB_size) * NUM_STAGES + mbar_size;",
        "this_kernel<<<grid, tb_size, smem_size>>>(A_tmap, B1_tmap, B2_tmap, SFA_ptr, SFB1_ptr, SFB2_ptr, C_ptr, M, N);",
        "return dual_gemm(data[0], data[1], data[2], data[6], data[7], data[8], data[9])",
    ],
    "v2": [
        "init_AB_tmap(&A_tmap, A_ptr, M, K, BLOCK_M, BLOCK_K);",
        "init_AB_tmap(&B1_tmap, B1_ptr, N, K, BLOCK_N / 2, BLOCK_K);",
        "init_AB_tmap(&B2_tmap, B2_ptr, N, K, BLOCK_N / 2, BLOCK_K);",
        "init_SF_tmap(&SFA_tmap, SFA_ptr, M * K / 16, 128 * BLOCK_K / 16);",
        "init_SF_tmap(&SFB1_tmap, SFB1_ptr, N * K / 16, 128 * BLOCK_K / 16);",
        "init_SF_tmap(&SFB2_tmap, SFB2_ptr, N * K / 16, 128 * BLOCK_K / 16);",
        "uint64_t globalDim[rank] = {global_size / 8};",
        "uint32_t boxDim[rank] = {shared_size / 8};",
        "CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT64,",
        "CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,",
        "dim3 grid(M / BLOCK_M, N / BLOCK_N);",
        "constexpr int AB_size = (BLOCK_M + BLOCK_N) * (BLOCK_K / 2);",
        "constexpr int SF_size = 128 * (BLOCK_K / 16) * 3;",
        "constexpr int sm100_size = 227'000;",
        "constexpr int dynamic_size = AB_size + SF_size + 2 * 8;",
        "constexpr int static_size = 8 + 4;",
        "constexpr int NUM_STAGES = (sm100_size - static_size) / dynamic_size;",
        "constexpr int smem_size = dynamic_size * NUM_STAGES + static_size;",
        "this_kernel<<<grid, TB_SIZE, smem_size>>>(A_tmap, B1_tmap, B2_tmap, SFA_tmap, SFB1_tmap, SFB2_tmap, C_ptr, M, N);",
        "constexpr int NUM_WARPS = 6;",
        "__cluster_dims__(2, 1, 1)",
        "constexpr bool ONE_MMA = false;",
        "out = dual_gemm(data[0], data[1], data[2], data[6], data[7], data[8], data[9])",
    ],
}


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


# ============================================================================ source -> device .cu
def extract_cuda_src(py_path: Path) -> str:
    """The string literal assigned to CUDA_SRC (what his load_inline(cuda_sources=CUDA_SRC) compiles)."""
    tree = ast.parse(Path(py_path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CUDA_SRC" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    raise ValueError(f"{py_path}: no `CUDA_SRC = \"\"\"...\"\"\"` string")


def check_host(src: str, version: str) -> list[str]:
    """Host-code lines the re-implementation relies on that are missing from `src` (pass the whole .py: CUDA_SRC and
    his custom_kernel)."""
    text = _norm(src)
    return [f for f in HOST_FINGERPRINTS["common"] + HOST_FINGERPRINTS[version] if _norm(f) not in text]


def device_source(src: str, instantiation: str) -> tuple[str, list[str]]:
    """The DEVICE_EDITS: returns (the .cu text, a description of each edit made)."""
    edits = []
    out, n = re.subn(r"#include <(?:torch|ATen)/[^>]*>\n", "", src)
    edits.append(f"removed {n} torch/ATen #include lines")
    cut = out.index("\nvoid check_cu(")
    edits.append(f"cut {len(out) - cut} characters of host code from `void check_cu(` to the end")
    out = "#include <algorithm>  // emu: std::min, formerly via the torch headers\n" + out[:cut]
    edits.append("prepended #include <algorithm>")
    out += f"\n// emu: instantiate the template his dispatch launches\nvoid *__emu_instantiate[] = {{(void *)&{instantiation}}};\n"
    edits.append(f"appended an instantiation of {instantiation}")
    return out, edits


def _nvcc() -> Path:
    if os.environ.get("NVCC"):
        return Path(os.environ["NVCC"])
    import nvidia  # the pip wheel's namespace package (nvidia-cuda-nvcc / cu13)
    for base in nvidia.__path__:
        p = Path(base) / "cu13" / "bin" / "nvcc"
        if p.exists():
            return p
    raise FileNotFoundError("no nvcc: install the CUDA 13 nvcc wheel or set $NVCC")


def _include_dirs(nvcc: Path) -> list[Path]:
    """The wheel's include dir (cuda.h, cudaTypedefs.h, cuda_fp16.h) + a CCCL dir holding <nv/target>."""
    inc = nvcc.parent.parent / "include"
    dirs = [inc]
    if not (inc / "nv" / "target").exists():
        import glob
        cands = [inc / "cccl"] + [Path(p) for p in sorted(glob.glob(str(nvcc.parent.parent.parent / "*cccl*" / "include")))]
        cands += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*/include/cccl"))]
        cands += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*/include"))]
        found = next((c for c in cands if (c / "nv" / "target").exists()), None)
        if found is None:
            raise FileNotFoundError("no <nv/target> (CCCL) header found: install the CUDA cccl wheel or a toolkit")
        dirs.append(found)
    return dirs


def compile_ptx(cu_text: str, tag: str) -> tuple[str, dict]:
    """nvcc -arch=sm_100a --ptx; cached by the hash of text, flags and nvcc path."""
    nvcc = _nvcc()
    incs = _include_dirs(nvcc)
    cmd_tail = ["-arch=sm_100a", "--ptx"] + NVCC_FLAGS + [f"-I{d}" for d in incs]
    key = hashlib.sha256((cu_text + "\0" + " ".join(cmd_tail) + "\0" + str(nvcc)).encode()).hexdigest()[:20]
    d = Path(tempfile.gettempdir()) / "emu_calibrate_gau" / f"{tag}-{key}"
    ptx = d / "kernel.ptx"
    info = {"cmd": " ".join([str(nvcc)] + cmd_tail + ["kernel.cu"]), "dir": str(d), "cached": ptx.exists()}
    if not ptx.exists():
        d.mkdir(parents=True, exist_ok=True)
        (d / "kernel.cu").write_text(cu_text)
        tmp = d / f"kernel.{os.getpid()}.ptx"
        p = subprocess.run([str(nvcc)] + cmd_tail + ["-o", str(tmp), str(d / "kernel.cu")], capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"nvcc failed ({info['cmd']}):\n{p.stderr[-3000:]}")
        os.replace(tmp, ptx)
    return ptx.read_text(), info


# ============================================================================ his host code, in Python
def dispatch(version: str, m: int, k: int):
    """His dual_gemm's LAUNCH chain: (K, BLOCK_N, NUM_STAGES) (v1b) / (K, BLOCK_N) (v2), or None."""
    table = [((256, 7168), (64, 5)), ((512, 7168), (128, 4)), ((256, 4096), (64, 5))]
    for (mm, kk), res in table:
        if m == mm and k == kk:
            return (k,) + (res if version == "v1b" else res[:1])
    if k in (256, 512, 1536, 2048, 2304, 7168):
        return (k, 128, 4) if version == "v1b" else (k, 128)
    return None


def _ab_tmap(address: int, height: int, width: int, box_h: int, box_w: int) -> bytes:
    """His init_AB_tmap(ptr, global_height, global_width, shared_height, shared_width)."""
    from emu.tma import encode_tensor_map
    return encode_tensor_map(address, DRIVER_DTYPE_TO_HW["CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B"],
                             dims=[256, height, width // 256], strides=[width // 2, 128],
                             box=[256, box_h, box_w // 256], elem_strides=[1, 1, 1],
                             swizzle=DRIVER_SWIZZLE_TO_HW["CU_TENSOR_MAP_SWIZZLE_128B"])


def _sf_tmap(address: int, global_size: int, shared_size: int) -> bytes:
    """His init_SF_tmap(ptr, global_size, shared_size): INT64 elements, rank 1."""
    from emu.tma import encode_tensor_map
    return encode_tensor_map(address, DRIVER_DTYPE_TO_HW["CU_TENSOR_MAP_DATA_TYPE_INT64"],
                             dims=[global_size // 8], strides=[], box=[shared_size // 8], elem_strides=[1],
                             swizzle=DRIVER_SWIZZLE_TO_HW["CU_TENSOR_MAP_SWIZZLE_NONE"])


def host_launch(version: str, m: int, n: int, k: int, addr: dict) -> dict:
    """grid, block, cluster, dynamic smem, kernel instantiation and parameter bytes, as his host code makes them."""
    d = dispatch(version, m, k)
    if d is None:
        raise ValueError(f"his dispatch launches nothing for M={m} K={k}")
    block_m, block_k = 128, 256
    i32 = lambda v: int(v).to_bytes(4, "little", signed=True)  # noqa: E731
    ptr = lambda v: int(v).to_bytes(8, "little")  # noqa: E731
    if version == "v1b":
        K, block_n, stages = d
        if m % block_m or n % block_n:
            raise ValueError(f"v1b needs M % {block_m} == 0 and N % {block_n} == 0")
        ab = (block_m + block_n * 2) * (block_k // 2)
        sf = 128 * (block_k // 16) * 3
        smem = (ab + sf) * stages + (2 * stages + 1) * 8
        params = [_ab_tmap(addr["a"], m, K, block_m, block_k), _ab_tmap(addr["b1"], n, K, block_n, block_k),
                  _ab_tmap(addr["b2"], n, K, block_n, block_k), ptr(addr["sfa"]), ptr(addr["sfb1"]),
                  ptr(addr["sfb2"]), ptr(addr["c"]), i32(m), i32(n)]
        return {"grid": ((m // block_m) * (n // block_n), 1, 1), "block": (block_m + 2 * WARP, 1, 1),
                "cluster": (1, 1, 1), "dynamic_smem": smem, "params": params,
                "instantiation": f"kernel<{K}, {block_m}, {block_n}, {block_k}, {stages}>"}
    K, block_n = d
    if m % (2 * block_m) or n % block_n:
        raise ValueError(f"v2 needs M % 256 == 0 (CTA pairs along M) and N % {block_n} == 0")
    ab = (block_m + block_n) * (block_k // 2)
    sf = 128 * (block_k // 16) * 3
    dynamic_size = ab + sf + 2 * 8
    static_size = 8 + 4
    stages = (227_000 - static_size) // dynamic_size
    smem = dynamic_size * stages + static_size
    sf_box = 128 * block_k // 16
    params = [_ab_tmap(addr["a"], m, K, block_m, block_k), _ab_tmap(addr["b1"], n, K, block_n // 2, block_k),
              _ab_tmap(addr["b2"], n, K, block_n // 2, block_k), _sf_tmap(addr["sfa"], m * K // 16, sf_box),
              _sf_tmap(addr["sfb1"], n * K // 16, sf_box), _sf_tmap(addr["sfb2"], n * K // 16, sf_box),
              ptr(addr["c"]), i32(m), i32(n)]
    return {"grid": (m // block_m, n // block_n, 1), "block": (6 * WARP, 1, 1), "cluster": (2, 1, 1),
            "dynamic_smem": smem, "params": params,
            "instantiation": f"kernel_cutlass<{K}, {block_n}, {stages}, false>"}


# ============================================================================ one run
@dataclass
class GauResult:
    status: str
    version: str
    shape: tuple
    mode: str
    message: str = ""
    seconds: float = 0.0
    launch: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    compile: dict = field(default_factory=dict)

    def line(self) -> str:
        m, n, k = self.shape
        lc = self.launch
        extra = (f" grid {lc.get('grid')} block {lc.get('block')} cluster {lc.get('cluster')} smem "
                 f"{lc.get('dynamic_smem')}" if lc else "")
        pair = f", {self.stats['tmem_ld_pair_lanes']} warp tcgen05.ld at lanes >= 128 (odd CTA of a pair)" \
            if self.stats.get("tmem_ld_pair_lanes") else ""
        return (f"emulated {self.status.upper()}: gau-nernst {self.version} {m}x{n}x{k}x1 {self.mode}{extra}, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs"
                f"{pair}, {self.seconds:.1f} s")


def run_one(version: str, source: Path, m: int, n: int, k: int, mode: str, seed: int = 1111,
            sched_seed: int = 0) -> GauResult:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import numpy as np
    import torch

    import reference
    from emu.launch import CapturedLaunch
    from emu.run import _check, execute, place_inputs
    from emu.state import GlobalMemory

    t0 = time.time()
    res = GauResult("unsupported", version, (m, n, k), mode)
    src = extract_cuda_src(source)
    missing = check_host(Path(source).read_text(), version)  # CUDA_SRC + his custom_kernel
    if missing:
        res.message = "his host code differs from what this tool re-implements; missing: " + " | ".join(missing)
        return res
    if dispatch(version, m, k) is None:
        res.message = f"his dispatch has no kernel for M={m} K={k}"
        return res
    data = reference.generate_input(m, n, k, 1, seed, mode=mode, device="cpu")
    data[9].fill_(float("nan"))
    gmem = GlobalMemory()
    addr = place_inputs(gmem, data, m, n, k, 1)
    try:
        hl = host_launch(version, m, n, k, addr)
    except ValueError as e:
        res.message = str(e)
        return res
    cu, edits = device_source(src, hl["instantiation"])
    ptx, cinfo = compile_ptx(cu, version)
    res.compile = dict(cinfo, edits=edits, instantiation=hl["instantiation"])
    name = re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)
    cap = CapturedLaunch(ptx=ptx, kernel_name=name, grid=hl["grid"], block=hl["block"], cluster=hl["cluster"],
                         dynamic_smem=hl["dynamic_smem"], params=hl["params"], dsl_version="")
    res.launch = {k_: hl[k_] for k_ in ("grid", "block", "cluster", "dynamic_smem", "instantiation")}
    run = execute(cap, gmem, sched_seed)
    res.status, res.message = run.status, run.message
    if run.machine is not None:
        res.stats = dict(run.machine.stats)
    if run.status == "completed":
        raw = gmem.read(addr["c"], m * n * 2)
        out = torch.from_numpy(raw.view(np.float16).copy()).reshape(1, m, n).permute(1, 2, 0)
        ok, msg = _check(out, reference.ref_kernel(data))
        res.status, res.message = ("match" if ok else "mismatch"), msg
    res.seconds = time.time() - t0
    return res


def find_source(version: str) -> tuple[Path | None, str]:
    """(path, "") or (None, why) for $GAU_DUAL_GEMM_V1B / $GAU_DUAL_GEMM_V2, else the /tmp copy."""
    env = os.environ.get(ENV_VARS[version])
    if env:
        return (Path(env), "") if Path(env).is_file() else (None, f"${ENV_VARS[version]}={env} is not a file")
    p = DEFAULT_PATHS[version]
    if p.is_file():
        return p, ""
    return None, (f"gau-nernst's submission_{version}.py is not available: set ${ENV_VARS[version]} or save "
                  f"{GAU_REPO}@{GAU_COMMIT[:12]}:nvidia/nvfp4_dual_gemm/submission_{version}.py to {p} "
                  f"(needs network; not in this repository by design)")


# ============================================================================ CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--v1b", help="path to submission_v1b.py (default $GAU_DUAL_GEMM_V1B or /tmp/gau/...)")
    ap.add_argument("--v2", help="path to submission_v2.py (default $GAU_DUAL_GEMM_V2 or /tmp/gau/...)")
    ap.add_argument("--only", default="v1b,v2", help="comma-separated kernels to run")
    ap.add_argument("--shape", default="256,256,512", help="M,N,K (L = 1; his kernels ignore L)")
    ap.add_argument("--modes", default="strict,leaderboard")
    ap.add_argument("--seed", type=int, default=1111)
    ap.add_argument("--sched-seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    m, n, k = (int(x) for x in args.shape.split(","))
    results, skipped = [], []
    for version in [v.strip() for v in args.only.split(",") if v.strip()]:
        given = getattr(args, version)
        path, why = (Path(given), "") if given else find_source(version)
        if path is None or not path.is_file():
            skipped.append(version)
            print(f"skipped {version}: {why or f'{given} is not a file'}", flush=True)
            continue
        print(f"{version}: {path} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]})", flush=True)
        for mode in [x.strip() for x in args.modes.split(",") if x.strip()]:
            r = run_one(version, path, m, n, k, mode, args.seed, args.sched_seed)
            results.append(r)
            print(r.line(), flush=True)
            if r.status != "match":
                print("  " + r.message.replace("\n", "\n  "), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([{
            "label": "emulated", "status": r.status, "version": r.version, "shape": r.shape, "mode": r.mode,
            "message": r.message, "seconds": round(r.seconds, 2), "launch": r.launch, "stats": r.stats,
            "compile": r.compile} for r in results], indent=2, default=list))
    return 0 if results and not skipped and all(r.status == "match" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
