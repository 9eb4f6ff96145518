"""Calibration of the emulator on gau-nernst's B200-verified NVFP4 dual-GEMM kernels (emu/calibration/gau.py).

The kernels' source (gau-nernst/gpu-mode-kernels, nvidia/nvfp4_dual_gemm/submission_v1b.py / submission_v2.py) is
not in this repository: these tests run when $GAU_DUAL_GEMM_V1B / $GAU_DUAL_GEMM_V2 name the files or copies sit in
/tmp/gau/, and skip with the reason otherwise. The unit tests below them need no source.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from emu.state import Cluster, Cta, Hazard, TMEM_LANES  # noqa: E402
from emu.tcgen05 import tmem_alloc, tmem_load_16x256b, tmem_load_32x32b  # noqa: E402
from emu.calibration import gau  # noqa: E402

SHAPE = (256, 256, 512)


def _source_or_skip(version):
    path, why = gau.find_source(version)
    if path is None:
        pytest.skip(why)
    try:
        gau._nvcc()
        gau._include_dirs(gau._nvcc())
    except Exception as e:  # no compiler / headers here
        pytest.skip(f"cannot compile his kernel: {e}")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "leaderboard"])
@pytest.mark.parametrize("version", ["v1b", "v2"])
def test_gau_kernel_matches(version, mode):
    path = _source_or_skip(version)
    res = gau.run_one(version, path, *SHAPE, mode)
    print(res.line())
    assert res.status == "match", res.message
    if version == "v2":
        # his 2-SM epilogue reads the M=256 accumulator of CTA 1 at lanes 128.. (emu.tcgen05._pair_lane)
        assert res.stats.get("tmem_ld_pair_lanes", 0) > 0
        assert res.launch["cluster"] == (2, 1, 1)


def test_gau_device_edits_are_mechanical():
    path, why = gau.find_source("v1b")
    if path is None:
        pytest.skip(why)
    src = gau.extract_cuda_src(path)
    assert not gau.check_host(path.read_text(), "v1b")
    cu, edits = gau.device_source(src, "kernel<512, 128, 128, 256, 4>")
    assert "torch/" not in cu and "ATen/" not in cu and "TORCH_CHECK" not in cu and "at::Tensor" not in cu
    assert len(edits) == 4
    # everything kept is his text, verbatim
    body = cu.split("\n", 1)[1].rsplit("\n// emu: instantiate", 1)[0]
    assert body.replace("\n", "") in src.replace("#include <torch/library.h>\n", "").replace(
        "#include <ATen/core/Tensor.h>\n", "").replace("\n", "")


# ---------------------------------------------------------------------------------------------- no source needed
def _pair():
    cl = Cluster((0, 0, 0), (2, 1, 1))
    for r in range(2):
        cl.ctas.append(Cta((r, 0, 0), r, cl, np.zeros(1024, np.uint8)))
    return cl


def test_ld_16x256b_fragment():
    """Thread t, register 4i + 2h + c <- lane base + t//4 + 8h, column col + 8i + 2(t%4) + c (CUTLASS
    SM100_TMEM_LOAD_16dp256b1x/2x DstLayout)."""
    cta = _pair().ctas[0]
    col = tmem_alloc([cta], 32)
    lanes, cols = np.meshgrid(np.arange(TMEM_LANES), np.arange(512), indexing="ij")
    cta.tmem[:, :] = (lanes << 16 | cols).astype(np.uint32)
    v = tmem_load_16x256b(cta, (48 << 16) | col, 1, 2)  # warp 1, lanes 48..63, 2 repetitions
    assert v.shape == (32, 8)
    for t in range(32):
        for r in range(8):
            i, h, c = r // 4, (r // 2) % 2, r % 2
            assert v[t, r] >> 16 == 48 + t // 4 + 8 * h
            assert v[t, r] & 0xFFFF == col + 8 * i + 2 * (t % 4) + c
    with pytest.raises(Hazard):
        tmem_load_16x256b(cta, (56 << 16) | col, 1, 1)  # lanes 56..71 cross out of warp 1's quadrant


def test_lane_128_only_in_odd_cta_of_pair():
    cl = _pair()
    for cta in cl.ctas:
        tmem_alloc([cta], 32)
        cta.tmem[:, :32] = np.arange(TMEM_LANES, dtype=np.uint32)[:, None]
    odd, even = cl.ctas[1], cl.ctas[0]
    v = tmem_load_32x32b(odd, (128 + 64) << 16, 2, 1)  # odd CTA: lane 192 -> its own lane 64
    assert (v[:, 0] == np.arange(64, 96)).all()
    v = tmem_load_16x256b(odd, (128 + 16) << 16, 0, 1)
    assert v[0, 0] == 16
    assert odd.pair_lane_loads == 2
    with pytest.raises(Hazard):
        tmem_load_32x32b(even, (128 + 64) << 16, 2, 1)  # even CTA: no evidence -> Hazard
    with pytest.raises(Hazard):
        tmem_load_32x32b(odd, 256 << 16, 0, 1)  # beyond the pair
