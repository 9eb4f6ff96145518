"""Reference for the NVFP4 block-scaled dual GEMM with SiLU: C = silu(A @ B1^T) * (A @ B2^T).

API (leaderboard-compatible, plus a `mode` and a `device`):
  generate_input(m, n, k, l, seed, mode="leaderboard" | "strict") -> 10-tuple
      (a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted, sfb2_permuted, c)
  ref_kernel(data) -> fp16 [m, n, l]
  check_implementation(data, output) -> (ok, message)

Data layout (as on the leaderboard):
  a [m, k//2, l], b1/b2 [n, k//2, l]: float4_e2m1fn_x2, K-major; byte p of a row holds elements 2p (low
      nibble) and 2p+1 (high nibble). Memory is (l, mn, k//2) contiguous, viewed through permute(1, 2, 0).
  sfa/sfb1/sfb2 [mn, k//16, l]: float8_e4m3fn, one scale per 16 consecutive K elements; memory (l, mn, k//16).
  *_permuted [32, 4, mn//128, 4, k//64, l]: a view of contiguous memory laid out (l, mn//128, k//64, 32, 4, 4);
      plain element (i, j, b) lives at [i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b].
  c [m, n, l]: fp16, memory (l, m, n); the kernel overwrites it.

Modes of generate_input:
  "leaderboard": the leaderboard's distribution. Every nibble masked to 0b1011 (values 0, +-0.5, +-1, +-1.5),
      scales rand[0, 1) cast to e4m3, c randn fp16.
  "strict": for our own checks. All 16 FP4 codes; positive e4m3 scales from subnormal (2^-9) up to ~2^4, with
      varied mantissas. Per K block the A and B scale exponents are anti-correlated, so each block's product
      sa*sb stays near 2^T with T chosen from K to keep |C1|, |C2| around 12: outputs stay finite in fp16
      while a wrong nibble order, a wrong scale index or a scale applied twice fails by orders of magnitude.

Random numbers come from a torch.Generator seeded with `seed`, drawn on the CPU and then moved to the device
(CUDA when available), so the data are identical on every machine.

ref_kernel: on an SM100 GPU, torch._scaled_mm (two calls, fp32 out, blocked scales) as the leaderboard does;
anywhere else an exact dequantisation path: each FP4 value times its e4m3 scale is exact in fp32, the products
are summed by an fp32 matmul (TF32 off), then silu(C1) * C2 -> fp16. Set NVFP4_REFERENCE_PATH=dequant or
=scaled_mm to force a path.
"""
from __future__ import annotations

import contextlib
import math
import os
import warnings

import torch

from task import input_t, output_t
from utils import verbose_allclose

SF_VEC_SIZE = 16
K_MULTIPLE = 256
MN_MULTIPLE = 128
RTOL = 1e-3
ATOL = 1e-3
MODES = ("leaderboard", "strict")

# e2m1 code -> value (bit 3 sign, bits 2..1 exponent, bit 0 mantissa)
FP4_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                   -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
LEADERBOARD_NIBBLE_MASK = 0b1011  # sign + 2 low bits: the leaderboard's values are 0, +-0.5, +-1, +-1.5

# strict mode: target size of one GEMM's outputs, spread of the per-block scale exponents (log2 units)
STRICT_TARGET_ABS = 12.0
STRICT_BLOCK_SPREAD = 5.0
STRICT_JITTER = 1.0
E4M3_MIN_SUBNORMAL = 2.0 ** -9
E4M3_MAX = 448.0


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


