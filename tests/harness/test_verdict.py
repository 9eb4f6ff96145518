"""The kernel of submission.py in the SM100 emulator (emulated, no GPU): every TUNE_SPACE config under the default
verdict (harness.verdict.DEFAULT_SCHEDULES, small shapes on a reduced SM count), CTAs that run several tiles, the
verdict's reports, schedules and CLI. The planted bugs it must report: tests/harness/test_mutants.py.

Runs of the kernel take seconds to minutes on 2 CPUs: those are marked slow; each feature keeps a cheap one."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]

from emu.machine import POLICIES, Schedule  # noqa: E402
from harness import dsl as dsl_release  # noqa: E402
from harness.mutants import MUTANTS  # noqa: E402
from harness.verdict import (DEFAULT_SCHEDULES, default_sm_count, emulate, emulate_in_order,  # noqa: E402
                             load_submission, schedules_for)

SUB = load_submission(REPO / "submission.py")
# The quick set (tests/conftest.py) runs the emulator on one config per protocol family where a test has several:
# 1-CTA, 2-CTA, 2-CTA with the A collector (the test shapes' default config) and a CONFIG_TABLE config (512x4096's);
# the other cases are marked slow.
QUICK = {"m128n64_c1x1_e32", "m256n64_c2x1_e32", "m256n64_c2x1_e32_ac", "m256n128_c2x1_e32"}


def quick_if(case, quick: bool):
    return pytest.param(*case) if quick else pytest.param(*case, marks=pytest.mark.slow)

def small_shape(cfg) -> tuple:
    """The smallest leaderboard-valid shape (M, N multiples of 128) that fills one cluster of cfg (a k-tile for each
    slice of a K split)."""
    cm, cn = cfg.cluster_mn
    m = 128 * cm
    n = max(128, cfg.cta_tile_mn[1] * cn)
    return (m, n, max(512, 256 * cfg.split_k), 1)


# Fields that change only arithmetic or a cache hint, not who waits for whom (raster order changes nothing within
# the one cluster of a small shape): a config differing from another TUNE_SPACE config in these alone is a math-only
# twin.
MATH_ONLY_FIELDS = ("b_evict_first", "raster_along_m", "silu_tanh", "silu_ex2_poly", "setmaxnreg")


def gated_twin_of(cfg):
    """The config cfg is a math-only twin of, where that one runs the six schedules in the gate and cfg is not a
    CONFIG_TABLE config; None otherwise."""
    fields = SUB.KernelConfig.__dataclass_fields__
    base = dataclasses.replace(cfg, **{f: fields[f].default for f in MATH_ONLY_FIELDS})
    table = {c.name for c in SUB.CONFIG_TABLE.values()}
    gated = {c.name for c in SUB.TUNE_SPACE}
    return base if base != cfg and base.name in gated and cfg.name not in table else None


# The gate: every config under the default verdict (six schedules each), all of it slow; a math-only twin under one
# schedule (its protocol runs the six in its base config's case; CI's time); the quick set's emulator runs are the
# table config's leaderboard run, one planted bug, one pointer fallback and the cheap CLI / subset / deadlock / launch
# checks.
@pytest.mark.slow
@pytest.mark.parametrize("cfg", SUB.TUNE_SPACE, ids=lambda c: c.name)
def test_every_tune_space_config_matches(cfg):
    """The default verdict: every schedule of DEFAULT_SCHEDULES matches (a math-only twin: the first)."""
    twin = gated_twin_of(cfg) is not None
    res = emulate(*small_shape(cfg), config_name=cfg.name, mode="strict", sched_seed=1, schedules=1 if twin else None)
    assert res.status == "match", res.summary() + "\n" + res.message
    assert [r.status for r in res.runs] == ["match"] * (1 if twin else len(DEFAULT_SCHEDULES))
    assert res.checked_elements == small_shape(cfg)[0] * small_shape(cfg)[1]
    assert res.stats["mma"] > 0
    # last, so a failure here says only this: our kernel relies on nothing a precedent excuses
    assert not res.notes, "\n".join(res.note_lines())


def test_math_only_twins_are_named_and_no_table_config_is_one():
    """The gate's one-schedule cases: each differs from its base only in MATH_ONLY_FIELDS, and no shipped config is
    one (a planted change of protocol in a twin would not be one either: its base would differ in that field)."""
    twins = {c.name: gated_twin_of(c).name for c in SUB.TUNE_SPACE if gated_twin_of(c) is not None}
    assert twins["m128n64_c1x1_e32_bn"] == "m128n64_c1x1_e32" and twins["m256n128_c2x1_e32_px2"] == "m256n128_c2x1_e32"
    assert not set(twins) & {c.name for c in SUB.CONFIG_TABLE.values()}
    assert "m256n128_c2x1_e16_sk2_rs_px2" not in twins and "m256n64_c2x1_e32_ac_pe4" not in twins
    assert len(twins) == 10, twins


@pytest.mark.slow
def test_one_config_matches_under_every_policy():
    """One schedule of each scheduling policy (POLICIES), a 1-CTA tile (the policies' unit tests:
    tests/emu/test_scheduler.py)."""
    res = emulate(128, 256, 512, 1, config_name="m128n64_c1x1_e32", schedules=len(POLICIES))
    assert res.status == "match", res.summary() + "\n" + res.message
    assert sorted(r.schedule.split(":")[0] for r in res.runs) == sorted(POLICIES)
    assert res.launch["sm_count"] == 1  # a small shape: one CTA walks all four tiles (default_sm_count)


# The quick set's leaderboard-data run of a table config, two tiles of its own (a k-tile per slice of a K split); every
# CONFIG_TABLE config's leaderboard run is in the slow set's test_correctness_no_gpu_path_passes
# (tests/package/test_scripts.py), at two clusters' worth of tiles.
@pytest.mark.parametrize("name", sorted({c.name for c in SUB.CONFIG_TABLE.values()} & QUICK))
def test_leaderboard_generator_on_table_configs(name):
    cfg = next(c for c in SUB.TUNE_SPACE if c.name == name)
    res = emulate(256, 256, max(512, 256 * cfg.split_k), 1, config_name=name, mode="leaderboard", sched_seed=2)
    assert res.status == "match", res.summary() + "\n" + res.message


def test_the_quick_set_runs_a_table_config():
    """CONFIG_TABLE changes by the timed ranking; the quick set must still emulate one of its configs."""
    assert {c.name for c in SUB.CONFIG_TABLE.values()} & QUICK


# All slow: 512 MMAs per schedule. Two schedules each, the uniform one and one skew, the skews taking turns over the
# cases (all five of DEFAULT_SCHEDULES appear): the six-schedule verdict on rings that wrap across tiles is run for
# every config by test_correctness.py --configs all (tests/package/test_scripts.py, two clusters' worth of tiles per CTA
# group); these cases add the long walk (8 tiles of 4 k-tiles per CTA) and the MMA and collector counts over it.
SKEWS = [s.policy for s in DEFAULT_SCHEDULES[1:]]
SEVERAL_TILES = [("m128n64_c1x1_e32", 3), ("m128n128_c1x1_e32", 4), ("m256n64_c2x1_e32", 5), ("m256n128_c2x1_e32", 6),
                 ("m128n64_c1x1_e32_ac", 10), ("m128n128_c1x1_e32_ac", 11), ("m256n64_c2x1_e32_ac", 12),
                 ("m256n128_c2x1_e32_ac", 13), ("m256n64_c2x1_e16_ac_ep", 14), ("m256n128_c2x1_e16_ep", 15),
                 ("m256n64_c2x1_e16_ac_ep_ld16", 16), ("m256n128_c2x1_e16_ep_ld16", 17), ("m256n64_c2x1_e32_ac_pf2", 18),
                 ("m256n128_c2x1_e16_th_ep_pf2", 19), ("m256n64_c2x1_e32_ac_rg", 20)]


@pytest.mark.slow
@pytest.mark.parametrize("name,seed,skew", [(name, seed, SKEWS[i % len(SKEWS)])
                                            for i, (name, seed) in enumerate(SEVERAL_TILES)])
def test_ctas_run_several_tiles(name, seed, skew):
    """sm_count=2: each CTA (pair) walks several tiles of 4 k-tiles, so the smem ring and the accumulator
    stages wrap across tiles (and the pipelined epilogue's early release meets the next tile's MMAs)."""
    cfg = next(c for c in SUB.TUNE_SPACE if c.name == name)
    res = emulate(256, 512, 1024, 1, config_name=name, mode="strict", sm_count=2,
                  schedules=[Schedule("uniform", seed), Schedule(skew, seed + 1)])
    assert res.status == "match", res.summary() + "\n" + res.message
    grid = res.launch["grid"]
    assert grid[0] * grid[1] * grid[2] <= 2
    assert res.stats["mma"] == (256 // 128) * (512 // cfg.mma_tile_mn[1]) * 4 * 4 * 2 // (2 if cfg.use_2cta else 1)
    # with the A collector every B2 MMA takes A from it (emulated: the collector, not shared memory)
    assert res.stats.get("mma_a_from_collector", 0) == (res.stats["mma"] // 2 if cfg.a_collector else 0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "leaderboard"])
@pytest.mark.parametrize("name", ["m256n64_c2x1_e32_ac_th", "m256n128_c2x1_e32_th"])
def test_silu_tanh_within_tolerance(name, mode):
    """KernelConfig.silu_tanh: h + h tanh.approx(h) cancels for x << 0, where tanh's error near -1 decides whether C
    stays within the leaderboard's tolerance (docs/design.md "Epilogue knobs"); K = 1024 puts |x| up to ~60 on both
    generators; the emulator's tanh.approx.f32 carries its GPU-measured error model (emu.mufu)."""
    res = emulate(256, 256, 1024, 1, config_name=name, mode=mode, sched_seed=21)
    assert res.status == "match", res.summary() + "\n" + res.message


