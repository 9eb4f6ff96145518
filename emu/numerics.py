"""Number formats of the tcgen05 MMAs: e2m1, e2m3, e3m2, e4m3, e5m2, f16, bf16, tf32, 8-bit integer elements, e4m3 /
ue8m0 scale factors, fp32 and f16 results.

All decoders are 256- or 16-entry lookup tables built from the format definitions, applied with numpy
fancy indexing (vectorised). Values decode to float64, in which every e2m1 x e4m3 x e2m1 x e4m3 product
is exact.

Sources (independent of the code under test):
- e2m1 (FP4): PTX ISA 5.2.5.x "Alternate Floating Point Data Formats" / OCP Microscaling (MX) spec v1.0
  section 5.3.3: 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit, no inf/NaN; magnitudes
  0, 0.5, 1, 1.5, 2, 3, 4, 6. Two elements per byte, element 0 in the LOW nibble (little-endian sub-byte
  order, as CUTLASS's subbyte_reference and torch.float4_e2m1fn_x2 store it; PTX ISA 9.7.16.10.4.6 only
  says "two 4-bit elements in an 8-bit container, with no padding").
- e2m3 / e3m2 (FP6): OCP Microscaling (MX) spec v1.0 section 5.3.2: 1 sign bit (bit 5), then 2 exponent bits
  (bias 1) and 3 mantissa bits / 3 exponent bits (bias 3) and 2 mantissa bits, no inf/NaN, exponent 0 subnormal;
  maxima 7.5 / 28. (How kind::f8f6f4 finds them in shared memory: emu.tcgen05.unpad_subbyte.)
- e4m3 (float8_e4m3fn): PTX ISA 5.2.5.x / OCP FP8 spec: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits;
  exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 (0x7F / 0xFF) is NaN; there is no infinity; max 448.
  The MMA's scale type is UE4M3 (unsigned, PTX ISA 9.7.16.10.7.1 Table 55). A byte with the sign bit set is
  outside that type; we decode it as signed e4m3fn, so a poisoned 0xFF byte reads as NaN.
- ue8m0: OCP MX spec 5.4.1: 2^(e-127), 0xFF is NaN.
- e5m2 (float8_e5m2): OCP FP8 spec: 1 sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like (exponent 31:
  infinity with mantissa 0, else NaN); subnormals m/4 * 2^-14.
- f16 / bf16: IEEE binary16 / the upper 16 bits of an IEEE binary32 (PTX ISA 5.2.5 "Alternate Floating-Point Data
  Formats": bf16 is 1 sign, 8 exponent, 7 mantissa bits).
- tf32: PTX ISA 5.2.5: 1 sign, 8 exponent, 10 mantissa bits, held in a 32-bit container with the fp32 layout. An MMA
  reads the container's upper 19 bits here (the lower 13 dropped): the ISA's format has no place for them, and what
  the tensor core does with nonzero ones is not written in a source we have (a kernel that feeds unrounded fp32
  values gets a tf32 product either way; comparisons use a tolerance).
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


def _build_fp6_table(exp_bits: int, bias: int) -> np.ndarray:
    """The 64 values of a 6-bit float with `exp_bits` exponent bits (OCP MX e2m3: 2, bias 1; e3m2: 3, bias 3)."""
    man_bits = 5 - exp_bits
    table = np.empty(64, dtype=np.float64)
    for code in range(64):
        sign = -1.0 if code & 0x20 else 1.0
        exp, man = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1)
        frac = man / (1 << man_bits)
        table[code] = sign * (frac * 2.0 ** (1 - bias) if exp == 0 else (1.0 + frac) * 2.0 ** (exp - bias))
    return table


def _build_e5m2_table() -> np.ndarray:
    table = np.empty(256, dtype=np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exp, man = (byte >> 2) & 0x1F, byte & 0x3
        if exp == 0x1F:
            table[byte] = sign * np.inf if man == 0 else np.nan
        elif exp == 0:
            table[byte] = sign * (man / 4.0) * 2.0 ** -14
        else:
            table[byte] = sign * (1.0 + man / 4.0) * 2.0 ** (exp - 15)
    return table


E4M3FN_TABLE = _build_e4m3fn_table()
E5M2_TABLE = _build_e5m2_table()
UE8M0_TABLE = _build_ue8m0_table()
E2M3_TABLE = _build_fp6_table(2, 1)
E3M2_TABLE = _build_fp6_table(3, 3)


def element_values(bits: np.ndarray, fmt: str) -> np.ndarray:
    """An MMA operand's element bits (one element per entry, unsigned) in format `fmt` -> float64 (integers for u8 /
    s8: exact in float64 too). Formats of PTX ISA Table 42 / 43 ("atype / btype")."""
    bits = np.asarray(bits)
    if fmt == "e2m1":
        return E2M1_TABLE[bits.astype(np.intp) & 0xF]
    if fmt in ("e2m3", "e3m2"):
        return (E2M3_TABLE if fmt == "e2m3" else E3M2_TABLE)[bits.astype(np.intp) & 0x3F]
    if fmt == "e4m3":
        return E4M3FN_TABLE[bits.astype(np.uint8)]
    if fmt == "e5m2":
        return E5M2_TABLE[bits.astype(np.uint8)]
    if fmt == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if fmt == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if fmt == "u8":
        return bits.astype(np.uint8).astype(np.float64)
    if fmt == "s8":
        return bits.astype(np.uint8).view(np.int8).astype(np.float64)
    raise ValueError(f"no element format {fmt}")


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
