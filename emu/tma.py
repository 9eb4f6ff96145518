"""TMA tensor maps (CUtensorMap, 128 bytes) and the tile-mode bulk tensor load.

Bit layout of the 128-byte tensor map. The CUDA driver API documents CUtensorMap as opaque
(cuTensorMapEncodeTiled, "Tensor Map Object Management"); the layout below was established from the real
driver's encoder (cuTensorMapEncodeTiled, driver 580.159, NVIDIA H200), one parameter varied at a time and 150
random parameter sets (calibration/tma_gpu.py; fixture tests/data/tma_encode.json.gz, checked by
tests/calibration/test_tma_gpu.py). Little-endian throughout.

  bytes  0..7    global address (the driver requires 16-byte alignment; 32 for interleave 32B)
  u32 at 8       control word:
                   bits 0..3    (flags: 0 from the driver; the CuTe DSL's own encoder writes 2; not interpreted)
                   bits 4..6    rank - 1
                   bits 7..10   element type, hardware code (table HW_DTYPES below)
                   bits 11..12  interleave (0 none, 1 16B, 2 32B)
                   bits 13..14  swizzle (0 none, 1 32B, 2 64B, 3 128B)
                   bit  15      OOB fill: 1 = NaN_REQUEST_ZERO_FMA, 0 = zeros
                   bit  16      round to TF32 (CU_TENSOR_MAP_DATA_TYPE_TFLOAT32*)
                   bits 17..18  L2 promotion (0 none, 1 64B, 2 128B, 3 256B)
                   bits 19..31  (not produced by the driver on H200; the DSL sets bit 21 for some shapes:
                                 recorded in `unknown_bits`, not interpreted)
  u32 at 12+4i   (global stride of dimension i+1, in bytes) >> 4, low 32 bits, i = 0..3
  u32 at 28      bits 4i..4i+3: bits 32..35 of (stride_{i+1} >> 4)  (strides < 2^40)
  u32 at 32+4i   global dim i - 1, i = 0..4 (elements; for the 4-bit types, 4-bit elements)
  u32 at 52      bits 3i..3i+2: element stride i - 1, i = 0..4
  u8  at 55+i    box dim i - 1, i = 0..4 (elements)
  bytes 60..63   0
  bytes 64..127  derived values the driver fills (box bytes, swizzle atom bytes, ...); the CuTe DSL leaves them
                 unwritten (host-stack garbage) and its kernels run on B200, so they are ignored here.

Element types: codes 0..10 measured on the H200 (below). The 4-bit packed type (the driver's
CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B, which the H200's driver rejects) is hardware code 11 by the CuTe DSL's
encoding of the FP4 operands (dims and box counted in 4-bit elements there: K=512 is encoded as 512, a
128-byte box row as 256), consistent with the driver documentation of 16U4_ALIGN8B (16 4-bit elements in 8
bytes: packed, two per byte, the byte copied as is). Codes 12/13 (ALIGN16B / 6-bit types) are unverified guesses
and rejected as Unsupported.

Tile-mode load semantics (PTX ISA 9.7.9.25 "Data Movement: Tensor copy", 5.5 "Tensors": tiled mode, bounding
box, traversal stride, out-of-bound access; 5.5.6 "Tensor-map swizzling modes"):
- The box starts at the coordinates given by the instruction (signed, innermost first). Along dimension i it
  visits coordinates c_i + j * elementStride_i, j = 0 .. ceil(box_i / elementStride_i) - 1, and writes the
  visited elements densely to shared memory, dimension 0 fastest. complete_tx counts all of those bytes,
  out-of-bound ones included (measured: the mbarrier completes with exactly that count).
- An element whose coordinate is outside [0, dim) in any dimension is not read; it is filled with zero
  (or the NaN constant with OOB fill NaN_REQUEST_ZERO_FMA).
- Swizzle (a function of the shared memory address): within each 16-byte chunk the bytes stay; the chunk
  index (address bits [4:6]) is XORed with address bits [7:9], limited to bit 4 (32B), bits [4:5] (64B) or
  bits [4:6] (128B). Checked byte-for-byte against the H200 for destinations at 1024-aligned and only
  128-aligned addresses.
- The shared-memory address of a tensor copy (a load's destination, a store's source) must be 128-byte aligned,
  whatever the swizzle mode (SMEM_ALIGN below, with its sources; measured: a 16-byte aligned destination faults with
  "misaligned address", 128- and 384-aligned SW128 destinations land as modeled).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .state import Hazard, Unsupported

# hardware code -> (name, bits per element)
HW_DTYPES = {
    0: ("UINT8", 8), 1: ("UINT16", 16), 2: ("UINT32", 32), 3: ("INT32", 32), 4: ("UINT64", 64), 5: ("INT64", 64),
    6: ("FLOAT16", 16), 7: ("FLOAT32", 32), 8: ("FLOAT32_FTZ", 32), 9: ("FLOAT64", 64), 10: ("BFLOAT16", 16),
    11: ("16U4_ALIGN8B", 4),
}
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
INTERLEAVE_NAMES = {0: "none", 1: "16B", 2: "32B"}
L2_PROMOTION_BYTES = {0: 0, 1: 64, 2: 128, 3: 256}
KNOWN_CONTROL_BITS = 0x7FFF0  # bits 4..18
# The NaN constant of OOB fill NaN_REQUEST_ZERO_FMA, per 16-bit half (measured on the H200 for FLOAT32).
OOB_NAN_HALFWORD = 0x7FF7

# The shared-memory address of a tensor copy, 128-byte aligned for every swizzle mode. CUDA C++ Programming Guide
# 4.11.2.2 "Using TMA to transfer multi-dimensional arrays" (12.x: 10.29.2), Table 23: "Shared memory address | Must be
# 128 byte aligned."; its swizzle part: "When using TMA, the shared memory is required to be aligned to 128 bytes", and
# Table 25 gives 128 bytes as the shared memory alignment of SWIZZLE_128B/64B/32B/NONE alike. The pattern's repeat
# (1024 bytes for 128B) is a recommendation only ("For simplicity shared memory should be aligned according to the
# number of bytes after which the swizzle pattern repeats"), with an offset formula for buffers that are not, so 1024 is
# not required: arseni_ivanov's B200-verified kernel loads SW128 tiles into 128-aligned buffers, and the H200 lands
# them where swizzle_offsets says (tests/calibration/test_tma_gpu.py). Hardware fault when broken: NVIDIA/cutlass PR #1870 (a TMA
# load into a mainloop buffer placed after an epilogue buffer "not 128B aligned": "smem misaligned address").
SMEM_ALIGN = 128
SMEM_ALIGN_SOURCE = "CUDA C++ Programming Guide 4.11.2.2, Table 23: \"Shared memory address: Must be 128 byte aligned\""


def check_smem_alignment(addr: int, what: str) -> None:
    """Hazard unless `addr`, the shared-memory address of a tensor copy (`what` names the copy and the operand), is a
    multiple of SMEM_ALIGN."""
    if addr % SMEM_ALIGN:
        raise Hazard(f"{what}: shared-memory address {addr:#x} is not {SMEM_ALIGN}-byte aligned ({addr % SMEM_ALIGN} "
                     f"bytes past a multiple of {SMEM_ALIGN}; {SMEM_ALIGN_SOURCE})")


@dataclass
class TensorMap:
    address: int
    rank: int
    dtype_code: int
    dtype: str
    elem_bits: int
    dims: list[int]             # elements, innermost first
    strides: list[int]          # bytes, of dimensions 1..rank-1
    box: list[int]              # elements
    elem_strides: list[int]
    interleave: int
    swizzle: int                # 0 none, 1 32B, 2 64B, 3 128B
    oob_nan: bool
    tf32: bool
    l2_promotion: int
    flags: int                  # control bits 0..3
    unknown_bits: int           # control bits outside the known fields
    raw: bytes = field(repr=False, default=b"")

    @property
    def swizzle_bytes(self) -> int:
        return SWIZZLE_BYTES[self.swizzle]

    @property
    def box_counts(self) -> list[int]:
        """Elements actually visited per dimension: ceil(box / elementStride)."""
        return [-(-b // e) for b, e in zip(self.box, self.elem_strides)]

    @property
    def inner_box_bytes(self) -> int:
        return self.box_counts[0] * self.elem_bits // 8

    def __str__(self) -> str:
        sw = f"{self.swizzle_bytes}B" if self.swizzle else "none"
        extra = []
        if any(e != 1 for e in self.elem_strides):
            extra.append(f"elemstrides={self.elem_strides}")
        if self.interleave:
            extra.append(f"interleave={INTERLEAVE_NAMES[self.interleave]}")
        if self.tf32:
            extra.append("tf32")
        if self.unknown_bits:
            extra.append(f"unknown_bits={self.unknown_bits:#x}")
        return (f"TensorMap({self.dtype} rank {self.rank} @ {self.address:#x}: dims={self.dims} strides={self.strides}B "
                f"box={self.box} swizzle={sw} oob={'nan' if self.oob_nan else 'zero'} "
                f"L2={L2_PROMOTION_BYTES[self.l2_promotion]}B flags={self.flags:#x}{' ' + ' '.join(extra) if extra else ''})")


def decode_tensor_map(raw: bytes) -> TensorMap:
    raw = bytes(raw)
    if len(raw) < 64:
        raise Hazard(f"a tensor map is 128 bytes; got {len(raw)}")

    def u32(off):
        return int.from_bytes(raw[off:off + 4], "little")

    ctrl = u32(8)
    rank = ((ctrl >> 4) & 7) + 1
    if rank > 5:
        raise Hazard(f"tensor map rank field {rank} > 5 (control word {ctrl:#010x})")
    code = (ctrl >> 7) & 0xF
    if code not in HW_DTYPES:
        raise Unsupported(f"tensor map element type code {code} (control word {ctrl:#010x})")
    name, bits = HW_DTYPES[code]
    hi = u32(28)
    strides = [((u32(12 + 4 * i) | (((hi >> (4 * i)) & 0xF) << 32)) << 4) for i in range(rank - 1)]
    dims = [u32(32 + 4 * i) + 1 for i in range(rank)]
    es_word = u32(52) & 0x7FFF
    elem_strides = [((es_word >> (3 * i)) & 7) + 1 for i in range(rank)]
    box = [raw[55 + i] + 1 for i in range(rank)]
    tm = TensorMap(
        address=int.from_bytes(raw[0:8], "little"), rank=rank, dtype_code=code, dtype=name, elem_bits=bits,
        dims=dims, strides=strides, box=box, elem_strides=elem_strides, interleave=(ctrl >> 11) & 3,
        swizzle=(ctrl >> 13) & 3, oob_nan=bool((ctrl >> 15) & 1), tf32=bool((ctrl >> 16) & 1),
        l2_promotion=(ctrl >> 17) & 3, flags=ctrl & 0xF, unknown_bits=ctrl & ~(KNOWN_CONTROL_BITS | 0xF) & 0xFFFFFFFF,
        raw=raw[:128],
    )
    return tm


def box_bytes(tmap: TensorMap) -> int:
    """Bytes one tile-mode load writes to shared memory, out-of-bound fill included (what complete_tx counts)."""
    n = 1
    for c in tmap.box_counts:
        n *= c
    return n * tmap.elem_bits // 8


def check_load(tmap: TensorMap, coords: list[int], smem_addr: int) -> None:
    """The rules a tile-mode load must obey (PTX ISA cp.async.bulk.tensor; cuTensorMapEncodeTiled's
    requirements), raising Hazard where the kernel would break them."""
    if len(coords) != tmap.rank:
        raise Hazard(f"{len(coords)} coordinates for a rank-{tmap.rank} tensor map")
    check_smem_alignment(smem_addr, "tensor copy")
    if tmap.address % 16:
        raise Hazard(f"tensor map global address {tmap.address:#x} is not 16-byte aligned")
    if any(s % 16 for s in tmap.strides):
        raise Hazard(f"tensor map strides {tmap.strides} are not multiples of 16 bytes")
    if tmap.interleave:
        raise Unsupported("interleaved tensor maps")
    if tmap.tf32:
        raise Unsupported("TF32-rounding tensor maps")
    if tmap.elem_bits == 4:
        if coords[0] % 2 or tmap.box[0] % 2 or tmap.elem_strides[0] != 1 or tmap.dims[0] % 2:
            raise Hazard(f"4-bit tensor map with an odd inner coordinate/box/dim or an inner element stride: "
                         f"coords {coords}, {tmap}")
    if (tmap.inner_box_bytes % 16) != 0:
        raise Hazard(f"inner box of {tmap.inner_box_bytes} bytes is not a multiple of 16 ({tmap})")
    if tmap.swizzle and tmap.inner_box_bytes > tmap.swizzle_bytes:
        raise Hazard(f"inner box of {tmap.inner_box_bytes} bytes exceeds the {tmap.swizzle_bytes}B swizzle span")


def swizzle_offsets(offsets: np.ndarray, swizzle: int) -> np.ndarray:
    """Shared addresses -> swizzled addresses: chunk bits [4:6] ^= address bits [7:9], masked per mode."""
    if swizzle == 0:
        return offsets
    mask = {1: 1, 2: 3, 3: 7}[swizzle]
    return offsets ^ (((offsets >> 7) & mask) << 4)


def _box_rows(tmap: TensorMap) -> tuple[int, int]:
    """(rows, pitch): box rows (one per outer-coordinate tuple) and the shared-memory bytes between rows (the
    inner box bytes, or the swizzle span with swizzle)."""
    rows = 1
    for c in tmap.box_counts[1:]:
        rows *= c
    return rows, (tmap.swizzle_bytes if tmap.swizzle else tmap.inner_box_bytes)


def _row_coords(tmap: TensorMap, coords: list[int], r: int) -> list[int]:
    """The outer coordinates (dimension 1 fastest) of box row r, with the traversal strides."""
    idx, rem = [], r
    for c in tmap.box_counts[1:]:
        idx.append(rem % c)
        rem //= c
    return [coords[d + 1] + idx[d] * tmap.elem_strides[d + 1] for d in range(len(idx))]


def _swizzled_index(smem_addr: int, total: int, swizzle: int) -> np.ndarray:
    """Index k of the unswizzled image -> index of its byte in the swizzled image (same address range)."""
    addrs = smem_addr + np.arange(total, dtype=np.int64)
    dest = swizzle_offsets(addrs, swizzle) - smem_addr
    if dest.min() < 0 or dest.max() >= total:
        raise Unsupported(f"a swizzled box of {total} bytes at {smem_addr:#x} would scatter outside its own range")
    return dest


def tile_writes(tmap: TensorMap, coords: list[int], read_global, smem_addr: int) -> tuple[np.ndarray, np.ndarray]:
    """(data, written): the shared-memory image of one tile-mode load starting at smem_addr (index k = shared
    address smem_addr + k) and a bool mask of the bytes the load writes.

    Rows (one per outer-coordinate tuple, dimension 1 fastest) are placed at a pitch of the inner box bytes
    without swizzle, and of the swizzle span (32/64/128 bytes) with swizzle: a shorter inner box leaves the rest
    of its span untouched (measured on the H200: a 64-byte box row in 128B mode occupies a 128-byte row, 64
    bytes of it written, XOR-swizzled as a function of the address)."""
    coords = [int(c) for c in coords]
    check_load(tmap, coords, smem_addr)
    counts = tmap.box_counts
    esize = tmap.elem_bits / 8
    inner_bytes = tmap.inner_box_bytes
    rows, pitch = _box_rows(tmap)
    out = np.zeros(rows * pitch, np.uint8)
    written = np.zeros(rows * pitch, bool)
    if tmap.oob_nan:
        fill = np.tile(np.frombuffer(int(OOB_NAN_HALFWORD).to_bytes(2, "little"), np.uint8), inner_bytes // 2)
    else:
        fill = np.zeros(inner_bytes, np.uint8)

    c0 = coords[0] + np.arange(counts[0]) * tmap.elem_strides[0]
    in0 = (c0 >= 0) & (c0 < tmap.dims[0])
    for r in range(rows):
        cs = _row_coords(tmap, coords, r)
        written[r * pitch:r * pitch + inner_bytes] = True
        row = out[r * pitch:r * pitch + inner_bytes]
        if any(c < 0 or c >= tmap.dims[d + 1] for d, c in enumerate(cs)) or not in0.any():
            row[:] = fill
            continue
        base = tmap.address + sum(c * s for c, s in zip(cs, tmap.strides))
        if tmap.elem_strides[0] == 1 and in0.all():
            row[:] = read_global(base + int(coords[0] * esize), inner_bytes)
            continue
        row[:] = fill
        if tmap.elem_bits == 4:  # element stride 1 (checked), even coordinates: whole bytes
            lo = max(coords[0], 0)
            hi = min(coords[0] + counts[0], tmap.dims[0])
            if hi > lo:
                row[(lo - coords[0]) // 2:(hi - coords[0]) // 2] = read_global(base + lo // 2, (hi - lo) // 2)
            continue
        eb = int(esize)
        for j in np.nonzero(in0)[0]:
            row[j * eb:(j + 1) * eb] = read_global(base + int(c0[j]) * eb, eb)
    if tmap.swizzle == 0:
        return out, written
    dest = _swizzled_index(smem_addr, out.size, tmap.swizzle)
    res = np.empty_like(out)
    res[dest] = out
    wres = np.empty_like(written)
    wres[dest] = written
    return res, wres


def tile_bytes(tmap: TensorMap, coords: list[int], read_global, smem_addr: int) -> np.ndarray:
    """The bytes a tile-mode load of the box at `coords` writes to shared memory starting at smem_addr, as one
    uint8 array of box_bytes(tmap) bytes (index k = shared address smem_addr + k), swizzle applied as a
    function of the address; out-of-bound elements filled per the OOB fill mode. read_global(addr, nbytes) ->
    np.uint8 array. A swizzled box whose rows are shorter than the swizzle span leaves gaps: use tile_writes."""
    data, written = tile_writes(tmap, coords, read_global, smem_addr)
    if not written.all():
        raise Unsupported(f"{tmap}: its {tmap.inner_box_bytes}-byte box rows are shorter than the "
                          f"{tmap.swizzle_bytes}B swizzle span, so the load leaves gaps (use tma.tile_writes)")
    return data


def encode_tensor_map(address: int, dtype_code: int, dims: list[int], strides: list[int], box: list[int],
                      elem_strides: list[int] | None = None, swizzle: int = 0, interleave: int = 0,
                      oob_nan: bool = False, l2_promotion: int = 0, tf32: bool = False, flags: int = 0) -> bytes:
    """The first 64 bytes of a tensor map in the layout above (bytes 64..127 zero): the inverse of
    decode_tensor_map, for tests and synthetic loads. Matches the driver's bytes 0..63 (tests/calibration/test_tma_gpu.py)."""
    rank = len(dims)
    elem_strides = elem_strides or [1] * rank
    raw = bytearray(128)
    raw[0:8] = int(address).to_bytes(8, "little")
    ctrl = (flags & 0xF) | ((rank - 1) << 4) | (dtype_code << 7) | (interleave << 11) | (swizzle << 13) \
        | (int(oob_nan) << 15) | (int(tf32) << 16) | (l2_promotion << 17)
    raw[8:12] = ctrl.to_bytes(4, "little")
    hi = 0
    for i, s in enumerate(strides):
        raw[12 + 4 * i:16 + 4 * i] = ((s >> 4) & 0xFFFFFFFF).to_bytes(4, "little")
        hi |= ((s >> 36) & 0xF) << (4 * i)
    raw[28:32] = hi.to_bytes(4, "little")
    for i, d in enumerate(dims):
        raw[32 + 4 * i:36 + 4 * i] = (d - 1).to_bytes(4, "little")
    es = 0
    for i, e in enumerate(elem_strides):
        es |= (e - 1) << (3 * i)
    raw[52:54] = es.to_bytes(2, "little")
    for i, b in enumerate(box):
        raw[55 + i] = b - 1
    return bytes(raw)


