#!/usr/bin/env python3
"""gau-nernst's B200-measured NVFP4 kernels in the SM100 emulator: the public points the timed emulator is judged on.

gau-nernst/gpu-mode-kernels @ aee9cda6b6444f774ce5eaee1ec1a5c84acaa521 keeps one file per version of his
leaderboard submissions with per-version B200 times in each problem's README: nvidia/nvfp4_dual_gemm (v1 ... v2, this
problem) and nvidia/nvfp4_gemm (v0 ... v4, the single NVFP4 GEMM). calibration/b200_points.json lists every
(version, shape) time with its design and the fit/holdout split. This module runs each version's own device code, with
the launch his host code makes, in the emulator (functional: no timing), and exposes that to the timed judge:

    prep = prepare("gau-gemm-v3b-128x7168x2048", sources=DIR)        # a point id, or
    prep = prepare("dual/v1b", shape=(256, 256, 512), mode="leaderboard", sources=DIR)
    prep = prepare_point(point, sources=DIR)                          # a record of judged_points()
    prep.launches       # emu.launch.CapturedLaunch per kernel launch, in order (.ptx .grid .block .cluster
                        # .dynamic_smem .params .launch_attrs: what emu.run_kernel / emu.timing take)
    prep.gmem           # emu.state.GlobalMemory: inputs placed, C poisoned NaN, his fp32 workspaces zeroed
    prep.check(gmem, machine) -> (status, message, checked_elements)   # machine: the one that ran the last launch;
                        # checks the elements the clusters run computed completely (any subset of clusters)
    prep.select(i, cluster_ids, count, seed, written)   # a subset of launch i's clusters (split-K slices together)
A prepared gmem is consumed by one run: prepare again for another.

CLI (one line per point on stderr, a summary on stdout; exit 0 only if every run matches):
    python -m calibration.gau --points all --sources DIR [--full-size] [--clusters N] [--modes strict,leaderboard]
    python -m calibration.gau --versions dual/v1b,gemm/v4 --sources DIR [--shape M,N,K]
--points takes all, fit, holdout, dual, gemm or point ids; without --full-size every selected version runs on its
family's small shapes (SMALL_SHAPES), with it each point runs at its benchmark shape.

DIR holds the files at their repository paths, fetched by path at the pinned commit (never copied into this
repository): DIR/nvidia/nvfp4_dual_gemm/submission_v1b.py, DIR/nvidia/nvfp4_gemm/submission_v3b.py, ... (the
`design_from` URLs of the points file name every file). Default $GAU_SOURCES, else /tmp/gau_src.

Steps per launch (each mechanical, so a reviewer can redo it by hand):
1. Source: the string assigned to CUDA_SRC (his load_inline(cuda_sources=CUDA_SRC)), read with `ast` (the file is
   never executed: it compiles a torch extension on import).
2. Device edits (device_source): drop the `#include <torch/...>` / `#include <ATen/...>` lines, cut the text at
   `void check_cu(` (the rest is host code: torch tensors, cuTensorMapEncodeTiled, the launch), prepend
   `#include <algorithm>` (std::min, which the torch headers brought in), append one instantiation of the template
   his dispatch launches (gau_versions.Plan).
3. Compile with the pip nvcc: `nvcc -arch=sm_100a --ptx` + his device flags (-O3 --use_fast_math
   --expt-relaxed-constexpr --relocatable-device-code=false -lineinfo; -gencode -> -arch since only PTX is made).
4. Host side: gau_versions re-does his host function for the shape (dispatch, grid, block, shared memory, the tensor
   maps from his exact cuTensorMapEncodeTiled arguments, parameter bytes in PTX order); the source must contain every
   host line that relies on (check_host), else the run is "unsupported".
5. Inputs: reference.generate_input(M, N, K, 1, seed, mode) laid out as the leaderboard's tensors; nvfp4_gemm takes
   (a, b1, sfa, sfb1, sfa_p, sfb1_p, c) of it as its (a, b, sfa, sfb, sfa_p, sfb_p, c): the same formats.
6. emu.machine.Machine runs each launch (the chosen clusters) on the same global memory; the result is compared with
   reference.py's dequantisation path (dual: silu(A B1^T) * (A B2^T); gemm: A B^T) on the elements the run wrote,
   under the leaderboard rule |out - ref| <= 1e-3 + 1e-3 |ref|, NaN/inf matching. Every result is "emulated".
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

import numpy as np

from calibration import gau_versions as gv

REPO = Path(__file__).resolve().parents[1]
GAU_REPO = "gau-nernst/gpu-mode-kernels"
GAU_COMMIT = "aee9cda6b6444f774ce5eaee1ec1a5c84acaa521"
FAMILY_DIRS = {"dual": "nvidia/nvfp4_dual_gemm", "gemm": "nvidia/nvfp4_gemm"}
POINTS_FILE = Path(__file__).with_name("b200_points.json")
DEFAULT_SOURCES = Path("/tmp/gau_src")
NVCC_FLAGS = ["-O3", "--use_fast_math", "--expt-relaxed-constexpr", "--relocatable-device-code=false", "-lineinfo"]
SMALL_SHAPES = {"dual": [(256, 256, 512)], "gemm": [(128, 256, 2048)]}
# shapes that reach a code path the family's small shape does not (gemm v4 splits K only at K 7168 and 16384)
EXTRA_SMALL = {("gemm", "v4"): [(128, 256, 7168)]}
MODES = ("strict", "leaderboard")


def blob_url(family: str, name: str) -> str:
    return f"https://github.com/{GAU_REPO}/blob/{GAU_COMMIT}/{FAMILY_DIRS[family]}/submission_{name}.py"


def source_path(sources, family: str, name: str) -> Path:
    return Path(sources) / FAMILY_DIRS[family] / f"submission_{name}.py"


def sources_dir(given=None) -> Path:
    return Path(given or os.environ.get("GAU_SOURCES") or DEFAULT_SOURCES)


def load_points(path: Path = POINTS_FILE) -> dict:
    return json.loads(Path(path).read_text())


# ============================================================================ source -> PTX
def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def extract_cuda_src(py_path: Path) -> str:
    """The string literal assigned to CUDA_SRC (what his load_inline(cuda_sources=CUDA_SRC) compiles)."""
    tree = ast.parse(Path(py_path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CUDA_SRC" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    raise ValueError(f"{py_path}: no `CUDA_SRC = \"\"\"...\"\"\"` string")


def check_host(text: str, fingerprints) -> list[str]:
    """Host-code lines the re-implementation relies on that `text` (the whole .py) lacks (whitespace-normalised)."""
    norm = _norm(text)
    return [f for f in fingerprints if _norm(f) not in norm]


def device_source(src: str, instantiation: str) -> tuple[str, list[str]]:
    """The device edits: (the .cu text, a description of each edit made)."""
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


def nvcc_path() -> Path:
    if os.environ.get("NVCC"):
        return Path(os.environ["NVCC"])
    import nvidia  # the pip wheel's namespace package (nvidia-cuda-nvcc / cu13)
    for base in nvidia.__path__:
        p = Path(base) / "cu13" / "bin" / "nvcc"
        if p.exists():
            return p
    raise FileNotFoundError("no nvcc: install the CUDA 13 nvcc wheel or set $NVCC")


def include_dirs(nvcc: Path) -> list[Path]:
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


def compiler_missing() -> str:
    """'' when nvcc and its headers are here, else why not (tests skip with it)."""
    try:
        include_dirs(nvcc_path())
    except Exception as e:  # noqa: BLE001 (any reason the compiler is unusable is a reason to skip)
        return f"cannot compile his kernels: {e}"
    return ""


def compile_ptx(cu_text: str, tag: str) -> tuple[str, dict]:
    """nvcc -arch=sm_100a --ptx; cached by the hash of text, flags and nvcc path."""
    nvcc = nvcc_path()
    cmd_tail = ["-arch=sm_100a", "--ptx"] + NVCC_FLAGS + [f"-I{d}" for d in include_dirs(nvcc)]
    key = hashlib.sha256((cu_text + "\0" + " ".join(cmd_tail) + "\0" + str(nvcc)).encode()).hexdigest()[:20]
    d = Path(tempfile.gettempdir()) / "emu_calibrate_gau" / f"{tag}-{key}"
    ptx = d / "kernel.ptx"
    info = {"cmd": " ".join([str(nvcc)] + cmd_tail + ["kernel.cu"]), "dir": str(d), "cached": ptx.exists()}
    if not ptx.exists():
        d.mkdir(parents=True, exist_ok=True)
        # written whole, then renamed: a concurrent process (pytest-xdist) may be compiling the same file
        (d / f"kernel.{os.getpid()}.cu").write_text(cu_text)
        os.replace(d / f"kernel.{os.getpid()}.cu", d / "kernel.cu")
        tmp = d / f"kernel.{os.getpid()}.ptx"
        p = subprocess.run([str(nvcc)] + cmd_tail + ["-o", str(tmp), str(d / "kernel.cu")], capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"nvcc failed ({info['cmd']}):\n{p.stderr[-3000:]}")
        os.replace(tmp, ptx)
    return ptx.read_text(), info


def cubin_for(ptx_dir: str | Path) -> bytes:
    """The cubin ptxas (the nvcc wheel's, -arch=sm_100a) makes of <ptx_dir>/kernel.ptx, cached beside it: the timed
    emulator reads its SASS (emu.timing.sass) where PTX and SASS disagree on how often a copy issues."""
    d = Path(ptx_dir)
    cubin = d / "kernel.cubin"
    if not cubin.exists():
        tmp = d / f"kernel.{os.getpid()}.cubin"
        cmd = [str(nvcc_path().parent / "ptxas"), "-arch=sm_100a", str(d / "kernel.ptx"), "-o", str(tmp)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"ptxas failed ({' '.join(cmd)}):\n{p.stderr[-3000:]}")
        os.replace(tmp, cubin)
    return cubin.read_bytes()


# ============================================================================ inputs and the reference
def make_inputs(family: str, m: int, n: int, k: int, mode: str, seed: int, buf_elems: int, buf_poisoned=False):
    """(data, gmem, addresses): reference.generate_input's tensors placed as the leaderboard's torch tensors, C
    poisoned NaN, and his fp32 workspace when the plan needs one: zeroed (his torch.zeros buffers) where his kernel
    adds into it atomically, poisoned NaN (`buf_poisoned`) where it is a workspace of partial sums each call
    overwrites before a later launch reads it (after the first call it holds the previous call's sums, so a correct
    kernel cannot rely on its zeros; the poison tells the check which partial sums this run wrote)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import reference
    from harness.problems import dual_gemm_tensors
    from harness.problems import place_inputs, torch_bytes
    from emu.state import GlobalMemory

    data = reference.generate_input(m, n, k, 1, seed, mode=mode, device="cpu")
    data[9].fill_(float("nan"))
    gmem = GlobalMemory()
    if family == "dual":
        addresses = place_inputs(gmem, data, m, n, k, 1)
    else:
        want = dual_gemm_tensors(m, n, k, 1)
        addresses = {}
        for name, idx, as_name in (("a", 0, "a"), ("b1", 1, "b"), ("sfa", 6, "sfa"), ("sfb1", 7, "sfb"), ("c", 9, "c")):
            t = data[idx]
            assert tuple(t.shape) == want[name][1] and tuple(t.stride()) == want[name][2], name
            raw, offset = torch_bytes(t)
            addresses[as_name] = gmem.alloc_array(raw) + offset
    if buf_elems:
        addresses["buf"] = gmem.alloc(buf_elems * 4, fill=0xFF if buf_poisoned else None)  # 0xFFFFFFFF: a NaN
    addresses.update(m=m, n=n)
    return data, gmem, addresses


def reference_block(family: str, data, rows, cols):
    """reference.py's exact dequantisation path for C[rows][:, cols] (fp16): dual silu(A B1^T) * (A B2^T), gemm A B^T."""
    import torch

    import reference
    idx_r, idx_c = torch.as_tensor(np.asarray(rows)), torch.as_tensor(np.asarray(cols))
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    with torch.no_grad(), reference.ieee_fp32_matmul():
        a_rows = reference.dequantize(a[:, :, 0].view(torch.uint8)[idx_r], sfa[:, :, 0][idx_r])

        def product(b, sfb):
            return a_rows @ reference.dequantize(b[:, :, 0].view(torch.uint8)[idx_c], sfb[:, :, 0][idx_c]).t()
        if family == "gemm":
            return product(b1, sfb1).to(torch.float16)
        return (torch.nn.functional.silu(product(b1, sfb1)) * product(b2, sfb2)).to(torch.float16)


# ============================================================================ a prepared run
@dataclass
class Prepared:
    """One version on one shape, ready to run: the launches (in order), global memory, and how to judge C."""

    family: str
    version: str
    shape: tuple          # (M, N, K, 1)
    mode: str
    seed: int
    plan: gv.Plan
    launches: list        # emu.launch.CapturedLaunch per launch
    gmem: object
    addresses: dict
    data: tuple
    source: str           # the file the device code came from
    compile: list = field(default_factory=list)
    point: dict | None = None

    @property
    def label(self) -> str:
        m, n, k, _ = self.shape
        return f"gau-{self.family}-{self.version}-{m}x{n}x{k}"

    def _groups(self, index: int, cluster_ids: list) -> dict:
        group = self.plan.launches[index].group
        out: dict = {}
        for cid in cluster_ids:
            out.setdefault(group(cid) if group else cid, []).append(cid)
        return out

    def select(self, index: int, cluster_ids: list, count, seed: int = 0, written=None) -> list:
        """Cluster ids of launch `index` for a run of `count` clusters ("all" / None: every one). Clusters that share
        a group (the K slices of one split-K tile) are taken together; a launch that reads the previous result
        (`reads`) takes the clusters whose range holds an element `written` (a boolean mask over M*N) marks."""
        if count in (None, "all"):
            return list(cluster_ids)
        reads = self.plan.launches[index].reads
        if reads is not None and written is not None:
            return [cid for cid in cluster_ids if written[slice(*reads(cid))].any()]
        groups = self._groups(index, cluster_ids)
        keys = list(groups)
        if int(count) >= len(keys):
            return list(cluster_ids)
        rng = np.random.default_rng(seed)
        picked = sorted(rng.choice(len(keys), size=int(count), replace=False).tolist())
        return [cid for i in picked for cid in groups[keys[i]]]

    def stores(self, machine, output: str | None = None) -> np.ndarray:
        """Stores (atomic adds included) per M*N result element, in memory order, in `machine`'s store_log; the
        slices of a split-K workspace fold onto their element."""
        m, n, _, _ = self.shape
        out = output or self.plan.output
        esize = 2 if (out == "c") else 4
        base = self.addresses[out]
        size = (self.plan.buf_elems if out == "buf" else m * n) * esize
        count = np.zeros(m * n, np.int64)
        if not machine.store_log:
            return count
        log = np.asarray(machine.store_log, dtype=np.int64)
        log = log[(log[:, 0] >= base) & (log[:, 0] < base + size)]
        first = (log[:, 0] - base) // esize
        last = -(-(log[:, 0] + log[:, 1] - base) // esize)
        for d in range(int((last - first).max(initial=0))):
            idx = first + d
            np.add.at(count, idx[idx < last] % (m * n), 1)
        return count

    def written(self, machine, output: str | None = None) -> np.ndarray:
        """Boolean mask over the M*N result elements (in memory order) that `machine` stored to."""
        return self.stores(machine, output) > 0

    def complete(self, gmem, machine) -> np.ndarray:
        """Mask over the M*N result elements (memory order) that the clusters run computed completely: written, with
        every K slice's atomic add where his kernel adds split-K slices into the result, and (a reduction launch)
        every slice's partial sum present in the NaN-poisoned workspace it read. A subset run (the timed emulator's
        representative clusters) need not take the K slices of a tile together; this keeps to what it finished."""
        m, n, _, _ = self.shape
        slices = self.plan.design.get("split_k", 1)
        mask = self.stores(machine) >= (slices if self.plan.output == "buf" else 1)
        if self.plan.reduces:
            buf = gmem.read(self.addresses["buf"], self.plan.buf_elems * 4).view(np.float32)
            mask &= ~np.isnan(buf.reshape(-1, m * n)).any(0)
        return mask

    def result(self, gmem) -> np.ndarray:
        """The result as float64 [M, N] (reading C or his workspace, in his layout)."""
        m, n, _, _ = self.shape
        dt = np.float16 if self.plan.dtype == "fp16" else np.float32
        raw = gmem.read(self.addresses[self.plan.output], m * n * np.dtype(dt).itemsize).view(dt).astype(np.float64)
        return raw.reshape(m, n) if self.plan.layout == "mn" else raw.reshape(n, m).T

    def check(self, gmem, machine, every_cluster: bool = False) -> tuple[str, str, int]:
        """(status, message, checked_elements): the elements the clusters run computed completely (`complete`; the
        last launch's `machine` holds its store_log), against the reference. `every_cluster` (every launch ran all
        its clusters) requires every element complete. "unchecked": a subset run completed no element (e.g. the
        timed emulator ran one K slice of each tile it simulated)."""
        import torch

        from harness.problems import check_c
        m, n, _, _ = self.shape
        done = self.complete(gmem, machine)
        if every_cluster and not done.all():
            return "mismatch", f"{int((~done).sum())} of {m * n} result elements were not computed completely", int(done.sum())
        if not done.any():
            stored = bool(self.written(machine).any())
            return ("unchecked" if stored else "mismatch"), (
                "no result element was computed completely by the clusters run (their K slices or partial sums are "
                "incomplete)" if stored else "the emulated clusters wrote no element of the result"), 0
        mask = done.reshape(m, n) if self.plan.layout == "mn" else done.reshape(n, m).T
        rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
        sub = mask[np.ix_(rows, cols)]
        out = torch.from_numpy(self.result(gmem)[np.ix_(rows, cols)][sub])
        ref = reference_block(self.family, self.data, rows, cols).double().numpy()[sub]
        ok, msg = check_c(out, torch.from_numpy(ref))
        written_note = "" if mask.all() else f" ({int(mask.sum())} of {m * n} elements computed by the clusters run)"
        dtype_note = ", fp32 result (his split-K buffer, as timed)" if self.plan.dtype == "fp32" else ""
        return ("match" if ok else "mismatch"), msg + written_note + dtype_note, int(mask.sum())


def _parse_target(target):
    """(family, version, point-or-None) from a point id, "family/version" or (family, version)."""
    if isinstance(target, (tuple, list)):
        return target[0], target[1], None
    if "/" in target:
        fam, ver = target.split("/", 1)
        return fam, ver, None
    for p in load_points()["points"]:
        if p["id"] == target:
            return p["family"], p["version"], p
    raise KeyError(f"{target!r} is neither a point id of {POINTS_FILE.name} nor family/version")


def prepare(target, shape=None, mode: str = "strict", seed: int = 1111, sources=None) -> Prepared:
    """A point id (its benchmark shape unless `shape` is given) or "family/version" / (family, version) with a shape
    (M, N, K[, 1]): compile its launches, place the inputs. Raises gv.NoDispatch / ValueError / FileNotFoundError
    with the reason when it cannot run."""
    from emu.launch import CapturedLaunch

    family, name, point = _parse_target(target)
    if point is not None and not point.get("runnable", True):
        raise ValueError(f"{point['id']}: {point.get('not_runnable', 'no runnable source')}")
    ver = gv.version(family, name)
    if shape is None:
        if point is None:
            raise ValueError("a shape is needed for family/version targets")
        shape = point["shape"]
    m, n, k = (int(x) for x in shape[:3])
    if len(shape) > 3 and int(shape[3]) != 1:
        raise ValueError("his kernels take L = 1 only")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    path = source_path(sources_dir(sources), family, name)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: fetch {blob_url(family, name)} (by path, at the pinned commit) "
                                f"into {sources_dir(sources)}/{FAMILY_DIRS[family]}/")
    text = path.read_text()
    missing = check_host(text, ver.fingerprints)
    if missing:
        raise ValueError("his host code differs from what gau_versions re-implements; missing: " + " | ".join(missing))
    plan = ver.plan(m, n, k)
    src = extract_cuda_src(path)
    data, gmem, addresses = make_inputs(family, m, n, k, mode, seed, plan.buf_elems, plan.reduces)
    launches, infos = [], []
    for launch in plan.launches:
        cu, edits = device_source(src, launch.instantiation)
        ptx, info = compile_ptx(cu, f"{family}-{name}")
        kname = re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)
        launches.append(CapturedLaunch(ptx=ptx, kernel_name=kname, grid=launch.grid, block=launch.block,
                                       cluster=launch.cluster, dynamic_smem=launch.dynamic_smem,
                                       params=launch.params(addresses), dsl_version="", cubin=cubin_for(info["dir"])))
        infos.append(dict(info, edits=edits, instantiation=launch.instantiation))
    return Prepared(family, name, (m, n, k, 1), mode, seed, plan, launches, gmem, addresses, data, str(path), infos,
                    point)


