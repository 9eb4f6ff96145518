"""novus677's kernels 1-8 from their own commits (calibration/novus_versions.py, calibration/novus.py --kernel N): the
reserve declared as calibration/heldout2.json. Their sources are not in this repository: the tests read them from
$NOVUS_DUAL_GEMM_VERSIONS or a git directory ($NOVUS_DUAL_GEMM_GIT, default the mirror) and skip with the reason
otherwise; the emulated runs need nvcc too."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from calibration import novus, novus_versions  # noqa: E402
from tests.calibration.test_public_kernels import NOVUS_NOTES  # noqa: E402


def _where_or_skip():
    where, why = novus_versions.find_source()
    if where is None:
        pytest.skip(why)
    return where


def _compiler_or_skip():
    try:
        from calibration.gau import include_dirs, nvcc_path
        include_dirs(nvcc_path())
    except Exception as e:  # no compiler / headers here
        pytest.skip(f"cannot compile his kernel: {e}")


def test_every_version_parses_and_kernel_9_parses_to_the_default_dispatch():
    """Steps 1-4 on each commit (no compile): the fingerprints hold, the dispatch parses, the benchmark and test shapes
    have a launch; kernel 9 read this way gives calibration/novus.py's DISPATCH for every shape it lists."""
    where = _where_or_skip()
    for n in range(1, 10):
        v, src, dispatch, notes = novus_versions.load(n, where)
        for shape in novus_versions.BENCH_SHAPES + (novus_versions.TEST_SHAPE,):
            launch = novus_versions.launch_for(v, dispatch, shape)
            assert launch[0] == shape[2] and launch[8] >= (shape[0] // launch[1]) * (shape[1] // launch[2]) // 2
    v, _, dispatch, _ = novus_versions.load(9, where)
    assert {s: novus_versions.launch_for(v, dispatch, s) for s in novus.DISPATCH} == novus.DISPATCH
    assert novus_versions.instantiation(v, novus.DISPATCH[(256, 512, 256)]) == novus.instantiation(
        novus.DISPATCH[(256, 512, 256)])


def test_the_declared_times_are_the_recorded_commit_messages():
    """The reserve's measured times (calibration/b200_points.json's novus677 points, declared in heldout2.json) are
    the times in each kernel's commit message as novus_versions.COMMITS records it, and each point names that commit.
    Needs no source: the recorded messages are checked against the commits themselves below."""
    import json

    decl = json.loads((REPO / "calibration" / "heldout2.json").read_text())
    records = {p["id"]: p for p in json.loads((REPO / "calibration" / "b200_points.json").read_text())["novus677_points"]}
    for n in range(1, 9):
        commit, message = novus_versions.COMMITS[n]
        times = [float(x) for x in message.split(": ")[1].split("/")]
        ids = [i for i in decl["points"] if i.startswith(f"novus-dual-k{n}-")]
        assert len(ids) == 4 and [records[i]["measured_us"] for i in ids] == times
        assert {records[i]["source"]["commit"] for i in ids} == {commit}


def test_the_recorded_commit_messages_are_the_commits():
    """novus_versions.COMMITS holds each commit's own subject line (read from a git directory of his repository)."""
    import subprocess

    where = _where_or_skip()
    if not (Path(where) / "HEAD").is_file():
        pytest.skip(f"{where} holds the versions' files, not a git directory: the commit messages cannot be read")
    for n in range(1, 9):
        commit, message = novus_versions.COMMITS[n]
        got = subprocess.run(["git", f"--git-dir={where}", "log", "-1", "--format=%s", commit],
                             capture_output=True, text=True).stdout.strip()
        assert got == message


def test_a_source_that_does_not_match_is_unsupported():
    where = _where_or_skip()
    files = novus_versions.read_files(where, 6)
    src, _ = novus_versions.compose_source(files)
    v = novus_versions.VERSIONS[6]
    assert not novus_versions.check_host(v, src + files["submission.py"])
    assert novus_versions.check_host(v, src.replace("<<<GRID_DIM, BLOCK_DIM", "<<<2 * GRID_DIM, BLOCK_DIM"))
    with pytest.raises(novus_versions.Unsupported):
        novus_versions.parse_dispatch(novus_versions.VERSIONS[7], src)  # kernel 6's LAUNCH has 8 arguments, not 9


def test_a_dispatch_without_the_shapes_launch_is_unsupported():
    """Needs no source: a parsed dispatch that has no launch for a benchmark shape."""
    with pytest.raises(novus_versions.Unsupported):
        novus_versions.launch_for(novus_versions.VERSIONS[4], {"any": dict(
            zip(novus_versions.VERSIONS[4].launch_args, (7168, 128, 64, 256, 5, True, True, False)))}, (256, 4096, 7168))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "leaderboard"])
@pytest.mark.parametrize("kernel", range(1, 9))
def test_novus_kernel_version_matches_at_the_test_shape(kernel, mode):
    where = _where_or_skip()
    _compiler_or_skip()
    cfg = novus.version_config(kernel, novus_versions.TEST_SHAPE, where)
    res = novus.run_one(where, cfg, mode)
    print(res.line())
    assert res.status == "match", res.message
    rules = {n.rule for n in res.notes}
    assert "tmem-lane-quadrant-from-warp" in rules and rules <= NOVUS_NOTES, rules
    assert "bulk-copy-reads-past-allocation" in rules  # K/256 = 1 < his 4-5 stages, as kernel 9's test launch
