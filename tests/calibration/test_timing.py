"""The timed emulator's calibration report (docs/timing_calibration.md / .json, written by
`tools/emulate.py --timing --calibration`): its summary is what its rows say, its rows are the points file's, and it was
timed on today's engine (its canary, a frozen launch, times the same again)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from calibration import timing as judge  # noqa: E402

REPORT = json.loads(judge.REPORT_JSON.read_text())


def test_summary_is_recomputed_from_the_stored_rows():
    """The whole summary, the held-out judgement of calibration/heldout.json included, is what the rows say."""
    assert judge.summarize(REPORT["rows"], judge.load_points()["heldout"]) == REPORT["summary"]


def test_the_report_was_timed_on_this_engine():
    """The engine's canary (calibration/timing_sentinel.json.gz: one launch of the kernel, frozen as captured), timed
    again on the current engine with the cost table, takes the time the report recorded: the timed emulator and its
    table are the ones the report was timed on. A change to either that moves it makes the report stale: regenerate it
    (tools/emulate.py --timing --calibration --sources DIR), which records the canary's new time."""
    stored = REPORT["sentinel"]
    assert (stored["config"], stored["shape"], stored["launch"]) == (
        judge.SENTINEL["config"], judge.SENTINEL["shape"], str(judge.SENTINEL_LAUNCH.relative_to(REPO)))
    now = judge.sentinel_timed_us()
    assert now == stored["timed_us"], (f"docs/timing_calibration.json is stale: the canary times {now} us on this "
                                       f"engine, {stored['timed_us']} us when the report was written")


def test_the_canary_moves_with_the_engine():
    """The check above can fail: a cost-table change that moves every timed figure moves the canary too."""
    from emu.timing import costs as cost_table

    slower = cost_table.load(overrides={"clock_ghz": cost_table.load().clock_ghz * 0.9})
    assert judge.sentinel_timed_us(slower) > REPORT["sentinel"]["timed_us"]


def test_rows_are_the_points_files_points_with_their_split():
    points = {p["id"]: p for p in judge.load_points()["points"]}
    assert {r["id"] for r in REPORT["rows"]} == set(points)
    for r in REPORT["rows"]:
        p = points[r["id"]]
        assert (r["measured_us"], r["split"], list(r["shape"])) == (p["measured_us"], p["split"], list(p["shape"]))
        assert r["timed_prior_us"] > 0 and r["timed_fitted_us"] > 0, r["id"]
    fit = {r["id"] for r in REPORT["rows"] if r["split"] == "fit"}
    assert fit == set(judge.load_points()["split"]["fit"])


def test_the_fit_touches_only_the_tables_fitted_rows():
    from emu.timing import costs

    fitted = {r.name for r in costs.load().rows.values() if r.fitted}
    assert set(REPORT["fitted_overrides"]) <= fitted


def test_deltas_compare_consecutive_versions_of_one_series():
    rows = [{"id": f"x{i}", "family": "dual", "version": f"v{i}", "order": i, "shape": [1, 1, 1, 1],
             "split": "holdout", "measured_us": m, "timed_fitted_us": t}
            for i, (m, t) in enumerate([(10.0, 10.0), (9.0, 10.0), (9.0, 8.1)])]
    ds = judge.deltas(rows, "timed_fitted_us")
    assert [(d["from"], d["to"]) for d in ds] == [("v0", "v1"), ("v1", "v2")]
    assert ds[0]["measured"] == -0.1 and ds[0]["predicted"] == 0.0 and ds[0]["error"] == 0.1
    assert abs(ds[1]["error"] - (-0.19)) < 1e-9


def test_modeled_column_is_the_frozen_prediction_of_the_retired_model():
    """The report's "modeled μs" column and its tools/model.py summary lines come from the predictions frozen in the
    points file when tools/model.py was retired (its delta RMS did not beat no-change's: the summary says so)."""
    frozen = judge.model_predictions(judge.load_points()["points"])
    assert len(frozen) == 34
    assert {r["id"]: r["model_us"] for r in REPORT["rows"] if r["model_us"] is not None} == frozen
    s = REPORT["summary"]
    assert s["model:deltas_dual"]["n"] == s["no_change:model_deltas_dual"]["n"] == 28
    assert s["model:deltas_dual"]["rms"] > s["no_change:model_deltas_dual"]["rms"]  # why it was retired


def test_heldout_judgement_computes_the_declared_metrics_and_targets():
    """judge_heldout on a synthetic set: per-M errors and bias, the listed pairs' order, the dual-delta RMS against no
    change, targets met or not."""
    rows = [{"id": i, "author": a, "family": "dual", "version": v, "order": o, "shape": [m, 4096, 7168, 1],
             "split": "holdout", "measured_us": meas, "timed_fitted_us": timed}
            for i, a, v, o, m, meas, timed in [("g1", "gau-nernst", "v1", 0, 256, 10.0, 10.5),
                                                ("g2", "gau-nernst", "v2", 1, 256, 9.0, 9.2),
                                                ("g3", "gau-nernst", "v1", 2, 512, 16.0, 20.0),
                                                ("x1", "other", "final", 3, 256, 12.0, 9.0)]]
    declared = {"points": ["g1", "g2", "g3", "x1", "absent"], "pairs": [["x1", "g1"], ["x1", "g2"]],
                "pairs_final": [["x1", "g2"]],
                "targets": {"abs_error_median_max": 0.06, "abs_error_max_max": 0.15, "signed_bias_abs_max_each_M": 0.05}}
    out = judge.judge_heldout(rows, declared)
    assert out["n"] == 4 and out["missing"] == ["absent"]
    assert out["abs_error"]["M512"] == {"n": 1, "median": 0.25, "max": 0.25}
    assert out["signed_bias"]["M256"]["mean"] == round((0.05 + 0.2 / 9 - 0.25) / 3, 4)
    assert out["pair_order"] == {"right": 0, "of": 2}  # x1 measured slower than g1, g2 but timed faster
    assert out["dual_delta_rms"]["n"] == 1  # g1 -> g2 only: x1 is another author's series, g3 another shape
    assert out["dual_delta_rms"]["no_change"] == 0.1 and out["dual_delta_rms"]["timed"] == round(abs(9.2 / 10.5 - 0.9), 4)
    assert out["targets_met"]["abs_error_max"] is False and out["targets_met"]["pair_order"] is False
    assert out["targets_met"]["dual_delta_rms"] is True