def prepare_point(point: dict, sources=None, mode: str = "strict", seed: int = 1111) -> Prepared:
    """prepare() for a point record of the points file (what the timed judge iterates): its benchmark shape."""
    return prepare(point["id"], mode=mode, seed=seed, sources=sources)


def judged_points() -> list:
    """The points the timed emulator is judged on: runnable, and not set aside by their author (`use`)."""
    return [p for p in load_points()["points"] if p.get("runnable", True) and p.get("use", True)]


# ============================================================================ functional run
@dataclass
class RunResult:
    status: str                       # match, mismatch, unchecked, deadlock, hazard, unsupported
    label: str
    mode: str
    message: str = ""
    checked: int = 0
    seconds: float = 0.0
    clusters: list = field(default_factory=list)   # (run, total) per launch
    stats: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.status == "match" and self.notes:
            return f"MATCH with {len(self.notes)} note{'s' if len(self.notes) > 1 else ''}"
        return self.status.upper()

    def line(self) -> str:
        cl = " + ".join(f"{r}/{t}" for r, t in self.clusters) or "-"
        return (f"emulated {self.verdict}: {self.label} {self.mode}, clusters {cl}, {self.checked} elements checked, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs, "
                f"{self.seconds:.1f} s")


def run(prep: Prepared, clusters="all", sched_seed: int = 0, max_quantum: int = 24) -> RunResult:
    """Run every launch of `prep` in order on prep.gmem (a subset: `clusters` groups of the first launch, and what
    reads their result in later launches), then check."""
    from emu import ptx as ptx_mod
    from emu.machine import Deadlock, Machine
    from emu.state import EmulatorError, Hazard, Unsupported

    t0 = time.time()
    res = RunResult("unsupported", prep.label, prep.mode)
    machine, written, every = None, None, True
    try:
        for i, cap in enumerate(prep.launches):
            machine = Machine(ptx_mod.parse_module(cap.ptx), cap, prep.gmem, seed=sched_seed, max_quantum=max_quantum)
            ids = list(machine.clusters())
            chosen = prep.select(i, ids, clusters, sched_seed, written)
            every &= len(chosen) == len(ids)
            res.clusters.append((len(chosen), len(ids)))
            machine.run(chosen)
            for key, val in machine.stats.items():
                res.stats[key] = res.stats.get(key, 0) + val
            res.notes += list(machine.notes.values())
            if prep.plan.buf_elems and i + 1 < len(prep.launches):
                written = prep.written(machine, "buf")
        res.status, res.message, res.checked = prep.check(prep.gmem, machine, every_cluster=every)
    except Deadlock as e:
        res.status, res.message = "deadlock", str(e)
    except Hazard as e:
        res.status, res.message = "hazard", str(e)
    except Unsupported as e:
        res.status, res.message = "unsupported", str(e)
    except EmulatorError as e:
        res.status, res.message = "unsupported", f"{type(e).__name__}: {e}"
    res.seconds = time.time() - t0
    return res


