#!/usr/bin/env python3
"""Calibrate the SM100 emulator (emu/) on arseni_ivanov's B200-verified CuTe DSL NVFP4 dual-GEMM kernel for THIS
problem (4th place, 13.69 us geomean; readable in Ozamatash/nvfp4_gpumode @ 1dc9713c5347,
dual_gemm/others/arseni.py). Three kernels, chosen by shape in his custom_kernel: M <= 256 -> Sm100BlockScaledSmall
(2-CTA MMA 256x64, cluster 2x1); else N < 3000 -> Sm100BlockScaledDenseGemmKernel 128x128, cluster 1x1
(compile_small_cluster); else the same class with cluster 1x2 (A multicast). None is persistent. His source is NOT
copied into this repository: the file is read at run time.

    python -m calibration.arseni [--src FILE] [--configs NAME,...|all] [--modes strict,leaderboard] [--json OUT]

FILE: $ARSENI_DUAL_GEMM, else /tmp/arseni/arseni.py (save dual_gemm/others/arseni.py of Ozamatash/nvfp4_gpumode at
commit 1dc9713c534731093125c3ce7adb180da2bcfe9c there; needs the network, which CI lacks: tests skip with the reason).

Steps per kernel (each mechanical):
1. Compile (a worker subprocess per kernel: the DSL keeps global state) under the installed nvidia-cutlass-dsl (4.8.1)
   for sm_100a with his own compile functions, unmodified: compile_kernel() (Small and the 1x2 kernel) or
   compile_small_cluster() (the 1x1 kernel), i.e. his `cute.compile(gemm, 7 pointers, (0, 0, 0, 0), ...,
   options="--opt-level 2 --gpu-arch sm_100a")`. Two differences between the DSL he ran (the leaderboard's 4.3 era)
   and 4.8.1 are bridged in the worker, not in his file (DSL_COMPAT below): 4.3's abstract
   Tensor.mark_compact_shape_dynamic did nothing where 4.8.1's raises NotImplementedError, and 4.3 passed a tuple
   of Python ints as dynamic Int32 arguments (his custom_kernel calls the compiled function with the real
   (m, n, k, l)) where 4.8.1 bakes them in as constants: the worker hands cute.compile Int32(0) for each.
   The compiled function is written out with export_to_c (plain C ABI).
2. Capture the launch: the exported host code, linked with harness/launch_stubs.c, is called once through its C entry
   with the emulated addresses of the 7 tensors his custom_kernel passes (a, b1, b2, the three *_permuted scale
   tensors, c) and the problem size (m, n, k, l); the cudaLaunchKernelEx stand-in records grid, block, cluster,
   shared memory and parameter bytes (harness.capture.call_host_c_abi).
3. Inputs from reference.generate_input in both modes as the leaderboard's tensors (harness.problems.place_inputs), C NaN;
   emu.run_kernel; C compared with reference.ref_kernel under the leaderboard tolerance.

Configs: "small" (256x256x512, his M <= 256 kernel), "c1x1" (512x256x512, his M > 256, N < 3000 kernel), "c1x2"
(384x3072x256, his N >= 3000 kernel: 36 clusters), each the kernel his custom_kernel picks for that shape;
"bench3" (256x3072x4096, full size, slow).
Prints one line per config and mode: "emulated VERDICT: ...", the notes grouped by rule. Exit 0 only if all MATCH.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARSENI_REPO = "Ozamatash/nvfp4_gpumode"
ARSENI_COMMIT = "1dc9713c534731093125c3ce7adb180da2bcfe9c"
ARSENI_PATH = "dual_gemm/others/arseni.py"
DEFAULT_FILE = Path("/tmp/arseni/arseni.py")
ENV_VAR = "ARSENI_DUAL_GEMM"
EXPORT_PREFIX = "emu_arseni"
# his custom_kernel's choice -> (compile function, class whose PTX it is, index into that function's result)
KERNELS = {"small": ("compile_kernel", "Sm100BlockScaledSmall", 0),
           "c1x2": ("compile_kernel", "Sm100BlockScaledDenseGemmKernel", 1),
           "c1x1": ("compile_small_cluster", "Sm100BlockScaledDenseGemmKernel", None)}


def kernel_for(m: int, n: int) -> str:
    """His custom_kernel's dispatch: `if m <= 256: small; elif n < 3000: compile_small_cluster(); else: large`."""
    return "small" if m <= 256 else ("c1x1" if n < 3000 else "c1x2")


