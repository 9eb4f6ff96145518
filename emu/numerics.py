"""Number formats of the NVFP4 block-scaled MMA: e2m1 elements, e4m3 / ue8m0 scale factors, fp32 results.

All decoders are 256- or 16-entry lookup tables built from the format definitions, applied with numpy
fancy indexing (vectorised). Values decode to float64, in which every e2m1 x e4m3 x e2m1 x e4m3 product
is exact.

Sources (independent of the code under test):
- e2m1 (FP4): PTX ISA 5.2.5.x "Alternate Floating Point Data Formats" / OCP Microscaling (MX) spec v1.0
  section 5.3.3: 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit, no inf/NaN; magnitudes
  0, 0.5, 1, 1.5, 2, 3, 4, 6. Two elements per byte, element 0 in the LOW nibble (little-endian sub-byte
  order, as CUTLASS's subbyte_reference and torch.float4_e2m1fn_x2 store it; PTX ISA 9.7.16.10.4.6 only
  says "two 4-bit elements in an 8-bit container, with no padding").
- e4m3 (float8_e4m3fn): PTX ISA 5.2.5.x / OCP FP8 spec: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits;
  exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 (0x7F / 0xFF) is NaN; there is no infinity; max 448.
  The MMA's scale type is UE4M3 (unsigned, PTX ISA 9.7.16.10.7.1 Table 55). A byte with the sign bit set is
  outside that type; we decode it as signed e4m3fn, so a poisoned 0xFF byte reads as NaN.
- ue8m0: OCP MX spec 5.4.1: 2^(e-127), 0xFF is NaN.
- fp32 rounding: IEEE 754 round-to-nearest-even, which numpy's float64 -> float32 cast performs.
"""
from __future__ import annotations

import numpy as np

_E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)
E2M1_TABLE = np.concatenate([_E2M1_MAGNITUDES, -_E2M1_MAGNITUDES])  # index = 4-bit code


def _build_e4m3fn_table() -> np.ndarray:
    table = np.empty(256, dtype=np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exp = (byte >> 3) & 0xF
        man = byte & 0x7
        if exp == 0xF and man == 0x7:
            table[byte] = np.nan
        elif exp == 0:
            table[byte] = sign * (man / 8.0) * 2.0 ** -6
        else:
            table[byte] = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return table


def _build_ue8m0_table() -> np.ndarray:
    table = np.array([2.0 ** (e - 127) for e in range(256)], dtype=np.float64)
    table[0xFF] = np.nan
    return table


E4M3FN_TABLE = _build_e4m3fn_table()
UE8M0_TABLE = _build_ue8m0_table()


def e2m1_to_float(codes: np.ndarray) -> np.ndarray:
    """4-bit e2m1 codes (0..15, any integer dtype) -> float64."""
    return E2M1_TABLE[np.asarray(codes, dtype=np.intp) & 0xF]


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """Bytes [..., n] -> codes [..., 2n] (uint8): element 2i is the low nibble of byte i."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out


def pack_fp4(codes: np.ndarray) -> np.ndarray:
    """Codes [..., 2n] -> bytes [..., n], inverse of unpack_fp4."""
    codes = np.asarray(codes, dtype=np.uint8)
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def e4m3fn_to_float(data: np.ndarray) -> np.ndarray:
    """float8_e4m3fn bytes -> float64 (NaN for 0x7F/0xFF, subnormals exact)."""
    return E4M3FN_TABLE[np.asarray(data, dtype=np.uint8)]


def round_to_fp32(values: np.ndarray) -> np.ndarray:
    """float64 -> float32, IEEE round-to-nearest-even (overflow -> inf)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32)


def fp32_to_bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
