"""Calibration on two more B200-verified kernels for this problem (issue 17): arseni_ivanov's CuTe DSL kernel
(calibration/arseni.py) and novus677's CUDA + inline-PTX kernel 9 (calibration/novus.py).

Their sources are not in this repository: the emulated runs need /tmp/arseni/arseni.py and /tmp/novus/ (or
$ARSENI_DUAL_GEMM / $NOVUS_DUAL_GEMM_SRC) and skip with the reason otherwise (CI has no network). Both kernels MATCH
with notes: each note names a PTX model violation the kernel survived on B200 (emu/precedents.py). The unit tests
at the end need no source.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from emu import ordering  # noqa: E402
from calibration import arseni, novus  # noqa: E402

# the tcgen05 ordering rules (emu.ordering): both kernels trip them (no tcgen05.fence; scale columns single-buffered)
TCGEN05_ORDERING = {ordering.MMA_THEN_CP, ordering.FENCE_AFTER, ordering.FENCE_BEFORE}
ARSENI_NOTES = {"mbarrier-init-unpublished", "mbarrier-used-before-init", "bulk-store-without-proxy-fence",
                "bulk-store-source-unsynchronized", "bulk-store-source-reused-before-read",
                "bulk-store-reads-after-exit", "tmem-outside-allocation"} | TCGEN05_ORDERING
NOVUS_NOTES = {"bulk-copy-reads-past-allocation", "async-copy-lands-after-exit",
               "tmem-lane-quadrant-from-warp"} | TCGEN05_ORDERING


def _novus_or_skip():
    folder, why = novus.find_source()
    if folder is None:
        pytest.skip(why)
    try:
        from calibration.gau import include_dirs, nvcc_path
        include_dirs(nvcc_path())
    except Exception as e:  # no compiler / headers here
        pytest.skip(f"cannot compile his kernel: {e}")
    return folder


def _arseni_or_skip():
    path, why = arseni.find_source()
    if path is None:
        pytest.skip(why)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "leaderboard"])
@pytest.mark.parametrize("config", novus.DEFAULT_CONFIGS)
def test_novus_kernel_matches(config, mode):
    folder = _novus_or_skip()
    res = novus.run_one(folder, novus.CONFIGS[config], mode)
    print(res.line())
    assert res.status == "match", res.message
    rules = {n.rule for n in res.notes}
    assert "tmem-lane-quadrant-from-warp" in rules and rules <= NOVUS_NOTES, rules
    if config == "test":  # K/256 = 1 < 4 stages: three stages of scale copies read past the tensors
        assert "bulk-copy-reads-past-allocation" in rules
    else:
        assert "bulk-copy-reads-past-allocation" not in rules


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "leaderboard"])
@pytest.mark.parametrize("config", ["small", "c1x1"])
def test_arseni_kernel_matches(config, mode):
    path = _arseni_or_skip()
    res = arseni.run_one(path, arseni.CONFIGS[config], mode)
    print(res.line())
    assert res.status == "match", res.message
    rules = {n.rule for n in res.notes}
    assert rules <= ARSENI_NOTES and "bulk-store-without-proxy-fence" in rules, rules
    if config == "small":
        assert res.launch["cluster"] == (2, 1, 1)
    else:  # his 1-CTA kernels allocate 256 tensor-memory columns and use 304; one C stage is rewritten
        assert {"tmem-outside-allocation", "bulk-store-source-reused-before-read"} <= rules


@pytest.mark.slow
def test_novus_device_edits_are_mechanical():
    folder = _novus_or_skip()
    src = novus.read_source(folder)
    assert not novus.check_host(src)
    cu, edits = novus.device_source(src, novus.instantiation(novus.DISPATCH[(256, 512, 256)]))
    assert "ATen/" not in cu and "torch/" not in cu and "cuTensorMapEncodeTiled(" not in cu and len(edits) == 4
    body = cu.split("\n", 1)[1].rsplit("\n// emu: instantiate", 1)[0]
    assert body in src.replace("#include <ATen/ATen.h>\n", "").replace("#include <ATen/core/Tensor.h>\n", "").replace(
        "#include <ATen/cuda/CUDAContext.h>\n", "").replace("#include <ATen/cuda/CUDAUtils.h>\n", "").replace(
        "#include <torch/library.h>\n", "")


# ---------------------------------------------------------------------------------------------- no source needed
def test_novus_dispatch_covers_the_task_shapes_and_launch_formulas():
    import utils

    task = utils.load_task()
    shapes = {(c["m"], c["n"], c["k"]) for c in task["tests"] + task["benchmarks"]}
    assert shapes <= set(novus.DISPATCH)
    for (m, n, k), launch in novus.DISPATCH.items():
        assert launch[0] == k and launch[8] == (m // launch[1]) * (n // launch[2])  # grid = tiles
    hl = novus.host_launch(novus.CONFIGS["test"], {x: 1 << 20 for x in ("a", "b1", "b2", "sfa", "sfb1", "sfb2", "c")})
    assert hl["dynamic_smem"] == 4 * (256 * 128 // 2 * 3 + 3 * 16 * 128) and hl["block"] == (192, 1, 1)
    assert [len(p) for p in hl["params"]] == [4, 4, 128, 128, 128, 8, 8, 8, 8]


def test_arseni_dispatch_follows_his_custom_kernel():
    assert arseni.kernel_for(256, 4096) == "small" and arseni.kernel_for(512, 2304) == "c1x1"
    assert arseni.kernel_for(512, 3072) == "c1x2"
    assert {c.kernel for c in arseni.CONFIGS.values()} == set(arseni.KERNELS)
