"""Run the kernel of a submission file in the emulator on reference inputs and compare with reference.py.

    result = emulate(m, n, k, l, config_name=None, mode="strict", seed=1111, sched_seed=0,
                     submission="submission.py", clusters="all")

Flow: reference.generate_input (CPU) -> the tensors' bytes in emulated global memory (C poisoned NaN)
-> emu.launch.capture_launch (the submission's real host code: grid, cluster, shared memory, parameter
bytes with the TMA descriptors it encoded for these addresses) -> emu.machine.Machine runs every warp of
the chosen clusters -> C read back -> reference.check_implementation on the tiles those clusters wrote.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import ptx as ptx_mod
from .launch import DT_I64, capture_launch, leaderboard_tensors
from .machine import Deadlock, Machine
from .state import EmulatorError, GlobalMemory, Hazard, Unsupported

REPO = Path(__file__).resolve().parents[1]
OPERANDS = ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "c")
DATA_INDEX = {"a": 0, "b1": 1, "b2": 2, "sfa": 6, "sfb1": 7, "sfb2": 8, "c": 9}


@dataclass
class EmulationResult:
    status: str  # "match", "mismatch", "deadlock", "hazard", "unsupported"
    config: str
    shape: tuple
    mode: str
    message: str = ""
    seconds: float = 0.0
    clusters_run: int = 0
    clusters_total: int = 0
    checked_elements: int = 0
    stats: dict = field(default_factory=dict)
    launch: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)  # emu.state.Note: model violations with a hardware-verified precedent
    profile: object = None  # KernelConfig.profile's buffer after the run: int64 (CTAs, words) (tools/profile_buffer.py)

    @property
    def exit_code(self) -> int:
        return {"match": 0, "mismatch": 1}.get(self.status, 2)

    @property
    def verdict(self) -> str:
        """MATCH, MATCH with notes, MISMATCH, DEADLOCK, HAZARD or UNSUPPORTED."""
        if self.status == "match" and self.notes:
            return f"MATCH with {len(self.notes)} note{'s' if len(self.notes) > 1 else ''}"
        return self.status.upper()

    def summary(self) -> str:
        m, n, k, l = self.shape
        dsl = f" (DSL {self.launch['dsl_version']})" if self.launch.get("dsl_version") else ""
        if self.launch.get("host_path") == "pointer":
            dsl = dsl[:-1] + ", pointer fallback)" if dsl else " (pointer fallback)"
        return (f"emulated {self.verdict}: {self.config}{dsl} {m}x{n}x{k}x{l} {self.mode}, "
                f"{self.clusters_run}/{self.clusters_total} clusters, {self.checked_elements} elements checked, "
                f"{self.stats.get('warp_instructions', 0)} warp-instructions, {self.stats.get('mma', 0)} MMAs, "
                f"{self.seconds:.1f} s")


def load_submission(path: Path):
    path = Path(path).resolve()
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    name = f"_emu_submission_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _torch_bytes(t: torch.Tensor) -> tuple[np.ndarray, int]:
    """The whole storage of t as bytes, and t's byte offset into it."""
    if t.dtype == torch.float4_e2m1fn_x2 or t.dtype == torch.float8_e4m3fn:
        t = t.view(torch.uint8)
    storage = t.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().copy()
    return raw, t.storage_offset() * t.element_size()


def place_inputs(gmem: GlobalMemory, data, m: int, n: int, k: int, l: int) -> dict:
    want = leaderboard_tensors(m, n, k, l)
    addresses = {}
    for name in OPERANDS:
        t = data[DATA_INDEX[name]]
        _dtype, shape, strides = want[name]
        if tuple(t.shape) != tuple(shape) or tuple(t.stride()) != tuple(strides):
            raise EmulatorError(f"{name}: input has shape {tuple(t.shape)} strides {t.stride()}, the launch "
                                f"capture describes {shape} {strides}")
        raw, offset = _torch_bytes(t)
        base = gmem.alloc_array(raw)
        addresses[name] = base + offset
    return addresses


def choose_clusters(machine: Machine, clusters, rng_seed: int) -> list:
    ids = list(machine.clusters())
    if clusters in (None, "all"):
        return ids
    count = int(clusters)
    if count >= len(ids):
        return ids
    rng = np.random.default_rng(rng_seed)
    picked = sorted(rng.choice(len(ids), size=count, replace=False).tolist())
    return [ids[i] for i in picked]


