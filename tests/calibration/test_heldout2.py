"""The second declared set (calibration/heldout2.json, docs/timing_hypotheses.md section 8): novus677's kernels 1-8,
declared before any timed run. Its points are records of calibration/b200_points.json (key novus677_points) that
neither the fit nor calibration/heldout.json's judgement sees."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from calibration import timing as judge  # noqa: E402

DECL = json.loads((REPO / "calibration" / "heldout2.json").read_text())
POINTS_FILE = json.loads((REPO / "calibration" / "b200_points.json").read_text())
HELDOUT = json.loads((REPO / "calibration" / "heldout.json").read_text())


def test_every_declared_point_is_a_record_and_none_is_fitted_or_in_the_first_set():
    records = {p["id"]: p for p in POINTS_FILE["novus677_points"]}
    assert len(DECL["points"]) == len(set(DECL["points"])) == 32 == len(records)
    assert set(DECL["points"]) == set(records)
    first = set(HELDOUT["points"]) | {p["id"] for p in HELDOUT["new_points"]}
    assert not set(DECL["points"]) & first
    fit = set(POINTS_FILE["split"]["fit"])
    assert fit == set(DECL["fit"]) == set(HELDOUT["fit"]) and not set(DECL["points"]) & fit
    gau_ids = {p["id"] for p in POINTS_FILE["points"]}
    assert not set(DECL["points"]) & gau_ids
    for i in DECL["points"]:
        p = records[i]
        assert p["split"] == "holdout2" and p["author"] == "novus677" and p["family"] == "dual"
        assert i == f"novus-dual-k{p['kernel']}-{'x'.join(map(str, p['shape'][:3]))}" and 1 <= p["kernel"] <= 8
        assert p["source"]["url"].endswith(p["source"]["commit"]) and p["measured_us"] > 0
        assert p["label"].startswith("measured (B200")
    assert DECL["counts"] == {"novus677 dual M=256": 16, "novus677 dual M=512": 16}
    assert sum(records[i]["shape"][0] == 256 for i in DECL["points"]) == 16


def test_the_delta_series_run_k1_to_k9_per_shape():
    k9 = {p["id"]: p for p in HELDOUT["new_points"]}
    for shape, ids in DECL["delta_series"].items():
        assert ids[:8] == [f"novus-dual-k{n}-{shape}" for n in range(1, 9)] and ids[:8] == [
            i for i in DECL["points"] if i.endswith(shape)]
        assert ids[8] == f"novus-dual-k9-{shape}" and ids[8] in k9


def test_the_first_set_and_the_fit_do_not_change():
    """The default load is the 67 points of before: 58 held out (calibration/heldout.json), 9 fit; no record of the
    second set among them (the report's judgement on heldout.json is the committed one: test_timing)."""
    data = judge.load_points()
    ids = {p["id"] for p in data["points"]}
    assert len(data["points"]) == 67 and not ids & set(DECL["points"])
    assert sum(p["split"] == "fit" for p in data["points"]) == 9
    assert set(HELDOUT["points"]) <= ids and len(HELDOUT["points"]) == 58


def test_a_run_on_the_second_set_times_only_it_and_the_fit_points(tmp_path, monkeypatch):
    """judge.run(point_set="heldout2") with the timed emulator stubbed (time = measured × a factor per kernel): the rows
    are the 9 fit points, the 32 declared points and kernel 9's 4 (the deltas' end); the summary judges the set
    (32 points, 32 deltas, no pairs) and leaves heldout.json's judgement out."""
    def fake_time_points(points, sources, overrides=None, jobs=1, progress=None):
        start = (overrides or {}).get("cta_start_cycles", 0) / 1.962e3
        return {p["id"]: {"id": p["id"], "timed_us": round(p["measured_us"] * (1 + 0.01 * p.get("kernel", 0)) + start, 3),
                          "status": "match", "message": "", "binds": "stub", "seconds": 0.0} for p in points}

    monkeypatch.setattr(judge, "time_points", fake_time_points)
    out = judge.run("unused", rates=(64, 80), report=(tmp_path / "r.json", tmp_path / "r.md"), out=lambda *a, **k: None,
                    with_prior=False, point_set="heldout2")
    ids = {r["id"] for r in out["rows"]}
    assert len(ids) == 45 and set(DECL["points"]) <= ids and set(DECL["fit"]) <= ids
    assert {r["split"] for r in out["rows"] if r["id"] in DECL["points"]} == {"holdout2"}
    s = out["summary"]
    assert "heldout:timed_fitted_us" not in s
    j = s["heldout2:timed_fitted_us"]
    assert (j["n"], j["declared"], j["missing"], j["delta_rms"]["n"]) == (32, 32, [], 32)
    assert j["delta_rms"]["no_change"] == 0.0838 and j["sign_accuracy"]["of"] == 9
    assert set(j["signed_bias"]) == {"M256", "M512"}
    assert "second declared set" in (tmp_path / "r.md").read_text()
