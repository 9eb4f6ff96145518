#!/usr/bin/env python3
"""Calibrate the SM100 emulator (emu/) on novus677's B200-verified CUDA + inline-PTX NVFP4 dual-GEMM kernel for THIS
problem (novus677/nvfp4_dual_gemm @ 4670b25423de, nvfp4_dual_gemm.cu with tcgen05-interface.cuh and tma-interface.cuh:
"kernel 9", 14.18 us geomean on the leaderboard; 1-SM 128xBN MMA, A kept in the collector (fill / lastuse), scales
by plain bulk copies, silu exact or via tanh.approx, a transposed-C variant). His source is NOT copied into this
repository: the three files are read from a folder at run time.

    python -m calibration.novus [--src DIR] [--configs NAME,...|all] [--modes strict,leaderboard] [--json OUT]

DIR: $NOVUS_DUAL_GEMM_SRC, else /tmp/novus. To fill it (needs the network, which CI lacks: tests skip with the reason),
save the three files of novus677/nvfp4_dual_gemm at commit 4670b25423deb35866db475bfd1cc0bd9f34a6e4 there.

Steps per config (each mechanical, so a reviewer can redo them by hand):
1. Source: nvfp4_dual_gemm.cu as committed; its two `#include "....cuh"` lines are replaced by those files' text
   (the same text nvcc would read through -I).
2. Device-only edits (device_source): drop the `#include <ATen/...>` / `#include <torch/...>` lines (host-only),
   add `#include <cstdint>` first (uint8_t/int32_t, formerly via ATen), cut from the `template <...>` line of
   `launch_nvfp4_dual_gemm` to the end (host code: cuTensorMapEncodeTiled, the launch, the at::Tensor entry), and
   append an instantiation of nvfp4_dual_gemm_cutlass<...> with the template arguments of his LAUNCH for the shape.
3. Compile with the pip nvcc to sm_100a PTX with the flags of his submission's load_inline (-O3 --use_fast_math
   --expt-relaxed-constexpr --relocatable-device-code=false; -gencode compute_100a,sm_100a -> -arch=sm_100a since only
   PTX is made), plus -lineinfo.
4. Host side, re-done in Python from his launch_nvfp4_dual_gemm (HOST_FINGERPRINTS: the lines relied on must still
   be in the source, else "unsupported"): grid GRID_DIM, block 128 + 2*32, dynamic smem = PIPE_DEPTH * (BLOCK_K *
   (BLOCK_M + 2 BLOCK_N) / 2 + 3 * (BLOCK_K / 16) * 128); tensor maps from his cuTensorMapEncodeTiled arguments
   (rank 2, 16U4_ALIGN8B -> hardware code 11, dims {K, rows}, stride {K/2}, box {BLOCK_K, BLOCK_M or BLOCK_N},
   SWIZZLE_128B -> 3, interleave / L2 / OOB fill NONE); parameters in PTX order: M, N (int32), the three maps by
   value, SFA/SFB1/SFB2 (the *_permuted tensors' data pointers, data[6..8]), C.
5. Inputs from reference.generate_input in both modes, laid out as the leaderboard's tensors (harness.problems.place_inputs);
   C poisoned NaN. For the TRANSPOSE variant his entry returns C.view({N, M, 1}).transpose(0, 1): C's buffer is read
   as [N, M] and transposed before the check.
6. emu.run_kernel -> compared with reference.ref_kernel under the leaderboard tolerance.

Configs: his dispatch table (DISPATCH) picks template arguments by exact (M, N, K). "test" runs his own launch for
the test shape 256x512x256 (K/256 = 1 < 4 stages); "bench3"/"bench4" his launches for two benchmark shapes at full
size (slow); "n64_tanh", "n128_tanh2", "transpose" run the template arguments of his benchmark launches (BLOCK_N 64 +
tanh SiLU, tanh SiLU with the 0.49995 factor, transposed C) at a smaller K and grid = tiles, since his dispatch has
no small shape for them: same device code path, another K instantiation.

Prints one line per config and mode: "emulated VERDICT: ...". Exit 0 only if all MATCH (notes allowed).

His kernels 1-8 (`--kernel N`, configs test / bench1..bench4 / all): each from its own commit, with its own host code
(dispatch, template arguments, grid, K as a parameter in kernels 1-2) and fingerprints: calibration/novus_versions.py
(its docstring gives the steps). Kernel 9 above stays the default and reads the folder as before.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOVUS_REPO = "novus677/nvfp4_dual_gemm"
NOVUS_COMMIT = "4670b25423deb35866db475bfd1cc0bd9f34a6e4"
FILES = ("nvfp4_dual_gemm.cu", "tcgen05-interface.cuh", "tma-interface.cuh")
DEFAULT_DIR = Path("/tmp/novus")
ENV_VAR = "NOVUS_DUAL_GEMM_SRC"
NVCC_FLAGS = ["-O3", "--use_fast_math", "--expt-relaxed-constexpr", "--relocatable-device-code=false", "-lineinfo"]
BLOCK_DIM = 128 + 2 * 32
SF_VEC = 16

# his cuda_nvfp4_dual_gemm switch: (M, N, K) -> LAUNCH(K, BLOCK_M, BLOCK_N, BLOCK_K, PIPE_DEPTH, FAST_SILU, FAST_SILU2,
# TRANSPOSE, GRID_DIM)
DISPATCH = {
    (256, 4096, 7168): (7168, 128, 64, 256, 5, True, False, False, 128),
    (512, 4096, 7168): (7168, 128, 128, 256, 4, False, True, False, 128),
    (256, 3072, 4096): (4096, 128, 64, 256, 5, True, False, False, 96),
    (512, 3072, 7168): (7168, 128, 128, 256, 4, True, False, True, 96),
    (1536, 512, 7168): (7168, 128, 128, 256, 4, False, False, False, 48),
    (256, 512, 256): (256, 128, 128, 256, 4, False, False, False, 8),
    (3072, 1024, 1536): (1536, 128, 128, 256, 4, False, False, False, 192),
    (7168, 1024, 256): (256, 128, 128, 256, 4, False, False, False, 448),
    (7168, 2304, 2048): (2048, 128, 128, 256, 4, False, False, False, 1008),
    (4608, 384, 7168): (7168, 128, 128, 256, 4, False, False, False, 108),
    (7168, 384, 2304): (2304, 128, 128, 256, 4, False, False, False, 168),
    (512, 768, 7168): (7168, 128, 128, 256, 4, False, False, False, 24),
    (4096, 768, 512): (512, 128, 128, 256, 4, False, False, False, 192),
}

HOST_FINGERPRINTS = [
    "constexpr int32_t BLOCK_DIM = WARPGROUP_SIZE + 2 * WARP_SIZE;",
    "const cuuint64_t globalDimA[2] = {K, M};",
    "const cuuint64_t globalStridesA[1] = {K / 2};",
    "const cuuint32_t boxDimA[2] = {BLOCK_K, BLOCK_M};",
    "const cuuint64_t globalDimB[2] = {K, N};",
    "const cuuint32_t boxDimB[2] = {BLOCK_K, BLOCK_N};",
    "&tensorMapA, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, 2, A_ptr, globalDimA,",
    "globalStridesA, boxDimA, elementStridesA, CU_TENSOR_MAP_INTERLEAVE_NONE,",
    "CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,",
    "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));",
    "constexpr int32_t shmem_size_a = PIPE_DEPTH * (BLOCK_K * BLOCK_M) / 2;",
    "constexpr int32_t shmem_size_b = PIPE_DEPTH * (BLOCK_K * BLOCK_N) / 2;",
    "constexpr int32_t shmem_size_sfa = PIPE_DEPTH * (BLOCK_K / SF_VEC_SIZE) * 128;",
    "constexpr int32_t shmem_size_sfb = PIPE_DEPTH * (BLOCK_K / SF_VEC_SIZE) * 128;",
    "shmem_size_a + 2 * shmem_size_b + shmem_size_sfa + 2 * shmem_size_sfb;",
    "<<<GRID_DIM, BLOCK_DIM, shmem_size>>>(M, N, tensorMapA, tensorMapB1,",
    "tensorMapB2, SFA_ptr, SFB1_ptr, SFB2_ptr, C_ptr);",
    "return C.view({N, M, 1}).transpose(0, 1);",
    "[[likely]] case hash(512, 3072, 7168): LAUNCH(7168, 128, 128, 256, 4, true, false, true, 96);",
    "[[unlikely]] case hash(256, 512, 256): LAUNCH(256, 128, 128, 256, 4, false, false, false, 8);",
]

# cuTensorMapEncodeTiled enums (cuda.h) -> the tensor-map hardware fields of emu/tma.py
HW_DTYPE_16U4_ALIGN8B = 11
HW_SWIZZLE_128B = 3


@dataclass(frozen=True)
class NovusConfig:
    name: str
    shape: tuple  # (M, N, K)
    launch: tuple  # his LAUNCH arguments (kernel 9's order; other kernels: normalized to it, KernelVersion.normalize)
    what: str
    version: int = 9  # his kernel N (1-9); 9: the folder of find_source(), else the commit's sources (versions below)

    @property
    def natural(self) -> bool:
        return DISPATCH.get(self.shape) == self.launch

    def natural_for(self, dispatch: dict) -> bool:
        """Whether this config claims to be his launch for its shape (a version config named kN-...)."""
        return self.name.startswith(f"k{self.version}-")


def version_config(n: int, shape: tuple = (256, 512, 256), where=None) -> NovusConfig:
    """His kernel n's own launch for `shape` (his dispatch at that commit; calibration/novus_versions.py). Raises
    novus_versions.Unsupported where his source at that commit differs from what is re-implemented."""
    from calibration import novus_versions

    v, _, dispatch, notes = novus_versions.load(n, where)
    launch = novus_versions.launch_for(v, dispatch, tuple(shape))
    m, nn, k = shape
    return NovusConfig(f"k{n}-{m}x{nn}x{k}", tuple(shape), launch,
                       f"kernel {n} ({v.commit[:7]}): his launch {novus_versions.instantiation(v, launch)}"
                       + (f"; {'; '.join(notes)}" if notes else ""), n)


def _variant(name: str, shape: tuple, template_of: tuple, what: str) -> NovusConfig:
    """His launch for the shape `template_of`, with K and GRID_DIM (= tiles, as in his table) set for `shape`."""
    m, n, k = shape
    _, bm, bn, bk, depth, fast, fast2, transpose, _ = DISPATCH[template_of]
    return NovusConfig(name, shape, (k, bm, bn, bk, depth, fast, fast2, transpose, (m // bm) * (n // bn)), what)


CONFIGS = {c.name: c for c in (
    NovusConfig("test", (256, 512, 256), DISPATCH[(256, 512, 256)],
                "his launch for the test shape: 128x128, 4 stages, exact SiLU, K/256 = 1 < 4 stages"),
    _variant("n64_tanh", (256, 256, 1536), (256, 4096, 7168),
             "his 256x4096x7168 launch (BLOCK_N 64, 5 stages, tanh SiLU) at K 1536"),
    _variant("n128_tanh2", (256, 256, 1280), (512, 4096, 7168),
             "his 512x4096x7168 launch (SiLU via tanh(0.49995 x)) at K 1280"),
    _variant("transpose", (256, 256, 1280), (512, 3072, 7168),
             "his 512x3072x7168 launch (tanh SiLU, transposed C) at K 1280"),
    NovusConfig("bench3", (256, 3072, 4096), DISPATCH[(256, 3072, 4096)], "his launch, benchmark shape 3, full size"),
    NovusConfig("bench4", (512, 3072, 7168), DISPATCH[(512, 3072, 7168)], "his launch, benchmark shape 4, full size"),
)}
DEFAULT_CONFIGS = ("test", "n64_tanh", "n128_tanh2", "transpose")


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


# ============================================================================ source -> device .cu
def find_source() -> tuple[Path | None, str]:
    """(folder, "") or (None, why): $NOVUS_DUAL_GEMM_SRC, else /tmp/novus, holding the three files."""
    env = os.environ.get(ENV_VAR)
    d = Path(env) if env else DEFAULT_DIR
    missing = [f for f in FILES if not (d / f).is_file()]
    if not missing:
        return d, ""
    return None, (f"novus677's kernel is not available: {', '.join(missing)} missing in {d} (set ${ENV_VAR}, or save "
                  f"{NOVUS_REPO}@{NOVUS_COMMIT[:12]}:{{{','.join(FILES)}}} there; needs network, not in this "
                  "repository by design)")


def read_source(folder: Path) -> str:
    """nvfp4_dual_gemm.cu with its two local #include lines replaced by the headers' text."""
    text = (folder / FILES[0]).read_text()
    for header in FILES[1:]:
        line = f'#include "{header}"\n'
        if text.count(line) != 1:
            raise ValueError(f"{FILES[0]}: expected one `{line.strip()}`")
        text = text.replace(line, (folder / header).read_text() + "\n")
    return text


