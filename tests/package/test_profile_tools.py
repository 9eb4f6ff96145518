"""KernelConfig.profile, its buffer's decoder (tools/profile_buffer.py), tools/profile.py's statistics and fit, and
the H100/H200 probe's CPU side (probes/profile_stamps.py), on synthetic buffers; the probe's compile for the lent
Hopper (slow). The kernel's and the probe's profiles in the emulator: tests/harness/test_profile.py.
No figure here is a measurement.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
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


def _stub_run(pdl=True, calls=50, ctas=12, sms=16, ghz=1.98, tick=32, tiles=3, spin=2000, release=900.0, seed=0,
              gt_skew=None, clock_rate=None):
    """A buffer as probes/profile_stamps.py's stub writes it on a Hopper GPU, from a timeline of true times (ns):
    each call's CTAs on a random choice of `sms` SMs, %globaltimer absolute and floored to `tick`, each SM's %clock64
    from its own origin (~1e14) at `ghz`. No PDL: a call's CTAs start 1.8 us after the previous call's last exit;
    PDL: 0.4 us before its last exit (0.3 us after its last entry at the earliest), and their griddepcontrol.wait
    returns `release` ns after its last exit.
    gt_skew: {sm: ns} added to that SM's %globaltimer; clock_rate(call, cta): the clock of that CTA's SM in that
    call (default ghz; %clock64 then runs from the record's entry at that rate). Returns (words, events_us_per_call)."""
    rng = np.random.default_rng(seed)
    clk0 = {sm: 100_000_000_000_000 + sm * 987_654_321 for sm in range(sms)}
    spin_ns = spin / ghz + 8  # the loop's last iteration and the stamp
    words = np.full((calls, ctas, LAYOUT.words), pb.NOT_WRITTEN, np.int64)
    last_exit, last_entry = 5_000.0, 4_000.0  # the L2 flush before call 0
    first = None
    for call in range(calls):
        start = max(last_entry + 300, last_exit - 400) if pdl else last_exit + 1800
        first = start if first is None else first
        exits, entries = [], []
        for cta, sm in enumerate(int(s) for s in rng.permutation(sms)[:ctas]):
            t = {"entry": start + rng.uniform(0, 200)}
            t["wait_begin"] = t["entry"] + 60
            t["wait_done"] = max(t["wait_begin"] + 15, last_exit + release) if pdl else t["wait_begin"] + 15
            t["tmem_alloc"] = t["entry"] + 70
            t["first_load"] = t["wait_done"] + 30 + spin_ns
            hand, got = [], t["first_load"] + 25
            for j in range(tiles):
                hand.append((j, got, got + spin_ns))
                got += spin_ns + 5
            t["mainloop_end"] = t["first_load"] + tiles * spin_ns + 10
            t["epilogue_end"] = hand[-1][2] + 5
            t["exit"] = t["epilogue_end"] + 10
            rate = clock_rate(call, cta) if clock_rate else ghz
            t0 = t["entry"]

            def stamp(x, sm=sm, rate=rate, t0=t0):
                gt = int(x + (gt_skew or {}).get(sm, 0))
                return GLOBALTIMER_2026 + gt // tick * tick, clk0[sm] + round(t0 * ghz + (x - t0) * rate)

            words[call, cta] = _record(LAYOUT, {k: stamp(v) for k, v in t.items()}, sm=sm, tiles=tiles,
                                       handoffs=[(j, stamp(g), stamp(r)) for j, g, r in hand])
            exits.append(t["exit"])
            entries.append(t["entry"])
        last_exit, last_entry = max(exits), max(entries)
    return words, (last_exit - first + 1800) / calls / 1000


def _kinds(res):
    return [line.split(":")[0] if not line.startswith(("%globaltimer", "time base")) else ":".join(line.split(":")[:2])
            for line in res["problems"]]


@pytest.mark.parametrize("pdl", [True, False], ids=["pdl", "nopdl"])
def test_probe_analysis_passes_a_sound_hopper_buffer(pdl):
    """The stub's 50 calls as a Hopper GPU writes them (absolute %globaltimer in 32 ns steps, per-SM clocks from
    ~1e14): every check passes, the clock and the spins come back, the boundaries show their true margins."""
    from probes import profile_stamps as P

    words, events = _stub_run(pdl=pdl)
    res = P.analyse(words, LAYOUT, 3, 2000, pdl, events_us_per_call=events, step_ns=32)
    assert res["ok"], res["problems"]
    assert res["clock_ghz"] == pytest.approx(1.98, rel=1e-4) and res["tolerance_ns"] == 32
    assert res["spin_ns_median"] == pytest.approx(2000 / 1.98 + 8, abs=1)
    assert abs(res["spin_minus_globaltimer_ns_mean"]) < 2 and res["timebase_residual_ns"] < 20  # half a tick + ~2
    margins = res["boundary_margin_min_ns"]
    if pdl:
        assert margins["%globaltimer: exit -> wait_done"] == pytest.approx(900, abs=40)
        assert margins["%globaltimer: entry -> entry"] > 3000  # the previous call's CTAs all entered long before
        assert res["entry_first_ns"] == pytest.approx(-400, abs=40)  # the next call starts before the previous ends
    else:
        assert margins["time base: exit -> entry"] == pytest.approx(1800, abs=10)
    assert res["period_ns"] > 0 and "statistics" not in res


def test_probe_analysis_fails_each_check_it_makes():
    """One broken buffer per check, each reported under its own kind with where it happened: a missing phase, a
    tile count, the first H100 run's "first_load > got 0" (in every record), a %globaltimer going back within a
    CTA, an SM whose %globaltimer reads 3 us behind the others (a call's entry before the previous call's end), a PDL
    wait that returns before the previous grid's end, a clock that doubles in one call (the time base off
    %globaltimer), spins that %globaltimer sees longer, spins too short for their cycles, a span that is not the
    events', and stamps without a clock to fit."""
    from probes import profile_stamps as P

    words, events = _stub_run(pdl=False)
    def ok(w, spin=2000, pdl=False, events=events):
        return P.analyse(w, LAYOUT, 3, spin, pdl, events_us_per_call=events, step_ns=32)

    def broken(change, **kw):
        w = words.copy()
        change(w)
        res = ok(w, **kw)
        assert not res["ok"]
        return res

    def word(ph):
        return LAYOUT.phase_word(ph)

    res = broken(lambda w: w.__setitem__((7, 1, word("exit")), pb.NOT_WRITTEN))
    assert any(p.startswith("missing exit: 1 of 600 CTA records, call 7; first: call 7 CTA 1") for p in res["problems"])
    res = broken(lambda w: w.__setitem__((3, 2, LAYOUT.count_word), 2))
    assert "tiles other than the stub's 3" in _kinds(res)

    def got_before_first_load(w):  # the first H100 run: the epilogue past the hand-off before the MMA warp's stamp
        w[:, :, LAYOUT.ring_word:LAYOUT.ring_word + 2] = w[:, :, word("first_load"):word("first_load") + 2] - 500
    res = broken(got_before_first_load)
    assert any(p.startswith("first_load > got 0: 600 of 600 CTA records, 50 of 50 calls") for p in res["problems"])
    assert P.handoff_order(pb.decode(words, LAYOUT))["got_before_first_load"] == 0

    def timer_back(w):
        w[9, 4, word("wait_done")] = w[9, 4, word("wait_begin")] - 64
    res = broken(timer_back)
    assert any(p.startswith("%globaltimer: wait_begin > wait_done: 1 of 600 CTA records, call 9; first: call 9 CTA 4")
               for p in res["problems"])
    assert "wait_begin > wait_done" not in _kinds(res)  # %clock64 kept its order

    skewed, _ = _stub_run(pdl=False, gt_skew={5: -3000})
    res = ok(skewed)
    assert "%globaltimer: exit -> entry out of the launch order between SMs" in _kinds(res)
    assert res["boundary_margin_min_ns"]["time base: exit -> entry"] < -1000  # the decoded axis inherits the skew

    early, ev = _stub_run(pdl=True, release=-600.0)
    res = ok(early, pdl=True, events=ev)
    assert "%globaltimer: exit -> wait_done out of the launch order between SMs" in _kinds(res)
    assert "%globaltimer: entry -> entry out of the launch order between SMs" not in _kinds(res)

    doubled, _ = _stub_run(pdl=False, clock_rate=lambda call, cta: 2 * 1.98 if (call, cta) == (20, 3) else 1.98)
    res = ok(doubled)
    assert _kinds(res) == ["time base: stamps placed off their %globaltimer reading"]

    def longer_on_the_timer(w):  # every release stamp's %globaltimer one step later than its clock says
        for j in range(3):
            w[:, :, LAYOUT.ring_word + 4 * j + 2] += 32
    res = broken(longer_on_the_timer)
    assert "spins on the time base disagree with %globaltimer" in _kinds(res)
    assert _kinds(ok(words, spin=4000)) == ["spins shorter than their cycles on the time base"]
    res = ok(words, events=2 * events)
    assert _kinds(res) == ["decoded span disagrees with the events"]
    flat = words.copy()
    flat[:, :, 0:2 * len(LAYOUT.phases):2] = GLOBALTIMER_2026
    flat[:, :, LAYOUT.ring_word::2] = np.where(flat[:, :, LAYOUT.ring_word::2] == pb.NOT_WRITTEN, pb.NOT_WRITTEN,
                                               GLOBALTIMER_2026)
    assert "time base: no SM clock fitted" in _kinds(ok(flat))


def test_probe_saves_and_analyses_again(tmp_path):
    """save_runs keeps the CTAs that ran and the timer probe's words; analyse_saved gives the same verdicts."""
    from probes import profile_stamps as P

    words, events = _stub_run(pdl=True, calls=6)
    full = np.full((6, 148, LAYOUT.words), pb.NOT_WRITTEN, np.int64)
    full[:, :12] = words
    meta = {"label": "measured (synthetic)", "config": "stub", "shape": [1, 2, 3, 1], "pdl": True,
            "handoff": "mbarrier", "tiles": 3, "spin_cycles": 2000, "events_us_per_call": events,
            "layout": LAYOUT.as_dict()}
    timer = _timer_words()
    P.save_runs(tmp_path / "r.npz", [(full, meta)], timer)
    with np.load(tmp_path / "r.npz") as f:
        assert f["run0"].shape == (6, 12, LAYOUT.words)
    t, (res,) = P.analyse_saved(tmp_path / "r.npz")
    assert (t["step_ns"], t["label"], res["tolerance_ns"], res["handoff"]) == (32, meta["label"], 32, "mbarrier")
    assert res == {**P.analyse(words, LAYOUT, 3, 2000, True, events, meta["label"], 32, t["read_ns"]),
                   **{k: meta[k] for k in ("config", "shape", "pdl", "handoff")}}


def _timer_words(ctas=4, changes=300, tick=32, ghz=1.98, reads_per_update=3):
    """TIMER_PTX's words as a GPU whose %globaltimer moves by `tick` every `tick` ns would write them."""
    from probes import profile_stamps as P

    w = np.full((ctas, P.TIMER_WORDS), pb.NOT_WRITTEN, np.int64)
    for cta in range(ctas):
        clk0 = 100_000_000_000_000 + cta * 55_555
        t = np.arange(1, changes + 1) * tick
        end = clk0 + round((changes + 1) * tick * ghz)
        w[cta, :P.TIMER_HEADER] = (cta + 10, changes, changes * reads_per_update, clk0, end, 0)
        w[cta, P.TIMER_HEADER:P.TIMER_HEADER + 2 * changes] = np.stack(
            [GLOBALTIMER_2026 + t, clk0 + np.round(t * ghz + 3).astype(np.int64)], axis=1).ravel()
    return w


def test_timer_probe_reads_step_resolution_and_update_period():
    """timer_steps on a 32 ns timer read three times per update: step, resolution and update period 32 ns, the clock
    back, a read ~11 ns; a step back, a timer that never moved and a stalled clock are problems."""
    from probes import profile_stamps as P

    t = P.timer_steps(_timer_words())
    assert t["ok"], t["problems"]
    assert (t["step_ns"], t["resolution_ns"], t["steps_ns_histogram"]) == (32, 32, {"32": 4 * 299})
    assert t["clock_ghz"] == pytest.approx(1.98, rel=1e-3) and t["update_ns_median"] == pytest.approx(32, abs=0.6)
    assert t["read_ns"] == pytest.approx(32 / 3, rel=0.02) and t["sms"] == 4
    coarse = P.timer_steps(_timer_words(tick=1024))
    assert coarse["step_ns"] == 1024 and coarse["update_ns_median"] == pytest.approx(1024, rel=1e-3)
    w = _timer_words()
    w[1, P.TIMER_HEADER + 2 * 100] = w[1, P.TIMER_HEADER + 2 * 99] - 32  # the timer went back
    w[2, 1] = 1  # one change in all its reads
    w[3, P.TIMER_HEADER + 2 * 51 + 1] = w[3, P.TIMER_HEADER + 2 * 50 + 1]  # %clock64 stood still
    bad = P.timer_steps(w)
    assert not bad["ok"] and len(bad["problems"]) == 3
    assert "went back" in bad["problems"][0] and "changed 1 times" in bad["problems"][1]
    assert "%clock64 did not advance" in bad["problems"][2]


def test_timer_probe_assembles_for_hopper(tmp_path):
    """TIMER_PTX is valid PTX for sm_90a (ptxas as preflight finds it: the pinned nvidia-cuda-nvcc wheel of the test
    extra, or $PTXAS, PATH, /usr/local/cuda; the driver JIT-compiles it there)."""
    from emu.timing.sass import find_tool
    from probes import profile_stamps as P

    ptxas = find_tool("ptxas")
    if ptxas is None:  # the test extra's nvidia-cuda-nvcc wheel has one: only an install without the extra lacks it
        pytest.skip("no ptxas anywhere preflight looks ($PTXAS, the nvidia-cuda-nvcc wheel of pip install -e '.[test]', "
                    "PATH, /usr/local/cuda)")
    (tmp_path / "t.ptx").write_text(P.TIMER_PTX)
    p = subprocess.run([ptxas["path"], "-arch", "sm_90a", str(tmp_path / "t.ptx"), "-o", str(tmp_path / "t.cubin")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "t.cubin").stat().st_size > 0


def test_profile_tool_reports_stamps_out_of_order():
    """tools/profile.py's statistics carry the same stamp checks (a B200 bundle says whether its stamps hold): none
    on a sound buffer; every record and a warning line for the first H100 run's hand-off; a late SM's %globaltimer
    in the launch-order margins."""
    from tools import profile as tool

    words, events = _stub_run(pdl=False, calls=8)
    run = lambda w: tool.Run("measured (synthetic)", (1, 2, 3, 1), "stub", False, LAYOUT, w, events)  # noqa: E731
    stats = tool.statistics(run(words))
    assert stats["records_out_of_order"] == {"clock64": 0, "globaltimer": 0}
    assert stats["boundary_margin_min_ns"]["exit -> entry"] == pytest.approx(1800, abs=40)
    assert tool.stamp_warning(stats) is None
    bad = words.copy()
    bad[:, :, LAYOUT.ring_word:LAYOUT.ring_word + 2] = bad[:, :, LAYOUT.phase_word("first_load"):][:, :, :2] - 500
    stats = tool.statistics(run(bad))
    assert stats["records_out_of_order"]["clock64"] == 8 * 12
    assert "'clock64': 96" in tool.stamp_warning(stats)
    skewed, _ = _stub_run(pdl=False, calls=8, gt_skew={5: -3000})
    assert tool.statistics(run(skewed))["boundary_margin_min_ns"]["exit -> entry"] < -1000


def test_named_barrier_verdict_reads_the_diagnostics():
    """The diagnostic runs' hand-off counts: early in the named run only -> exited warps count; in neither -> they do
    not; early in the held run too -> neither reading."""
    from probes import profile_stamps as P

    def runs(named, held):
        return [{"handoff": "named", "handoff_order": {"ctas": 96, "got_before_first_load": named}},
                {"handoff": "named_held", "handoff_order": {"ctas": 96, "got_before_first_load": held}}]
    assert P.named_barrier_verdict(runs(96, 0)).startswith("an exited warp counts as arrived")
    assert P.named_barrier_verdict(runs(0, 0)).startswith("an exited warp does not count")
    assert P.named_barrier_verdict(runs(96, 40)).startswith("neither reading fits")
    assert P.named_barrier_verdict(runs(96, 0)[:1]) is None


@pytest.mark.slow
@pytest.mark.needs_tvm_ffi("the probe compiles its stub with --enable-tvm-ffi, as on the lent GPU")
@pytest.mark.parametrize("handoff,pdl", [("mbarrier", True), ("mbarrier", False), ("named", False),
                                         ("named_held", False)])
def test_probe_stub_compiles_for_the_lent_hopper(handoff, pdl):
    """What the lent H100 compiles (DSL 4.3.5, sm_90a): every run of the probe builds a cubin; the verdict's stub
    hands off through mbarriers only (no named barrier but the CTA-wide one), the diagnostics through named barriers
    3 and 4 (the first run's protocol)."""
    import re

    from probes import profile_stamps as P

    cfg = P.stand_in_config(P.SHAPE, pdl)
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    art = P.compile_artifacts(fields, 3, 2000, handoff, arch="sm_90a", dsl="4.3.5")
    ptx = (art / "kernel.ptx").read_text()
    assert ".target sm_90a" in ptx and list((art / "dump").glob("*.sm_90a.cubin"))
    named = set(re.findall(r"\bbar(?:rier)?\.(?:sync|arrive)(?:\.aligned)?\s+(\d+)", ptx))
    assert named == ({"0"} if handoff == "mbarrier" else {"0", "3", "4"}), named
    assert ("mbarrier.try_wait" in ptx) == (handoff == "mbarrier")
    assert ("griddepcontrol.wait" in ptx) == pdl