@dataclass(frozen=True)
class ArseniConfig:
    name: str
    shape: tuple  # (M, N, K), L = 1

    @property
    def kernel(self) -> str:
        return kernel_for(self.shape[0], self.shape[1])


CONFIGS = {c.name: c for c in (
    ArseniConfig("small", (256, 256, 512)),
    ArseniConfig("c1x1", (512, 256, 512)),
    ArseniConfig("c1x2", (384, 3072, 256)),
    ArseniConfig("bench3", (256, 3072, 4096)),
)}
DEFAULT_CONFIGS = ("small", "c1x1", "c1x2")


def find_source() -> tuple[Path | None, str]:
    env = os.environ.get(ENV_VAR)
    p = Path(env) if env else DEFAULT_FILE
    if p.is_file():
        return p, ""
    return None, (f"arseni_ivanov's kernel is not available: no {p} (set ${ENV_VAR} or save {ARSENI_REPO}@"
                  f"{ARSENI_COMMIT[:12]}:{ARSENI_PATH} there; needs network, not in this repository by design)")


# ============================================================================ compile (worker subprocess)
def compile_artifacts(source: Path, kernel: str) -> Path:
    """Folder with kernel.ptx, kernel.o, <EXPORT_PREFIX>.h and meta.json for one of his kernels; cached."""
    from harness.capture import cached_compile, installed_dsl

    source = Path(source).resolve()
    key = {"source": hashlib.sha256(source.read_bytes()).hexdigest(), "dsl": installed_dsl(), "kernel": kernel,
           "worker": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}
    return cached_compile("arseni", key, {"source": str(source), "kernel": kernel}, Path(__file__),
                          "--compile-worker", dict(os.environ, CUTE_DSL_KEEP_PTX="1"))


def dsl_compat(cute, cutlass) -> list[str]:
    """DSL_COMPAT: make 4.8.1 treat his file as the 4.3-era DSL did (see the module docstring). Returns what it did."""
    import cutlass.cute.typing as cute_typing

    cute_typing.Tensor.mark_compact_shape_dynamic = lambda self, *a, **k: None
    original = cute.compile

    def compile_with_dynamic_int_tuples(fn, *args, **kwargs):
        args = tuple(tuple(cutlass.Int32(x) for x in a) if isinstance(a, tuple) and a
                     and all(type(x) is int for x in a) else a for a in args)
        return original(fn, *args, **kwargs)

    cute.compile = compile_with_dynamic_int_tuples
    return ["Tensor.mark_compact_shape_dynamic: no-op (as in DSL 4.3)",
            "cute.compile: a tuple of Python ints passed as Int32 values (dynamic, as in DSL 4.3)"]


def _compile_worker(job_path: str) -> None:
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != here]
    job = json.loads(Path(job_path).read_text())
    out, source, kernel = Path(job["out"]), Path(job["source"]), job["kernel"]
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # his `from task import input_t, output_t`
    import cutlass
    import cutlass.cute as cute

    compat = dsl_compat(cute, cutlass)
    t0 = time.time()
    spec = importlib.util.spec_from_file_location("arseni", source)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    fn_name, cls_name, index = KERNELS[kernel]
    result = getattr(mod, fn_name)()
    compiled = result if index is None else result[index]
    t1 = time.time()
    ptxs = [p for p in sorted((out / "dump").glob("*.ptx")) if f"arseni{cls_name}_" in p.name]
    if len(ptxs) != 1:
        raise RuntimeError(f"expected one {cls_name} PTX in the dump, found {[p.name for p in ptxs]}")
    shutil.copy(ptxs[0], out / "kernel.ptx")
    compiled.export_to_c(str(out), EXPORT_PREFIX)
    os.replace(out / f"{EXPORT_PREFIX}.o", out / "kernel.o")
    (out / "meta.json").write_text(json.dumps({
        "dsl_version": str(getattr(cutlass, "__version__", "") or importlib.metadata.version("nvidia-cutlass-dsl")),
        "compile_s": round(t1 - t0, 2), "ptx_file": ptxs[0].name, "dsl_compat": compat,
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest()}))


