"""Calibration of the emulator on a hardware-verified kernel: NVIDIA's CuTe DSL persistent block-scaled GEMM example
(calibration/nvidia_example.py). The example is not part of this repository: the tests that run it need
$NVIDIA_BLOCKSCALED_EXAMPLE (a path to dense_blockscaled_gemm_persistent.py) or a git mirror of NVIDIA/cutlass at
/work/.mirror/NVIDIA+cutlass/repo, and skip, saying so, without either (CI has neither).

The scale layout's test needs nothing and always runs. The bulk async-group rule and the TMA store the example
taught the emulator: tests/emu/test_tma.py."""
import shutil

import numpy as np
import pytest

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
