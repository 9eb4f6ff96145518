"""Reference for the NVFP4 block-scaled GEMM of the GPU MODE leaderboard nvfp4_gemm: C = A @ B^T.

API (leaderboard-compatible, plus a `mode` and a `device`; the same structure as the dual GEMM's ../reference.py):
  generate_input(m, n, k, l, seed, mode="leaderboard" | "strict") -> 7-tuple
      (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)
  ref_kernel(data) -> fp16 [m, n, l]
  check_implementation(data, output) -> (ok, message)

The leaderboard's problem (gpu-mode/reference-kernels@f83cb92a, problems/nvidia/nvfp4_gemm/reference.py; its data
since commit b09f481 "nvfp4_gemm: Update random tensor generation ranges"):
  a [m, k//2, l], b [n, k//2, l]: float4_e2m1fn_x2, K-major, bytes `torch.randint(-128, 128)` (int8) viewed as FP4:
      every byte value, so all 16 e2m1 codes in both nibbles (values up to +-6).
  sfa [m, k//16, l], sfb [n, k//16, l]: float8_e4m3fn from `torch.randint(0, 4)`: the scales are {0, 1, 2, 3}, and
      zero scales occur.
  sfa_permuted, sfb_permuted [32, 4, mn//128, 4, k//64, l]: the same scales in the tcgen05 atom layout, as in the dual
      problem (plain (i, j, b) at [i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b]).
  c [m, n, l]: fp16 randn, overwritten by the kernel.
  reference: per batch `torch._scaled_mm(a, b.T, to_blocked(sfa), to_blocked(sfb), out_dtype=torch.float16)`;
  check: rtol = atol = 1e-3 with the NaN / inf rule (make_match_reference). The leaderboard does not check the
  output's dtype; check_implementation here does (fp16).

Modes of generate_input:
  "leaderboard": the leaderboard's distribution above (drawn on the CPU from a generator seeded with `seed`, so the
      same values everywhere; the leaderboard draws the same distribution on its GPU with torch.manual_seed).
  "strict": for our own checks, as the dual GEMM's strict mode: all 16 FP4 codes; positive e4m3 scales from
      subnormal (2^-9) up to ~2^4 with varied mantissas, the A and B scale exponents anti-correlated per K block so
      |C| stays around 12 and finite in fp16, while a wrong nibble order, scale index or doubled scale fails by orders
      of magnitude. The leaderboard's scales (small integers) never exercise an e4m3 mantissa.

ref_kernel: torch._scaled_mm on an SM100 GPU (as the leaderboard does); anywhere else the exact dequantisation path
(each FP4 value times its scale is exact in fp32; fp32 matmul, TF32 off; fp16 at the end). NVFP4_REFERENCE_PATH=
dequant|scaled_mm forces one.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import torch

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from utils import verbose_allclose  # noqa: E402


def _dual_reference():
    """The package's ../reference.py (the dual GEMM's), whose layout helpers, dequantisation and strict scales this
    problem shares; imported by its path, so this file never imports itself as `reference`."""
    path = _ROOT / "reference.py"
    loaded = sys.modules.get("reference")
    if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == path:
        return loaded
    spec = importlib.util.spec_from_file_location("_nvfp4_dual_gemm_reference", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


_base = _dual_reference()

SF_VEC_SIZE = _base.SF_VEC_SIZE
RTOL = _base.RTOL
ATOL = _base.ATOL
MODES = _base.MODES
validate_shape = _base.validate_shape
permute_scales = _base.permute_scales
to_blocked = _base.to_blocked
dequantize = _base.dequantize
ieee_fp32_matmul = _base.ieee_fp32_matmul
is_sm100 = _base.is_sm100
LEADERBOARD_SCALES = (0, 4)  # torch.randint(0, 4): scales 0, 1, 2, 3


def generate_input(m: int, n: int, k: int, l: int, seed: int, mode: str = "leaderboard", device=None):
    """Build the 7-tuple for one case. See the module docstring for layouts and modes."""
    validate_shape(m, n, k, l)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    device = (torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")) if device is None \
        else torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    sf_k = k // SF_VEC_SIZE
    # every byte value in both modes: the leaderboard's randint(-128, 128) int8, as uint8 bits
    a_u8 = torch.randint(0, 256, (l, m, k // 2), dtype=torch.uint8, generator=gen)
    b_u8 = torch.randint(0, 256, (l, n, k // 2), dtype=torch.uint8, generator=gen)
    c = torch.randn((l, m, n), dtype=torch.float16, generator=gen)
    if mode == "leaderboard":
        sfa = torch.randint(*LEADERBOARD_SCALES, (l, m, sf_k), dtype=torch.int8, generator=gen).to(torch.float8_e4m3fn)
        sfb = torch.randint(*LEADERBOARD_SCALES, (l, n, sf_k), dtype=torch.int8, generator=gen).to(torch.float8_e4m3fn)
    else:
        t = _base.strict_log2_block_product(k)
        base = (torch.rand((l, sf_k), generator=gen) * 2 - 1) * _base.STRICT_BLOCK_SPREAD
        sfa = _base._strict_scales(gen, base, t / 2, +1.0, m)
        sfb = _base._strict_scales(gen, base, t / 2, -1.0, n)

    def fp4(u8):  # contiguous (l, mn, k//2) bytes -> [mn, k//2, l] fp4x2 view on the device
        return u8.to(device).permute(1, 2, 0).view(torch.float4_e2m1fn_x2)

    def scales(sf):  # contiguous (l, mn, sf_k) -> plain [mn, sf_k, l] view and the permuted atom view
        plain = sf.to(device).permute(1, 2, 0)
        return plain, permute_scales(plain)

    sfa, sfa_p = scales(sfa)
    sfb, sfb_p = scales(sfb)
    return fp4(a_u8), fp4(b_u8), sfa, sfb, sfa_p, sfb_p, c.to(device).permute(1, 2, 0)


def data_shape(data) -> tuple[int, int, int, int]:
    """(m, n, k, l) of a 7-tuple, validated against the problem's constraints."""
    if not isinstance(data, (tuple, list)) or len(data) != 7:
        raise ValueError("data must be the 7-tuple (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)")
    a, b, sfa, sfb = data[:4]
    c = data[6]
    if c.dim() != 3 or a.dim() != 3:
        raise ValueError(f"a and c must be 3-D, got a{tuple(a.shape)} c{tuple(c.shape)}")
    m, n, l = c.shape
    k = a.shape[1] * 2
    validate_shape(m, n, k, l)
    expect = {"a": (a, (m, k // 2, l)), "b": (b, (n, k // 2, l)), "sfa": (sfa, (m, k // 16, l)),
              "sfb": (sfb, (n, k // 16, l))}
    for name, (t, shape) in expect.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape} for (m,n,k,l)={(m, n, k, l)}")
    return m, n, k, l


def ref_kernel_dequant(data, chunk_bytes: int = 64 << 20):
    """Exact-dequantisation reference (any device): A rows processed in chunks to bound memory."""
    m, n, k, l = data_shape(data)
    a, b, sfa, sfb = data[:4]
    device = data[6].device
    out = torch.empty((l, m, n), dtype=torch.float16, device=device)
    rows = max(128, chunk_bytes // (4 * k))
    with torch.no_grad(), ieee_fp32_matmul():
        for batch in range(l):
            b_t = dequantize(b[:, :, batch], sfb[:, :, batch]).t()
            for r0 in range(0, m, rows):
                r1 = min(m, r0 + rows)
                out[batch, r0:r1] = (dequantize(a[r0:r1, :, batch], sfa[r0:r1, :, batch]) @ b_t).to(torch.float16)
    return out.permute(1, 2, 0)


def ref_kernel_scaled_mm(data):
    """The leaderboard's reference: torch._scaled_mm with NVFP4 inputs, blocked scales and fp16 out (SM100 only)."""
    m, n, k, l = data_shape(data)
    a, b, sfa, sfb = data[:4]
    device = data[6].device
    out = torch.empty((l, m, n), dtype=torch.float16, device=device)
    for batch in range(l):
        out[batch] = torch._scaled_mm(a[:, :, batch], b[:, :, batch].transpose(0, 1),
                                      to_blocked(sfa[:, :, batch]).to(device), to_blocked(sfb[:, :, batch]).to(device),
                                      bias=None, out_dtype=torch.float16)
    return out.permute(1, 2, 0)


_WARNED = []


def ref_kernel(data):
    """A @ B^T -> fp16 [m, n, l] on the data's device (see the module docstring)."""
    data_shape(data)
    forced = os.environ.get("NVFP4_REFERENCE_PATH", "").strip().lower()
    if forced not in ("", "dequant", "scaled_mm"):
        raise ValueError(f"NVFP4_REFERENCE_PATH must be 'dequant' or 'scaled_mm', got {forced!r}")
    if forced == "scaled_mm":
        return ref_kernel_scaled_mm(data)
    if forced == "" and is_sm100(data[6].device):
        try:
            return ref_kernel_scaled_mm(data)
        except (RuntimeError, TypeError) as err:  # keep the harness usable if this torch lacks the path
            if not _WARNED:
                warnings.warn(f"torch._scaled_mm NVFP4 failed ({err}); using the dequantisation reference")
                _WARNED.append(True)
    return ref_kernel_dequant(data)


def check_implementation(data, output) -> tuple[bool, str]:
    """Compare `output` with ref_kernel(data): |out - ref| <= 1e-3 + 1e-3*|ref| elementwise, NaN and +-inf must
    match (the leaderboard's rule), and the output must be fp16 (which the leaderboard does not check)."""
    if not isinstance(output, torch.Tensor):
        return False, f"output must be a torch.Tensor, got {type(output).__name__}"
    expected = ref_kernel(data)
    if output.dtype != expected.dtype:
        return False, f"output dtype {output.dtype}, expected {expected.dtype}"
    if output.device != expected.device:
        output = output.to(expected.device)
    reasons = verbose_allclose(output, expected, rtol=RTOL, atol=ATOL)
    if reasons:
        return False, "mismatch found! custom implementation doesn't match reference: " + " ".join(reasons)
    return True, ""