def test_a_whole_run_writes_its_report_from_the_points(tmp_path, monkeypatch):
    """judge.run end to end with the timed emulator stubbed (each point's time = measured × a per-author factor, the
    start row moving it): the fit picks from the grid, every point of the points file and the held-out file becomes a
    row, the held-out judgement is in the summary, and both report files are written where asked."""
    factor = {"gau-nernst": 1.02, "arseni_ivanov": 1.3, "novus677": 0.95}

    def fake_time_points(points, sources, overrides=None, jobs=1, progress=None):
        start = (overrides or {}).get("cta_start_cycles", 0) / 1.962e3  # cycles -> us at the table's clock
        return {p["id"]: {"id": p["id"], "timed_us": round(p["measured_us"] * factor[p["author"]] - 2 + start, 3),
                          "status": "match", "message": "", "binds": "stub", "seconds": 0.0} for p in points}

    monkeypatch.setattr(judge, "time_points", fake_time_points)
    out = judge.run("unused", rates=(64, 80), report=(tmp_path / "r.json", tmp_path / "r.md"), out=lambda *a, **k: None,
                    switches={"store_queue_cycles": 64})
    points = judge.load_points()["points"]
    assert {r["id"] for r in out["rows"]} == {p["id"] for p in points} and len(points) > 60
    assert out["switches"] == {"store_queue_cycles": 64} and set(out["fitted_overrides"]) == {
        "l2_to_sm_bytes_per_clk", "cta_start_cycles"}
    held = out["summary"]["heldout:timed_fitted_us"]
    assert held["n"] == held["declared"] and not held["missing"]
    assert "held-out set" in (tmp_path / "r.md").read_text() and json.loads((tmp_path / "r.json").read_text())["rows"]


STATISTICS = {"mean", "best", "unknown"}
RUNNERS = {"GPU MODE on-prem", "Modal", "own loop", "unknown"}


def test_every_point_records_its_statistic_and_runner_with_their_sources():
    """issue 31 item 3: every record of the points file and every point heldout.json adds says what its figure is and
    where it was measured; a 'best' point publishes its spread, a 'mean' point the mean it is judged on."""
    points = json.loads(judge.POINTS.read_text())
    records = (points["points"] + points["novus677_points"] + points["heldout3_points"]
               + json.loads(judge.HELDOUT.read_text())["new_points"])
    assert len(records) == 65 + 32 + 28 + 8
    for p in records:
        assert p["statistic"] in STATISTICS and p["runner"] in RUNNERS, p["id"]
        assert p["statistic_source"] and p["runner_source"], p["id"]
        if p["statistic"] == "best":
            assert p["best_us"] == p["measured_us"] <= p["worst_us"], p["id"]
        assert (p["statistic"] == "mean") == ("mean_us" in p), p["id"]


def test_a_published_mean_is_what_a_point_is_judged_on(tmp_path):
    """load_points judges a record on mean_us where one is published (measured_us holds it from then on), else on its
    one published figure; the spread is the fastest..slowest repeat where both are published."""
    points = json.loads(judge.POINTS.read_text())
    rec = dict(points["points"][0], measured_us=16.5, mean_us=17.0, best_us=16.4, worst_us=17.9)
    points["points"] = [rec] + points["points"][1:]
    path = tmp_path / "points.json"
    path.write_text(json.dumps(points))
    loaded = judge.load_points(path)["points"][0]
    assert loaded["measured_us"] == 17.0 == judge.judged_value(rec) and judge.spread(rec) == (16.4, 17.9)
    plain = judge.load_points()["points"][0]
    assert plain["measured_us"] == 16.5 and judge.spread(plain) == (16.5, 16.5)


def test_the_first_sets_pairs_inside_a_published_spread():
    """Of heldout.json's 35 pairs, only arseni_ivanov's points publish a spread (⚡ 12.6 .. 🐌 14.4 us at 256x4096): the
    four pairs at 256x4096 whose other point measured 14.4 us lie inside it (docs/timing_hypotheses.md section 9.6);
    the committed report's timed rows say which of the 35 are out of order (B0: 9, one of them inside the spread)."""
    data = judge.load_points()
    rows = [dict(r, spread_us=list(judge.spread({p["id"]: p for p in data["points"]}[r["id"]])))
            for r in REPORT["rows"]]
    xs = judge.pairs_by_spread(rows, data["heldout"]["pairs"])
    inside = sorted(x["pair"][1] for x in xs if x["inside_spread"])
    assert len(xs) == 35 and inside == ["gau-dual-v1e-256x4096x7168", "gau-dual-v1f-256x4096x7168",
                                        "gau-dual-v1g-256x4096x7168", "novus-dual-k9-256x4096x7168"]
    assert all(x["pair"][0] == "arseni-dual-final-256x4096x7168" for x in xs if x["inside_spread"])
    wrong = [x for x in xs if not x["in_order"]]
    assert len(wrong) == 9 and [x["pair"][1] for x in wrong if x["inside_spread"]] == ["novus-dual-k9-256x4096x7168"]