# --------------------------------------------------------------------------------------------------
# Shape validation
# --------------------------------------------------------------------------------------------------
def validate_shape(m: int, n: int, k: int, l: int) -> None:
    """Raise ValueError naming the broken constraint (M, N multiples of 128; K multiple of 256; L >= 1)."""
    for name, value in (("M", m), ("N", n), ("K", k), ("L", l)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if l < 1:
        raise ValueError(f"L must be >= 1 (got L={l})")
    if k < K_MULTIPLE or k % K_MULTIPLE:
        raise ValueError(f"K must be a positive multiple of {K_MULTIPLE} (K % 256 == 0), got K={k}")
    if m < MN_MULTIPLE or m % MN_MULTIPLE:
        raise ValueError(f"M must be a positive multiple of {MN_MULTIPLE}, got M={m}")
    if n < MN_MULTIPLE or n % MN_MULTIPLE:
        raise ValueError(f"N must be a positive multiple of {MN_MULTIPLE}, got N={n}")


def _default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


# --------------------------------------------------------------------------------------------------
# Layout helpers
# --------------------------------------------------------------------------------------------------
def permute_scales(sf: torch.Tensor) -> torch.Tensor:
    """Plain scales [mn, sf_k, l] -> the [32, 4, mn//128, 4, sf_k//4, l] view of (l, mn//128, sf_k//4, 32, 4, 4)
    contiguous memory (the tcgen05 / cuBLAS block-scale layout)."""
    mn, sf_k, l = sf.shape
    rest_mn, rest_k = mn // 128, sf_k // 4
    # (l, mn, sf_k) with mn = (mm, mm4, mm32), sf_k = (kk, kk4)
    blocks = sf.permute(2, 0, 1).reshape(l, rest_mn, 4, 32, rest_k, 4)
    # -> memory order (l, mm, kk, mm32, mm4, kk4)
    atoms = blocks.permute(0, 1, 4, 3, 2, 5).contiguous()
    return atoms.permute(3, 4, 1, 5, 2, 0)


def to_blocked(sf_2d: torch.Tensor) -> torch.Tensor:
    """One batch's scales [mn, sf_k] -> flat blocked layout expected by torch._scaled_mm (as the leaderboard's
    to_blocked): 128x4 tiles in (row-block, col-block) order, each tile stored as [32][4][4]."""
    rows, cols = sf_2d.shape
    tiles = sf_2d.reshape(rows // 128, 128, cols // 4, 4).permute(0, 2, 1, 3)
    return tiles.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


# --------------------------------------------------------------------------------------------------
# Input generation
# --------------------------------------------------------------------------------------------------
def _fp4_bytes(gen, l, mn, k, mode):
    if mode == "strict":  # every byte value: all 16 codes in both nibbles
        return torch.randint(0, 256, (l, mn, k // 2), dtype=torch.uint8, generator=gen)
    # the leaderboard draws randint(255) (0..254), then keeps sign + 2 low bits of each nibble
    raw = torch.randint(0, 255, (l, mn, k // 2), dtype=torch.uint8, generator=gen)
    return raw & ((LEADERBOARD_NIBBLE_MASK << 4) | LEADERBOARD_NIBBLE_MASK)


def strict_log2_block_product(k: int) -> float:
    """log2 of the typical per-block scale product sa*sb in strict mode, so that |C| ~ STRICT_TARGET_ABS."""
    mean_sq_fp4 = sum(v * v for v in FP4_E2M1_VALUES) / 16.0
    # E[4^u] for u ~ U(-j, j) on each of the two scales
    jitter_rms = (4 ** STRICT_JITTER - 4 ** -STRICT_JITTER) / (2 * STRICT_JITTER * math.log(4))
    return math.log2(STRICT_TARGET_ABS / (math.sqrt(k) * mean_sq_fp4 * jitter_rms))


def _strict_scales(gen, base_log2, offset_log2, sign, mn):
    """e4m3 scales with log2 = offset + sign*base[block] + U(-jitter, jitter), clamped to e4m3's positive range."""
    l, sf_k = base_log2.shape
    jitter = (torch.rand((l, mn, sf_k), generator=gen) * 2 - 1) * STRICT_JITTER
    log2 = offset_log2 + sign * base_log2[:, None, :] + jitter
    values = torch.exp2(log2).clamp(E4M3_MIN_SUBNORMAL, E4M3_MAX)
    return values.to(torch.float8_e4m3fn)


def generate_input(m: int, n: int, k: int, l: int, seed: int, mode: str = "leaderboard", device=None):
    """Build the 10-tuple for one case. See the module docstring for layouts and modes."""
    validate_shape(m, n, k, l)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    device = _default_device() if device is None else torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    sf_k = k // SF_VEC_SIZE

    a_u8 = _fp4_bytes(gen, l, m, k, mode)
    b1_u8 = _fp4_bytes(gen, l, n, k, mode)
    b2_u8 = _fp4_bytes(gen, l, n, k, mode)
    c = torch.randn((l, m, n), dtype=torch.float16, generator=gen)
    if mode == "leaderboard":
        sfa = torch.rand((l, m, sf_k), generator=gen).to(torch.float8_e4m3fn)
        sfb1 = torch.rand((l, n, sf_k), generator=gen).to(torch.float8_e4m3fn)
        sfb2 = torch.rand((l, n, sf_k), generator=gen).to(torch.float8_e4m3fn)
    else:
        t = strict_log2_block_product(k)
        base = (torch.rand((l, sf_k), generator=gen) * 2 - 1) * STRICT_BLOCK_SPREAD
        sfa = _strict_scales(gen, base, t / 2, +1.0, m)
        sfb1 = _strict_scales(gen, base, t / 2, -1.0, n)
        sfb2 = _strict_scales(gen, base, t / 2, -1.0, n)

    def fp4(u8):  # contiguous (l, mn, k//2) bytes -> [mn, k//2, l] fp4x2 view on the device
        return u8.to(device).permute(1, 2, 0).view(torch.float4_e2m1fn_x2)

    def scales(sf):  # contiguous (l, mn, sf_k) -> plain [mn, sf_k, l] view and the permuted atom view
        plain = sf.to(device).permute(1, 2, 0)
        return plain, permute_scales(plain)

    sfa, sfa_p = scales(sfa)
    sfb1, sfb1_p = scales(sfb1)
    sfb2, sfb2_p = scales(sfb2)
    return (fp4(a_u8), fp4(b1_u8), fp4(b2_u8), sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p,
            c.to(device).permute(1, 2, 0))


# --------------------------------------------------------------------------------------------------
# Reference kernel
# --------------------------------------------------------------------------------------------------
def data_shape(data) -> tuple[int, int, int, int]:
    """(m, n, k, l) of a 10-tuple, validated against the problem's constraints."""
    if not isinstance(data, (tuple, list)) or len(data) != 10:
        raise ValueError("data must be the 10-tuple (a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c)")
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    c = data[9]
    if c.dim() != 3 or a.dim() != 3:
        raise ValueError(f"a and c must be 3-D, got a{tuple(a.shape)} c{tuple(c.shape)}")
    m, n, l = c.shape
    k = a.shape[1] * 2
    validate_shape(m, n, k, l)
    expect = {"a": (a, (m, k // 2, l)), "b1": (b1, (n, k // 2, l)), "b2": (b2, (n, k // 2, l)),
              "sfa": (sfa, (m, k // 16, l)), "sfb1": (sfb1, (n, k // 16, l)), "sfb2": (sfb2, (n, k // 16, l))}
    for name, (t, shape) in expect.items():
        if tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape} for (m,n,k,l)={(m, n, k, l)}")
    return m, n, k, l


@contextlib.contextmanager
def ieee_fp32_matmul():
    """Full-precision fp32 matmuls (no TF32 / reduced precision) inside the block."""
    prev_precision = torch.get_float32_matmul_precision()
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        torch.set_float32_matmul_precision(prev_precision)


_LUT_CACHE: dict = {}


def _fp4_pair_lut(device) -> torch.Tensor:
    """[256, 2] fp32: byte -> (value of low nibble, value of high nibble)."""
    key = str(device)
    if key not in _LUT_CACHE:
        vals = torch.tensor(FP4_E2M1_VALUES, dtype=torch.float32)
        codes = torch.arange(256)
        _LUT_CACHE[key] = torch.stack([vals[codes & 0xF], vals[codes >> 4]], dim=1).to(device)
    return _LUT_CACHE[key]


def dequantize(fp4: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """[r, k//2] fp4x2 (or uint8) and [r, k//16] e4m3 -> exact fp32 [r, k]."""
    u8 = fp4.view(torch.uint8) if fp4.dtype != torch.uint8 else fp4
    r, half_k = u8.shape
    values = _fp4_pair_lut(u8.device)[u8.long()].reshape(r, half_k // 8, SF_VEC_SIZE)
    return (values * sf.float().unsqueeze(-1)).reshape(r, half_k * 2)


def ref_kernel_dequant(data: input_t, chunk_bytes: int = 64 << 20) -> output_t:
    """Exact-dequantisation reference (any device): A rows processed in chunks to bound memory."""
    m, n, k, l = data_shape(data)
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    device = data[9].device
    out = torch.empty((l, m, n), dtype=torch.float16, device=device)
    rows = max(128, chunk_bytes // (4 * k))
    with torch.no_grad(), ieee_fp32_matmul():
        for b in range(l):
            b1_t = dequantize(b1[:, :, b], sfb1[:, :, b]).t()
            b2_t = dequantize(b2[:, :, b], sfb2[:, :, b]).t()
            for r0 in range(0, m, rows):
                r1 = min(m, r0 + rows)
                a_rows = dequantize(a[r0:r1, :, b], sfa[r0:r1, :, b])
                c1 = a_rows @ b1_t
                c2 = a_rows @ b2_t
                out[b, r0:r1] = (torch.nn.functional.silu(c1) * c2).to(torch.float16)
    return out.permute(1, 2, 0)


def ref_kernel_scaled_mm(data: input_t) -> output_t:
    """The leaderboard's reference: torch._scaled_mm with NVFP4 inputs and blocked scales (SM100 only)."""
    m, n, k, l = data_shape(data)
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    device = data[9].device
    out = torch.empty((l, m, n), dtype=torch.float16, device=device)
    for b in range(l):
        scale_a = to_blocked(sfa[:, :, b]).to(device)
        results = []
        for bmat, sfb in ((b1, sfb1), (b2, sfb2)):
            results.append(torch._scaled_mm(a[:, :, b], bmat[:, :, b].transpose(0, 1), scale_a,
                                            to_blocked(sfb[:, :, b]).to(device), bias=None,
                                            out_dtype=torch.float32))
        out[b] = (torch.nn.functional.silu(results[0]) * results[1]).to(torch.float16)
    return out.permute(1, 2, 0)


def is_sm100(device) -> bool:
    device = torch.device(device)
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 10


_WARNED = []


def ref_kernel(data: input_t) -> output_t:
    """silu(A @ B1^T) * (A @ B2^T) -> fp16 [m, n, l] on the data's device (see module docstring)."""
    data_shape(data)
    forced = os.environ.get("NVFP4_REFERENCE_PATH", "").strip().lower()
    if forced not in ("", "dequant", "scaled_mm"):
        raise ValueError(f"NVFP4_REFERENCE_PATH must be 'dequant' or 'scaled_mm', got {forced!r}")
    device = data[9].device
    if forced == "scaled_mm":
        return ref_kernel_scaled_mm(data)
    if forced == "" and is_sm100(device):
        try:
            return ref_kernel_scaled_mm(data)
        except (RuntimeError, TypeError) as err:  # keep the harness usable if this torch lacks the path
            if not _WARNED:
                warnings.warn(f"torch._scaled_mm NVFP4 failed ({err}); using the dequantisation reference")
                _WARNED.append(True)
    return ref_kernel_dequant(data)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    """Compare `output` with ref_kernel(data): |out - ref| <= 1e-3 + 1e-3*|ref| elementwise, NaN and +-inf
    must match (the leaderboard's rule); reports the first mismatches."""
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