def tile_store(tmap: TensorMap, coords: list[int], smem_image: np.ndarray, smem_addr: int, write_global) -> int:
    """A tile-mode bulk tensor store (cp.async.bulk.tensor.Nd.global.shared::cta.tile, PTX ISA 9.7.9.25.5.1
    "cp.async.bulk.tensor": copies the box from shared memory to the tensor in global memory). Returns the
    number of global bytes written.

    The shared-memory side is the load's, in reverse (PTX ISA 5.5 "Tensors": the same bounding box, traversal
    and 5.5.6 swizzle modes apply to both directions): `smem_image` holds the shared bytes at smem_addr ..
    smem_addr + rows * pitch (pitch: the inner box bytes, or the swizzle span), and the box element at row r,
    inner byte j sits at the swizzled address of smem_addr + r * pitch + j. PTX ISA 5.5.x "Out of Bound
    Access": box elements whose coordinates fall outside the tensor are not written to global memory.
    write_global(addr, uint8 array)."""
    coords = [int(c) for c in coords]
    check_load(tmap, coords, smem_addr)  # the same alignment / box rules
    if any(e != 1 for e in tmap.elem_strides):
        raise Unsupported(f"a tensor store through a map with traversal strides {tmap.elem_strides}")
    counts = tmap.box_counts
    esize = tmap.elem_bits / 8
    rows, pitch = _box_rows(tmap)
    total = rows * pitch
    smem_image = np.asarray(smem_image, np.uint8)
    if smem_image.size < total:
        raise Hazard(f"tensor store: {smem_image.size} shared bytes given for a box of {total}")
    if tmap.swizzle:
        image = smem_image[_swizzled_index(smem_addr, total, tmap.swizzle)]
    else:
        image = smem_image[:total]
    lo = max(coords[0], 0)
    hi = min(coords[0] + counts[0], tmap.dims[0])
    written = 0
    if hi <= lo:
        return 0
    for r in range(rows):
        cs = _row_coords(tmap, coords, r)  # element strides are 1 here (checked above)
        if any(c < 0 or c >= tmap.dims[d + 1] for d, c in enumerate(cs)):
            continue
        base = tmap.address + sum(c * s for c, s in zip(cs, tmap.strides))
        b0, b1 = int((lo - coords[0]) * esize), int((hi - coords[0]) * esize)
        write_global(base + int(lo * esize), image[r * pitch + b0:r * pitch + b1])
        written += b1 - b0
    return written


