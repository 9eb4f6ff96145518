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
