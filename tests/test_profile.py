"""KernelConfig.profile, its buffer's decoder (tools/profile_buffer.py), tools/profile.py's statistics and fit, and
the H100/H200 probe's CPU side (probes/profile_stamps.py).

Emulated runs (marked slow) write the profile buffer with the kernel's own PTX: functional (%globaltimer and %clock64
count instructions), timed (simulated time), and the timed emulator's profile as a stand-in measurement for the fit.
No figure here is a measurement.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools import profile_buffer as pb  # noqa: E402

LAYOUT = pb.read_layout(REPO / "submission.py")


def _record(layout, stamps: dict, sm=5, issues=True, tiles=0, handoffs=()):
    """One CTA's words as the kernel writes them: stamps {phase: (ns, clk)}, handoffs [(j, got, released)]."""
    w = np.full(layout.words, pb.NOT_WRITTEN, np.int64)
    for phase, (ns, clk) in stamps.items():
        w[layout.phase_word(phase):layout.phase_word(phase) + 2] = (ns, clk)
    w[layout.sm_word] = sm | (int(issues) << 32)
    w[layout.count_word] = tiles
    for j, got, rel in handoffs:
        base = layout.ring_word + 4 * (j % layout.ring)
        w[base:base + 4] = (*got, *rel)
    return w


def _ordered_stamps(t0=1000, step=1000, ghz=2.0):
    return {ph: (t0 + i * step, int((t0 + i * step) * ghz)) for i, ph in enumerate(
        ("entry", "wait_begin", "tmem_alloc", "wait_done", "first_load", "mainloop_end", "epilogue_end", "exit"))}


# ------------------------------------------------------------------ layout and decoder (no emulator)
def test_layout_read_from_the_source_is_the_modules():
    import submission as S

    assert LAYOUT == pb.Layout(S.PROFILE_PHASES, S.PROFILE_RING, S.PROFILE_SM_WORD, S.PROFILE_COUNT_WORD,
                               S.PROFILE_RING_WORD, S.PROFILE_WORDS)
    assert LAYOUT.words % 2 == 0 and LAYOUT.ring_word % 2 == 0  # 16-byte aligned stamp pairs in every record
    assert pb.Layout.from_dict(LAYOUT.as_dict()) == LAYOUT


def test_decode_a_record_with_a_wrapped_ring():
    tiles = LAYOUT.ring + 3
    handoffs = [(j, (5000 + 10 * j, 10000 + 20 * j), (5005 + 10 * j, 10010 + 20 * j)) for j in range(tiles)]
    words = np.full((4, LAYOUT.words), pb.NOT_WRITTEN, np.int64)
    words[2] = _record(LAYOUT, _ordered_stamps(), sm=7, issues=False, tiles=tiles, handoffs=handoffs)
    (p,) = pb.decode(words, LAYOUT)  # rows without an entry stamp are CTAs that did not run
    assert (p.call, p.cta, p.sm, p.issues_mma, p.tiles) == (0, 2, 7, False, tiles)
    assert [j for j, _, _ in p.handoffs] == list(range(3, tiles))  # the ring keeps the last `ring` tiles
    assert p.handoffs[0][1] == (5030, 10060) and p.handoffs[-1][2] == handoffs[-1][2]
    assert pb.missing(p, LAYOUT) == []  # a peer CTA (no MMAs) owes no first_load / mainloop_end
    assert pb.disorder(p) == []


def test_missing_and_disorder_name_what_is_wrong():
    stamps = _ordered_stamps()
    del stamps["first_load"]
    stamps["wait_begin"], stamps["wait_done"] = stamps["wait_done"], stamps["wait_begin"]
    (p,) = pb.decode(_record(LAYOUT, stamps, tiles=1, handoffs=[(0, (5500, 11000), (5600, 11200))])[None], LAYOUT)
    assert pb.missing(p, LAYOUT) == ["first_load"]
    assert "wait_begin > wait_done" in pb.disorder(p)
    (q,) = pb.decode(_record(LAYOUT, _ordered_stamps(), tiles=2, handoffs=[(0, (5500, 11000), (5600, 11200))])[None],
                     LAYOUT)
    assert pb.missing(q, LAYOUT) == ["hand-offs (1 of 2)"]


