"""calibration/public.py and the points file: every public B200 point names the file its time was measured on, pinned
at a commit of a public repository, and every such file runs unmodified through harness.runner.

The points file and the mapping are checked without any source. The files are not in this repository: the runs (slow)
read them from the folder $PUBLIC_SOURCES names (`python -m calibration.public sources` says how to fill it) and skip
with the reason where it names none, a file is absent or no nvcc is here. Only a named folder counts, not the tools'
default one: each file costs a compile (about 100 s for a CUDA file on 2 CPUs; the 49 files, over an hour), CI names
none (no network; the generic path is tested there on the team's stand-ins, tests/harness/test_runner.py), and the
whole run's result is committed as docs/public_files.md (`python -m calibration.public table` re-makes it)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from calibration import outcomes, public
from calibration.public import PublicFile, all_points, file_of, local_file, public_files
from harness.cuda_build import compiler_missing

REPO = Path(__file__).resolve().parents[2]
DOC = json.loads(public.POINTS.read_text())
GAU = [p for p in DOC["points"]]
DESIGN_FIELDS = ("mma_tile", "cta_tile", "cta_group", "cluster", "block_k", "stages", "threads", "persistent",
                 "products", "a_collector", "split_k", "swap_ab", "pdl", "warp_roles", "epilogue", "scale_load", "tma_ab",
                 "output", "launches", "grid", "dynamic_smem", "tmem_columns", "change")
BENCHMARKS = {"dual": [[256, 4096, 7168, 1], [512, 4096, 7168, 1], [256, 3072, 4096, 1], [512, 3072, 7168, 1]],
              "gemm": [[128, 7168, 16384, 1], [128, 4096, 7168, 1], [128, 7168, 2048, 1]]}
GAU_REPO, GAU_COMMIT = "gau-nernst/gpu-mode-kernels", "aee9cda6b6444f774ce5eaee1ec1a5c84acaa521"


# ---------------------------------------------------------------------------------------------- the points file
def test_gau_points_are_well_formed_and_labelled():
    ids = [p["id"] for p in GAU]
    assert len(ids) == len(set(ids)) == 8 * 4 + 11 * 3
    for p in GAU:
        assert p["problem"] == {"dual": "nvfp4_dual_gemm", "gemm": "nvfp4_gemm"}[p["family"]]
        assert p["shape"] in BENCHMARKS[p["family"]], p["id"]
        assert p["id"] == f"gau-{p['family']}-{p['version']}-{'x'.join(str(x) for x in p['shape'][:3])}"
        assert isinstance(p["measured_us"], (int, float)) and 1 < p["measured_us"] < 100
        assert p["label"] == "measured (B200, GPU MODE leaderboard)" == DOC["label"]
        assert p["split"] in ("fit", "holdout")
        assert p["runnable"] == (p["version"] != "mix") and (p["use"] or p.get("why_not_used"))
    for fam in ("dual", "gemm"):  # the README tables, as transcribed: one time per benchmark shape of every version
        for v in {p["version"] for p in GAU if p["family"] == fam}:
            assert sorted(p["shape"] for p in GAU if p["family"] == fam and p["version"] == v) == sorted(BENCHMARKS[fam])
    assert {p["version"] for p in GAU if p["family"] == "dual"} == {"v1", "v1b", "v1c", "v1d", "v1e", "v1f", "v1g", "v2"}
    assert {p["version"] for p in GAU if p["family"] == "gemm"} == {
        "v0", "v0b", "v0c", "v1", "v1b", "v2", "v2b", "v3", "v3b", "v4", "mix"}


def test_split_is_the_decided_rule():
    split = DOC["split"]
    assert split["decided"] == "2026-11-26" and "timed" in split["decided_before"] and split["rule"] and split["rationale"]
    fit = {p["id"] for p in GAU if p["split"] == "fit"}
    assert fit == set(split["fit"]) == {p["id"] for p in GAU if p["family"] == "gemm" and p["version"] in ("v0", "v3b", "v4")}
    assert len(fit) == 9 and all(p["split"] == "holdout" for p in GAU if p["family"] == "dual")


def test_design_records_are_complete():
    for p in GAU:
        if not p["runnable"]:
            assert "design" not in p and p["not_runnable"]
            continue
        assert all(f in p["design"] for f in DESIGN_FIELDS), (p["id"], [f for f in DESIGN_FIELDS if f not in p["design"]])
        d = p["design_summary"]
        assert d.split()[1] == "x".join(map(str, p["design"]["mma_tile"])), p["id"]
        assert ("split-K" in d) == (p["design"]["split_k"] > 1), p["id"]


def test_points_judged_are_the_used_and_runnable_ones():
    """What calibration.public and calibration.timing run: 59 of gau-nernst's points (not the v4 + v3b mix, not gemm v1
    whose output its author calls invalid), every declared set's points, heldout.json's arseni and novus ones."""
    points = all_points()
    assert len({p["id"] for p in points}) == len(points)
    gau = {p["id"] for p in points if p["author"] == "gau-nernst"}
    assert gau == {p["id"] for p in GAU if p["version"] != "mix" and not (p["family"] == "gemm" and p["version"] == "v1")}
    assert len(gau) == 59 and set(DOC["split"]["fit"]) <= gau
    by_author = {a: sum(p["author"] == a for p in points) for a in ("arseni_ivanov", "novus677", "teelaitila",
                                                                     "NaregAmirianMegan")}
    assert by_author == {"arseni_ivanov": 4, "novus677": 36, "teelaitila": 24, "NaregAmirianMegan": 4}


# ---------------------------------------------------------------------------------------------- point -> file
def test_every_point_names_a_pinned_file():
    for p in all_points():
        f = file_of(p)
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", f.repo) and re.fullmatch(r"[0-9a-f]{40}", f.commit), p["id"]
        assert f.path.endswith(".py") and " " not in f.path, (p["id"], f.path)
        if p["author"] == "gau-nernst":
            assert (f.repo, f.commit) == (GAU_REPO, GAU_COMMIT) and f.url == p["source"]["design_from"]
            assert f.path == f"nvidia/nvfp4_{'dual_gemm' if p['family'] == 'dual' else 'gemm'}/submission_{p['version']}.py"
    k9 = next(p for p in all_points() if p["id"] == "novus-dual-k9-256x3072x4096")
    assert file_of(k9).path == "submission.py"  # of the four files its record lists, the one the leaderboard ran


def test_public_files_are_each_file_once_with_their_points():
    files = public_files()
    assert len({e["file"] for e in files}) == len(files)
    named = [i for e in files for i in e["points"]]
    assert sorted(named) == sorted(p["id"] for p in all_points())
    breadth = [e for e in files if not e["points"]]
    assert breadth and all(e["file"].repo == "jIab-b/nvfp4_gemm" and e["problem"] == "nvfp4_gemm" for e in breadth)
    timed = [e for e in breadth if "published" in e]  # public_files.json's; the rest outcomes.json declares
    assert len(timed) == 15 and all(len(e["published"]["mean_us"]) == len(e["published"]["shapes"]) == 3 for e in timed)
    declared = {(e["repo"], e["commit"], e["path"]) for e in outcomes.declared()["files"]}
    assert {(e["file"].repo, e["file"].commit, e["file"].path) for e in files} == declared


def test_local_file_says_what_is_missing_and_how_to_fetch_it(tmp_path):
    point = all_points()[0]
    path, why = local_file(point, tmp_path)
    assert path is None and str(tmp_path) in why and "python -m calibration.public sources" in why
    target = file_of(point).local(tmp_path)
    target.parent.mkdir(parents=True)
    target.write_text("# the file\n")
    assert local_file(point, tmp_path) == (target, "")


def test_sources_come_from_a_clone_at_the_pinned_commit(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    clone.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(clone), *a], check=True, capture_output=True, text=True)  # noqa
    git("init", "-q")
    (clone / "dual").mkdir()
    (clone / "dual" / "submission.py").write_text("first\n")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    first = git("rev-parse", "HEAD").stdout.strip()
    (clone / "dual" / "submission.py").write_text("second\n")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "two")
    f = PublicFile("someone/kernels", first, "dual/submission.py")
    monkeypatch.setattr(public, "public_files", lambda: [{"file": f}])
    assert public.fill_from_clone(clone, "someone/kernels", tmp_path / "src") == [str(f.local(tmp_path / "src"))]
    assert f.local(tmp_path / "src").read_text() == "first\n"  # the pinned commit's bytes, not the clone's head


# ---------------------------------------------------------------------------------------------- the files, run
def _file_or_skip(entry) -> Path:
    if not os.environ.get(public.ENV_VAR):
        pytest.skip(f"${public.ENV_VAR} names no folder of public sources (module docstring: why not the default)")
    path = entry["file"].local(public.sources_dir())
    if not path.is_file():
        pytest.skip(f"{entry['file'].url} is not in {public.sources_dir()} (python -m calibration.public sources)")
    if "load_inline" in path.read_text() and compiler_missing():
        pytest.skip(compiler_missing())
    return path


ENTRIES = public_files()


@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['file'].repo.split('/')[0]}-{e['file'].commit[:8]}-"
                                                 f"{Path(e['file'].path).stem}" for e in ENTRIES])
def test_public_file_runs_unmodified_at_its_smallest_test_shape(entry):
    """A point's file MATCHes (notes allowed: not this package's code); a file that is not a point MATCHes, or cannot
    run, said in one line with its place (a cuBLAS call, say), or fails in the emulator with the PTX line of what
    it cannot do or of its own bug by the ISA (an opcode not implemented, a hazard): never a traceback."""
    path = _file_or_skip(entry)
    small, _ = public.task_shapes(entry["problem"])
    res = public.run_point({"id": path.name, "shape": list(small), "problem": entry["problem"],
                            "design_from": {"repo": entry["file"].repo, "commit": entry["file"].commit,
                                            "path": entry["file"].path}}, mode="leaderboard")
    if entry["points"]:
        assert res.passed, (res.summary(), res.message, res.construct)
    else:
        said = res.construct or res.message
        assert "Traceback" not in said and (res.passed or (res.exit_code == 3 and res.construct) or (
            res.status in ("hazard", "unsupported", "deadlock") and "PTX line" in said) or (
            res.status in ("mismatch", "refused") and said)), (res.summary(), said)


@pytest.mark.slow
@pytest.mark.parametrize("point", [p for p in GAU if p["runnable"] and p["use"]], ids=lambda p: p["id"])
def test_gau_design_record_is_what_his_host_code_launches(point):
    """The design record's grid, threads, shared memory, cluster and launch count are what the file's own host code
    launches at the point's shape (captured, not emulated)."""
    from harness.runner import run_cases

    path = _file_or_skip({"file": file_of(point), "problem": point["problem"]})
    (res,) = run_cases(path, [(tuple(point["shape"]), "leaderboard", 1111)], point["problem"], schedules=1, emulate=False)
    d = point["design"]
    assert res.status == "captured" and len(res.launches) == d["launches"], (res.summary(), res.message)
    first = res.launches[0]
    assert (first["grid"], first["block"][0], first["dynamic_smem"], first["cluster"]) == (
        d["grid"], d["threads"], d["dynamic_smem"], d["cluster"]), point["id"]


