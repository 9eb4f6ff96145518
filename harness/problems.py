"""The problems this package's kernels solve, as the harness needs them: which tensors the host function takes and
how the leaderboard lays them out, where each sits in reference.generate_input's tuple, how inputs are placed in
emulated global memory, and how C is checked against reference.py (the leaderboard's tolerance).

One Problem per leaderboard: DUAL_GEMM (nvfp4_dual_gemm, C = silu(A @ B1^T) * (A @ B2^T), the default everywhere)
and GEMM (nvfp4_gemm, C = A @ B^T: the same kernel with KernelConfig.problem "nvfp4_gemm", its own reference in
nvfp4_gemm/reference.py). get_problem(name or Problem) -> the Problem.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from emu import GlobalMemory
from emu.state import EmulatorError

# DLDataType (dlpack.h codes): what torch's DLPack export gives the leaderboard's tensors
DT_FP4X2 = (17, 4, 2)   # kDLFloat4_e2m1fn, torch.float4_e2m1fn_x2 (two e2m1 per byte)
DT_E4M3 = (10, 8, 1)    # kDLFloat8_e4m3fn
DT_F16 = (2, 16, 1)     # kDLFloat
DT_I64 = (0, 64, 1)     # kDLInt (KernelConfig.profile's buffer)


@dataclass(frozen=True)
class Problem:
    """A leaderboard problem as the harness sees it."""

    name: str                    # the leaderboard's name
    operands: tuple              # the host function's tensor arguments, in order; the last is C
    data_index: dict             # operand -> its index in reference.generate_input's tuple
    tensors: Callable            # (m, n, k, l) -> {operand: (DLDataType, shape, strides)} as the leaderboard has them
    reference_tile: Callable     # (reference module, data, rows, cols, batch) -> the expected fp16 tile of C
    tune_space: str = "TUNE_SPACE"       # the submission's names of the problem's tuning space and config table
    config_table: str = "CONFIG_TABLE"

    def reference(self):
        """The problem's reference module (problem_files.load_reference): generate_input, ref_kernel,
        check_implementation."""
        from problem_files import load_reference

        return load_reference(self.name)

    def configs(self, sub) -> list:
        """Every named config of the submission `sub` for this problem: its tuning space, then its config table."""
        return list(getattr(sub, self.tune_space, ())) + list(getattr(sub, self.config_table, {}).values())


def _fp4_scaled_tensors(fp4_rows: dict, m: int, n: int, k: int, l: int) -> dict:
    """(dtype, shape, strides) of FP4 operands [rows, K/2, L] (float4_e2m1fn_x2, K-major), their permuted scale
    atoms [32, 4, rest_mn, 4, rest_k, L] (named "sf" + the operand's name) and C fp16 [M, N, L]."""
    rest_k = k // 16 // 4
    out = {}
    for name, rows in fp4_rows.items():
        out[name] = (DT_FP4X2, (rows, k // 2, l), (k // 2, 1, rows * k // 2))
    for name, rows in fp4_rows.items():
        rest_mn = -(-rows // 128)
        out["sf" + name] = (DT_E4M3, (32, 4, rest_mn, 4, rest_k, l),
                            (16, 4, rest_k * 512, 1, 512, rest_mn * rest_k * 512))
    out["c"] = (DT_F16, (m, n, l), (n, 1, m * n))
    return out


def dual_gemm_tensors(m: int, n: int, k: int, l: int) -> dict[str, tuple[tuple, tuple, tuple]]:
    """The 7 tensors of nvfp4_dual_gemm exactly as the leaderboard's torch tensors have them
    (submission.check_inputs)."""
    return _fp4_scaled_tensors({"a": m, "b1": n, "b2": n}, m, n, k, l)


def dual_gemm_reference_tile(reference, data, rows: slice, cols: slice, b: int) -> torch.Tensor:
    """reference.py's exact dequantisation path for one tile of C (the whole C costs minutes on big shapes)."""
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    with torch.no_grad(), reference.ieee_fp32_matmul():
        a_rows = reference.dequantize(a[rows, :, b], sfa[rows, :, b])
        c1 = a_rows @ reference.dequantize(b1[cols, :, b], sfb1[cols, :, b]).t()
        c2 = a_rows @ reference.dequantize(b2[cols, :, b], sfb2[cols, :, b]).t()
    return (torch.nn.functional.silu(c1) * c2).to(torch.float16)


DUAL_GEMM = Problem(
    name="nvfp4_dual_gemm",
    operands=("a", "b1", "b2", "sfa", "sfb1", "sfb2", "c"),
    data_index={"a": 0, "b1": 1, "b2": 2, "sfa": 6, "sfb1": 7, "sfb2": 8, "c": 9},
    tensors=dual_gemm_tensors,
    reference_tile=dual_gemm_reference_tile,
)


def gemm_tensors(m: int, n: int, k: int, l: int) -> dict[str, tuple[tuple, tuple, tuple]]:
    """The 5 tensors nvfp4_gemm's kernel takes (DualGemmKernel.gemm: a, b, sfa_permuted, sfb_permuted, c) as the
    leaderboard's torch tensors have them (submission.check_inputs of the 7-tuple)."""
    return _fp4_scaled_tensors({"a": m, "b": n}, m, n, k, l)


def gemm_reference_tile(reference, data, rows: slice, cols: slice, b: int) -> torch.Tensor:
    """nvfp4_gemm/reference.py's exact dequantisation path for one tile of C."""
    a, bm, sfa, sfb = data[:4]
    with torch.no_grad(), reference.ieee_fp32_matmul():
        c = reference.dequantize(a[rows, :, b], sfa[rows, :, b]) @ reference.dequantize(bm[cols, :, b], sfb[cols, :, b]).t()
    return c.to(torch.float16)


GEMM = Problem(
    name="nvfp4_gemm",
    operands=("a", "b", "sfa", "sfb", "c"),
    data_index={"a": 0, "b": 1, "sfa": 4, "sfb": 5, "c": 6},
    tensors=gemm_tensors,
    reference_tile=gemm_reference_tile,
    tune_space="GEMM_TUNE_SPACE",
    config_table="GEMM_CONFIG_TABLE",
)
PROBLEMS = {p.name: p for p in (DUAL_GEMM, GEMM)}


def get_problem(problem: "Problem | str | None" = None) -> Problem:
    """A Problem from itself, its leaderboard name, or None (the dual GEMM)."""
    if problem is None:
        return DUAL_GEMM
    if isinstance(problem, Problem):
        return problem
    if problem not in PROBLEMS:
        raise ValueError(f"problem must be one of {sorted(PROBLEMS)}, got {problem!r}")
    return PROBLEMS[problem]


def torch_bytes(t: torch.Tensor) -> tuple[np.ndarray, int]:
    """The whole storage of t as bytes, and t's byte offset into it."""
    if t.dtype == torch.float4_e2m1fn_x2 or t.dtype == torch.float8_e4m3fn:
        t = t.view(torch.uint8)
    storage = t.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().copy()
    return raw, t.storage_offset() * t.element_size()


# What the grid before a call writes in the leaderboard's timed loop (docs/leaderboard.md §3): the previous call of
# custom_kernel writes its own C, the L2 flush before a repeat its own buffer; neither writes an input of this call.
# Declared as this call's C (the same buffer where a caller repeats one input set): under programmatic dependent
# launch a read of an input before griddepcontrol.wait is then legal and any access to C races (emu.run_kernel's
# prerequisite_writes).
LEADERBOARD_PREREQUISITE_WRITES = ("c",)


def prerequisite_writes_for(config):
    """The stream a config is judged under: not known (None: every global access before griddepcontrol.wait races),
    as custom_kernel promises correctness after any kernel, unless the config loads inputs before the wait
    (KernelConfig.pdl_early_k_tiles), whose stated contract is the leaderboard's loop."""
    return LEADERBOARD_PREREQUISITE_WRITES if getattr(config, "pdl_early_k_tiles", 0) else None


def place_inputs(gmem: GlobalMemory, data, m: int, n: int, k: int, l: int, problem: Problem = DUAL_GEMM) -> dict:
    """Each operand's bytes in gmem, laid out as the leaderboard's tensors are; {operand: its global address}."""
    want = problem.tensors(m, n, k, l)
    addresses = {}
    for name in problem.operands:
        t = data[problem.data_index[name]]
        _dtype, shape, strides = want[name]
        if tuple(t.shape) != tuple(shape) or tuple(t.stride()) != tuple(strides):
            raise EmulatorError(f"{name}: input has shape {tuple(t.shape)} strides {t.stride()}, the launch "
                                f"capture describes {shape} {strides}")
        raw, offset = torch_bytes(t)
        base = gmem.alloc_array(raw)
        addresses[name] = base + offset
    return addresses


def wrong_elements(out: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Boolean, the shape of out: the elements the leaderboard's rule fails (|out - ref| > 1e-3 + 1e-3 |ref|, or NaN
    or inf where the reference has none, or the other way)."""
    o, e = out.float(), expected.float()
    nan_ok = torch.isnan(o) == torch.isnan(e)
    inf_ok = torch.isinf(o) == torch.isinf(e)
    close = torch.isclose(o, e, rtol=1e-3, atol=1e-3, equal_nan=True)
    return ~(close & nan_ok & inf_ok)


def check_c(out: torch.Tensor, expected: torch.Tensor) -> tuple[bool, str]:
    """The leaderboard's rule: |out - ref| <= 1e-3 + 1e-3 |ref|, NaN and inf must match."""
    o, e = out.float(), expected.float()
    bad = wrong_elements(out, expected)
    if not bad.any():
        return True, "all elements within tolerance"
    idx = torch.nonzero(bad)[:5]
    shown = ", ".join(f"[{', '.join(str(int(x)) for x in i)}] got {o[tuple(i)].item():.6g} want {e[tuple(i)].item():.6g}"
                      for i in idx)
    return False, f"{int(bad.sum())} of {bad.numel()} elements differ; first: {shown}"


def compare(reference, config, data, gmem, addresses, machine, m, n, l, all_clusters: bool,
            problem: Problem = DUAL_GEMM):
    """(status, message, elements checked) of the C the run left in gmem: all of C against reference.ref_kernel, or,
    when only some clusters ran, every CTA tile they stored to against problem.reference_tile."""
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
            ok, msg = check_c(out[rs, cs, b], problem.reference_tile(reference, data, rs, cs, b))
            checked += int((rs.stop - rs.start) * (cs.stop - cs.start))
            if not ok:
                return "mismatch", f"tile rows {rs.start}:{rs.stop} cols {cs.start}:{cs.stop}: {msg}", checked
        return "match", f"{len(rows)} tiles", checked
    ok, msg = check_c(out, reference.ref_kernel(data))
    return ("match" if ok else "mismatch"), msg, m * n * l
