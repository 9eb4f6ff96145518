"""emu/tma.py against ground truth from a real GPU: the driver's tensor-map encodings and an H200's tile loads
(fixtures in tests/data, made by calibration/tma_gpu.py on an H200). The rules by hand: tests/emu/test_tma.py."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from emu import tma
from emu.state import Unsupported
from tests.emu.test_tma import pattern

DATA = Path(__file__).resolve().parents[1] / "data"
# driver enum (cuda.h CUtensorMapDataType) -> (hardware code, tf32 flag), as measured
DRIVER_TO_HW = {0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (3, 0), 4: (4, 0), 5: (5, 0), 6: (6, 0), 7: (7, 0), 8: (9, 0),
                9: (10, 0), 10: (8, 0), 11: (7, 1), 12: (8, 1)}


def encode_cases():
    with gzip.open(DATA / "tma_encode.json.gz", "rt") as f:
        return [c for c in json.load(f)["cases"] if c["rc"] == 0]


def test_decode_every_driver_encoding():
    cases = encode_cases()
    assert len(cases) > 200
    for c in cases:
        p, raw = c["params"], bytes.fromhex(c["bytes"])
        t = tma.decode_tensor_map(raw)
        code, tf32 = DRIVER_TO_HW[p["dtype"]]
        got = (t.address, t.rank, t.dims, t.strides, t.box, t.elem_strides, t.interleave, t.swizzle, t.l2_promotion,
               t.oob_nan, t.dtype_code, t.tf32, t.flags, t.unknown_bits)
        want = (p["addr"], p["rank"], p["dims"], p["strides"], p["box"], p["estrides"], p["interleave"], p["swizzle"],
                p["l2"], bool(p["oob"]), code, bool(tf32), 0, 0)
        assert got == want, (p, str(t))


def test_encode_matches_driver_first_64_bytes():
    for c in encode_cases():
        p, raw = c["params"], bytes.fromhex(c["bytes"])
        code, tf32 = DRIVER_TO_HW[p["dtype"]]
        mine = tma.encode_tensor_map(p["addr"], code, p["dims"], p["strides"], p["box"], p["estrides"], p["swizzle"],
                                     p["interleave"], bool(p["oob"]), p["l2"], bool(tf32))
        assert mine[:64] == raw[:64], p


def gpu_loads():
    z = np.load(DATA / "tma_loads_h200.npz")
    return [(k[:-5], json.loads(bytes(z[k]).decode()), z[k[:-5] + ".smem"]) for k in sorted(z.files) if k.endswith(".meta")]


@pytest.mark.parametrize("name,meta,smem", gpu_loads(), ids=[g[0] for g in gpu_loads()])
def test_tile_load_matches_h200(name, meta, smem):
    """Shared memory after one real TMA load (filled with 0xA5 before) equals the emulator's image."""
    assert meta["status"] == 1, "the GPU's mbarrier did not complete with the probe's tx count"
    t = tma.decode_tensor_map(bytes.fromhex(meta["tmap"]))
    assert tma.box_bytes(t) == meta["tx"]
    g = pattern(1 << 22)
    base = meta["global_base"]

    def read(addr, n):
        assert base <= addr and addr + n <= base + g.size
        return g[addr - base:addr - base + n].copy()

    dst = meta["dst_off"]
    smem_addr = 4096 + dst  # the probe's window starts 1024-aligned; any 1024-aligned base gives the same image
    data, written = tma.tile_writes(t, meta["coords"], read, smem_addr)
    window = smem[dst:dst + data.size]
    assert (window[written] == data[written]).all()
    assert (window[~written] == 0xA5).all()
    assert (smem[:dst] == 0xA5).all() and (smem[dst + data.size:] == 0xA5).all()
    if written.all():
        assert (tma.tile_bytes(t, meta["coords"], read, smem_addr) == window).all()
    else:
        with pytest.raises(Unsupported):
            tma.tile_bytes(t, meta["coords"], read, smem_addr)


def test_driver_encoder_answers_as_the_driver():
    """emu.tma.driver_encode_tiled (what the CUDA stand-ins answer host code's cuTensorMapEncodeTiled with) gives the
    real driver's return code on every fixture case, refusals included, and its first 64 bytes where it encodes; the
    sm_100-only types (cuda.h 13-15) and swizzle atoms (4-6), which the H200's driver refuses and a B200's takes, are
    left out: the ones the emulator does not decode are its own limit, CUDA_ERROR_NOT_SUPPORTED, not a refusal."""
    with gzip.open(DATA / "tma_encode.json.gz", "rt") as f:
        every = json.load(f)["cases"]
    sm100 = lambda p: p["dtype"] >= 13 or p["swizzle"] > 3  # noqa: E731
    cases = [c for c in every if not sm100(c["params"])]
    assert sum(c["rc"] != 0 for c in cases) > 50
    for c in every:
        p = c["params"]
        if p["swizzle"] > 3 or p["dtype"] in (14, 15):
            rc, _, why = tma.driver_encode_tiled(p["dtype"], p["rank"], p["addr"], p["dims"], p["strides"], p["box"],
                                                 p["estrides"], p["interleave"], p["swizzle"], p["l2"], p["oob"])
            assert rc == tma.CUDA_ERROR_NOT_SUPPORTED and "not modeled by the emulator" in why, (p, why)
    for c in cases:
        p = c["params"]
        rc, raw, why = tma.driver_encode_tiled(p["dtype"], p["rank"], p["addr"], p["dims"], p["strides"], p["box"],
                                               p["estrides"], p["interleave"], p["swizzle"], p["l2"], p["oob"])
        assert rc == c["rc"], (p, why)
        assert rc or raw[:64] == bytes.fromhex(c["bytes"])[:64], p


def test_driver_encoder_writes_the_fp4_type_the_dsl_writes():
    """16U4_ALIGN8B (sm_100 only, so not in the H200 fixture) is hardware code 11, dims and box in 4-bit elements: the
    bytes the CuTe DSL's own encoder gives the FP4 operands (emu/tma.py's module docstring)."""
    rc, raw, _ = tma.driver_encode_tiled(13, 3, 0x7F00_0000_0000, [256, 128, 2], [256, 128], [256, 128, 1], [1, 1, 1],
                                         0, 3, 0, 0)
    t = tma.decode_tensor_map(raw)
    assert rc == 0 and (t.dtype, t.elem_bits, t.dims, t.box, t.swizzle_bytes) == ("16U4_ALIGN8B", 4, [256, 128, 2],
                                                                                  [256, 128, 1], 128)
