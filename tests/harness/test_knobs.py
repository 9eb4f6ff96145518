"""The tile-protocol knobs of issue 13 (split_k, tail_k_tiles, product_per_cta) and issue 22 (split_k's
reduce_scatter): what a config may combine, what
plan() reserves, and (slow) the knobs' configs in the emulator with CTAs that walk several tiles, so the ring, the
accumulator stages and the exchange slots wrap (emulated, no GPU)."""
from __future__ import annotations

import pytest

from emu.machine import Schedule
from harness.verdict import DEFAULT_SCHEDULES, emulate, load_submission
from tests.conftest import ROOT

S = load_submission(f"{ROOT}/submission.py")
KNOBS = [c for c in S.TUNE_SPACE if c.split_k > 1 or c.tail_k_tiles or c.product_per_cta]


def test_tune_space_holds_each_knob():
    assert {c.split_k for c in KNOBS} >= {2, 3}
    assert {c.split_k for c in KNOBS if c.reduce_scatter} >= {2, 3}  # 3 deals 8 subtiles unevenly: a partial round
    assert any(c.tail_k_tiles for c in KNOBS) and any(c.product_per_cta for c in KNOBS)
    names = [c.name for c in S.TUNE_SPACE]
    assert len(names) == len(set(names))
    for c in S.TUNE_SPACE:
        assert (f"_sk{c.split_k}" in c.name) == (c.split_k > 1)
        assert (f"_t{c.tail_k_tiles}" in c.name) == bool(c.tail_k_tiles)
        assert c.name.endswith("_ppc") == c.product_per_cta
        assert ("_rs" in c.name) == c.reduce_scatter
        assert (f"_s{c.tail_silu_columns}" in c.name) == (c.tail_silu_columns != S.TAIL_SILU_COLUMNS)
    assert any(c.tail_silu_columns != S.TAIL_SILU_COLUMNS for c in KNOBS)


@pytest.mark.parametrize("cfg, why", [
    (S.KernelConfig(split_k=2, cluster_mn=(1, 2)), "cluster N must be 1"),
    (S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(4, 1), split_k=4), "at most 8 CTAs"),
    (S.KernelConfig(split_k=5), "split_k must be"),
    (S.KernelConfig(split_k=2, tail_k_tiles=1), "exclusive"),
    (S.KernelConfig(product_per_cta=True, a_collector=True), "A collector"),
    (S.KernelConfig(mma_tile_mn=(128, 256)), "256 only with product_per_cta"),
    (S.KernelConfig(tail_k_tiles=9), "tail_k_tiles holds"),
    (S.KernelConfig(reduce_scatter=True), "needs split_k > 1"),
    (S.KernelConfig(tail_silu_columns=128), "needs tail_k_tiles"),
    (S.KernelConfig(tail_k_tiles=2, tail_silu_columns=48), "multiple of epi_tile_n"),
    (S.KernelConfig(tail_k_tiles=2, tail_silu_columns=256), "up to the CTA tile N 128"),
    (S.KernelConfig(pdl_early_k_tiles=2, pdl=False), "it needs pdl"),
    (S.KernelConfig(pdl_early_k_tiles=99), "at most the ring's"),
])
def test_knob_combinations_refused_with_a_reason(cfg, why):
    ok, reason = S.DualGemmKernel.can_implement(cfg, 1024, 1024, 1024, 1)
    assert not ok and why in reason, reason


def test_split_k_needs_a_k_tile_per_slice():
    cfg = S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1), epi_tile_n=16, split_k=3)
    assert S.DualGemmKernel.can_implement(cfg, 256, 3072, 768, 1)[0]
    ok, reason = S.DualGemmKernel.can_implement(cfg, 256, 3072, 512, 1)
    assert not ok and "too few to split over 3" in reason


def test_launch_cluster_and_exchange_budget():
    split = S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1), epi_tile_n=16, split_k=3)
    pair = S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1), product_per_cta=True)
    assert split.launch_cluster_mn == (2, 3) and pair.launch_cluster_mn == (2, 2)
    # slices 1 and 2 each send acc1 and acc2: 4 fragments of 128 x 16 fp32 per slot, 2 slots
    assert S.DualGemmKernel.exchange_plan(split) == {"bytes": 2 * 4 * 128 * 16 * 4, "fragments": 4,
                                                     "fragment_bytes": 128 * 16 * 4, "empty_barriers": 2}
    # the reduce-scatter: the same slots (every receiver gets S - 1 senders' two fragments), an empty barrier per slot
    # and receiver in every slice
    rs = S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1), epi_tile_n=16, split_k=3, reduce_scatter=True)
    assert S.DualGemmKernel.exchange_plan(rs) == {**S.DualGemmKernel.exchange_plan(split), "empty_barriers": 4}
    assert S.DualGemmKernel(rs).plan()["ab_stages"] == S.DualGemmKernel(split).plan()["ab_stages"]
    plan = S.DualGemmKernel(split).plan()
    assert plan["dynamic_smem_bytes"] == S.BARRIER_BYTES + plan["ab_stages"] * plan["stage_bytes"] + 65536
    # one product per CTA: one B and one SFB per stage, one accumulator per stage
    pp = S.DualGemmKernel(pair).plan()
    assert pp["stage_bytes"] == 128 * 128 + 64 * 128 + 128 * 16 + 128 * 16
    assert pp["acc_tmem_cols"] == 128 * pp["acc_stages"] and pp["acc_stages"] == 2
    off = S.DualGemmKernel(S.KernelConfig(mma_tile_mn=(256, 128), cluster_mn=(2, 1))).plan()
    assert off["exchange_bytes"] == 0 and S.KernelConfig().launch_cluster_mn == (1, 1)