def check_host(src: str) -> list[str]:
    text = _norm(src)
    return [f for f in HOST_FINGERPRINTS if _norm(f) not in text]


def instantiation(launch: tuple) -> str:
    k, bm, bn, bk, depth, fast, fast2, transpose, grid = launch
    b = lambda v: "true" if v else "false"  # noqa: E731
    return f"nvfp4_dual_gemm_cutlass<{k}, {bm}, {bn}, {bk}, {depth}, {b(fast)}, {b(fast2)}, {b(transpose)}, {grid}>"


def device_source(src: str, inst: str) -> tuple[str, list[str]]:
    edits = []
    out, n = re.subn(r"#include <(?:torch|ATen)/[^>]*>\n", "", src)
    edits.append(f"removed {n} torch/ATen #include lines")
    start = out.index("void launch_nvfp4_dual_gemm(")
    cut = out.rindex("\ntemplate <", 0, start)
    edits.append(f"cut {len(out) - cut} characters of host code from the template line of launch_nvfp4_dual_gemm on")
    out = "#include <cstdint>  // emu: uint8_t / int32_t, formerly via the ATen headers\n" + out[:cut]
    edits.append("prepended #include <cstdint>")
    out += ("\n// emu: instantiate the template his dispatch launches\n"
            f"void *__emu_instantiate[] = {{(void *)&{inst}}};\n")
    edits.append(f"appended an instantiation of {inst}")
    return out, edits


