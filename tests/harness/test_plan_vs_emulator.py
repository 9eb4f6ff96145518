"""The kernel's per-CTA traffic and MMA count, three ways: the problem's arithmetic (written out here), the kernel's
own plan() (its shared-memory stage), and what the emulator counts running the compiled kernel (emulated). The timed
emulator charges time to exactly these bytes and MMAs, so they must be the kernel's real ones."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.verdict import emulate, load_submission  # noqa: E402

SUB = load_submission(REPO / "submission.py")
SHAPE = (256, 512, 1024, 1)
K_TILE, MMA_K, PRODUCTS = 256, 64, 2  # K per pipeline stage, K per block-scaled MMA, B1 and B2


# the quick set (tests/conftest.py) checks the benchmark's table config; the others are marked slow
@pytest.mark.parametrize("name", [n if n == "m256n64_c2x1_e32_ac" else pytest.param(n, marks=pytest.mark.slow) for n in
                                  ["m128n64_c1x1_e32", "m128n128_c1x1_e32", "m128n64_c1x2_e32", "m256n64_c2x1_e32",
                                   "m256n128_c2x1_e32_ac", "m256n64_c2x1_e32_ac"]])
def test_tma_bytes_and_mma_counts_match_the_plan(name):
    cfg = next(c for c in SUB.TUNE_SPACE if c.name == name)
    plan = SUB.DualGemmKernel(cfg).plan()
    m, n, k, l = SHAPE
    mma_m, mma_n = cfg.mma_tile_mn
    ctas_per_mma = 2 if cfg.use_2cta else 1
    # per CTA and k-tile: its A rows, its share of each B (a 2-CTA pair splits B's rows), and the e4m3 scales (one per
    # 16 K elements; SFB moves in whole 128-row atoms)
    cta_m = mma_m // ctas_per_mma
    stage_bytes = (cta_m * K_TILE // 2 + PRODUCTS * (mma_n // ctas_per_mma) * K_TILE // 2
                   + (cta_m + PRODUCTS * -(-mma_n // 128) * 128) * K_TILE // 16)
    assert plan["stage_bytes"] == stage_bytes
    # counts, not a verdict: one schedule (the six of the default verdict: the TUNE_SPACE gate,
    # tests/harness/test_verdict.py)
    res = emulate(*SHAPE, config_name=name, mode="strict", sched_seed=4, schedules=1)
    assert res.status == "match", res.message
    mma_tiles = (m // mma_m) * (n // mma_n) * l
    k_tiles = k // K_TILE
    assert res.stats["tma_bytes"] == stage_bytes * k_tiles * mma_tiles * ctas_per_mma
    # one MMA instruction per k-block and product, per MMA tile (a pair issues one for both CTAs)
    assert res.stats["mma"] == mma_tiles * k_tiles * (K_TILE // MMA_K) * PRODUCTS
    # the A collector: the B2 MMA takes A from the collector the B1 MMA filled, so half the MMAs read A from it
    assert res.stats.get("mma_a_from_collector", 0) == (res.stats["mma"] // PRODUCTS if cfg.a_collector else 0)