def run_target(target, shape=None, mode="strict", seed=1111, sources=None, clusters="all", sched_seed=0) -> RunResult:
    """prepare + run; a target that cannot be prepared comes back "unsupported" with the reason."""
    t0 = time.time()
    try:
        prep = prepare(target, shape, mode, seed, sources)
    except (gv.NoDispatch, ValueError, FileNotFoundError, KeyError, RuntimeError) as e:
        fam, ver, point = _parse_target(target) if not isinstance(e, KeyError) else ("?", str(target), None)
        label = point["id"] if point else f"gau-{fam}-{ver}" + (f"-{'x'.join(str(x) for x in shape[:3])}" if shape else "")
        return RunResult("unsupported", label, mode, message=str(e), seconds=time.time() - t0)
    return run(prep, clusters, sched_seed)


# ============================================================================ CLI
def _select_points(spec: str) -> list:
    points = load_points()["points"]
    out = []
    for tok in [t.strip() for t in spec.split(",") if t.strip()]:
        if tok == "all":
            out += points
        elif tok in ("fit", "holdout"):
            out += [p for p in points if p["split"] == tok]
        elif tok in FAMILY_DIRS:
            out += [p for p in points if p["family"] == tok]
        else:
            match = [p for p in points if p["id"] == tok]
            if not match:
                raise SystemExit(f"unknown point {tok!r}")
            out += match
    seen, uniq = set(), []
    for p in out:
        if p["id"] not in seen:
            seen.add(p["id"])
            uniq.append(p)
    return uniq


