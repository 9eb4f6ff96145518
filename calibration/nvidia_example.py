#!/usr/bin/env python3
"""Calibrate the SM100 emulator (emu/) on a hardware-verified kernel: NVIDIA's CuTe DSL persistent
block-scaled GEMM example (examples/python/CuTeDSL/cute/blackwell/kernel/blockscaled_gemm/
dense_blockscaled_gemm_persistent.py of NVIDIA/cutlass), which is NOT copied into this repository.

    python -m calibration.nvidia_example --example PATH [--configs 1cta,2cta,...] [--seed S] [--json OUT]
    python -m calibration.nvidia_example --from-mirror [--mirror DIR] [--mirror-rev REV] ...

For each config (NVFP4: A/B Float4E2M1FN, SF Float8E4M3FN, sf_vec_size 16, acc Float32, C Float16/Float32):
1. compile (worker subprocess: CUTE_DSL_ARCH=sm_100a and CUTE_DSL_KEEP_PTX=1 are set before cutlass is
   imported) with the example's own compile path: its `scaled_mm(...)`, i.e. `cute.compile(gemm, make_ptr(..., 0,
   ...) x5, layouts, (Int32(0),)*4, max_active_clusters, stream)`; the compiled function is exported with
   `export_to_c` (plain C ABI: header + object with the real host code and the embedded cubin).
2. capture the real launch: the object is linked with harness/launch_stubs.c (harness.host.build_library) and its
   host entry is called through ctypes with the global addresses of emulated buffers holding the inputs and
   the problem size; the cudaLaunchKernelEx stand-in records grid, block, cluster, dynamic smem, parameter bytes.
3. run every warp of every cluster in emu.machine.Machine, read C back, compare with an independent float64
   reference D = (A*SFA)(B*SFB)^T under the leaderboard's tolerance (|out - ref| <= 1e-3 + 1e-3 |ref|).

Input layouts are those the example's host code describes (read from its __call__ / prepare_tensors /
create_and_reorder_scale_factor_tensor): A (M, K, L) K-major FP4 (memory (L, M, K/2), element 2p in the low
nibble of byte p), B (N, K, L) likewise, C (M, N, L) row-major (memory (L, M, N)), scale factors in the
(32, 4, restMN, 4, restK, L) atom layout: memory (L, restMN, restK, 32, 4, 4) with sf[mn, kb] at
[l][mn // 128][kb // 4][mn % 32][(mn // 32) % 4][kb % 4].

Exit 0 only if every config MATCHes. Every result is "emulated": it says what the PTX computes under the
PTX ISA semantics as emu/ implements them.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MIRROR = Path("/work/.mirror/NVIDIA+cutlass/repo")
EXAMPLE_IN_REPO = ("examples/python/CuTeDSL/cute/blackwell/kernel/blockscaled_gemm/"
                   "dense_blockscaled_gemm_persistent.py")
EXPORT_PREFIX = "emu_cal"
SF_VEC = 16


@dataclass(frozen=True)
class CalConfig:
    name: str
    mma_tiler_mn: tuple
    cluster_shape_mn: tuple
    max_active_clusters: int   # the example's Constexpr: persistent grid = min(tiles, this) clusters
    shape: tuple               # (M, N, K, L)
    c_dtype: str = "Float16"   # or "Float32"

    def describe(self) -> str:
        m, n, k, l = self.shape
        return (f"{self.name} (mma {self.mma_tiler_mn[0]}x{self.mma_tiler_mn[1]}, cluster "
                f"{self.cluster_shape_mn[0]}x{self.cluster_shape_mn[1]}, max_active_clusters "
                f"{self.max_active_clusters}, C {self.c_dtype}) {m}x{n}x{k}x{l}")


CONFIGS = {c.name: c for c in (
    # one tile per CTA
    CalConfig("1cta", (128, 128), (1, 1), 148, (256, 256, 512, 1)),
    CalConfig("2cta", (256, 128), (2, 1), 74, (256, 256, 512, 1)),
    # persistent: one cluster runs every tile (4 tiles per CTA / 2 per CTA pair), accumulator stages reused
    CalConfig("1cta-persistent", (128, 128), (1, 1), 1, (256, 256, 512, 1)),
    CalConfig("2cta-persistent", (256, 128), (2, 1), 1, (256, 256, 512, 1)),
    # fp32 C, batched (L=2), N tile 256
    CalConfig("1cta-f32-l2", (128, 256), (1, 1), 148, (128, 256, 256, 2), "Float32"),
    # ragged M/N (TMA out-of-bound fill on loads, clipped TMA stores), N tile 64, K = 6 k-tiles (stage wrap)
    CalConfig("1cta-n64-ragged", (128, 64), (1, 1), 2, (200, 136, 1536, 1)),
    # multicast: 2x2 cluster of 2-CTA MMAs (A multicast along N, B along M, SFB multicast)
    CalConfig("2cta-cluster2x2", (256, 128), (2, 2), 1, (256, 512, 512, 1)),
    # 1x2 cluster (the two CTAs along N share A: A/SFA multicast), N tile 192 (the example's special SFB path), persistent
    CalConfig("1cta-cluster1x2-persistent", (128, 192), (1, 2), 1, (256, 384, 512, 1)),
)}
DEFAULT_CONFIGS = ("1cta", "2cta", "1cta-persistent", "2cta-persistent")


# ============================================================================ the example's source
def example_from_mirror(mirror: Path = DEFAULT_MIRROR, rev: str = "HEAD", dest: Path | None = None) -> Path:
    """Extract the example from a bare git mirror of NVIDIA/cutlass into a temp dir; return its path."""
    if not (mirror / "HEAD").exists() and not (mirror / ".git").exists():
        raise FileNotFoundError(f"no git mirror of NVIDIA/cutlass at {mirror}")
    text = subprocess.run(["git", "-C", str(mirror), "show", f"{rev}:{EXAMPLE_IN_REPO}"], check=True,
                          capture_output=True).stdout
    commit = subprocess.run(["git", "-C", str(mirror), "rev-parse", rev], check=True, capture_output=True,
                            text=True).stdout.strip()
    dest = Path(dest) if dest else Path(tempfile.gettempdir()) / "emu_calibrate_example" / commit[:12]
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "dense_blockscaled_gemm_persistent.py"
    if not path.exists() or path.read_bytes() != text:  # written whole, then renamed: a concurrent process
        (dest / f"{path.name}.{os.getpid()}").write_bytes(text)  # (pytest-xdist) may be hashing or compiling it
        os.replace(dest / f"{path.name}.{os.getpid()}", path)
    (dest / "SOURCE").write_text(f"NVIDIA/cutlass {commit} {EXAMPLE_IN_REPO}\n")
    return path


def find_example(env_var: str = "NVIDIA_BLOCKSCALED_EXAMPLE") -> tuple[Path | None, str]:
    """(path, why) for tests: $NVIDIA_BLOCKSCALED_EXAMPLE, else the mirror; (None, reason) when neither."""
    p = os.environ.get(env_var)
    if p:
        return (Path(p), "") if Path(p).is_file() else (None, f"${env_var}={p} is not a file")
    try:
        return example_from_mirror(), ""
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        return None, (f"NVIDIA's example is not available: no ${env_var} and no readable mirror at "
                      f"{DEFAULT_MIRROR} ({type(e).__name__})")


# ============================================================================ compile (worker subprocess)
def compile_artifacts(example: Path, cfg: CalConfig) -> Path:
    """Directory with kernel.ptx, kernel.o (export_to_c object), emu_cal.h, meta.json; cached."""
    from harness.capture import cached_compile
    from harness.dsl import installed_version

    example = Path(example).resolve()
    key = {"example": hashlib.sha256(example.read_bytes()).hexdigest(), "dsl": installed_version(),
           "cfg": [cfg.mma_tiler_mn, cfg.cluster_shape_mn, cfg.max_active_clusters, cfg.c_dtype],
           "worker": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}
    env = dict(os.environ, CUTE_DSL_KEEP_PTX="1")
    return cached_compile("calibrate", key, {"example": str(example), "cfg": dataclasses.asdict(cfg)},
                          Path(__file__), "--compile-worker", env)


def _compile_worker(job_path: str) -> None:

    # run as a script, sys.path[0] is this folder: nothing there may shadow a package the DSL imports
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != here]
    job = json.loads(Path(job_path).read_text())
    out, example = Path(job["out"]), Path(job["example"])
    cfg = CalConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["cfg"].items()})
    t0 = time.time()
    spec = importlib.util.spec_from_file_location("nvidia_dense_blockscaled_gemm_persistent", example)
    ex = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex
    spec.loader.exec_module(ex)
    import cuda.bindings.driver as cuda
    import cutlass

    ab, sf, c_dtype = cutlass.Float4E2M1FN, cutlass.Float8E4M3FN, getattr(cutlass, cfg.c_dtype)
    cls = ex.Sm100BlockScaledPersistentDenseGemmKernel
    if not cls.can_implement(cfg.shape, ab, ab, sf, c_dtype, "k", "k", "n", SF_VEC, cfg.mma_tiler_mn,
                             cfg.cluster_shape_mn):
        raise SystemExit(f"the example's can_implement rejects {cfg.describe()}")
    gemm = cls(SF_VEC, cfg.mma_tiler_mn, cfg.cluster_shape_mn)
    t1 = time.time()
    # the example's own compile path (null pointers, Int32(0) problem sizes, the given max_active_clusters)
    compiled = ex.scaled_mm(gemm, ab, ab, c_dtype, sf, "k", "k", "n", cfg.max_active_clusters, cuda.CUstream(0))
    t2 = time.time()
    ptxs = sorted((out / "dump").glob("*.ptx"))
    if len(ptxs) != 1:
        raise RuntimeError(f"expected one PTX file in the dump, found {[p.name for p in ptxs]}")
    shutil.copy(ptxs[0], out / "kernel.ptx")
    compiled.export_to_c(str(out), EXPORT_PREFIX)
    os.replace(out / f"{EXPORT_PREFIX}.o", out / "kernel.o")  # harness.host.build_library links <art>/kernel.o
    (out / "meta.json").write_text(json.dumps({
        "dsl_version": str(getattr(cutlass, "__version__", "") or importlib.metadata.version("nvidia-cutlass-dsl")),
        "import_s": round(t1 - t0, 2), "compile_s": round(t2 - t1, 2), "ptx_file": ptxs[0].name,
        "example_sha256": hashlib.sha256(example.read_bytes()).hexdigest()}))


# ============================================================================ launch capture
def capture(art: Path, addresses: dict, shape: tuple):
    """Call the example's exported host entry (plain C ABI of export_to_c: a_ptr, b_ptr, sfa_ptr, sfb_ptr, c_ptr,
    the four int32 problem sizes, its queue argument) once; return an emu.launch.CapturedLaunch."""
    from emu.launch import CapturedLaunch
    from harness.capture import call_host_c_abi

    ptx = (art / "kernel.ptx").read_text()
    args = [(f"{x}_ptr", ctypes.c_void_p(int(addresses[x]))) for x in ("a", "b", "sfa", "sfb", "c")]
    args += [(f"problem_mnkl[{i}]", ctypes.c_int32(v)) for i, v in enumerate(shape)]
    rec = call_host_c_abi(art, ptx, EXPORT_PREFIX, args)
    meta = json.loads((art / "meta.json").read_text())
    return CapturedLaunch(
        ptx=ptx, kernel_name=rec["kernel_name"], grid=rec["grid"], block=rec["block"], cluster=rec["cluster"],
        dynamic_smem=rec["dynamic_smem"], params=rec["blobs"], dsl_version=meta["dsl_version"],
        param_names=[p[0] for p in rec["params"]], param_decls=[p[3] for p in rec["params"]], cubin=rec["cubin"],
        launch_attrs=rec["attrs"], runtime_log=rec["log"], artifact_dir=str(art), timings={"worker": meta})


# ============================================================================ inputs and reference
def _e4m3_positive_table():
    from emu.numerics import E4M3FN_TABLE

    codes = np.arange(1, 0x7F)  # positive, finite, non-zero
    return codes.astype(np.uint8), E4M3FN_TABLE[codes]


def make_inputs(shape: tuple, seed: int) -> dict:
    """Strict-style data: FP4 bytes uniform over 0..255 (all 16 codes in both nibbles); e4m3 scales positive,
    from subnormal to ~2^4 with varied mantissas, A/B block exponents anti-correlated so |D| stays ~10."""
    m, n, k, l = shape
    rng = np.random.default_rng(seed)
    sf_k = k // SF_VEC
    a = rng.integers(0, 256, (l, m, k // 2), dtype=np.uint8)
    b = rng.integers(0, 256, (l, n, k // 2), dtype=np.uint8)
    mean_sq = np.mean(np.array([0, .25, 1, 2.25, 4, 9, 16, 36]))
    t = np.log2(10.0 / (np.sqrt(k) * mean_sq * 1.6))           # per-block log2 of sa*sb
    base = rng.uniform(-5, 5, (l, 1, sf_k))
    codes, values = _e4m3_positive_table()

    def scales(sign, rows):
        log2 = t / 2 + sign * base + rng.uniform(-1, 1, (l, rows, sf_k))
        want = np.exp2(log2)
        idx = np.abs(values[None, None, None, :] - want[..., None]).argmin(-1)  # nearest e4m3 value
        return codes[idx]

    return {"a": a, "b": b, "sfa": scales(+1, m), "sfb": scales(-1, n)}


def blocked_scale_bytes(sf: np.ndarray) -> np.ndarray:
    """(L, MN, SF_K) scale bytes -> bytes of the (32, 4, restMN, 4, restK, L) atom tensor: memory
    (L, restMN, restK, 32, 4, 4) with sf[mn, kb] at [l, mn//128, kb//4, mn%32, (mn//32)%4, kb%4]
    (the example's create_and_reorder_scale_factor_tensor / cvt_sf_MKL_to_M32x4xrm_K4xrk_L). Padding is 0."""
    l, mn, sf_k = sf.shape
    rm, rk = -(-mn // 128), -(-sf_k // 4)
    pad = np.zeros((l, rm * 128, rk * 4), np.uint8)
    pad[:, :mn, :sf_k] = sf
    # [l, rm, 4 (mn//32 % 4), 32 (mn % 32), rk, 4 (kb % 4)] -> [l, rm, rk, 32, 4, 4]
    v = pad.reshape(l, rm, 4, 32, rk, 4).transpose(0, 1, 4, 3, 2, 5)
    return np.ascontiguousarray(v).reshape(-1)


def reference(inputs: dict) -> np.ndarray:
    """float64 D[l, m, n] = sum_k A[m,k] sfa[m,k//16] B[n,k] sfb[n,k//16] (FP4 element 2p = low nibble of byte p)."""
    from emu.numerics import e2m1_to_float, e4m3fn_to_float, unpack_fp4

    def deq(packed, sf):
        vals = e2m1_to_float(unpack_fp4(packed))                       # (l, rows, k)
        return vals * np.repeat(e4m3fn_to_float(sf), SF_VEC, axis=2)

    a, b = deq(inputs["a"], inputs["sfa"]), deq(inputs["b"], inputs["sfb"])
    return np.einsum("lmk,lnk->lmn", a, b)


def check(out: np.ndarray, ref: np.ndarray, c_dtype: str) -> tuple[bool, str]:
    """The leaderboard's rule against the reference rounded to C's type: |o - r| <= 1e-3 + 1e-3 |r|."""
    r = ref.astype(np.float16 if c_dtype == "Float16" else np.float32).astype(np.float64)
    o = out.astype(np.float64)
    bad = ~np.isclose(o, r, rtol=1e-3, atol=1e-3) | (np.isnan(o) != np.isnan(r))
    if not bad.any():
        return True, f"all {o.size} elements within tolerance (max |ref| {np.abs(r).max():.3g})"
    idx = np.argwhere(bad)[:5]
    shown = ", ".join(f"[l={i[0]} m={i[1]} n={i[2]}] got {o[tuple(i)]:.6g} want {r[tuple(i)]:.6g}" for i in idx)
    return False, f"{int(bad.sum())} of {bad.size} elements differ; first: {shown}"


# ============================================================================ one config
@dataclass
class CalResult:
    status: str
    config: CalConfig
    message: str = ""
    seconds: float = 0.0
    launch: dict = dataclasses.field(default_factory=dict)
    stats: dict = dataclasses.field(default_factory=dict)
    timings: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        m, n, k, l = self.config.shape
        lc = self.launch
        extra = (f" grid {lc.get('grid')} cluster {lc.get('cluster')} smem {lc.get('dynamic_smem')}"
                 if lc else "")
        return (f"emulated {self.status.upper()}: {self.config.name} {m}x{n}x{k}x{l}{extra}, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs, "
                f"{self.seconds:.1f} seconds")


def calibrate_one(example: Path, cfg: CalConfig, seed: int = 0, sched_seed: int = 0, progress=None,
                  place_scales=None) -> CalResult:
    """Compile (cached), capture, emulate and check one config. place_scales: (L, MN, SF_K) scale bytes -> the bytes
    placed in global memory (default blocked_scale_bytes; tests pass a wrong layout to prove the check bites)."""
    from emu import run_kernel
    from emu.state import GlobalMemory

    place_scales = place_scales or blocked_scale_bytes
    t0 = time.time()
    res = CalResult("unsupported", cfg)
    art = compile_artifacts(example, cfg)
    t1 = time.time()
    m, n, k, l = cfg.shape
    inputs = make_inputs(cfg.shape, seed)
    c_bytes = 2 if cfg.c_dtype == "Float16" else 4
    gmem = GlobalMemory()
    addresses = {
        "a": gmem.alloc_array(inputs["a"]),
        "b": gmem.alloc_array(inputs["b"]),
        "sfa": gmem.alloc_array(place_scales(inputs["sfa"])),
        "sfb": gmem.alloc_array(place_scales(inputs["sfb"])),
        "c": gmem.alloc(l * m * n * c_bytes, fill=0xFF),  # NaN-poisoned: every element must be written
    }
    cap = capture(art, addresses, cfg.shape)
    t2 = time.time()
    res.launch = {"grid": cap.grid, "block": cap.block, "cluster": cap.cluster, "dynamic_smem": cap.dynamic_smem,
                  "kernel": cap.kernel_name[:80]}
    run = run_kernel(cap, gmem, sched_seed, progress=progress)
    res.status, res.message = run.status, run.message
    if run.status == "completed":
        raw = gmem.read(addresses["c"], l * m * n * c_bytes)
        out = raw.view(np.float16 if c_bytes == 2 else np.float32).reshape(l, m, n)
        ok, msg = check(out, reference(inputs), cfg.c_dtype)
        res.status, res.message = ("match" if ok else "mismatch"), msg
    if run.machine is not None:
        res.stats = dict(run.machine.stats)
    res.seconds = time.time() - t0
    res.timings = {"compile_or_cache_s": round(t1 - t0, 2), "capture_s": round(t2 - t1, 2),
                   "emulate_s": round(time.time() - t2, 2), "worker": json.loads((art / "meta.json").read_text())}
    return res


# ============================================================================ CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--example", help="path to dense_blockscaled_gemm_persistent.py")
    src.add_argument("--from-mirror", action="store_true", help="extract it from a git mirror of NVIDIA/cutlass")
    ap.add_argument("--mirror", default=str(DEFAULT_MIRROR), help="the mirror (a bare repository)")
    ap.add_argument("--mirror-rev", default="HEAD", help="commit / tag to extract")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help=f"comma-separated, from {', '.join(CONFIGS)} (or 'all')")
    ap.add_argument("--seed", type=int, default=0, help="input data seed")
    ap.add_argument("--sched-seed", type=int, default=0, help="emulator scheduler seed")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    example = Path(args.example) if args.example else example_from_mirror(Path(args.mirror), args.mirror_rev)
    names = list(CONFIGS) if args.configs == "all" else [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configs {unknown}; known: {list(CONFIGS)}")
    print(f"example: {example} (sha256 {hashlib.sha256(example.read_bytes()).hexdigest()[:16]})", flush=True)
    results = []
    for name in names:
        res = calibrate_one(example, CONFIGS[name], seed=args.seed, sched_seed=args.sched_seed)
        results.append(res)
        print(res.line(), flush=True)
        if res.status != "match":
            print("  " + res.message.replace("\n", "\n  "), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([{
            "label": "emulated", "status": r.status, "config": dataclasses.asdict(r.config), "message": r.message,
            "seconds": round(r.seconds, 2), "launch": r.launch, "stats": r.stats, "timings": r.timings,
            "example": str(example)} for r in results], indent=2, default=list))
    return 0 if results and all(r.status == "match" for r in results) else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        _compile_worker(sys.argv[2])
    else:
        sys.exit(main())