# ============================================================================ the driver's encoder
# cuTensorMapEncodeTiled (CUDA driver API, "Tensor Map Object Management") as host code calls it: cuda.h's enums in,
# a CUresult and the 128 bytes out. The enum -> hardware-code map and the checks below reproduce the real driver's
# answers on every parameter set of tests/data/tma_encode.json.gz (driver 580.159, H200) except the sm_100-only
# types, which the H200's driver refuses and a B200's accepts (tests/calibration/test_tma_gpu.py).
DRIVER_DTYPES = {  # cuda.h CUtensorMapDataType -> (hardware code, round to TF32)
    0: (0, False), 1: (1, False), 2: (2, False), 3: (3, False), 4: (4, False), 5: (5, False), 6: (6, False),
    7: (7, False), 8: (9, False), 9: (10, False), 10: (8, False), 11: (7, True), 12: (8, True),
    13: (11, False),  # CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B: sm_100 only, the hardware code the CuTe DSL writes
}
DRIVER_DTYPE_NAMES = {0: "UINT8", 1: "UINT16", 2: "UINT32", 3: "INT32", 4: "UINT64", 5: "INT64", 6: "FLOAT16",
                      7: "FLOAT32", 8: "FLOAT64", 9: "BFLOAT16", 10: "FLOAT32_FTZ", 11: "TFLOAT32", 12: "TFLOAT32_FTZ",
                      13: "16U4_ALIGN8B", 14: "16U4_ALIGN16B", 15: "16U6_ALIGN16B"}
