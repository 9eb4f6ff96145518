"""nvfp4_gemm (issue 23) on a machine without a B200: the two submittable files and their rules, the single GEMM's
configs and budgets, its input checks, its offline compile, and its reference against an independent float64 product.

The kernel is submission.py's (KernelConfig.problem "nvfp4_gemm"); nvfp4_gemm/submission.py is generated from it
(tools/gemm_submission.py) and differs in its leaderboard header only.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import submission as S  # noqa: E402
from tools import gemm_submission, preflight  # noqa: E402
from problem_files import load_reference, task_path  # noqa: E402
from utils import load_task, verbose_allclose  # noqa: E402

GEMM = "nvfp4_gemm"
R = load_reference(GEMM)
TASK = load_task(task_path(GEMM))
SHAPES = sorted({(c["m"], c["n"], c["k"], c["l"]) for c in TASK["tests"] + TASK["benchmarks"]})
BENCHMARKS = [(c["m"], c["n"], c["k"], c["l"]) for c in TASK["benchmarks"]]
# Every file a user submits, with the header its leaderboard needs (docs/leaderboard.md §5, §9)
SUBMITTABLE = {"submission.py": "nvfp4_dual_gemm", "nvfp4_gemm/submission.py": "nvfp4_gemm"}


# ------------------------------------------------------------------ the submittable files (docs/leaderboard.md §4)
@pytest.mark.parametrize("path", SUBMITTABLE)
def test_no_stream_word_in_any_submittable_file(path):
    hits = [i + 1 for i, line in enumerate((REPO / path).read_text().splitlines()) if "stream" in line.lower()]
    assert not hits, f"{path}: the leaderboard rejects any file containing 'stream' (any case); lines {hits}"


@pytest.mark.parametrize("path", SUBMITTABLE)
def test_submittable_headers_name_their_leaderboard(path):
    lines = (REPO / path).read_text().splitlines()
    assert lines[:2] == [f"#!POPCORN leaderboard {SUBMITTABLE[path]}", "#!POPCORN gpu NVIDIA"]


@pytest.mark.parametrize("path", SUBMITTABLE)
def test_submittable_files_pass_preflights_lint(path):
    headers = preflight.GEMM_HEADERS if SUBMITTABLE[path] == GEMM else preflight.HEADERS
    assert preflight.lint_source((REPO / path).read_text(), str(REPO / path), headers) == []


def test_lint_refuses_the_wrong_header_and_the_word():
    text = (REPO / "nvfp4_gemm/submission.py").read_text()
    assert any("missing header" in p for p in preflight.lint_source(text, str(REPO / "x.py")))  # the dual header
    bad = text.replace("# The two leaderboards", "# Two leaderboards, one STREAM", 1)
    assert any("'stream'" in p for p in preflight.lint_source(bad, str(REPO / "x.py"), preflight.GEMM_HEADERS))


def test_gemm_submission_is_generated_from_submission_py():
    """One kernel source: nvfp4_gemm/submission.py is submission.py with the other header (python tools/gemm_submission.py)."""
    assert (REPO / "nvfp4_gemm/submission.py").read_text() == gemm_submission.render((REPO / "submission.py").read_text()), \
        "nvfp4_gemm/submission.py is out of date: run python tools/gemm_submission.py"
    assert gemm_submission.main(["--check"]) == 0
    assert preflight.lint_gemm_submission() == []


def test_the_generator_changes_the_header_only():
    text = (REPO / "submission.py").read_text()
    out = gemm_submission.render(text)
    assert out.splitlines()[0] == "#!POPCORN leaderboard nvfp4_gemm"
    assert out.splitlines()[1:] == text.splitlines()[1:]
    with pytest.raises(ValueError, match="must start with"):
        gemm_submission.render("#!POPCORN leaderboard other\n")


# ------------------------------------------------------------------ configs and budgets
def test_gemm_configs_are_named_apart_and_select_the_single_product():
    assert all(c.name.startswith("gemm_") and c.single_product and c.problem == GEMM for c in S.GEMM_TUNE_SPACE)
    assert not any(c.name.startswith("gemm_") or c.single_product for c in S.TUNE_SPACE)
    assert len({c.name for c in S.GEMM_TUNE_SPACE}) == len(S.GEMM_TUNE_SPACE)


def test_gemm_config_table_entries_are_tunable_and_implementable():
    assert sorted(S.GEMM_CONFIG_TABLE) == sorted(BENCHMARKS)
    for shape, cfg in S.GEMM_CONFIG_TABLE.items():
        assert cfg in S.GEMM_TUNE_SPACE, f"{cfg.name} for {shape} is not in GEMM_TUNE_SPACE"
        assert S.DualGemmKernel.can_implement(cfg, *shape)[0]
        assert cfg.mma_tile_mn[0] == 128 and cfg.cluster_mn == (1, 1), "M = 128: 1-CTA tiles along N"


def test_every_gemm_task_shape_has_an_implementable_config():
    for shape in SHAPES:
        cfg = S.config_for(*shape, GEMM)
        ok, why = S.DualGemmKernel.can_implement(cfg, *shape)
        assert ok and cfg.single_product, f"{shape}: {why}"
        assert S.candidate_configs(*shape, GEMM), f"no tuning candidate for {shape}"
        assert all(c.single_product for c in S.candidate_configs(*shape, GEMM))


def test_default_gemm_config_is_the_fewest_bytes_into_the_busiest_sm():
    """What won the leaderboard at M = 128 (gau-nernst v4, docs/leaderboard.md §9), from the rule alone."""
    pick = {s: (S.default_gemm_config(*s).cta_tile_mn[1], S.default_gemm_config(*s).split_k) for s in BENCHMARKS}
    assert pick == {(128, 7168, 16384, 1): (128, 2), (128, 4096, 7168, 1): (64, 2), (128, 7168, 2048, 1): (64, 1)}
    assert S.default_gemm_config(2304, 4608, 7168, 1).split_k == 1  # many waves of tiles: no split
    assert S.default_config(128, 4096, 7168, 1, GEMM) == S.default_gemm_config(128, 4096, 7168, 1)
    assert not S.default_config(128, 4096, 7168, 1).single_product  # the dual GEMM stays the default problem


@pytest.mark.parametrize("cfg", S.GEMM_TUNE_SPACE, ids=lambda c: c.name)
def test_gemm_plan_fits_sm100_and_stages_are_maximal(cfg):
    plan = S.DualGemmKernel(cfg).plan()
    assert plan["smem_bytes"] <= S.SMEM_CAPACITY
    assert plan["smem_bytes"] + plan["stage_bytes"] > S.SMEM_CAPACITY, "one more stage would fit: not derived"
    assert plan["ab_stages"] >= 4  # one B: a stage is A + B + their scales (4: N 128 beside a 3-sender exchange ring)
    assert plan["stage_bytes"] == 128 * 128 + cfg.mma_tile_mn[1] * 128 + 2 * 128 * 16
    assert plan["acc_tmem_cols"] == cfg.mma_tile_mn[1] * plan["acc_stages"] and plan["tmem_cols"] <= S.TMEM_COLUMNS
    assert plan["exchange_bytes"] == (2 * (cfg.split_k - 1) * 128 * cfg.epi_tile_n * 4 if cfg.split_k > 1 else 0)


@pytest.mark.parametrize("field, value", [("mma_tile_mn", (256, 64)), ("a_collector", True), ("tail_k_tiles", 2),
                                          ("product_per_cta", True), ("silu_tanh", True), ("epi_pipeline", True),
                                          ("setmaxnreg", True)])
def test_gemm_refuses_what_is_not_built_for_one_product(field, value):
    kwargs = {"mma_tile_mn": (128, 64), "problem": GEMM, field: value}
    if field == "mma_tile_mn":
        kwargs["cluster_mn"] = (2, 1)
    ok, why = S.DualGemmKernel.can_implement(S.KernelConfig(**kwargs), 1024, 1024, 1024, 1)
    assert not ok and "nvfp4_gemm runs 1-CTA tiles" in why
    ok, why = S.DualGemmKernel.can_implement(S.KernelConfig(problem="nvfp4_other"), 1024, 1024, 1024, 1)
    assert not ok and "problem must be" in why


# ------------------------------------------------------------------ input checks of the 7-tuple (before any launch)
def _data(m=128, n=256, k=256, l=1):
    return list(R.generate_input(m, n, k, l, seed=7, device="cpu"))


def _expect_error(data, pattern):
    with pytest.raises(ValueError, match=pattern):
        S.check_inputs(tuple(data))
    S._launchers.clear()
    with pytest.raises(ValueError, match=pattern):
        S.custom_kernel(tuple(data))


def test_gemm_operand_dtype():
    data = _data()
    data[1] = data[1].view(torch.uint8)
    _expect_error(data, "b must be torch.float4_e2m1fn_x2")


def test_gemm_scale_layout():
    data = _data()
    data[5] = data[5].contiguous()
    _expect_error(data, "sfb_permuted must have strides")


def test_gemm_output_dtype():
    """The leaderboard does not check C's dtype (gau-nernst's split-K entries returned fp32); custom_kernel does."""
    data = _data()
    data[6] = data[6].float()
    _expect_error(data, "c must be .* torch.float16")


def test_gemm_tensors_on_the_cpu():
    _expect_error(_data(), "CUDA device")


def test_other_lengths_name_both_tuples():
    _expect_error(_data()[:6], "10-tuple .* or the 7-tuple")
    _expect_error(_data()[:6] + [torch.zeros(4)], "7-tuple does not end in C")


def test_custom_kernel_launches_the_7_tuple_with_its_five_tensors(monkeypatch):
    calls = []
    monkeypatch.setattr(S, "_launchers", {})
    monkeypatch.setattr(S, "check_inputs", lambda data: (128, 256, 256, 1))
    monkeypatch.setattr(S, "compile_config", lambda config, tvm_ffi=S.USE_TVM_FFI: (
        lambda *ts: calls.append((config.problem, ts))))
    monkeypatch.setattr(S, "check_sample", lambda data: "")  # the stand-in launcher computes nothing
    first, second = _data(), list(R.generate_input(128, 256, 256, 1, seed=8, device="cpu"))
    assert S.custom_kernel(tuple(first)) is first[6]
    assert S.custom_kernel(tuple(second)) is second[6]
    assert [p for p, _ in calls] == [GEMM, GEMM]
    for data, (_, launched) in zip((first, second), calls):
        assert all(x is y for x, y in zip(launched, (data[0], data[1], data[4], data[5], data[6])))
    assert list(S._launchers) == [(7, (128, 256, 1), 128)]  # keyed apart from the dual GEMM's shapes (10-tuples)


# ------------------------------------------------------------------ offline compile (sm_100a)
def test_compile_the_gemm_benchmark_shapes_configs_offline():
    launchers = {s: S.compile_config(S.config_for(*s, GEMM)) for s in BENCHMARKS}
    for shape, launcher in launchers.items():
        assert launcher is S.compile_config(S.config_for(*shape, GEMM))


# ------------------------------------------------------------------ the reference (nvfp4_gemm/reference.py)
def test_leaderboard_generator_matches_the_leaderboards_distribution():
    """reference-kernels@f83cb92a nvfp4_gemm/reference.py (data since b09f481): FP4 bytes randint(-128, 128): all 16
    codes in both nibbles; scales randint(0, 4): {0, 1, 2, 3}, zeros included; the permuted tensors hold the same
    scales in the atom layout; shapes and strides as the leaderboard's."""
    a, b, sfa, sfb, sfa_p, sfb_p, c = R.generate_input(256, 384, 1024, 1, seed=1111, device="cpu")
    raw = a.view(torch.uint8)
    assert set((raw & 15).unique().tolist()) == set(range(16)) == set((raw >> 4).unique().tolist())
    assert set(sfa.float().unique().tolist()) == {0.0, 1.0, 2.0, 3.0} == set(sfb.float().unique().tolist())
    assert a.shape == (256, 512, 1) and a.stride() == (512, 1, 256 * 512) and a.dtype == torch.float4_e2m1fn_x2
    assert sfa.shape == (256, 64, 1) and sfa_p.shape == (32, 4, 2, 4, 16, 1) and sfb_p.shape == (32, 4, 3, 4, 16, 1)
    assert c.shape == (256, 384, 1) and c.dtype == torch.float16
    i, j = torch.arange(256)[:, None], torch.arange(64)[None, :]
    assert torch.equal(sfa_p.view(torch.uint8)[i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, 0],
                       sfa.view(torch.uint8)[:, :, 0])


