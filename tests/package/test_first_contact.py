"""The first call of a shape (submission.prepare), on the CPU: the fallback chain, the check of C on a sample and the
line it prints. The same paths with the kernel's own launches in the emulator: tests/harness/test_first_contact.py."""
import math

import pytest
import torch

import reference
import submission as S
from problem_files import load_reference
from utils import load_task

GEMM = S.GEMM_PROBLEM
GEMM_REFERENCE = load_reference(GEMM)


def _solved(m, n, k, l=1, seed=3, problem=S.DUAL_GEMM_PROBLEM):
    """Inputs whose C holds the reference's answer (strict data: every FP4 code, scales far from 1)."""
    ref = GEMM_REFERENCE if problem == GEMM else reference
    data = list(ref.generate_input(m, n, k, l, seed=seed, mode="strict", device="cpu"))
    data[-1].copy_(ref.ref_kernel(tuple(data)))
    return data


# ------------------------------------------------------------------ the check of C on a sample
def test_sample_covers_every_row_tile_and_lane_quadrant():
    rows = S.sample_rows(7168)
    assert {r // 128 for r in rows} == set(range(56))  # every 128-row tile
    assert {r % 128 // 32 for r in rows} == {0, 1, 2, 3} and len({r % 32 for r in rows}) >= 16
    cols = S.sample_columns(4096)
    assert cols[-1] == 4095 and len({c % 64 for c in cols}) == len(cols)  # another place in its tile each


@pytest.mark.parametrize("problem", [S.DUAL_GEMM_PROBLEM, GEMM])
def test_the_references_answer_passes(problem):
    assert S.check_sample(_solved(512, 256, 512, problem=problem)) == ""


def _corrupt_tile(c):
    c[128:256] = c[256:384].clone()  # tile row 1 holds tile row 2's values


def _corrupt_quadrant(c):
    c[160:192], c[192:224] = c[192:224].clone(), c[160:192].clone()  # two lane quadrants of one tile swapped


def _corrupt_column_block(c):
    c[:, 64:128] = c[:, 128:192].clone()  # an N tile written with its neighbour's columns


def _corrupt_unwritten_element(c):
    c[S.sample_rows(c.shape[0])[3], 17] = float("nan")  # one element of a sampled row never written


@pytest.mark.parametrize("corrupt", [_corrupt_tile, _corrupt_quadrant, _corrupt_column_block,
                                     _corrupt_unwritten_element])
def test_a_misplaced_tile_quadrant_or_column_block_is_caught(corrupt):
    data = _solved(512, 256, 512)
    corrupt(data[-1])
    assert S.check_sample(data).startswith("C wrong at ")


def _answer_with(data, change):
    """C the reference computes after `change` edits a copy of the inputs (the kernel's bug), put into data's C."""
    wrong = [t.clone() for t in data]
    change(wrong)
    data[-1].copy_(reference.ref_kernel(tuple(wrong)))


def _half_k(d):  # only the first K slice of a split reached C
    d[0].view(torch.uint8)[:, d[0].shape[1] // 2:] = 0


def _one_scale(d):  # one A row read with the wrong e4m3 scale for one 16-element block
    d[3][300, 5] = d[3][300, 5].float().mul(2).to(d[3].dtype)


def _swapped_products(d):  # silu(A B2) * (A B1): the two B operands (and scales) swapped
    d[1], d[2], d[4], d[5] = d[2], d[1], d[5], d[4]


@pytest.mark.parametrize("change", [_half_k, _one_scale, _swapped_products])
def test_a_wrong_k_slice_scale_or_product_is_caught(change):
    data = _solved(512, 256, 512)
    _answer_with(data, change)
    assert "C wrong at" in S.check_sample(data)


# ------------------------------------------------------------------ the chain and the first call
TASK = load_task("task.yml")


@pytest.mark.parametrize("case", TASK["benchmarks"] + TASK["tests"], ids=lambda c: f"{c['m']}x{c['n']}x{c['k']}")
def test_chain_runs_from_the_tables_choice_to_the_safe_config(case):
    shape = (case["m"], case["n"], case["k"], case["l"])
    chain = S.config_chain(*shape)
    assert chain[0] == S.config_for(*shape) and chain[-1] == S.SAFE_CONFIG[S.DUAL_GEMM_PROBLEM]
    assert len(set(chain)) == len(chain) and all(S.DualGemmKernel.can_implement(c, *shape)[0] for c in chain)
    if shape in S.CONFIG_FALLBACK:
        assert S.CONFIG_FALLBACK[shape] in chain
    assert S.default_config(*shape) in chain


def test_safe_configs_are_gated_and_the_plainest():
    """The chains' last configs are in the tune spaces (so the gate emulates them) and use no cluster, pair, split,
    collector or PDL: the fewest PTX forms no public B200 kernel ran (docs/ptx_ledger.md)."""
    for problem, space in ((S.DUAL_GEMM_PROBLEM, S.TUNE_SPACE), (GEMM, S.GEMM_TUNE_SPACE)):
        safe = S.SAFE_CONFIG[problem]
        assert safe in space and safe.problem == problem
        assert math.prod(safe.launch_cluster_mn) == 1 and not safe.use_2cta and safe.split_k == 1
        assert not safe.a_collector and not safe.pdl and not safe.product_per_cta


def test_launcher_key_tells_every_dimension_the_choice_reads():
    keys = {S.launcher_key(list(reference.generate_input(*shape, seed=1, device="cpu")))
            for shape in ((256, 256, 512, 1), (256, 256, 1024, 1), (256, 512, 512, 1), (512, 256, 512, 1))}
    assert len(keys) == 4  # K is part of the key: a K-split entry cannot take every K
    gemm = S.launcher_key(list(GEMM_REFERENCE.generate_input(256, 256, 512, 1, seed=1, device="cpu")))
    assert gemm not in keys  # the 7-tuple's problem is keyed apart


def on_cpu(monkeypatch, fake, shape=(256, 256, 512, 1), tvm_ffi=True):
    """prepare with `fake` as compile_config, the CPU's tensors admitted by check_inputs (it wants a B200's), a fresh
    launcher cache."""
    monkeypatch.setattr(S, "check_inputs", lambda data: shape)
    monkeypatch.setattr(S, "USE_TVM_FFI", tvm_ffi)
    monkeypatch.setattr(S, "compile_config", fake)
    monkeypatch.setattr(S, "_launchers", {})


class FakeLaunches:
    """compile_config's stand-in: per (config name, path) a behaviour: "compile" (raises at compile), "launch" (raises
    at the launch), "wrong" (writes a wrong C), anything else writes the reference's C."""

    def __init__(self, answer, behaviour):
        self.answer, self.behaviour, self.compiled = answer, behaviour, []

    def __call__(self, config, tvm_ffi=S.USE_TVM_FFI):
        what = self.behaviour.get((config.name, "TVM-FFI" if tvm_ffi else "pointer"), "")
        self.compiled.append((config.name, tvm_ffi))
        if what == "compile":
            raise RuntimeError("planted: does not compile")

        def launch(*tensors):
            if what == "launch":
                raise TypeError("planted: the launch refuses a tensor")
            tensors[-1].copy_(self.answer * (2 if what == "wrong" else 1))
        return launch


def test_first_call_falls_back_past_each_failure_and_says_so(monkeypatch, capsys):
    data = _solved(256, 256, 512)
    answer = data[-1].clone()
    data[-1].fill_(float("nan"))
    chain = S.config_chain(256, 256, 512, 1)
    first, safe = chain[0].name, chain[-1].name
    fake = FakeLaunches(answer, {(first, "TVM-FFI"): "compile", (first, "pointer"): "wrong"})
    on_cpu(monkeypatch, fake)
    assert S.custom_kernel(tuple(data)) is data[-1]
    assert torch.equal(data[-1], answer)
    assert fake.compiled == [(first, True), (first, False), (safe, True)]
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"submission: nvfp4_dual_gemm 256x256x512x1: {safe}, TVM-FFI launch, 148 clusters of 1 ")
    assert f"fell back past: {first} (TVM-FFI): RuntimeError: planted: does not compile; {first} (pointer): C wrong at" \
        in line
    assert list(S._launchers) == [S.launcher_key(data)]
    S.custom_kernel(tuple(data))  # later calls: the cached launcher, no check, no line
    assert capsys.readouterr().err == "" and len(fake.compiled) == 3


def test_a_failed_launch_takes_the_pointer_path_of_the_same_config(monkeypatch, capsys):
    data = _solved(256, 256, 512, problem=GEMM)
    answer = data[-1].clone()
    first = S.config_chain(256, 256, 512, 1, GEMM)[0].name
    on_cpu(monkeypatch, FakeLaunches(answer, {(first, "TVM-FFI"): "launch"}))
    S.custom_kernel(tuple(data))
    assert f"{first}, pointer launch" in capsys.readouterr().err


def test_no_config_computing_c_is_an_error_naming_every_failure(monkeypatch):
    data = _solved(256, 256, 512)
    chain = S.config_chain(256, 256, 512, 1)
    on_cpu(monkeypatch, FakeLaunches(data[-1].clone(), {(c.name, "pointer"): "wrong" for c in chain}), tvm_ffi=False)
    with pytest.raises(RuntimeError, match="no config computed C: ") as err:
        S.custom_kernel(tuple(data))
    assert all(f"{c.name} (pointer): C wrong at" in str(err.value) for c in chain)


def test_a_wrong_input_is_an_error_before_any_compile(monkeypatch):
    data = _solved(256, 256, 512)
    data[0] = data[0].view(torch.uint8)
    fake = FakeLaunches(data[-1].clone(), {})
    monkeypatch.setattr(S, "compile_config", fake)
    monkeypatch.setattr(S, "_launchers", {})
    with pytest.raises(ValueError, match="a must be torch.float4_e2m1fn_x2"):
        S.custom_kernel(tuple(data))
    assert fake.compiled == []


def test_a_tuner_chain_of_one_config_is_not_replaced(monkeypatch):
    """tools/tune.py times exactly the candidate: prepare(chain=[candidate]) raises where the candidate is wrong."""
    data = _solved(256, 256, 512)
    candidate = S.config_chain(256, 256, 512, 1)[0]
    on_cpu(monkeypatch, FakeLaunches(data[-1].clone(), {(candidate.name, "TVM-FFI"): "wrong",
                                                        (candidate.name, "pointer"): "wrong"}))
    with pytest.raises(RuntimeError, match=f"{candidate.name} .*C wrong at"):
        S.prepare(tuple(data), chain=[candidate])


def test_a_check_that_cannot_run_is_said_and_does_not_block_a_launch(monkeypatch, capsys):
    data = _solved(256, 256, 512)
    on_cpu(monkeypatch, FakeLaunches(data[-1].clone(), {}))

    def out_of_memory(data):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(S, "check_sample", out_of_memory)
    S.custom_kernel(tuple(data))
    assert "C checked on a sample: not run (OutOfMemoryError: CUDA out of memory." in capsys.readouterr().err
