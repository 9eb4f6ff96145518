"""Tests of reference.py, utils.py, task.py and task.yml (CPU; GPU/SM100 tests skip elsewhere)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import reference  # noqa: E402
import utils  # noqa: E402
from test_correctness import decode_e2m1_bits, decode_e4m3_bits, independent_reference  # noqa: E402

CPU = torch.device("cpu")
HAS_CUDA = torch.cuda.is_available()
IS_SM100 = HAS_CUDA and torch.cuda.get_device_capability()[0] == 10
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (none visible)")
needs_sm100 = pytest.mark.skipif(not IS_SM100, reason="needs an SM100 GPU (torch._scaled_mm NVFP4 runs only there)")

# The OCP MX spec's FP4 E2M1 table, code 0..15 (written out here, not derived)
E2M1_TABLE = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
SHAPES = [(128, 128, 256, 1), (256, 384, 512, 2), (384, 128, 1024, 1)]


def gen(m, n, k, l, seed=1111, mode="leaderboard"):
    return reference.generate_input(m, n, k, l, seed, mode=mode, device=CPU)


def nibbles(fp4):
    raw = fp4.view(torch.uint8)
    return raw & 15, raw >> 4


# --------------------------------------------------------------------------------------------------
# Generator: shapes, dtypes, strides, values
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", reference.MODES)
@pytest.mark.parametrize("m,n,k,l", SHAPES)
def test_shapes_dtypes_strides(m, n, k, l, mode):
    data = gen(m, n, k, l, mode=mode)
    assert len(data) == 10
    a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    sf_k = k // 16
    for t, mn in ((a, m), (b1, n), (b2, n)):
        assert t.dtype == torch.float4_e2m1fn_x2
        assert tuple(t.shape) == (mn, k // 2, l)
        assert t.stride() == (k // 2, 1, mn * k // 2)  # (l, mn, k//2) memory, K-major
    for t, mn in ((sfa, m), (sfb1, n), (sfb2, n)):
        assert t.dtype == torch.float8_e4m3fn
        assert tuple(t.shape) == (mn, sf_k, l)
        assert t.stride() == (sf_k, 1, mn * sf_k)
    for t, mn in ((sfa_p, m), (sfb1_p, n), (sfb2_p, n)):
        rest_mn, rest_k = mn // 128, sf_k // 4
        assert t.dtype == torch.float8_e4m3fn
        assert tuple(t.shape) == (32, 4, rest_mn, 4, rest_k, l)
        # a view of contiguous (l, rest_mn, rest_k, 32, 4, 4) memory
        assert t.stride() == (16, 4, rest_k * 512, 1, 512, rest_mn * rest_k * 512)
        assert t.untyped_storage().nbytes() == t.numel()
    assert c.dtype == torch.float16 and tuple(c.shape) == (m, n, l) and c.stride() == (n, 1, m * n)
    assert all(t.device == CPU for t in data)


@pytest.mark.parametrize("m,n,k,l", SHAPES)
def test_leaderboard_values(m, n, k, l):
    data = gen(m, n, k, l)
    allowed = {0, 1, 2, 3, 8, 9, 10, 11}  # sign + 2 low bits: values 0, +-0.5, +-1, +-1.5
    for t in data[:3]:
        for half in nibbles(t):
            assert set(half.unique().tolist()) == allowed
    for t in data[3:9]:
        values = t.float()
        assert torch.isfinite(values).all()
        assert values.min() >= 0 and values.max() < 1.0 + 1e-6  # rand[0,1) rounded to e4m3 (1.0 possible)
    assert torch.isfinite(data[9].float()).all()


@pytest.mark.parametrize("m,n,k,l", SHAPES)
def test_strict_values(m, n, k, l):
    data = gen(m, n, k, l, mode="strict")
    for t in data[:3]:
        for half in nibbles(t):
            assert set(half.unique().tolist()) == set(range(16)), "every FP4 code in both nibble positions"
    for t in data[3:6]:
        raw = t.view(torch.uint8).to(torch.int64)
        values = t.float()
        assert torch.isfinite(values).all() and (values > 0).all(), "positive, finite scales"
        exponents = set(((raw >> 3) & 15).unique().tolist())
        assert min(exponents) <= 2 and max(exponents) >= 8, f"exponent fields span too little: {sorted(exponents)}"
        assert len(set((raw & 7).unique().tolist())) == 8, "every mantissa value"
    out = reference.ref_kernel(data).float()
    assert torch.isfinite(out).all(), "strict outputs must stay finite in fp16"
    assert out.abs().max() > 100, "strict outputs must be large enough for a bug to show"


def test_seed_determinism():
    one, two, other = gen(256, 128, 512, 1, seed=5), gen(256, 128, 512, 1, seed=5), gen(256, 128, 512, 1, seed=6)
    for x, y, z in zip(one, two, other):
        assert torch.equal(x.view(torch.uint8) if x.element_size() == 1 else x,
                           y.view(torch.uint8) if y.element_size() == 1 else y)
    assert not torch.equal(one[0].view(torch.uint8), other[0].view(torch.uint8))


@needs_cuda
@pytest.mark.parametrize("mode", reference.MODES)
def test_cpu_and_gpu_generate_the_same_data(mode):
    cpu = reference.generate_input(256, 128, 512, 2, 3, mode=mode, device="cpu")
    gpu = reference.generate_input(256, 128, 512, 2, 3, mode=mode)
    for x, y in zip(cpu, gpu):
        assert y.device.type == "cuda" and x.stride() == y.stride()
        if x.element_size() == 1:
            x, y = x.view(torch.uint8), y.view(torch.uint8)
        assert torch.equal(x, y.cpu())


# --------------------------------------------------------------------------------------------------
# Scale layout
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", reference.MODES)
def test_permuted_layout_matches_index_mapping(mode):
    m, n, k, l = 384, 256, 1024, 2  # rest_mn 3 / 2, rest_k 16, two batches
    data = gen(m, n, k, l, mode=mode)
    for plain, permuted in zip(data[3:6], data[6:9]):
        mn, sf_k, _ = plain.shape
        i = torch.arange(mn)[:, None, None]
        j = torch.arange(sf_k)[None, :, None]
        b = torch.arange(l)[None, None, :]
        gathered = permuted.view(torch.uint8)[i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, b]
        assert gathered.shape == plain.shape
        assert torch.equal(gathered, plain.view(torch.uint8)), "every element of the plain tensor at its documented index"


def test_permuted_layout_small_explicit_loop():
    data = gen(128, 128, 256, 1, mode="strict")
    plain, permuted = data[3].view(torch.uint8), data[6].view(torch.uint8)
    for i in range(128):
        for j in range(16):
            assert permuted[i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, 0] == plain[i, j, 0]


def test_to_blocked_is_the_permuted_memory():
    data = gen(256, 128, 512, 2, mode="strict")
    for plain, permuted in zip(data[3:6], data[6:9]):
        for b in range(2):
            flat = permuted[..., b].permute(2, 4, 0, 1, 3).reshape(-1)
            assert torch.equal(reference.to_blocked(plain[:, :, b]).view(torch.uint8), flat.view(torch.uint8))


# --------------------------------------------------------------------------------------------------
# Dequantisation reference
# --------------------------------------------------------------------------------------------------
def test_independent_decoders():
    assert decode_e2m1_bits(torch.arange(16)).tolist() == E2M1_TABLE
    raw = torch.arange(256, dtype=torch.uint8)
    want = raw.view(torch.float8_e4m3fn).double()
    got = decode_e4m3_bits(raw)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert torch.equal(got[ok], want[ok])


def test_reference_decode_table():
    assert list(reference.FP4_E2M1_VALUES) == E2M1_TABLE
    raw = torch.tensor([[0x21, 0xF7]], dtype=torch.uint8)  # low nibble first: 0.5, 1.0, 6.0, -6.0
    one = torch.ones((1, 1), dtype=torch.float32).expand(1, 1)
    got = reference.dequantize(torch.cat([raw] * 8, dim=1), one)
    assert got[0, :4].tolist() == [0.5, 1.0, 6.0, -6.0]


@pytest.mark.parametrize("mode", reference.MODES)
@pytest.mark.parametrize("m,n,k,l", SHAPES + [(128, 256, 7168, 1)])
def test_dequant_reference_matches_independent_float64(m, n, k, l, mode):
    data = gen(m, n, k, l, seed=21, mode=mode)
    got = reference.ref_kernel_dequant(data)
    want = independent_reference(data)
    assert got.dtype == torch.float16 and got.shape == (m, n, l) and got.stride() == (n, 1, m * n)
    assert utils.verbose_allclose(got.double(), want, rtol=1e-3, atol=1e-3) == []
    assert (got.double() - want).abs().max() > 0 or mode == "leaderboard"  # fp16 rounding is visible


def test_dequant_chunking_does_not_change_result():
    data = gen(384, 128, 512, 1, mode="strict")
    assert torch.equal(reference.ref_kernel_dequant(data), reference.ref_kernel_dequant(data, chunk_bytes=1))


def test_ref_kernel_path_override(monkeypatch):
    data = gen(128, 128, 256, 1)
    monkeypatch.setenv("NVFP4_REFERENCE_PATH", "bogus")
    with pytest.raises(ValueError, match="NVFP4_REFERENCE_PATH"):
        reference.ref_kernel(data)
    monkeypatch.setenv("NVFP4_REFERENCE_PATH", "dequant")
    assert torch.equal(reference.ref_kernel(data), reference.ref_kernel_dequant(data))


@needs_sm100
@pytest.mark.parametrize("mode", reference.MODES)
def test_scaled_mm_and_dequant_paths_agree(mode):
    for case in utils.load_task()["tests"]:
        data = reference.generate_input(**case, mode=mode)
        fast = reference.ref_kernel_scaled_mm(data)
        exact = reference.ref_kernel_dequant(data)
        assert utils.verbose_allclose(fast, exact, rtol=1e-3, atol=1e-3) == [], case


# --------------------------------------------------------------------------------------------------
# check_implementation
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_case():
    data = gen(256, 128, 512, 1, mode="strict")
    return data, reference.ref_kernel(data)


def test_check_accepts_the_reference(small_case):
    data, expected = small_case
    assert reference.check_implementation(data, expected.clone()) == (True, "")


def test_check_catches_one_wrong_element(small_case):
    data, expected = small_case
    out = expected.clone()
    i = (out.float().abs() > 10).nonzero()[0].tolist()
    out[tuple(i)] = out[tuple(i)] * 1.01
    ok, message = reference.check_implementation(data, out)
    assert not ok
    assert "Number of mismatched elements: 1" in message and f"ERROR AT {tuple(i)}" in message


def test_check_catches_a_nan(small_case):
    data, expected = small_case
    out = expected.clone()
    out[5, 7, 0] = float("nan")
    ok, message = reference.check_implementation(data, out)
    assert not ok and "(5, 7, 0)" in message


def test_check_reports_first_mismatches_and_count(small_case):
    data, expected = small_case
    out = torch.full_like(expected, float("nan"))  # an unwritten (poisoned) output
    ok, message = reference.check_implementation(data, out)
    assert not ok and f"Number of mismatched elements: {out.numel()}" in message and "more mismatched" in message


def test_check_rejects_wrong_shape_and_dtype(small_case):
    data, expected = small_case
    assert not reference.check_implementation(data, expected[:128])[0]
    ok, message = reference.check_implementation(data, expected.float())
    assert not ok and "dtype" in message


def test_check_infs_must_match():
    data = list(gen(128, 128, 256, 1, mode="strict"))
    data[3] = torch.full_like(data[3], 448.0)  # huge A scales: many outputs overflow fp16
    data[4] = torch.full_like(data[4], 448.0)
    data = tuple(data)
    expected = reference.ref_kernel(data)
    assert torch.isposinf(expected).any() and torch.isfinite(expected).any()
    assert reference.check_implementation(data, expected.clone())[0], "matching infs are accepted"
    pos = tuple(torch.isposinf(expected).nonzero()[0].tolist())
    flipped = expected.clone()
    flipped[pos] = float("-inf")
    assert not reference.check_implementation(data, flipped)[0]
    finite = expected.clone()
    finite[pos] = 65504.0
    assert not reference.check_implementation(data, finite)[0]


# --------------------------------------------------------------------------------------------------
# Strict data exists to catch these bugs; leaderboard data cannot catch all of them
# --------------------------------------------------------------------------------------------------
def _buggy_output(data, a_bytes=None, sfa_values=None):
    """silu(A@B1^T)*(A@B2^T) -> fp16 with A's bytes and/or A's scales replaced (a simulated kernel bug)."""
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    m, n, l = data[9].shape
    a_bytes = a.view(torch.uint8) if a_bytes is None else a_bytes
    sfa_values = sfa.float() if sfa_values is None else sfa_values
    out = torch.empty((m, n, l), dtype=torch.float16)
    for b in range(l):
        a_vals = reference.dequantize(a_bytes[:, :, b], torch.ones_like(sfa_values[:, :, b]))
        a_deq = (a_vals.reshape(m, -1, 16) * sfa_values[:, :, b, None]).reshape(m, -1)
        c1 = a_deq @ reference.dequantize(b1[:, :, b], sfb1[:, :, b]).T
        c2 = a_deq @ reference.dequantize(b2[:, :, b], sfb2[:, :, b]).T
        out[:, :, b] = (torch.nn.functional.silu(c1) * c2).half()
    return out


def _row_transposed_in_atom(mn):
    r = torch.arange(mn)
    inner = r % 128
    return (r // 128) * 128 + (inner % 4) * 32 + inner // 4


BUGS = {
    "nibble order swapped (A)": lambda d: _buggy_output(
        d, a_bytes=((d[0].view(torch.uint8) & 15) << 4) | (d[0].view(torch.uint8) >> 4)),
    "scale row index transposed in the 32x4 atom (A)": lambda d: _buggy_output(
        d, sfa_values=d[3].float()[_row_transposed_in_atom(d[3].shape[0])]),
    "scale K-block index off by one (A)": lambda d: _buggy_output(d, sfa_values=d[3].float().roll(1, dims=1)),
    "scale applied twice (A)": lambda d: _buggy_output(d, sfa_values=d[3].float() ** 2),
    "FP4 exponent MSB ignored (|v| >= 2 wrong)": lambda d: _buggy_output(d, a_bytes=d[0].view(torch.uint8) & 0xBB),
    "e4m3 exponent MSB ignored (scales >= 2 wrong)": lambda d: _buggy_output(
        d, sfa_values=(d[3].view(torch.uint8) & 0xBF).view(torch.float8_e4m3fn).float()),
}


@pytest.fixture(scope="module")
def bug_data():
    return {mode: gen(256, 256, 512, 1, seed=99, mode=mode) for mode in reference.MODES}


def test_simulated_kernel_without_bug_passes(bug_data):
    for data in bug_data.values():
        assert reference.check_implementation(data, _buggy_output(data))[0]


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_strict_data_catches_bug_loudly(bug, bug_data):
    data = bug_data["strict"]
    out = BUGS[bug](data)
    ok, message = reference.check_implementation(data, out)
    assert not ok
    count = int(message.split("Number of mismatched elements: ")[1].split()[0])
    assert count > 0.05 * out.numel(), f"{bug}: only {count} mismatches"


def test_leaderboard_data_misses_some_bugs(bug_data):
    data = bug_data["leaderboard"]
    missed = sorted(bug for bug, make in BUGS.items() if reference.check_implementation(data, make(data))[0])
    # the leaderboard's 7 FP4 values and scales < 1 never exercise these two
    assert "FP4 exponent MSB ignored (|v| >= 2 wrong)" in missed
    assert "e4m3 exponent MSB ignored (scales >= 2 wrong)" in missed


def test_a_nibble_swap_in_every_operand_is_invisible(bug_data):
    """Why the nibble-order bug above swaps A only: swapping both elements of every pair in A, B1 and B2
    leaves every dot product unchanged (both elements share one scale block), so no data can see it, and a
    kernel doing that is still correct. The element order is pinned by test_reference_decode_table instead."""
    data = bug_data["strict"]
    def swap(t):
        raw = t.view(torch.uint8)
        return (((raw & 15) << 4) | (raw >> 4)).view(torch.float4_e2m1fn_x2)
    swapped = (swap(data[0]), swap(data[1]), swap(data[2]), *data[3:])
    assert not torch.equal(swapped[0].view(torch.uint8), data[0].view(torch.uint8))
    assert reference.check_implementation(data, reference.ref_kernel(swapped))[0]


# --------------------------------------------------------------------------------------------------
# Bad shapes
# --------------------------------------------------------------------------------------------------
BAD_SHAPES = [
    ((128, 128, 128, 1), r"K % 256"),
    ((128, 128, 300, 1), r"K % 256"),
    ((100, 128, 256, 1), r"M must be a positive multiple of 128"),
    ((128, 200, 256, 1), r"N must be a positive multiple of 128"),
    ((128, 128, 256, 0), r"L must be >= 1"),
]


@pytest.mark.parametrize("shape,match", BAD_SHAPES)
def test_generate_input_rejects_bad_shapes(shape, match):
    with pytest.raises(ValueError, match=match):
        reference.generate_input(*shape, seed=1, device=CPU)


def test_generate_input_rejects_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        reference.generate_input(128, 128, 256, 1, 1, mode="wide", device=CPU)


def test_ref_kernel_rejects_bad_shapes():
    data = list(gen(256, 256, 512, 1))
    bad_m = list(data)
    bad_m[0], bad_m[3], bad_m[9] = data[0][:100], data[3][:100], data[9][:100]
    with pytest.raises(ValueError, match="M must be"):
        reference.ref_kernel(tuple(bad_m))
    bad_n = list(data)
    bad_n[1], bad_n[2], bad_n[4], bad_n[5], bad_n[9] = (data[1][:200], data[2][:200], data[4][:200],
                                                        data[5][:200], data[9][:, :200])
    with pytest.raises(ValueError, match="N must be"):
        reference.ref_kernel(tuple(bad_n))
    bad_k = list(data)
    bad_k[0], bad_k[1], bad_k[2] = data[0][:, :64], data[1][:, :64], data[2][:, :64]  # K = 128
    bad_k[3], bad_k[4], bad_k[5] = data[3][:, :8], data[4][:, :8], data[5][:, :8]
    with pytest.raises(ValueError, match="K % 256"):
        reference.ref_kernel(tuple(bad_k))
    bad_l = list(data)
    bad_l[9] = data[9][:, :, :0]
    with pytest.raises(ValueError, match="L must be >= 1"):
        reference.ref_kernel(tuple(bad_l))
    with pytest.raises(ValueError, match="10-tuple"):
        reference.ref_kernel(tuple(data[:9]))
    inconsistent = list(data)
    inconsistent[4] = data[4][:, :16]  # sfb1 with a wrong K extent
    with pytest.raises(ValueError, match="sfb1"):
        reference.ref_kernel(tuple(inconsistent))


# --------------------------------------------------------------------------------------------------
# task.yml, utils.py, task.py
# --------------------------------------------------------------------------------------------------
def test_load_task():
    task = utils.load_task()
    assert len(task["tests"]) == 10 and len(task["benchmarks"]) == 4
    for case in task["tests"] + task["benchmarks"]:
        reference.validate_shape(case["m"], case["n"], case["k"], case["l"])
        assert case["seed"] == 1111
    assert [(c["m"], c["n"], c["k"]) for c in task["benchmarks"]] == [
        (256, 4096, 7168), (512, 4096, 7168), (256, 3072, 4096), (512, 3072, 7168)]
    sol = [c["sol_us"] for c in task["benchmarks"]]
    assert math.isclose(math.exp(sum(map(math.log, sol)) / 4), 4.886, abs_tol=5e-4)  # docs/leaderboard.md §2


def test_load_task_rejects_malformed(tmp_path):
    bad = tmp_path / "task.yml"
    bad.write_text("tests:\n  - {m: 128, n: 128, k: 256, l: 1}\nbenchmarks:\n  - {m: 128, n: 128, k: 256, l: 1, seed: 1}\n")
    with pytest.raises(ValueError, match="seed"):
        utils.load_task(bad)
    bad.write_text("tests:\n  - {m: 128, n: 128, k: 256, l: 1, seed: 1}\n"
                   "benchmarks:\n  - {m: 128, n: 128, k: 256, l: 1, seed: 1}\n")
    with pytest.raises(ValueError, match="sol_us"):
        utils.load_task(bad)
    with pytest.raises(FileNotFoundError):
        utils.load_task(tmp_path / "missing.yml")


def test_utils_is_a_superset_of_the_leaderboards():
    for name in ("set_seed", "get_device", "verbose_allclose", "verbose_allequal", "match_reference",
                 "make_match_reference", "DeterministicContext", "clear_l2_cache", "clear_l2_cache_large"):
        assert callable(getattr(utils, name)), name
    x = torch.tensor([1.0, 2.0, float("inf")])
    assert utils.verbose_allclose(x, x.clone()) == []
    assert utils.verbose_allequal(x, torch.tensor([1.0, 3.0, float("inf")]))[0] == "Number of mismatched elements: 1"
    check = utils.make_match_reference(lambda d: d * 2, rtol=1e-3, atol=1e-3)
    assert check(x, x * 2) == (True, "") and not check(x, x)[0]


def test_task_types_import():
    from task import TestSpec, input_t, output_t  # noqa: F401
    assert set(TestSpec.__annotations__) == {"m", "n", "k", "l", "seed"}