def expected_mmas(cfg, m, n, k):
    """One MMA per k-block and product per MMA tile, whoever issues it (a K split divides the k-tiles)."""
    return (m // cfg.mma_tile_mn[0]) * (n // cfg.mma_tile_mn[1]) * (k // 256) * 4 * 2


# Two schedules per walk, the uniform one and one skew, the skews taking turns over the cases (as
# test_verdict.py's several-tiles walks): every config here also runs the six-schedule verdict in the gate
# (test_verdict.py) and in the no-GPU correctness path's two clusters of tiles; six per walk cost CI 6 minutes.
SKEWS = [s.policy for s in DEFAULT_SCHEDULES[1:]]
WALKS = [
    ("m256n64_c2x1_e32_ac_t2", (256, 512, 1024, 1), 2, 21),
    ("m256n128_c2x1_e32_t2", (256, 384, 1536, 1), 2, 22),
    ("m256n128_c2x1_e16_sk2", (256, 512, 1024, 1), 4, 23),
    # the reduce-scatter: 8 subtiles over 3 slices (an uneven last round), and v1.4's table config (2 slices, the same
    # exchange as _sk2_rs, whose own walk would repeat it); slice 0's reduction from 3 slices walks no more than _sk2's
    # does (its gate and the uneven corner shape below run it)
    ("m256n128_c2x1_e16_sk3_rs", (256, 256, 1280, 1), 6, 30),
    ("m256n128_c2x1_e16_sk2_rs_px2", (256, 512, 1024, 1), 4, 31),
    # v1.6's table config for 256x3072: the three-slice split with the A collector, four tiles of two k-tiles a slice
    ("m256n128_c2x1_e16_ac_sk3_rs", (256, 512, 1536, 1), 6, 32),
    ("m128n128_c1x1_e32_ppc", (256, 512, 512, 1), 2, 25),
    ("m256n128_c2x1_e32_ppc", (256, 512, 512, 1), 4, 26),
    ("m256n256_c2x1_e32_ppc", (256, 512, 512, 1), 4, 27),
    # the tail's silu ahead of acc2 through ex2_poly, three of the four subtiles ahead
    ("m256n128_c2x1_e32_t3_s96_px2", (256, 384, 1536, 1), 2, 29),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, shape, sm_count, seed, skew",
                         [(*walk, SKEWS[i % len(SKEWS)]) for i, walk in enumerate(WALKS)])
def test_knob_configs_walk_several_tiles(name, shape, sm_count, seed, skew):
    cfg = next(c for c in S.TUNE_SPACE if c.name == name)
    res = emulate(*shape, config_name=name, mode="strict", sm_count=sm_count,
                  schedules=[Schedule("uniform", seed), Schedule(skew, seed + 1)])
    assert res.status == "match", res.summary() + "\n" + res.message
    assert [r.status for r in res.runs] == ["match", "match"]
    grid = res.launch["grid"]
    assert grid[0] * grid[1] * grid[2] == sm_count  # one cluster walks every tile
    assert res.stats["mma"] == expected_mmas(cfg, *shape[:3])
    if cfg.a_collector:  # the tail's k-tiles read A from shared memory for each product
        tiles = (shape[0] // cfg.mma_tile_mn[0]) * (shape[1] // cfg.mma_tile_mn[1])
        assert res.stats["mma_a_from_collector"] == tiles * (shape[2] // 256 - cfg.tail_k_tiles) * 4
    if cfg.split_k > 1 or cfg.product_per_cta:
        assert res.stats["st_async_bytes"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name, shape", [("m256n64_c2x1_e32_ac_t2", (256, 128, 256, 1)),
                                         ("m256n128_c2x1_e16_sk3", (256, 128, 1024, 1))])
def test_knob_corner_shapes(name, shape):
    """The tail longer than K (all of K in the tail: A@B2 starts from a cleared accumulator), a K split that does
    not divide the k-tiles (4 over 3 slices: 1, 1, 2); the uniform schedule and one skew, as the walks above."""
    res = emulate(*shape, config_name=name, mode="leaderboard",
                  schedules=[Schedule("uniform", 28), Schedule("consumer_first", 29)])
    assert res.status == "match", res.summary() + "\n" + res.message
    assert [r.status for r in res.runs] == ["match", "match"]


@pytest.mark.slow
@pytest.mark.parametrize("writes", [None, ("a", "c")], ids=["stream-unknown", "previous-grid-writes-A"])
def test_early_loads_under_pdl_race_a_stream_that_may_write_the_inputs(writes):
    """pdl_early_k_tiles reads A, B and the scales before griddepcontrol.wait: correct in the leaderboard's loop (the
    gate runs it there: harness.problems.prerequisite_writes_for), a race after a kernel that may write an input."""
    res = emulate(256, 128, 1024, 1, config_name="m256n64_c2x1_e32_ac_pe4", mode="strict", schedules=1,
                  prerequisite_writes=writes)
    assert res.status == "hazard" and "before griddepcontrol.wait" in res.message, res.summary() + "\n" + res.message