@pytest.mark.slow
def test_nareg_frees_tensor_memory_its_other_warps_still_read():
    """NaregAmirianMegan's submission_ptx.py deallocates the accumulator with the barrier before it commented out: the
    runner says so at every schedule (emu.ordering's DEALLOC_WHILE_READ, a note), where the emulator once poisoned the
    freed columns and one schedule in four gave a wrong C with no word of why."""
    entry = next(e for e in ENTRIES if e["file"].path == "nvfp4_dual_gemm/submission_ptx.py")
    path = _file_or_skip(entry)
    from harness.runner import run_submission

    res = run_submission(path, (256, 256, 512, 1), mode="leaderboard", schedules=4, allow_notes=True)
    assert res.passed and len(res.runs) == 4, res.summary()
    (note,) = [n for n in res.notes if n["rule"] == "tcgen05-dealloc-while-read"]
    assert "warp 0 deallocated tensor-memory columns 0-511" in note["detail"] and "warps 1, 2, 3" in note["detail"]


# ---------------------------------------------------------------------------------------------- the table
def test_table_takes_a_points_benchmark_verdicts_from_its_timed_check(tmp_path):
    """A point's file at its benchmark shapes is judged by the timed calibration's check of C, labelled with the report
    it came from; a file without points by its own runs; an absent file says so."""
    report = tmp_path / "timing_calibration.json"
    report.write_text(json.dumps({"rows": [{"id": "p-256", "status": "match"}, {"id": "p-512", "status": "unchecked"}]}))
    small = {"shape": [128, 256, 256, 1], "mode": "leaderboard", "clusters": "all", "status": "match",
             "verdict": "MATCH", "construct": "", "where": "", "message": "", "notes": [], "bridges": ["load-inline"],
             "launches": 1, "seconds": 1.0}
    failed = dict(small, clusters=1, shape=[128, 7168, 16384, 1], status="cannot-run", verdict="CANNOT RUN",
                  construct="cublasLtMatmul", where="sub_cub.py:12")
    rows = [{"repo": "a/b", "commit": "0" * 40, "path": "k.py", "problem": "nvfp4_dual_gemm", "author": "a",
             "points": ["p-256", "p-512"], "runs": [small]},
            {"repo": "c/d", "commit": "1" * 40, "path": "sub_cub.py", "problem": "nvfp4_gemm", "author": "c",
             "points": [], "runs": [small, failed]},
            {"repo": "e/f", "commit": "2" * 40, "path": "x.py", "problem": "nvfp4_gemm", "author": "e", "points": [],
             "runs": [], "absent": "/nowhere/x.py"}]
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    public.write_table(rows, md, js, timed=public.timed_checks([report]))
    lines = {line.split("`")[1]: line for line in md.read_text().splitlines() if line.startswith("| [")}
    assert "timed check, 2 points: MATCH (timing_calibration.json), UNCHECKED (timing_calibration.json)" in lines["k.py"]
    assert "| MATCH | CANNOT RUN |" in lines["sub_cub.py"] and "cublasLtMatmul (sub_cub.py:12)" in lines["sub_cub.py"]
    assert "not run: source absent" in lines["x.py"]
    assert json.loads(js.read_text())["rows"][0]["timed_checks"] == {"p-256": ["match", "timing_calibration.json"],
                                                                     "p-512": ["unchecked", "timing_calibration.json"]}
    with pytest.raises(ValueError, match="breadth, all or none"):
        public.table(benchmarks=True)


def test_a_re_run_of_some_files_updates_the_table(tmp_path):
    """table --only: the files re-run replace their rows, the others stay, in the files' order."""
    files = [e["file"] for e in public_files()[:3]]
    row = lambda f, verdict: {"repo": f.repo, "commit": f.commit, "path": f.path, "runs": [verdict]}  # noqa: E731
    js = tmp_path / "t.json"
    js.write_text(json.dumps({"rows": [row(files[0], "old"), row(files[1], "old")]}))
    rows = public.merged([row(files[2], "new"), row(files[0], "new")], js)
    assert [(r["path"], r["commit"], r["runs"]) for r in rows] == [
        (files[0].path, files[0].commit, ["new"]), (files[1].path, files[1].commit, ["old"]),
        (files[2].path, files[2].commit, ["new"])]