@dataclass
class Prepared:
    """A submission's kernel ready to run: its config, inputs in emulated global memory (C poisoned NaN) and the
    launch its real host code makes for them."""

    config: object
    data: tuple
    gmem: GlobalMemory
    addresses: dict
    cap: object
    profile_shape: tuple | None = None  # (CTAs, words) of the profile buffer at addresses["profile"], if any

    def profile_words(self):
        """The profile buffer as the kernel left it, or None for a config that does not profile."""
        if self.profile_shape is None:
            return None
        rows, words = self.profile_shape
        return self.gmem.read(self.addresses["profile"], rows * words * 8).view(np.int64).reshape(rows, words).copy()


def prepare(m: int, n: int, k: int, l: int = 1, config_name: str | None = None, mode: str = "strict",
            seed: int = 1111, submission: str | Path = REPO / "submission.py", sm_count: int | None = None,
            input_seed: int | None = None, dsl: str = "default", host_path: str = "tvm_ffi"):
    """Prepared, or an EmulationResult saying why the config cannot run this shape."""
    sub = load_submission(submission)
    if config_name is None:
        config = sub.config_for(m, n, k, l)
    else:
        matches = [c for c in sub.TUNE_SPACE if c.name == config_name] + \
                  [c for c in sub.CONFIG_TABLE.values() if c.name == config_name] + \
                  [c for c in getattr(sub, "PROFILE_SPACE", ()) if c.name == config_name]
        if not matches:
            raise SystemExit(f"no config named {config_name} in TUNE_SPACE, CONFIG_TABLE or PROFILE_SPACE of {submission}")
        config = matches[0]
    ok, why = sub.DualGemmKernel.can_implement(config, m, n, k, l)
    if not ok:
        return EmulationResult("unsupported", config.name, (m, n, k, l), mode,
                               message=f"{config.name} cannot implement {m}x{n}x{k}x{l}: {why}")
    import reference

    data = reference.generate_input(m, n, k, l, seed if input_seed is None else input_seed, mode=mode, device="cpu")
    data[9].fill_(float("nan"))
    gmem = GlobalMemory()
    addresses = place_inputs(gmem, data, m, n, k, l)
    extra, profile_shape = (), None
    if getattr(config, "profile", False):
        # One record per CTA for the largest persistent grid, every word -1 (not written), as tools/profile.py has it.
        profile_shape = (sub.SM_COUNT, sub.PROFILE_WORDS)
        addresses["profile"] = gmem.alloc_array(np.full(profile_shape, -1, np.int64))
        extra = (("profile", DT_I64, profile_shape, (profile_shape[1], 1)),)
    cap = capture_launch(str(submission), config, m, n, k, l, addresses, sm_count=sm_count, dsl=dsl,
                         host_path=host_path, extra=extra)
    return Prepared(config, data, gmem, addresses, cap, profile_shape)


def launch_summary(cap, host_path: str = "tvm_ffi") -> dict:
    return {"grid": cap.grid, "block": cap.block, "cluster": cap.cluster, "dynamic_smem": cap.dynamic_smem,
            "dsl_version": cap.dsl_version, "params": len(cap.params), "host_path": host_path}


def emulate(m: int, n: int, k: int, l: int = 1, config_name: str | None = None, mode: str = "strict",
            seed: int = 1111, sched_seed: int = 0, submission: str | Path = REPO / "submission.py",
            clusters="all", sm_count: int | None = None, progress=None, input_seed: int | None = None,
            max_quantum: int = 24, dsl: str = "default", host_path: str = "tvm_ffi") -> EmulationResult:
    t0 = time.time()
    prep = prepare(m, n, k, l, config_name, mode, seed, submission, sm_count, input_seed, dsl, host_path)
    if isinstance(prep, EmulationResult):
        return prep
    import reference

    config, data, gmem, addresses, cap = prep.config, prep.data, prep.gmem, prep.addresses, prep.cap
    res = EmulationResult("unsupported", config.name, (m, n, k, l), mode)
    res.launch = launch_summary(cap, host_path)
    run = execute(cap, gmem, sched_seed, clusters, progress, max_quantum)
    res.status, res.message, res.clusters_run, res.clusters_total = run.status, run.message, run.clusters_run, run.clusters_total
    if run.machine is not None:
        res.stats = dict(run.machine.stats)
        res.notes = list(run.machine.notes.values())
        res.profile = prep.profile_words()
    if run.status == "completed":
        res.status, res.message, res.checked_elements = _compare(reference, config, data, gmem, addresses, run.machine,
                                                                 m, n, l, res.clusters_run == res.clusters_total)
    res.seconds = time.time() - t0
    return res