GLOBALTIMER_2026 = 1_795_000_000_000_000_000  # %globaltimer on the lent H100: ns since 1970 (float64 steps: 256 ns)


def _coarse_buffer(rng, calls=20, ctas=8, ghz=1.9, tick=32, rate=None, jump=None):
    """Stamps of `calls` x `ctas` records, CTA i on SM i, at true times t (ns since the first call): %globaltimer as
    the H100 gives it (absolute, truncated to `tick`), %clock64 from an origin of ~1e14 cycles per SM. rate(call):
    the SMs' clock in that call (default ghz); jump(call): cycles the clocks skip before that call (a stop)."""
    words = np.full((calls, ctas, LAYOUT.words), pb.NOT_WRITTEN, np.int64)
    truth, clk_at = {}, {cta: 100_000_000_000_000 + cta * 123_456_789 for cta in range(ctas)}
    prev = 0.0
    for call in range(calls):
        g = rate(call) if rate else ghz
        base = 1_000_000 + call * 9000
        for cta in range(ctas):
            clk_at[cta] += (base - prev) * g + (jump(call) if jump else 0)
            stamps = {}
            for i, ph in enumerate(LAYOUT.phases):
                t = base + 700 * i + rng.uniform(0, 50)
                stamps[ph] = (GLOBALTIMER_2026 + int(t // tick * tick), int(clk_at[cta] + (t - base) * g))
                truth[(call, cta, ph)] = t
            words[call, cta] = _record(LAYOUT, stamps, sm=cta, tiles=0)
        prev = base
    return words, truth


def _placement_errors(tb, profiles, truth):
    """|decoded - true| of every stamp, the decoded times put on the truth's origin by their mean difference."""
    d = np.array([tb.ns(p, p.stamps[ph]) - truth[(p.call, p.cta, ph)] for p in profiles for ph in p.stamps])
    return np.abs(d - d.mean())


def test_time_base_recovers_clock_and_sm_offsets_from_a_coarse_absolute_globaltimer():
    """Per SM a different %clock64 origin (~1e14 cycles); %globaltimer absolute (~1.8e18 ns) ticking every 32 ns, as
    on the lent H100: every stamp back on the true time within a few ns, the clock within 0.1%, a span within a CTA
    to the ns. (Converted to float64 before subtracting, the absolute %globaltimer steps by 256 ns: the first
    H100 run's spins decoded as 1024 ns for 1003.)"""
    rng = np.random.default_rng(0)
    ghz, tick = 1.9, 32
    words, truth = _coarse_buffer(rng, ghz=ghz, tick=tick)
    profiles = pb.decode(words, LAYOUT)
    tb = pb.TimeBase.fit(profiles)
    assert tb.tick_ns == tick and tb.origin_ns >= GLOBALTIMER_2026
    assert tb.ghz == pytest.approx(ghz, rel=1e-3)
    assert _placement_errors(tb, profiles, truth).max() < 6.0
    assert tb.residual_ns < tick and tb.line_residual_ns < tick
    for p in profiles[:8]:  # a span of ~5000 ns: %clock64's, to the ns
        span = truth[(p.call, p.cta, "exit")] - truth[(p.call, p.cta, "entry")]
        assert tb.ns(p, p.stamps["exit"]) - tb.ns(p, p.stamps["entry"]) == pytest.approx(span, abs=1.5)


def test_time_base_survives_a_clock_that_changes_between_calls():
    """The SMs' clock at 1.98 GHz on even calls and 1.75 GHz on odd ones, and stopping for 10^6 cycles before every
    fifth call: one line per SM over all calls no longer holds (line_residual_ns shows it), the per-record placement
    still does, and the clock is the rate within the records."""
    rng = np.random.default_rng(1)
    rate = lambda call: 1.98 if call % 2 == 0 else 1.75  # noqa: E731
    words, truth = _coarse_buffer(rng, rate=rate, jump=lambda call: 1_000_000 if call % 5 == 0 else 0)
    profiles = pb.decode(words, LAYOUT)
    tb = pb.TimeBase.fit(profiles)
    assert 1.75 <= tb.ghz <= 1.98
    assert tb.line_residual_ns > 1000 and tb.residual_ns < 200
    # within one record the order and the spacing are %clock64's: off by at most the rate's error (6%)
    for p in profiles[:16]:
        a, b = p.stamps["entry"], p.stamps["exit"]
        span = truth[(p.call, p.cta, "exit")] - truth[(p.call, p.cta, "entry")]
        assert tb.ns(p, b) - tb.ns(p, a) == pytest.approx(span, rel=0.07)
    # between records: each placed on %globaltimer, the rate's error bounded by its short span
    assert _placement_errors(tb, profiles, truth).max() < 300


def test_timeline_rows_are_the_emulator_traces_warp_rows():
    import submission as S
    from emu.machine import role_of

    K = S.DualGemmKernel
    assert pb.ROW_TMA == f"warp {K.TMA_WARP} ({role_of(K.TMA_WARP)})"
    assert pb.ROW_MMA == f"warp {K.MMA_WARP} ({role_of(K.MMA_WARP)})"
    assert pb.ROW_EPILOGUE == f"warp {K.EPILOGUE_WARPS[0]} ({role_of(K.EPILOGUE_WARPS[0])})"
    (p,) = pb.decode(_record(LAYOUT, _ordered_stamps(), tiles=1, handoffs=[(0, (5500, 11000), (5600, 11200))])[None],
                     LAYOUT)
    rows = pb.spans(p, pb.TimeBase.fit([p]), 1000.0, "CTA 0")
    assert {r[1] for r in rows} == {pb.ROW_TMA, pb.ROW_MMA, pb.ROW_EPILOGUE}
    assert all(r[3] >= r[2] for r in rows)


# ------------------------------------------------------------------ the knob (no compile)
def test_profile_twins_are_apart_from_the_tuned_and_timed_configs():
    import submission as S

    assert not any(c.profile for c in S.TUNE_SPACE) and not any(c.profile for c in S.CONFIG_TABLE.values())
    names = {c.name for c in S.PROFILE_SPACE}
    for cfg in (*S.TUNE_SPACE, *S.CONFIG_TABLE.values()):
        assert cfg.name + "_prof" in names
    assert all(c.profile for c in S.PROFILE_SPACE)
    with pytest.raises(ValueError, match="TVM-FFI"):
        S.compile_config(S.PROFILE_SPACE[0], tvm_ffi=False)


# ------------------------------------------------------------------ tools/profile.py's arithmetic (no emulator)
def _stats(entry_first, entry_mean, release=None, period=5000.0, exit_last=4500.0, ghz=2.0):
    return {"entry_first_ns": entry_first, "entry_mean_ns": entry_mean, "release_ns": release, "period_ns": period,
            "exit_last_ns": exit_last, "clock_ghz": ghz, "phases_ns": {"wait_begin": 400.0}, "mainloop_ns": 1000.0}


def test_closed_form_fit_splits_the_start_into_gap_and_stagger():
    from emu.timing import costs as cost_table
    from tools.profile import fit_closed_form

    c = cost_table.load(overrides={"clock_ghz": 2.0, "pdl_cta_start_us": 0.3, "cta_start_cycles": 0,
                                   "pdl_wait_release_us": 0.7})
    timed = _stats(400.0, 400.0, release=800.0)  # the engine starts every CTA together, 100 ns after its row
    measured = _stats(600.0, 700.0, release=1000.0)  # the mean CTA 300 ns later, 100 ns behind the first
    fit = fit_closed_form(measured, timed, True, c)
    assert fit["cta_start_cycles"]["value"] == pytest.approx(100 * 2.0)
    assert fit["pdl_cta_start_us"]["value"] == pytest.approx(0.3 + 0.3 - 0.1)
    assert fit["pdl_wait_release_us"]["value"] == pytest.approx(0.9)
    unblocked = fit_closed_form(_stats(600.0, 700.0, release=None), timed, True, c)["pdl_wait_release_us"]
    assert not unblocked["identified"] and unblocked["value"] == 0.7
    no_pdl = fit_closed_form(measured, timed, False, cost_table.load(overrides={"clock_ghz": 2.0}))
    assert "launch_gap_us" in no_pdl and "pdl_wait_release_us" not in no_pdl


def test_overrides_file_round_trip(tmp_path):
    from emu.timing import costs as cost_table
    from tools.profile import write_overrides

    pooled = {"clock_ghz": {"value": 1.85, "write": True}, "pdl_wait_release_us": {"value": 0.7, "write": False}}
    chosen = write_overrides(tmp_path / "c.yaml", pooled, "test")
    assert chosen == {"clock_ghz": 1.85}  # a row no shape identifies is not written
    assert cost_table.load(overrides=cost_table.read_overrides(tmp_path / "c.yaml")).clock_ghz == 1.85
    (tmp_path / "bad.yaml").write_text("clock_ghz: 2\n")
    with pytest.raises(ValueError, match="overrides"):
        cost_table.read_overrides(tmp_path / "bad.yaml")


def test_profile_tool_refuses_without_an_sm100_gpu(tmp_path):
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 10:
        pytest.skip("an SM100 GPU is visible: the tool would profile it")
    p = subprocess.run([sys.executable, "tools/profile.py", "--out", str(tmp_path)], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "SM100" in lines[0], p.stderr
    assert not list(tmp_path.iterdir())


def test_session_script_parses_and_refuses_without_a_b200(tmp_path):
    script = REPO / "tools" / "b200_session.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 10:
        pytest.skip("an SM100 GPU is visible: the session would run")
    p = subprocess.run(["bash", str(script), str(tmp_path / "bundle")], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "B200" in p.stderr
    assert not (tmp_path / "bundle").exists()
    # a lent H100 (nvidia-smi answers, compute capability 9.0) is refused the same way
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 9.0'\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run(["bash", str(script), str(tmp_path / "bundle")], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 2 and "H100" in p.stderr and "9.0" in p.stderr, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "bundle").exists()


def test_probe_analysis_of_a_handmade_buffer():
    """probes/profile_stamps.analyse on 50 calls the way the stub writes them: passes; a CTA without its exit and a
    spin that does not last its cycles are reported."""
    from probes import profile_stamps as P

    ghz, spin, tiles = 2.0, 2000, 2
    words = np.full((P.CALLS, 4, LAYOUT.words), pb.NOT_WRITTEN, np.int64)
    for call in range(P.CALLS):
        for cta in range(4):
            t = 10_000 + call * 6000 + 5 * cta
            stamps = {ph: (t + 100 * i, int((t + 100 * i) * ghz)) for i, ph in enumerate(
                ("entry", "wait_begin", "wait_done", "tmem_alloc", "first_load"))}
            hand = [(j, (t + 1000 + 1100 * j, int((t + 1000 + 1100 * j) * ghz)),
                     (t + 2010 + 1100 * j, int((t + 2010 + 1100 * j) * ghz))) for j in range(tiles)]
            end = t + 1000 + 1100 * tiles
            stamps.update({"mainloop_end": (end - 50, int((end - 50) * ghz)), "epilogue_end": (end, int(end * ghz)),
                           "exit": (end + 20, int((end + 20) * ghz))})
            words[call, cta] = _record(LAYOUT, stamps, sm=cta, tiles=tiles, handoffs=hand)
    res = P.analyse(words, LAYOUT, tiles, spin, True, events_us_per_call=6.0)
    assert res["ok"], res["problems"]
    assert res["clock_ghz"] == pytest.approx(ghz) and res["spin_ns_median"] == pytest.approx(1010)
    assert res["period_ns"] == pytest.approx(6000)
    broken = words.copy()
    broken[7, 1, LAYOUT.phase_word("exit")] = pb.NOT_WRITTEN
    assert any("call 7 CTA 1: missing exit" in p for p in P.analyse(broken, LAYOUT, tiles, spin, True)["problems"])
    assert not P.analyse(words, LAYOUT, tiles, 4 * spin, True)["ok"]  # spins of 4000 cycles cannot last 1010 ns


# ------------------------------------------------------------------ the kernel in the emulator
CONFIGS = ["m128n64_c1x1_e32_prof", "m256n64_c2x1_e32_ac_prof", "m128n64_c1x2_e32_prof", "m128n128_c1x1_e32_nopdl_prof"]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_functional_run_stamps_every_phase_in_order(config):
    """Every CTA: every phase it owes, in the orders the kernel's synchronisation guarantees, one hand-off per tile
    (4 SMs: several tiles per CTA), C still right."""
    from emu.run import emulate

    res = emulate(256, 512, 512, 1, config_name=config, sm_count=4)
    assert res.status == "match", res.message
    profiles = pb.decode(res.profile, LAYOUT)
    assert len(profiles) == res.launch["grid"][0] * res.launch["grid"][1] * res.launch["grid"][2]
    for p in profiles:
        assert pb.missing(p, LAYOUT) == [], (p.cta, pb.missing(p, LAYOUT))
        assert pb.disorder(p) == [], (p.cta, pb.disorder(p))
    import submission as S

    cfg = next(c for c in S.PROFILE_SPACE if c.name == config)
    cta_tiles = (256 // cfg.cta_tile_mn[0]) * (512 // cfg.cta_tile_mn[1])
    assert sum(p.tiles for p in profiles) == cta_tiles
    assert max(p.tiles for p in profiles) > 1
    issuers = sum(p.issues_mma for p in profiles)
    assert issuers == len(profiles) // (2 if cfg.use_2cta else 1)


@pytest.mark.slow
@pytest.mark.parametrize("config", ["m128n64_c1x1_e32_prof", "m256n64_c2x1_e32_ac_prof"])
def test_timed_profile_agrees_with_the_machines_marks(config):
    """The decoded stamps of a timed run against TimedMachine.marks (cycles, %clock64), each within what lies
    between the event and its stamp: entry after the CTA's start by the ~30 parameter loads before it; the first
    stage seen between the first TMA issue and the first MMA (the MMA warp's first-tile setup between); the mainloop
    end between the first MMA and the last MMA's completion; each accumulator got one mbarrier wake-up (plus a few
    instructions) after a commit arrived; the PDL release within a few cycles; exit before the last warp is done."""
    from emu.timing.call import timed_emulate

    res, timed = timed_emulate(256, 512, 1024, 1, config_name=config)
    assert res.status == "match", res.message
    m = timed.machine
    c = m.costs
    linear = lambda x, y, z: x + m.grid[0] * (y + m.grid[1] * z)  # noqa: E731
    marks = {linear(*ctaid): mk for ctaid, mk in m.marks.items()}
    sm_of = {linear(*cta.ctaid): cta.sm.index for cl in m.clusters_run for cta in cl.ctas}
    profiles = pb.decode(res.profile, LAYOUT)
    assert {p.cta for p in profiles} == set(marks)
    for p in profiles:
        mk, clk = marks[p.cta], {k: v[1] for k, v in p.events().items()}
        assert p.sm == sm_of[p.cta]
        assert 0 <= clk["entry"] - (mk["start"] + c.cta_start_cycles) <= 150
        assert 0 <= clk["wait_done"] - m.wait_release <= 10
        assert 0 <= mk["exit"] - clk["exit"] <= 64
        for j, got, _ in p.handoffs:
            lag = min(got[1] - t for t in mk["commits"] + ([mk["last_mma"]] if "last_mma" in mk else [])
                      if t <= got[1]) if p.issues_mma else None
            if lag is not None:
                assert c.mbarrier_wake_latency <= lag <= c.mbarrier_wake_latency + 64, (j, lag)
        if p.issues_mma:
            assert mk["first_load"] <= clk["first_load"] <= mk["first_mma"]
            assert mk["first_mma"] <= clk["mainloop_end"] <= mk["last_mma"]


@pytest.mark.slow
def test_knob_off_compiles_no_stamp_and_knob_on_every_one():
    """The default config's PTX (the emulator's compile) reads no timer; its profiling twin reads %globaltimer and
    %clock64 at each stamp and %smid once (the byte-identity of every knob-off config with the code before the knob
    was checked with tools/preflight.py --keep under 4.8.1 and 4.3.5: MEMORY.md)."""
    import submission as S
    from emu.launch import compile_artifacts

    cfg = S.config_for(256, 3072, 4096, 1)
    off = (compile_artifacts(str(REPO / "submission.py"), cfg) / "kernel.ptx").read_text()
    on = (compile_artifacts(str(REPO / "submission.py"), dataclasses.replace(cfg, profile=True)) / "kernel.ptx").read_text()
    for reg in ("%globaltimer", "%clock64", "%smid"):
        assert reg not in off
    assert on.count("%globaltimer") == on.count("%clock64") >= len(LAYOUT.phases) + 2
    assert on.count("%smid") == 1
    # custom_kernel's call is unchanged: the knob-off TVM-FFI function takes the leaderboard's seven tensors (an
    # optional eighth parameter on __call__ once made it expect eight for every config)
    from emu.run import prepare

    prep = prepare(256, 256, 512, 1, config_name=cfg.name)
    assert prep.profile_shape is None and prep.cap.grid[0] * prep.cap.grid[1] * prep.cap.grid[2] > 0


@pytest.mark.slow
def test_profile_config_under_the_leaderboard_era_dsl():
    from emu.run import emulate

    res = emulate(256, 256, 512, 1, config_name="m256n64_c2x1_e32_ac_prof", dsl="4.3.5")
    assert res.status == "match", res.message
    profiles = pb.decode(res.profile, LAYOUT)
    assert profiles and all(not pb.missing(p, LAYOUT) and not pb.disorder(p) for p in profiles)


# ------------------------------------------------------------------ tools/profile.py on the timed emulator's profile
@pytest.mark.slow
@pytest.mark.parametrize("config,made_with", [
    ("m128n64_c1x1_e32", {"clock_ghz": 1.8, "pdl_cta_start_us": 0.5, "pdl_wait_release_us": 0.9,
                          "l2_to_sm_bytes_per_clk": 48}),
    ("m128n64_c1x1_e32_nopdl", {"launch_gap_us": 2.5, "l2_to_sm_bytes_per_clk": 40}),
])
def test_profile_tool_recovers_the_rows_its_stand_in_was_made_with(tmp_path, config, made_with):
    """tools/profile.py --stand-in: the timed emulator's profile at known rows is the "measurement"; the fit from the
    table's priors must find those rows again; the bundle holds the report, the trace (JSON + PNG) and the fit."""
    from tools import profile as tool

    argv = ["--stand-in", "--shape", "256,256,1024", "--config", config, "--fit-iterations", "3", "--jobs", "1",
            "--out", str(tmp_path)] + [f"--stand-in-cost={k}={v}" for k, v in made_with.items()]
    assert tool.main(argv) == 0
    from emu.timing import costs as cost_table

    fitted = cost_table.read_overrides(tmp_path / "costs_fitted.yaml")
    for name, value in made_with.items():
        assert fitted[name] == pytest.approx(value, rel=0.03), (name, fitted)
    if "launch_gap_us" in made_with:
        assert "pdl_wait_release_us" not in fitted and "pdl_cta_start_us" not in fitted
    doc = json.loads((tmp_path / "profile.json").read_text())
    (shape,) = doc["shapes"]
    assert shape["measured"]["label"].startswith("timed stand-in") and shape["timed"]["label"] == "timed"
    assert {r["phase"] for r in shape["report"]} >= set(LAYOUT.phases)
    events = json.loads((tmp_path / shape["trace"]).read_text())["traceEvents"]
    assert any(e.get("args", {}).get("name", "").startswith("timed CTA") for e in events)
    assert (tmp_path / shape["trace"]).with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the bundle analyses again from its saved measurement alone
    again = tmp_path / "again"
    assert tool.main(["--from-bundle", str(tmp_path), "--out", str(again), "--fit-iterations", "0", "--jobs", "1"]) == 0
    assert json.loads((again / "profile.json").read_text())["shapes"][0]["measured"]["stats"] == shape["measured"]["stats"]


@pytest.mark.slow
def test_a_rate_past_the_point_where_the_mainloop_stops_depending_on_it_is_a_lower_bound(tmp_path):
    """Made with 96 B/cycle, this tile's timed mainloop hardly moves above about 80 (another resource binds): the fit
    must say "lower bound" and write that bound, not claim 96 or any value it cannot tell from its neighbours."""
    from tools import profile as tool

    assert tool.main(["--stand-in", "--shape", "256,256,1024", "--config", "m128n64_c1x1_e32_nopdl", "--no-timed",
                      "--out", str(tmp_path), "--stand-in-cost=l2_to_sm_bytes_per_clk=96"]) == 0
    assert (tmp_path / "measured.json").exists() and not (tmp_path / "profile.json").exists()  # as the session's
    assert tool.main(["--from-bundle", str(tmp_path), "--out", str(tmp_path), "--fit-iterations", "3",
                      "--jobs", "1"]) == 0  # GPU step, then its analysis step
    row = json.loads((tmp_path / "profile.json").read_text())["fit"]["rows"]["l2_to_sm_bytes_per_clk"]
    assert row["identified_in"] == 0 and row["write"]
    assert 64 < row["lower_bound"] <= 96 and row["value"] == row["lower_bound"]


@pytest.mark.slow
def test_fit_reads_the_launch_stagger_as_cta_start_cycles():
    """A stand-in 2-CTA pair whose second CTA enters 400 ns after the first on every call: the mean CTA lags the first
    by 200 ns, which the fit books as cta_start_cycles (the engine starts a wave's CTAs together), the gap row keeping
    the first CTA's entry."""
    from emu.timing import costs as cost_table
    from tools import profile as tool

    sub = REPO / "submission.py"
    made_with = {"pdl_cta_start_us": 0.5}
    measured = tool.stand_in((256, 256, 1024, 1), "m256n64_c2x1_e32_ac_prof", made_with, sub)
    timed = tool.predict((256, 256, 1024, 1), "m256n64_c2x1_e32_ac_prof", {}, sub)
    ghz = cost_table.load().clock_ghz
    w = measured.words.copy()
    entry = LAYOUT.phase_word("entry")
    w[:, 1, entry] += 400
    w[:, 1, entry + 1] += round(400 * ghz)
    staggered = dataclasses.replace(measured, words=w)
    fit = tool.fit_closed_form(tool.statistics(staggered), tool.statistics(timed), True, cost_table.load())
    assert fit["cta_start_cycles"]["value"] == pytest.approx(200 * ghz, rel=0.02)
    assert fit["pdl_cta_start_us"]["value"] == pytest.approx(0.5, abs=0.005)


# ------------------------------------------------------------------ the probe's stub in the emulator
@pytest.mark.slow
@pytest.mark.parametrize("timed", [False, True], ids=["functional", "timed"])
def test_probe_stub_in_the_emulator(timed):
    """probes/profile_stamps.py's stub (the kernel's host side and launch, its recording helper and slots) compiled for
    sm_100a and run in the emulator; the probe's own analysis passes (timed: the spins last their cycles at the
    table's clock on the decoded time base)."""
    from emu.timing import costs as cost_table
    from probes import profile_stamps as P

    cfg = P.stand_in_config(P.EMULATED_SHAPE)
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    words, status, message = P.emulate(fields, tiles=3, spin_cycles=2000, timed=timed)
    assert status == "completed", message
    res = P.analyse(words, LAYOUT, 3, 2000, cfg.pdl, label="timed" if timed else "emulated")
    assert res["ok"], res["problems"]
    assert res["ctas"] == 8
    if timed:
        assert res["clock_ghz"] == pytest.approx(cost_table.load().clock_ghz, rel=1e-3)