def _jobs(args) -> tuple[list, list]:
    """(target, shape, mode) to run, and the selected points that cannot run (with why)."""
    modes = [x.strip() for x in args.modes.split(",") if x.strip()]
    shape = tuple(int(x) for x in args.shape.split(",")) if args.shape else None
    jobs = []
    if args.versions:
        for tv in [t.strip() for t in args.versions.split(",") if t.strip()]:
            fam, ver = tv.split("/")
            shapes = [shape] if shape else SMALL_SHAPES[fam] + EXTRA_SMALL.get((fam, ver), [])
            jobs += [(tv, s, md) for s in shapes for md in modes]
        return jobs, []
    points = _select_points(args.points)
    skipped = [p for p in points if not p.get("runnable", True)]
    points = [p for p in points if p.get("runnable", True)]
    if args.full_size:
        return [(p["id"], None, md) for p in points for md in modes], skipped
    seen = []
    for p in points:  # one small-shape run per distinct version
        key = (p["family"], p["version"])
        if key in seen:
            continue
        seen.append(key)
        shapes = [shape] if shape else SMALL_SHAPES[key[0]] + EXTRA_SMALL.get(key, [])
        jobs += [(f"{key[0]}/{key[1]}", s, md) for s in shapes for md in modes]
    return jobs, skipped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default="all", help="all | fit | holdout | dual | gemm | point ids (comma-separated)")
    ap.add_argument("--versions", default=None, help="family/version list instead of points, e.g. dual/v1b,gemm/v4")
    ap.add_argument("--sources", default=None, help="DIR with the files at their repository paths "
                    "(default $GAU_SOURCES or /tmp/gau_src)")
    ap.add_argument("--full-size", action="store_true", help="each point at its benchmark shape")
    ap.add_argument("--shape", default=None, help="M,N,K for every run (default: the family's small shapes)")
    ap.add_argument("--clusters", default="all", help="all, or a number of cluster groups of the first launch")
    ap.add_argument("--modes", default=None, help="input generators (default strict,leaderboard; strict with "
                    "--full-size)")
    ap.add_argument("--seed", type=int, default=1111)
    ap.add_argument("--sched-seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write every result here")
    args = ap.parse_args(argv)
    if args.modes is None:
        args.modes = "strict" if args.full_size else "strict,leaderboard"
    if not sources_dir(args.sources).is_dir():
        print(f"no sources at {sources_dir(args.sources)}: fetch the files listed in {POINTS_FILE.name} "
              f"(design_from) at their repository paths", file=sys.stderr)
        return 2
    results = []
    jobs, skipped = _jobs(args)
    for p in skipped:
        print(f"not run: {p['id']}: {p.get('not_runnable')}", file=sys.stderr, flush=True)
    for i, (target, shape, mode) in enumerate(jobs):
        r = run_target(target, shape, mode, args.seed, args.sources, args.clusters, args.sched_seed)
        results.append(r)
        print(f"[{i + 1}/{len(jobs)}] {r.line()}" + ("" if r.status == "match" else f"\n    {r.message[:2000]}"),
              file=sys.stderr, flush=True)
    counts = {}
    for r in results:
        counts[r.verdict.split(" with")[0]] = counts.get(r.verdict.split(" with")[0], 0) + 1
    print(f"emulated: {len(results)} runs: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([{
            "label": "emulated", "target": r.label, "mode": r.mode, "status": r.status, "verdict": r.verdict,
            "message": r.message, "checked": r.checked, "clusters": r.clusters, "seconds": round(r.seconds, 2),
            "stats": r.stats, "notes": [n.describe() for n in r.notes]} for r in results], indent=2))
    return 0 if results and all(r.status == "match" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