@dataclass
class Execution:
    status: str  # "completed", "deadlock", "hazard", "unsupported"
    message: str = ""
    machine: Machine | None = None
    clusters_run: int = 0
    clusters_total: int = 0


def execute(cap, gmem: GlobalMemory, sched_seed: int = 0, clusters="all", progress=None,
            max_quantum: int = 24) -> Execution:
    """Parse the captured launch's PTX and run it (the chosen clusters) on gmem; report how it ended."""
    run = Execution("completed")
    try:
        kernel = ptx_mod.parse_module(cap.ptx)
        run.machine = Machine(kernel, cap, gmem, seed=sched_seed, progress=progress, max_quantum=max_quantum)
        ids = choose_clusters(run.machine, clusters, sched_seed)
        run.clusters_total = len(list(run.machine.clusters()))
        run.clusters_run = len(ids)
        run.machine.run(ids)
    except Deadlock as e:
        run.status, run.message = "deadlock", str(e)
    except Hazard as e:
        run.status, run.message = "hazard", str(e)
    except EmulatorError as e:  # Unsupported, or a PTX syntax the parser does not know
        run.status, run.message = "unsupported", f"{type(e).__name__}: {e}" if not isinstance(e, Unsupported) else str(e)
    return run


def _compare(reference, config, data, gmem, addresses, machine, m, n, l, all_clusters: bool):
    c_bytes = gmem.read(addresses["c"], m * n * l * 2)
    out = torch.from_numpy(c_bytes.view(np.float16).copy()).reshape(l, m, n).permute(1, 2, 0)
    if not all_clusters:
        tm, tn = config.cta_tile_mn
        written = np.zeros((m // tm, n // tn, l), bool)
        base = addresses["c"]
        for addr, nbytes in machine.store_log:
            if not base <= addr < base + m * n * l * 2:
                continue  # a store to another buffer (KernelConfig.profile's)
            e = (addr - base) // 2
            b, rem = divmod(e, m * n)
            row, col = divmod(rem, n)
            written[row // tm, col // tn, b] = True
        rows = []
        for i, j, b in zip(*np.nonzero(written)):
            rows.append((slice(int(i) * tm, (int(i) + 1) * tm), slice(int(j) * tn, (int(j) + 1) * tn), int(b)))
        if not rows:
            return "mismatch", "the emulated clusters wrote no element of C", 0
        checked = 0
        for rs, cs, b in rows:
            ok, msg = _check(out[rs, cs, b], _reference_tile(reference, data, rs, cs, b))
            checked += int((rs.stop - rs.start) * (cs.stop - cs.start))
            if not ok:
                return "mismatch", f"tile rows {rs.start}:{rs.stop} cols {cs.start}:{cs.stop}: {msg}", checked
        return "match", f"{len(rows)} tiles", checked
    ok, msg = _check(out, reference.ref_kernel(data))
    return ("match" if ok else "mismatch"), msg, m * n * l


def _reference_tile(reference, data, rows: slice, cols: slice, b: int) -> torch.Tensor:
    """reference.py's exact dequantisation path for one tile of C (the whole C costs minutes on big shapes)."""
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    with torch.no_grad(), reference._ieee_fp32_matmul():
        a_rows = reference.dequantize(a[rows, :, b], sfa[rows, :, b])
        c1 = a_rows @ reference.dequantize(b1[cols, :, b], sfb1[cols, :, b]).t()
        c2 = a_rows @ reference.dequantize(b2[cols, :, b], sfb2[cols, :, b]).t()
    return (torch.nn.functional.silu(c1) * c2).to(torch.float16)


def _check(out: torch.Tensor, expected: torch.Tensor) -> tuple[bool, str]:
    """The leaderboard's rule: |out - ref| <= 1e-3 + 1e-3 |ref|, NaN and inf must match."""
    o, e = out.float(), expected.float()
    nan_ok = torch.isnan(o) == torch.isnan(e)
    inf_ok = torch.isinf(o) == torch.isinf(e)
    close = torch.isclose(o, e, rtol=1e-3, atol=1e-3, equal_nan=True)
    bad = ~(close & nan_ok & inf_ok)
    if not bad.any():
        return True, "all elements within tolerance"
    idx = torch.nonzero(bad)[:5]
    shown = ", ".join(f"[{', '.join(str(int(x)) for x in i)}] got {o[tuple(i)].item():.6g} want {e[tuple(i)].item():.6g}"
                      for i in idx)
    return False, f"{int(bad.sum())} of {bad.numel()} elements differ; first: {shown}"
