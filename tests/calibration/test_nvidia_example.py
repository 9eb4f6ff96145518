"""Calibration of the emulator on a hardware-verified kernel: NVIDIA's CuTe DSL persistent block-scaled GEMM example
(calibration/nvidia_example.py). The example is not part of this repository: the tests that run it need
$NVIDIA_BLOCKSCALED_EXAMPLE (a path to dense_blockscaled_gemm_persistent.py) or a git mirror of NVIDIA/cutlass at
/work/.mirror/NVIDIA+cutlass/repo, and skip, saying so, without either (CI has neither).

The other tests (bulk async-group rule, TMA store) need nothing and always run."""
import shutil

import numpy as np
import pytest

from emu import ops_async, tma
from emu.isa import BLOCK
from emu.ptx import Imm
from emu.state import GlobalMemory
from calibration import nvidia_example as cal


@pytest.fixture(scope="module")
def example():
    path, why = cal.find_example()
    if path is None:
        pytest.skip(why)
    try:
        import cutlass  # noqa: F401
    except ImportError as e:
        pytest.skip(f"nvidia-cutlass-dsl is not installed ({e}): cannot compile NVIDIA's example")
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler to link the exported host code")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["1cta", "2cta"])
def test_nvidia_example_matches_in_emulator(example, name):
    res = cal.calibrate_one(example, cal.CONFIGS[name])
    assert res.status == "match", res.line() + "\n" + res.message
    assert res.stats["mma"] > 0


@pytest.mark.slow
def test_calibration_detects_a_wrong_scale_layout(example):
    """The harness is sensitive: the same run with the scale factors placed row-major (not in the atom layout the
    example's host code describes) must fail."""

    def plain(sf):
        l, mn, sf_k = sf.shape
        rm, rk = -(-mn // 128), -(-sf_k // 4)
        out = np.zeros((l, rm * 128, rk * 4), np.uint8)
        out[:, :mn, :sf_k] = sf
        return out.reshape(-1)

    res = cal.calibrate_one(example, cal.CONFIGS["1cta"], place_scales=plain)
    assert res.status == "mismatch", res.line()


# ------------------------------------------------------------------------------------- no mirror needed
def test_blocked_scale_layout_matches_the_atom_formula():
    rng = np.random.default_rng(0)
    sf = rng.integers(1, 127, (2, 200, 40), dtype=np.uint8)
    raw = cal.blocked_scale_bytes(sf)
    rm, rk = 2, 10
    view = raw.reshape(2, rm, rk, 32, 4, 4)
    for l, mn, kb in [(0, 0, 0), (1, 199, 39), (0, 37, 5), (1, 130, 17)]:
        assert view[l, mn // 128, kb // 4, mn % 32, (mn // 32) % 4, kb % 4] == sf[l, mn, kb]


class _FakeWarp:
    def read(self, op, ty, ex=None):
        return np.full(32, op.value, np.int64)


class _FakeIns:
    operands = (Imm(2, False),)


def _token(done):
    t = ops_async._BulkOp()
    t.done = done
    return t


def test_bulk_wait_group_needs_every_older_group_complete():
    """PTX ISA cp.async.bulk.wait_group N: wait until at most the N most recent bulk async-groups are pending and
    every earlier group is complete. A complete recent group does not let an older pending one slip into the N."""
    w, mask = _FakeWarp(), np.zeros(32, bool)
    mask[3] = True
    old = _token(False)
    w.bulk_groups = ({}, {3: [[old], [_token(True)], [_token(True)]]})
    assert ops_async.BulkWaitGroup.execute(None, w, _FakeIns, mask) is BLOCK
    old.done = True
    assert ops_async.BulkWaitGroup.execute(None, w, _FakeIns, mask) is None
    w.bulk_groups = ({}, {3: [[_token(True)], [_token(False)], [_token(False)]]})
    assert ops_async.BulkWaitGroup.execute(None, w, _FakeIns, mask) is None  # the 2 pending are the 2 most recent


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_tma_store_inverts_the_load(swizzle):
    """tile_store writes back exactly what tile_writes loaded (same box, same address swizzle); out-of-bound box
    elements are not written."""
    g = GlobalMemory()
    rows, cols = 100, 96  # fp16, row pitch 192 bytes
    src = np.random.default_rng(1).integers(0, 256, rows * cols * 2, dtype=np.uint8)
    a = g.alloc_array(src)
    inner = {0: 32, 1: 16, 2: 32, 3: 64}[swizzle]  # elements; inner box bytes <= the swizzle span
    raw = tma.encode_tensor_map(a, 6, [cols, rows], [cols * 2], [inner, 64], swizzle=swizzle)
    tm = tma.decode_tensor_map(raw)
    for coords in ([0, 0], [cols - inner, 64], [32, 60]):  # the last two run past row 99
        smem, written = tma.tile_writes(tm, coords, g.read, 1024)
        b = g.alloc(rows * cols * 2, fill=0xAB)
        tm_b = tma.decode_tensor_map(tma.encode_tensor_map(b, 6, [cols, rows], [cols * 2], [inner, 64], swizzle=swizzle))
        tma.tile_store(tm_b, coords, smem, 1024, g.write)
        got = g.read(b, rows * cols * 2).reshape(rows, cols * 2)
        want = np.full((rows, cols * 2), 0xAB, np.uint8)
        r0, c0 = coords[1], coords[0]
        r1 = min(r0 + 64, rows)
        want[r0:r1, 2 * c0:2 * (c0 + inner)] = src.reshape(rows, cols * 2)[r0:r1, 2 * c0:2 * (c0 + inner)]
        assert (got == want).all(), (swizzle, coords)