DRIVER_FLOAT_DTYPES = {6, 7, 8, 9, 10, 11, 12}  # the types OOB fill NaN_REQUEST_ZERO_FMA is valid for
# The largest box the driver encodes, in bytes (elements visited, after element strides): the fixture's largest accepted
# box holds 53,760 bytes and its smallest refused one 261,120 (every other check passing); 2^17 lies between, chosen,
# not measured.
DRIVER_MAX_BOX_BYTES = 1 << 17


# What the encoder returns: CUDA_ERROR_INVALID_VALUE where the driver refuses an argument (cuTensorMapEncodeTiled's
# documented requirements: the file's own failure on a B200), CUDA_ERROR_NOT_SUPPORTED where a B200's driver would
# encode it but this emulator cannot decode what it encodes (the emulator's limit, not the file's). CUresult values:
# cuda.h.
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_SUPPORTED = 801


def driver_encode_tiled(dtype: int, rank: int, address: int, dims, strides, box, elem_strides, interleave: int,
                        swizzle: int, l2_promotion: int, oob_fill: int, map_address: int = 0) -> tuple[int, bytes, str]:
    """(CUresult, the 128 bytes, why refused) of cuTensorMapEncodeTiled with these arguments: strides has rank - 1
    entries (bytes, of dimensions 1..rank-1); map_address, where the 128 bytes go (the driver documents "tensorMap
    address must be aligned to 64 bytes"). The CUDA driver API's requirements ("Tensor Map Object Management",
    cuTensorMapEncodeTiled) break with CUDA_ERROR_INVALID_VALUE; the types and swizzle atoms a B200 takes that this
    emulator does not decode (16U4_ALIGN16B, 16U6_ALIGN16B, the sm_100 swizzle atoms 4..6) with
    CUDA_ERROR_NOT_SUPPORTED, why naming them."""
    def refuse(why):
        return CUDA_ERROR_INVALID_VALUE, b"", why

    def limit(why):
        return CUDA_ERROR_NOT_SUPPORTED, b"", why

    if map_address % 64:
        return refuse(f"tensorMap address {map_address:#x} is not 64-byte aligned")
    if dtype not in DRIVER_DTYPE_NAMES:
        return refuse(f"tensorDataType {dtype} is not a CUtensorMapDataType")
    if dtype not in DRIVER_DTYPES:
        return limit(f"tensorDataType {DRIVER_DTYPE_NAMES[dtype]}: not modeled by the emulator (emu/tma.py)")
    if not 1 <= rank <= 5 or (interleave and rank < 3):
        return refuse(f"tensorRank {rank}: 1..5, at least 3 with interleave")
    if swizzle > 3:
        return limit(f"swizzle {swizzle} (an sm_100 swizzle atom): not modeled by the emulator (emu/tma.py)")
    if interleave > 2 or l2_promotion > 3 or oob_fill > 1:
        return refuse("interleave, L2 promotion or OOB fill out of range")
    code, tf32 = DRIVER_DTYPES[dtype]
    bits = HW_DTYPES[code][1]
    if address % (32 if interleave == 2 else 16):
        return refuse(f"globalAddress {address:#x} is not {32 if interleave == 2 else 16}-byte aligned")
    if any(not 1 <= d <= 2**32 for d in dims[:rank]):
        return refuse(f"globalDim {list(dims[:rank])}: each must be 1..2^32")
    if any(s % 16 or s >= 2**40 for s in strides[:rank - 1]):
        return refuse(f"globalStrides {list(strides[:rank - 1])}: each a multiple of 16 below 2^40")
    if any(not 1 <= b <= 256 for b in box[:rank]):
        return refuse(f"boxDim {list(box[:rank])}: each must be 1..256")
    if any(not 1 <= e <= 8 for e in elem_strides[:rank]):
        return refuse(f"elementStrides {list(elem_strides[:rank])}: each must be 1..8")
    box_bytes = math.prod(-(-b // e) for b, e in zip(box[:rank], elem_strides[:rank])) * bits // 8
    if box_bytes > DRIVER_MAX_BOX_BYTES:
        return refuse(f"the box holds {box_bytes} bytes, more than {DRIVER_MAX_BOX_BYTES}")
    inner_bytes = box[0] * bits // 8
    if not interleave and (box[0] * bits) % 128:
        return refuse(f"boxDim[0] {box[0]} x {bits} bits is not a multiple of 16 bytes")
    if not interleave and swizzle and inner_bytes > SWIZZLE_BYTES[swizzle]:
        return refuse(f"boxDim[0] spans {inner_bytes} bytes, more than the {SWIZZLE_BYTES[swizzle]}B swizzle")
    if oob_fill and dtype not in DRIVER_FLOAT_DTYPES:
        return refuse(f"OOB fill NaN_REQUEST_ZERO_FMA with the integer type {DRIVER_DTYPE_NAMES[dtype]}")
    raw = encode_tensor_map(address, code, list(dims[:rank]), list(strides[:rank - 1]), list(box[:rank]),
                            list(elem_strides[:rank]), swizzle, interleave, bool(oob_fill), l2_promotion, tf32)
    return 0, raw, ""