def capture(art: Path, addr: dict, m: int, n: int, k: int):
    from emu.launch import CapturedLaunch
    from harness.capture import call_host_c_abi

    ptx = (art / "kernel.ptx").read_text()
    args = [(f"{x}_ptr", ctypes.c_void_p(int(addr[x]))) for x in ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "c")]
    args += [(f"problem_size[{i}]", ctypes.c_int32(v)) for i, v in enumerate((m, n, k, 1))]
    rec = call_host_c_abi(art, ptx, EXPORT_PREFIX, args)
    meta = json.loads((art / "meta.json").read_text())
    return CapturedLaunch(
        ptx=ptx, kernel_name=rec["kernel_name"], grid=rec["grid"], block=rec["block"], cluster=rec["cluster"],
        dynamic_smem=rec["dynamic_smem"], params=rec["blobs"], dsl_version=meta["dsl_version"],
        param_names=[p[0] for p in rec["params"]], param_decls=[p[3] for p in rec["params"]], cubin=rec["cubin"],
        launch_attrs=rec["attrs"], runtime_log=rec["log"], artifact_dir=str(art), timings={"worker": meta})


# ============================================================================ one run
@dataclass
class ArseniResult:
    status: str
    config: ArseniConfig
    mode: str
    message: str = ""
    seconds: float = 0.0
    launch: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def verdict(self) -> str:
        rules = sorted({n.rule for n in self.notes})
        if self.status == "match" and rules:
            return f"MATCH with notes ({', '.join(rules)})"
        return self.status.upper()

    def line(self) -> str:
        m, n, k = self.config.shape
        lc = self.launch
        extra = (f" grid {lc.get('grid')} cluster {lc.get('cluster')} smem {lc.get('dynamic_smem')}" if lc else "")
        return (f"emulated {self.verdict}: arseni {self.config.name} (kernel {self.config.kernel}) {m}x{n}x{k}x1 "
                f"{self.mode}{extra}, {self.stats.get('warp_instructions', 0)} warp-instructions, "
                f"{self.stats.get('mma', 0)} MMAs, {self.seconds:.1f} s")