@pytest.mark.parametrize("mode", ["leaderboard", "strict"])
@pytest.mark.parametrize("shape", [(128, 256, 512, 1), (256, 128, 1024, 2)])
def test_reference_matches_an_independent_float64_product(mode, shape):
    import test_correctness

    data = R.generate_input(*shape, seed=3, mode=mode, device="cpu")
    got = R.ref_kernel_dequant(data)
    want = test_correctness.independent_reference(data)
    assert got.dtype == torch.float16 and got.shape == data[6].shape
    assert not verbose_allclose(got.double(), want, rtol=R.RTOL, atol=R.ATOL)
    assert torch.isfinite(want).all()
    ok, why = R.check_implementation(data, got)
    assert ok, why


def test_reference_source_and_data_facts_are_cited():
    text = (REPO / "nvfp4_gemm/reference.py").read_text()
    for fact in ("gpu-mode/reference-kernels@f83cb92a", "b09f481", "randint(-128, 128)", "randint(0, 4)",
                 "out_dtype=torch.float16"):
        assert fact in text, fact
    task = (REPO / "nvfp4_gemm/task.yml").read_text()
    assert "gpu-mode/reference-kernels@f83cb92a" in task and [c["sol_us"] for c in TASK["benchmarks"]] == [8.994, 2.354,
                                                                                                             1.333]
    assert re.search(r"eval_better_bench", task)
    assert ast.parse(text)