def compile_ptx(cu_text: str) -> tuple[str, dict]:
    from calibration.gau import include_dirs, nvcc_path  # the pip nvcc and its headers, found as for gau-nernst's

    import subprocess
    import tempfile

    nvcc = nvcc_path()
    tail = ["-arch=sm_100a", "--ptx"] + NVCC_FLAGS + [f"-I{d}" for d in include_dirs(nvcc)]
    key = hashlib.sha256((cu_text + "\0" + " ".join(tail) + "\0" + str(nvcc)).encode()).hexdigest()[:20]
    d = Path(tempfile.gettempdir()) / "emu_calibrate_novus" / key
    ptx = d / "kernel.ptx"
    info = {"cmd": " ".join([str(nvcc)] + tail + ["kernel.cu"]), "dir": str(d), "cached": ptx.exists()}
    if not ptx.exists():
        d.mkdir(parents=True, exist_ok=True)
        # written whole, then renamed: a concurrent process (pytest-xdist) may be compiling the same file
        (d / f"kernel.{os.getpid()}.cu").write_text(cu_text)
        os.replace(d / f"kernel.{os.getpid()}.cu", d / "kernel.cu")
        tmp = d / f"kernel.{os.getpid()}.ptx"
        p = subprocess.run([str(nvcc)] + tail + ["-o", str(tmp), str(d / "kernel.cu")], capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"nvcc failed ({info['cmd']}):\n{p.stderr[-3000:]}")
        os.replace(tmp, ptx)
    return ptx.read_text(), info