@dataclass
class Prepared:
    """His kernel on one shape, ready to run: the launch, global memory (inputs placed, C poisoned), and how to judge
    C (calibration.timing times it through this)."""

    launches: list  # [emu.launch.CapturedLaunch]
    gmem: object
    addresses: dict
    data: tuple
    shape: tuple  # (M, N, K)

    def check(self, gmem, machine, every_cluster: bool = False) -> tuple[str, str, int]:
        """(status, message, elements checked): all of C when every cluster ran, else the elements the clusters run
        stored, against reference.py."""
        import numpy as np
        import torch

        import reference
        from harness.problems import DUAL_GEMM, check_c

        m, n, _ = self.shape
        raw = gmem.read(self.addresses["c"], m * n * 2).view(np.float16)
        out = torch.from_numpy(raw.copy()).reshape(m, n, 1)
        if every_cluster:
            ok, msg = check_c(out, reference.ref_kernel(self.data))
            return ("match" if ok else "mismatch"), msg, m * n
        ok, msg = _check_written(machine.store_log, self.addresses["c"], m, n, out, self.data, reference, check_c,
                                 DUAL_GEMM.reference_tile)
        return ("match" if ok else "mismatch"), msg, sum(nbytes // 2 for _, nbytes in machine.store_log)


def prepare(source: Path, shape: tuple, mode: str = "strict", seed: int = 1111) -> Prepared:
    """His custom_kernel's choice of kernel for `shape` (M, N, K), compiled, with its launch captured on reference
    inputs; raises harness.host.LaunchError where the launch stand-ins refuse it (what a B200 refuses)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import reference
    from emu.state import GlobalMemory
    from harness.problems import place_inputs

    m, n, k = shape
    art = compile_artifacts(source, kernel_for(m, n))
    data = reference.generate_input(m, n, k, 1, seed, mode=mode, device="cpu")
    data[9].fill_(float("nan"))
    gmem = GlobalMemory()
    addr = place_inputs(gmem, data, m, n, k, 1)
    return Prepared([capture(art, addr, m, n, k)], gmem, addr, data, (m, n, k))


def run_one(source: Path, cfg: ArseniConfig, mode: str, seed: int = 1111, sched_seed: int = 0,
            clusters="all") -> ArseniResult:
    from emu import run_kernel
    from harness.host import LaunchError

    t0 = time.time()
    res = ArseniResult("unsupported", cfg, mode)
    try:
        prep = prepare(source, cfg.shape, mode, seed)
    except LaunchError as e:  # the launch stand-ins refuse what a B200 refuses (emu.device B200_LIMITS)
        res.status, res.message, res.seconds = "launch", str(e), time.time() - t0
        return res
    cap = prep.launches[0]
    res.launch = {"grid": cap.grid, "block": cap.block, "cluster": cap.cluster, "dynamic_smem": cap.dynamic_smem,
                  "dsl_version": cap.dsl_version}
    run = run_kernel(cap, prep.gmem, sched_seed, clusters)
    res.status, res.message = run.status, run.message
    if run.machine is not None:
        res.stats = dict(run.machine.stats)
        res.notes = list(run.machine.notes.values())
    if run.status == "completed":
        res.status, res.message, _ = prep.check(prep.gmem, run.machine, run.clusters_run == run.clusters_total)
    res.seconds = time.time() - t0
    return res


def _check_written(store_log, c_addr, m, n, out, data, reference, check, reference_tile):
    """The elements of C the chosen clusters stored, against reference.py's exact path on their rows and columns."""
    import numpy as np
    import torch

    written = np.zeros((m, n), bool)
    for a, nbytes in store_log:
        e0 = (a - c_addr) // 2
        written.reshape(-1)[e0:e0 + nbytes // 2] = True
    rows, cols = np.flatnonzero(written.any(1)), np.flatnonzero(written.any(0))
    if not rows.size:
        return False, "the emulated clusters wrote no element of C"
    rs, cs = slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1)
    mask = torch.from_numpy(written[rs, cs])
    ok, msg = check(out[rs, cs, 0][mask], reference_tile(reference, data, rs, cs, 0)[mask])
    return ok, f"{int(mask.sum())} elements stored by the chosen clusters: {msg}"


# ============================================================================ CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", help=f"path to his arseni.py (default ${ENV_VAR} or {DEFAULT_FILE})")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help=f"from {', '.join(CONFIGS)}, or 'all'")
    ap.add_argument("--modes", default="strict,leaderboard")
    ap.add_argument("--seed", type=int, default=1111)
    ap.add_argument("--sched-seed", type=int, default=0)
    ap.add_argument("--clusters", default="all", help="'all' or a count of clusters to run, drawn by the seed")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from emu.state import summarize_notes

    source, why = (Path(args.src), "") if args.src else find_source()
    if source is None or not source.is_file():
        print(f"skipped: {why or f'{args.src} is not a file'}", flush=True)
        return 1
    names = list(CONFIGS) if args.configs == "all" else [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configs {unknown}; known: {list(CONFIGS)}")
    print(f"arseni: {source} (sha256 {hashlib.sha256(source.read_bytes()).hexdigest()[:16]})", flush=True)
    results = []
    for name in names:
        for mode in [x.strip() for x in args.modes.split(",") if x.strip()]:
            r = run_one(source, CONFIGS[name], mode, args.seed, args.sched_seed, args.clusters)
            results.append(r)
            print(r.line(), flush=True)
            for line in summarize_notes(r.notes):
                print("  " + line, flush=True)
            if r.status != "match":
                print("  " + r.message.replace("\n", "\n  "), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([{
            "label": "emulated", "status": r.status, "verdict": r.verdict, "config": r.config.name,
            "kernel": r.config.kernel, "shape": r.config.shape, "mode": r.mode, "message": r.message,
            "notes": [x.describe() for x in r.notes], "seconds": round(r.seconds, 2), "launch": r.launch,
            "stats": r.stats} for r in results], indent=2, default=list))
    return 0 if results and all(r.status == "match" for r in results) else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        _compile_worker(sys.argv[2])
    else:
        sys.exit(main())
