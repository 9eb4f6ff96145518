"""The profile buffer in the emulator (KernelConfig.profile, tools/profile_buffer.py): the kernel's own PTX writes it,
functional (%globaltimer and %clock64 count instructions) and timed (simulated time); the timed emulator's profile
as a stand-in measurement for tools/profile.py's fit; probes/profile_stamps.py's stub run in the emulator. All slow.
No figure here is a measurement. The decoder and the fit on synthetic buffers: tests/package/test_profile_tools.py.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tools import profile_buffer as pb

# the profile buffer is an eighth tensor, which only the TVM-FFI entry takes (submission.compile_config)
pytestmark = pytest.mark.needs_tvm_ffi("the profile buffer passes through the TVM-FFI entry only")
REPO = Path(__file__).resolve().parents[2]
LAYOUT = pb.read_layout(REPO / "submission.py")


# ------------------------------------------------------------------ the kernel in the emulator
CONFIGS = ["m128n64_c1x1_e32_prof", "m256n64_c2x1_e32_ac_prof", "m128n64_c1x2_e32_prof", "m128n128_c1x1_e32_nopdl_prof"]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_functional_run_stamps_every_phase_in_order(config):
    """Every CTA: every phase it owes, in the orders the kernel's synchronisation guarantees, one hand-off per tile
    (4 SMs: several tiles per CTA), C still right."""
    from harness.verdict import emulate

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
    from emu.timing import costs as cost_table
    from harness.timed import timed_emulate

    # the prior table: the fitted per-CTA start would put every CTA's first stamp past the PDL release
    res, timed = timed_emulate(256, 512, 1024, 1, config_name=config, costs=cost_table.load(prior=True))
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
    from harness.capture import compile_artifacts

    cfg = S.config_for(256, 3072, 4096, 1)
    off = (compile_artifacts(str(REPO / "submission.py"), cfg) / "kernel.ptx").read_text()
    on = (compile_artifacts(str(REPO / "submission.py"), dataclasses.replace(cfg, profile=True)) / "kernel.ptx").read_text()
    for reg in ("%globaltimer", "%clock64", "%smid"):
        assert reg not in off
    assert on.count("%globaltimer") == on.count("%clock64") >= len(LAYOUT.phases) + 2
    assert on.count("%smid") == 1
    # custom_kernel's call is unchanged: the knob-off TVM-FFI function takes the leaderboard's seven tensors (an
    # optional eighth parameter on __call__ once made it expect eight for every config)
    from harness.verdict import prepare

    prep = prepare(256, 256, max(512, 256 * cfg.split_k), 1, config_name=cfg.name)  # a k-tile per slice of a split
    assert prep.profile_shape is None and prep.cap.grid[0] * prep.cap.grid[1] * prep.cap.grid[2] > 0


@pytest.mark.slow
def test_profile_config_under_the_leaderboard_era_dsl():
    from harness.verdict import emulate

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
    fit = tool.fit_closed_form(tool.statistics(staggered), tool.statistics(timed), True, cost_table.load(prior=True))
    assert fit["cta_start_cycles"]["value"] == pytest.approx(200 * ghz, rel=0.02)
    assert fit["pdl_cta_start_us"]["value"] == pytest.approx(0.5, abs=0.005)


# ------------------------------------------------------------------ the probe's stub in the emulator
@pytest.mark.slow
@pytest.mark.parametrize("timed", [False, True], ids=["functional", "timed"])
def test_probe_stub_in_the_emulator(timed):
    """probes/profile_stamps.py's stub (the kernel's host side and launch, its recording helper and slots, mbarrier
    hand-offs) compiled for sm_100a and run in the emulator. Functional: every record's phases, tile count and orders
    on both timers hold; it has no clock, so no time-base check (and the result says so). Timed: also the table's
    clock comes back, and the time base holds every stamp within a step of its %globaltimer reading unless one of
    the stamps' two reads lie apart (the engine lets a warp issue greedily: a spinning MMA warp can hold its
    sub-partition between epilogue warp 0's two reads); then that check, and only it, must say so."""
    from emu.timing import costs as cost_table
    from probes import profile_stamps as P

    cfg = P.stand_in_config(P.EMULATED_SHAPE)
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    words, status, message = P.emulate(fields, tiles=3, spin_cycles=2000, timed=timed)
    assert status == "completed", message
    res = P.analyse(words, LAYOUT, 3, 2000, cfg.pdl, label="timed" if timed else "emulated",
                    without_clock=None if timed else P.FUNCTIONAL_CLOCK)
    assert res["ctas"] == 8 and res["handoff_order"]["got_before_first_load"] == 0
    if not timed:
        assert res["ok"], res["problems"]
        assert res["timebase_checks"].startswith("not checked")
        return
    ghz = cost_table.load().clock_ghz
    assert res["clock_ghz"] == pytest.approx(ghz, rel=1e-3)
    # the timed frame: %globaltimer = ns since the previous kernel's end, %clock64 = cycles since then
    apart = max(abs(c / ghz - g) for p in pb.decode(words, LAYOUT) for g, c in p.events().values())
    expected = ["time base: stamps placed off their %globaltimer reading"] if apart > res["tolerance_ns"] + 1 else []
    assert [":".join(line.split(":")[:2]) for line in res["problems"]] == expected, (apart, res["problems"])