# ============================================================================ his host code, in Python
def _tmap(address: int, rows: int, k: int, box_rows: int, block_k: int) -> bytes:
    from emu.tma import encode_tensor_map

    return encode_tensor_map(address, HW_DTYPE_16U4_ALIGN8B, dims=[k, rows], strides=[k // 2], box=[block_k, box_rows],
                             elem_strides=[1, 1], swizzle=HW_SWIZZLE_128B)


def host_launch(cfg: NovusConfig, addr: dict) -> dict:
    m, n, _ = cfg.shape
    k, bm, bn, bk, depth, _, _, _, grid = cfg.launch
    if m % bm or n % bn or k % bk:
        raise ValueError(f"{cfg.name}: M, N, K must be multiples of {bm}, {bn}, {bk}")
    smem = depth * (bk * bm) // 2 + 2 * depth * (bk * bn) // 2 + 3 * depth * (bk // SF_VEC) * 128
    i32 = lambda v: int(v).to_bytes(4, "little", signed=True)  # noqa: E731
    ptr = lambda v: int(v).to_bytes(8, "little")  # noqa: E731
    params = [i32(m), i32(n), _tmap(addr["a"], m, k, bm, bk), _tmap(addr["b1"], n, k, bn, bk),
              _tmap(addr["b2"], n, k, bn, bk), ptr(addr["sfa"]), ptr(addr["sfb1"]), ptr(addr["sfb2"]), ptr(addr["c"])]
    inst = instantiation(cfg.launch)
    if cfg.version != 9:  # kernels 1-8 (calibration/novus_versions.py): their template, K a parameter in 1-2
        from calibration import novus_versions

        v = novus_versions.VERSIONS[cfg.version]
        inst = novus_versions.instantiation(v, cfg.launch)
        if v.k_param:
            params.insert(2, i32(k))
    return {"grid": (grid, 1, 1), "block": (BLOCK_DIM, 1, 1), "cluster": (1, 1, 1), "dynamic_smem": smem,
            "params": params, "instantiation": inst}


# ============================================================================ one run
@dataclass
class NovusResult:
    status: str
    config: NovusConfig
    mode: str
    message: str = ""
    seconds: float = 0.0
    launch: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    compile: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        rules = sorted({n.rule for n in self.notes})
        if self.status == "match" and rules:
            return f"MATCH with notes ({', '.join(rules)})"
        return self.status.upper()

    def line(self) -> str:
        m, n, k = self.config.shape
        lc = self.launch
        extra = f" grid {lc.get('grid')} smem {lc.get('dynamic_smem')}" if lc else ""
        return (f"emulated {self.verdict}: novus677 {self.config.name} {m}x{n}x{k}x1 {self.mode}{extra}, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs, "
                f"{self.seconds:.1f} s")


@dataclass
class Prepared:
    """His kernel on one shape, ready to run: the launch (host code re-done here), global memory (inputs placed, C
    poisoned), and how to judge C (calibration.timing times it through this)."""

    cfg: NovusConfig
    launches: list  # [emu.launch.CapturedLaunch]
    gmem: object
    addresses: dict
    data: tuple
    launch: dict
    compile: dict

    def check(self, gmem, machine, every_cluster: bool = False) -> tuple[str, str, int]:
        """(status, message, elements checked): all of C when every cluster ran, else the tiles the CTAs run wrote,
        against reference.py (C in his layout: transposed for some shapes)."""
        import numpy as np
        import torch

        import reference
        from harness.problems import DUAL_GEMM, check_c

        m, n, _ = self.cfg.shape
        transpose = self.cfg.launch[7]
        raw = gmem.read(self.addresses["c"], m * n * 2).view(np.float16)
        c = raw.reshape(n, m).T if transpose else raw.reshape(m, n)
        out = torch.from_numpy(np.ascontiguousarray(c)).reshape(m, n, 1)
        if every_cluster:
            ok, msg = check_c(out, reference.ref_kernel(self.data))
            return ("match" if ok else "mismatch"), msg, m * n
        checked = 0
        for rs, cs in _written_tiles(machine, self.addresses["c"], m, n, self.cfg.launch[1], self.cfg.launch[2],
                                     transpose):
            ok, msg = check_c(out[rs, cs, 0], DUAL_GEMM.reference_tile(reference, self.data, rs, cs, 0))
            checked += (rs.stop - rs.start) * (cs.stop - cs.start)
            if not ok:
                return "mismatch", f"tile rows {rs.start}:{rs.stop} cols {cs.start}:{cs.stop}: {msg}", checked
        return ("match", "", checked) if checked else ("mismatch", "the CTAs run wrote no tile of C", 0)


def prepare(folder: Path, cfg: NovusConfig, mode: str = "strict", seed: int = 1111) -> Prepared:
    """His kernel for cfg (his launch for its shape), compiled with the pip nvcc, launched as his host code launches
    it, on reference inputs. Raises RuntimeError where his host code differs from what this module re-implements."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import reference
    from calibration.gau import cubin_for
    from emu.launch import CapturedLaunch
    from emu.state import GlobalMemory
    from harness.problems import place_inputs

    if cfg.version == 9:
        src = read_source(folder)
        missing = check_host(src)
        if missing:
            raise RuntimeError("his host code differs from what this tool re-implements; missing: " + " | ".join(missing))
    else:  # kernels 1-8 from their commits: `folder` is a git directory or a folder of k1/ ... k9/ (novus_versions)
        from calibration import novus_versions

        v, src, dispatch, _ = novus_versions.load(cfg.version, folder)
        if novus_versions.launch_for(v, dispatch, cfg.shape) != cfg.launch and cfg.natural_for(dispatch):
            raise RuntimeError(f"kernel {cfg.version}: the launch differs from his dispatch for {cfg.shape}")
    m, n, k = cfg.shape
    data = reference.generate_input(m, n, k, 1, seed, mode=mode, device="cpu")
    data[9].fill_(float("nan"))
    gmem = GlobalMemory()
    addr = place_inputs(gmem, data, m, n, k, 1)
    hl = host_launch(cfg, addr)
    cu, edits = device_source(src, hl["instantiation"])
    ptx, cinfo = compile_ptx(cu)
    name = re.search(r"\.entry\s+([\w$]+)\s*\(", ptx).group(1)
    cap = CapturedLaunch(ptx=ptx, kernel_name=name, grid=hl["grid"], block=hl["block"], cluster=hl["cluster"],
                         dynamic_smem=hl["dynamic_smem"], params=hl["params"], dsl_version="",
                         cubin=cubin_for(cinfo["dir"]))
    return Prepared(cfg, [cap], gmem, addr, data,
                    {k_: hl[k_] for k_ in ("grid", "block", "cluster", "dynamic_smem", "instantiation")},
                    dict(cinfo, edits=edits, instantiation=hl["instantiation"]))


def run_one(folder: Path, cfg: NovusConfig, mode: str, seed: int = 1111, sched_seed: int = 0,
            clusters="all") -> NovusResult:
    from emu import run_kernel

    t0 = time.time()
    res = NovusResult("unsupported", cfg, mode)
    try:
        prep = prepare(folder, cfg, mode, seed)
    except RuntimeError as e:
        res.message = str(e)
        return res
    res.compile, res.launch = prep.compile, prep.launch
    run = run_kernel(prep.launches[0], prep.gmem, sched_seed, clusters)
    res.status, res.message = run.status, run.message
    if run.machine is not None:
        res.stats = dict(run.machine.stats)
        res.notes = list(run.machine.notes.values())
    if run.status == "completed":
        res.status, res.message, _ = prep.check(prep.gmem, run.machine, run.clusters_run == run.clusters_total)
    res.seconds = time.time() - t0
    return res


def _written_tiles(machine, c_addr, m, n, bm, bn, transpose) -> list:
    """The (rows, cols) slices of every bm x bn tile of C the machine stored to (C transposed in memory or not)."""
    tiles = set()
    for a, nbytes in machine.store_log:
        e = (a - c_addr) // 2
        r, c = divmod(e, m if transpose else n)
        row, col = (c, r) if transpose else (r, c)
        tiles.add((row // bm, col // bn))
    return [(slice(i * bm, (i + 1) * bm), slice(j * bn, (j + 1) * bn)) for i, j in sorted(tiles)]


# ============================================================================ CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", help=f"folder with {', '.join(FILES)} (default ${ENV_VAR} or {DEFAULT_DIR})")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help=f"from {', '.join(CONFIGS)}, or 'all'")
    ap.add_argument("--modes", default="strict,leaderboard")
    ap.add_argument("--seed", type=int, default=1111)
    ap.add_argument("--sched-seed", type=int, default=0)
    ap.add_argument("--clusters", default="all", help="'all' or a count of clusters (CTAs) to run, drawn by the seed")
    ap.add_argument("--json", default=None)
    ap.add_argument("--kernel", type=int, default=9,
                    help="his kernel N (1-9; default 9, the folder above); 1-8 from their commits "
                         "(calibration/novus_versions.py), configs test, bench1..bench4 or all")
    args = ap.parse_args(argv)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from emu.state import summarize_notes

    if args.kernel != 9:
        return _main_version(args, summarize_notes)
    folder, why = (Path(args.src), "") if args.src else find_source()
    if folder is None:
        print(f"skipped: {why}", flush=True)
        return 1
    names = list(CONFIGS) if args.configs == "all" else [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configs {unknown}; known: {list(CONFIGS)}")
    digest = hashlib.sha256(b"".join((folder / f).read_bytes() for f in FILES)).hexdigest()[:16]
    print(f"novus677: {folder} (sha256 of the three files {digest})", flush=True)
    results = []
    for name in names:
        cfg = CONFIGS[name]
        results += _run_modes(folder, cfg, name, args, summarize_notes)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([{
            "label": "emulated", "status": r.status, "verdict": r.verdict, "config": r.config.name,
            "shape": r.config.shape, "launch_args": r.config.launch, "mode": r.mode, "message": r.message,
            "notes": [n.describe() for n in r.notes], "seconds": round(r.seconds, 2), "launch": r.launch,
            "stats": r.stats, "compile": r.compile} for r in results], indent=2, default=list))
    return 0 if results and all(r.status == "match" for r in results) else 1


def _run_modes(folder, cfg, title: str, args, summarize_notes) -> list:
    """Run `cfg` (headed `title`) in every mode of --modes, printing each result's line, notes and (unless a MATCH)
    its message."""
    print(f"{title}: {cfg.what}", flush=True)
    results = []
    for mode in [x.strip() for x in args.modes.split(",") if x.strip()]:
        r = run_one(folder, cfg, mode, args.seed, args.sched_seed, args.clusters)
        results.append(r)
        print(r.line(), flush=True)
        for line in summarize_notes(r.notes):
            print("  " + line, flush=True)
        if r.status != "match":
            print("  " + r.message.replace("\n", "\n  "), flush=True)
    return results


def _main_version(args, summarize_notes) -> int:
    """--kernel N (1-8): his launch at that commit for the test shape and / or the benchmark shapes."""
    from calibration import novus_versions

    where, why = (Path(args.src), "") if args.src else novus_versions.find_source()
    if where is None:
        print(f"skipped: {why}", flush=True)
        return 1
    shapes = {"test": novus_versions.TEST_SHAPE,
              **{f"bench{i + 1}": s for i, s in enumerate(novus_versions.BENCH_SHAPES)}}
    if args.configs == "all":
        names = list(shapes)
    elif args.configs == ",".join(DEFAULT_CONFIGS):  # the option's default: the test shape
        names = ["test"]
    else:
        names = [c.strip() for c in args.configs.split(",")]
    print(f"novus677 kernel {args.kernel}: {where} ({novus_versions.COMMITS[args.kernel][0][:12]})", flush=True)
    results = []
    for name in names:
        try:
            cfg = version_config(args.kernel, shapes[name], where)
        except (KeyError, RuntimeError) as e:
            print(f"emulated UNSUPPORTED: novus677 kernel {args.kernel} {name}: {e}", flush=True)
            return 1
        results += _run_modes(where, cfg, cfg.name, args, summarize_notes)
    return 0 if results and all(r.status == "match" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