def test_deadlock_report_names_role_line_and_barrier(tmp_path):
    mutant = next(m for m in MUTANTS if m.name == "missing_release")
    res = emulate(*mutant.shape, config_name=mutant.config, submission=mutant.write(tmp_path), sched_seed=0)
    assert res.status == "deadlock"
    assert "(TMA)" in res.message and "PTX line" in res.message
    assert "waiting for parity" in res.message and "arrivals pending" in res.message and "tx-count" in res.message


def test_cli_exit_codes(tmp_path):
    ok = subprocess.run([sys.executable, "tools/emulate.py", "--shape", "128,128,256", "--config", "m128n64_c1x1_e32",
                         "--schedules", "2", "--json", str(tmp_path / "r.json")], cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("emulated MATCH") and "2/2 schedules" in ok.stdout
    assert '"label": "emulated"' in (tmp_path / "r.json").read_text()
    assert '"schedule": "producer_first:1"' in (tmp_path / "r.json").read_text()
    bad = next(m for m in MUTANTS if m.name == "swap_b").write(tmp_path)
    mis = subprocess.run([sys.executable, "tools/emulate.py", "--shape", "128,256,512", "--config", "m128n64_c1x1_e32",
                          "--submission", str(bad)], cwd=REPO, capture_output=True, text=True)
    assert mis.returncode == 1 and "MISMATCH" in mis.stdout and "differ" in mis.stdout
    dead = next(m for m in MUTANTS if m.name == "missing_release").write(tmp_path)
    dl = subprocess.run([sys.executable, "tools/emulate.py", "--shape", "128,256,512", "--config", "m128n64_c1x1_e32",
                         "--submission", str(dead)], cwd=REPO, capture_output=True, text=True)
    assert dl.returncode == 2 and "DEADLOCK" in dl.stdout
    # A note (a model violation a B200-verified kernel also commits) fails the kernel under development: exit 2;
    # --allow-notes (third-party kernels) accepts it. The example: the init-to-use synchronisation deleted.
    noted = next(m for m in MUTANTS if m.name == "init_not_ordered_1cta").write(tmp_path)
    cmd = [sys.executable, "tools/emulate.py", "--shape", "128,256,512", "--config", "m128n64_c1x1_e32", "--schedules",
           "1", "--submission", str(noted)]
    strict = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert strict.returncode == 2 and "note [mbarrier-used-before-init]" in strict.stdout, strict.stdout[-2000:]
    assert "notes are not allowed" in strict.stdout
    assert subprocess.run(cmd + ["--allow-notes"], cwd=REPO, capture_output=True, text=True).returncode == 0


def test_cluster_subset_checks_only_its_tiles():
    res = emulate(256, 512, 512, 1, config_name="m128n64_c1x1_e32", clusters=3, sched_seed=8, sm_count=148,
                  schedules=["uniform:8"])
    assert res.status == "match", res.message
    assert res.clusters_run == 3 and res.clusters_total == 16
    assert res.checked_elements == 3 * 128 * 64
    cfg = next(c for c in SUB.TUNE_SPACE if c.name == "m128n64_c1x1_e32")
    assert SUB.DualGemmKernel.schedule_for(cfg, 256, 512, 512, 1)["clusters"] == res.clusters_total


@pytest.mark.slow
def test_schedule_arithmetic_is_what_the_kernel_launches(monkeypatch):
    """DualGemmKernel.schedule_for (the tuner's load column) against the launch the emulator captures: a three-pair
    K split on 12 SMs, 2 clusters of 6 for 8 tiles, so each runs 4 rounds; C over the one simulated cluster."""
    cfg = next(c for c in SUB.TUNE_SPACE if c.name == "m256n128_c2x1_e16_sk3_rs")
    res = emulate(256, 1024, 768, 1, config_name=cfg.name, clusters=1, sched_seed=3, sm_count=12,
                  schedules=["uniform:3"])
    assert res.status == "match", res.summary() + "\n" + res.message
    # with no GPU both take max_active_clusters' SM_COUNT // cluster CTAs: the compile ran on 12 SMs
    monkeypatch.setattr(SUB, "SM_COUNT", 12)
    plan = SUB.DualGemmKernel.schedule_for(cfg, 256, 1024, 768, 1)
    assert plan == {"clusters": 2, "tiles": 8, "rounds": 4, "busiest_k_tiles": 4}
    assert res.clusters_total == plan["clusters"] and res.checked_elements == 4 * 256 * 128


DSL435_MISSING = "nvidia-cutlass-dsl 4.3.5 is not installed in .venv/dsl/4.3.5 (tools/setup.sh installs it)"


@pytest.mark.slow
@pytest.mark.skipif(not dsl_release.is_installed("4.3.5"), reason=DSL435_MISSING)
@pytest.mark.parametrize("name,shape", [("m128n64_c1x1_e32", (128, 256, 512, 1)), ("m256n64_c2x1_e32", (256, 256, 512, 1)),
                                        ("m256n128_c2x1_e32", (256, 256, 512, 1))])
def test_dsl_435_compile_matches(name, shape):
    """The leaderboard-era DSL emits different device code (21 kernel parameters): it is emulated as compiled by
    4.3.5, without notes (the kernel initialises the pair's dealloc barrier itself: 4.3's TmemAllocator re-initialised
    it in every role branch, two notes per 2-CTA config)."""
    res = emulate(*shape, config_name=name, mode="strict", sched_seed=9, dsl="4.3.5")
    assert res.launch["dsl_version"] == "4.3.5"
    assert res.passed, res.summary() + "\n" + res.message + "\n".join(res.note_lines())


@pytest.mark.slow
def test_sweep_runs_the_real_test_shapes(tmp_path):
    """tools/sweep.py: one config on every test shape of task.yml (real M, N, K; one cluster each)."""
    out = tmp_path / "sweep.json"
    proc = subprocess.run([sys.executable, "tools/sweep.py", "--configs", "m128n64_c1x1_e32", "--modes", "strict",
                           "--clusters", "1", "--json", str(out)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import json

    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 9 and all(r["status"] == "match" for r in rows)  # the 10 tests hold 9 distinct shapes
    assert "emulated sweep: 9 of 9 runs match" in proc.stdout


@pytest.mark.parametrize("name", [quick_if([n], n in QUICK) for n in ["m256n64_c2x1_e32_ac", "m128n128_c1x1_e32"]])
def test_pointer_fallback_launch_matches(name):
    """custom_kernel's launcher where apache-tvm-ffi is missing (launch_from_pointers): its own device code
    (C's parameter differs from the TVM-FFI compile) and its own host code, captured and emulated."""
    res = emulate(256, 256, 512, 1, config_name=name, mode="strict", sched_seed=10, host_path="pointer")
    assert res.launch["host_path"] == "pointer" and res.launch["params"] == 25
    assert res.status == "match", res.summary() + "\n" + res.message


@pytest.mark.needs_tvm_ffi("the TVM-FFI entry this compares the pointer fallback with")
@pytest.mark.parametrize("name,dsl", [quick_if((n, d), n in QUICK and d == "default")
                                      for d in ["default", "4.3.5"] for n in sorted({c.name for c in SUB.CONFIG_TABLE.values()})])
def test_pointer_fallback_compiles_to_the_emulated_device_code(name, dsl):
    """The pointer fallback (what runs where apache-tvm-ffi is missing, e.g. a DSL 4.3.5 image) compiles to the
    same device code as the TVM-FFI entry the emulator runs, up to the kernel's mangled name: under 4.3.5 its
    launch cannot be captured (no export_to_c there), so this equality is what covers it."""
    import re

    from harness.capture import compile_artifacts

    if not dsl_release.is_installed(dsl):
        pytest.skip(DSL435_MISSING)
    cfg = next(c for c in SUB.TUNE_SPACE if c.name == name)
    texts = [(compile_artifacts(str(REPO / "submission.py"), cfg, dsl=dsl, variant=v) / "kernel.ptx").read_text()
             for v in ("tvm_ffi", "pointer")]
    names = [re.search(r"\.entry\s+(\w+)", t).group(1) for t in texts]
    assert "tcgen05.mma" in texts[0]
    assert texts[0].replace(names[0], "KERNEL") == texts[1].replace(names[1], "KERNEL")


def test_schedules_and_small_shape_sm_count():
    assert Schedule.parse("late_wake:7") == Schedule("late_wake", 7) and Schedule("slow_async", 3).name == "slow_async:3"
    with pytest.raises(ValueError, match="unknown scheduling policy"):
        Schedule("fastest")
    assert schedules_for(None, 10) == [Schedule(s.policy, s.seed + 10) for s in DEFAULT_SCHEDULES]
    cycle = schedules_for(10)
    assert cycle[:6] == schedules_for(None) and len(cycle) == 10  # the default verdict's schedules come first
    assert {s.policy for s in cycle} == set(POLICIES) and len({s.seed for s in cycle}) == 10
    assert schedules_for(3) == schedules_for(None)[:3]
    assert schedules_for(["uniform:1", Schedule("late_wake", 2)]) == [Schedule("uniform", 1), Schedule("late_wake", 2)]
    one_cta = SimpleNamespace(cta_tile_mn=(128, 64), cluster_mn=(1, 1))
    pair = SimpleNamespace(cta_tile_mn=(128, 64), cluster_mn=(2, 1))
    assert default_sm_count(one_cta, 256, 512, 1) == 4  # 16 tiles: 4 per CTA
    assert default_sm_count(one_cta, 128, 256, 1) == 1
    assert default_sm_count(pair, 256, 512, 1) == 4  # 8 clusters of 2 CTAs: 2 clusters walk 4 tiles each
    assert default_sm_count(one_cta, 4096, 4096, 1) is None  # not a small shape: the B200's 148


@pytest.mark.slow
def test_verdicts_in_worker_processes_are_the_serial_ones():
    """harness.verdict.emulate_in_order (test_correctness.py's and tools/sweep.py's runs, one worker per CPU): with two
    workers the same verdicts, stats and digests of what ran, in the calls' order, as one after another here."""
    calls = [{"m": m, "n": n, "k": k, "l": l, "config_name": name, "schedules": 2, "digest": True}
             for name in ("m128n64_c1x1_e32", "m256n64_c2x1_e32_ac", "m128n128_c1x1_e32")
             for (m, n, k, l) in [small_shape(next(c for c in SUB.TUNE_SPACE if c.name == name))]]
    serial = list(emulate_in_order(calls, jobs=1))
    parallel = list(emulate_in_order(calls, jobs=2))
    assert [r.config for r in parallel] == [c["config_name"] for c in calls]
    for one, other in zip(serial, parallel):
        assert one.verdict == other.verdict == "MATCH", one.summary()
        ran = [[(r.schedule, r.stats, r.digest) for r in res.runs] for res in (one, other)]
        assert ran[0] == ran[1]