# ------------------------------------------------------------------ the tuner's table block (tools/tune.py --problem)
def test_tune_write_rewrites_the_gemm_block_only():
    from tools import tune

    text = (REPO / "submission.py").read_text()
    cfg = S.KernelConfig(mma_tile_mn=(128, 64), split_k=2, problem=GEMM)
    src = tune.config_source(S, cfg)
    out = tune.rewrite_table(text, {(128, 4096, 7168, 1): src}, GEMM)
    assert tune.table_entries(out, GEMM)[(128, 4096, 7168, 1)] == src
    assert tune.table_entries(out) == tune.table_entries(text)  # the dual GEMM's table untouched
    assert [a for a, b in zip(text.splitlines(), out.splitlines()) if a != b] == [
        line for line in text.splitlines() if line.strip().startswith("(128, 4096, 7168, 1)")]
    assert set(tune.table_entries(text, GEMM)) == set(S.GEMM_CONFIG_TABLE)


# ------------------------------------------------------------------ test_correctness.py --problem nvfp4_gemm
def test_correctness_problem_hands_the_gemm_space_and_reference_over(monkeypatch, capsys):
    import test_correctness

    handed, refs = [], []
    monkeypatch.setattr(test_correctness, "sm100_status", lambda: (False, "no CUDA GPU is visible (stand-in)"))
    monkeypatch.setattr(test_correctness, "run_preflight", lambda: (True, "stand-in"))
    monkeypatch.setattr(test_correctness, "reference_self_check", lambda ref: refs.append(ref) or (8, 0))
    monkeypatch.setattr(test_correctness, "run_emulator_checks",
                        lambda configs, problem, schedules=None, jobs=None: handed.append(problem) or handed.extend(configs) or (2 * len(configs), 0))
    assert test_correctness.main(["--problem", GEMM, "--configs", "all"]) == 0
    assert handed == [GEMM, *S.GEMM_TUNE_SPACE] and refs == [R]
    handed.clear()
    assert test_correctness.main(["--problem", GEMM]) == 0
    assert handed[1:] == test_correctness.configs_used_by(TASK, GEMM)
    assert {c.name for c in handed[1:]} >= {c.name for c in S.GEMM_CONFIG_TABLE.values()}
    assert capsys.readouterr().out.splitlines()[-1].startswith("summary:")
