"""harness/runner.py: any submission file in the emulator, unmodified (issue 28). Tested on popcorn-format files
written for the purpose (tests/harness/submissions/: a CuTe DSL one and a load_inline CUDA one, and small variants
made here: a planted bug, a call the stand-ins lack, a launch a B200 refuses) and on this package's own submission.py
through the same path. The public B200-run files: tests/calibration/test_public.py.

A run starts a worker process that imports the file (and compiles it: a few seconds for the CuTe DSL file; the CUDA
file's extension builds once, about a minute on 2 CPUs, then comes from the compile cache)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.cuda_build import compiler_missing
from harness.runner import (RunnerResult, is_package_kernel, merge_spans, run_cases, run_submission,
                            subtract_spans)

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
DSL_FILE = SUBMISSIONS / "dsl_epilogue.py"
CUDA_FILE = SUBMISSIONS / "cuda_epilogue.py"
SMALL = (128, 128, 256, 1)


def needs_nvcc():
    why = compiler_missing()
    if why:
        pytest.skip(why)


def test_dsl_file_matches_with_its_own_launch():
    res = run_submission(DSL_FILE, SMALL, mode="leaderboard", schedules=1)
    assert res.status == "match" and res.passed and res.exit_code == 0, (res.summary(), res.message, res.output)
    assert res.checked_elements == 128 * 128 and res.clusters_run == res.clusters_total == 128
    (launch,) = res.launches
    assert launch["grid"] == [128, 1, 1] and launch["block"] == [128, 1, 1] and launch["registers"]
    assert launch["built_by"].startswith("CuTe DSL")
    assert any(b.startswith("bridge dsl-export") for b in res.bridges)
    assert any(b.startswith("bridge torch-as-cuda") for b in res.bridges)
    assert res.torch_work.get("aten.mm") == 2  # its two products in torch: kernels of their own on a B200, untimed


def test_planted_bug_in_a_file_is_a_mismatch(tmp_path):
    """The same file with SiLU's product turned into a sum: the verdict is MISMATCH (exit 1), naming elements."""
    bad = tmp_path / "submission.py"
    text = DSL_FILE.read_text()
    assert "* y).to(cutlass.Float16)" in text
    bad.write_text(text.replace("* y).to(cutlass.Float16)", "+ y).to(cutlass.Float16)"))
    res = run_submission(bad, SMALL, mode="leaderboard", schedules=1)
    assert res.status == "mismatch" and res.exit_code == 1 and "elements differ" in res.message, res.summary()


def test_import_failure_is_one_line_with_its_place(tmp_path):
    """A file the runner cannot run: CANNOT RUN, exit 3, the construct and file:line, no traceback."""
    bad = tmp_path / "submission.py"
    bad.write_text("import torch\nfrom task import input_t, output_t\n\n\nraise RuntimeError('needs a B200 clock')\n")
    res = run_submission(bad, SMALL, schedules=1)
    assert (res.status, res.exit_code, res.where) == ("cannot-run", 3, "submission.py:5"), res.summary()
    assert "RuntimeError: needs a B200 clock" in res.construct and "Traceback" not in res.summary()


def test_cases_share_one_import():
    """Several shapes and generators in one worker: a result per case, in order."""
    results = run_cases(DSL_FILE, [((128, 128, 256, 1), "leaderboard", 1111), ((256, 128, 512, 1), "strict", 3)],
                        schedules=1)
    assert [(r.shape, r.mode, r.status) for r in results] == [((128, 128, 256, 1), "leaderboard", "match"),
                                                             ((256, 128, 512, 1), "strict", "match")]


def test_only_this_package_kernel_takes_the_config_path():
    assert is_package_kernel(ROOT / "submission.py") and is_package_kernel(ROOT / "nvfp4_gemm" / "submission.py")
    assert not is_package_kernel(DSL_FILE) and not is_package_kernel(CUDA_FILE)


def test_device_printf_lines_say_how_many_calls_and_show_the_kept_ones():
    """RunnerResult.printed holds the first PRINTED_KEPT printf calls' text (emu Machine.printed); a call's text may
    hold several lines or part of one."""
    res = RunnerResult("match", "f.py", "nvfp4_gemm", (128, 128, 256, 1), "leaderboard",
                       printed=["a=1\n", "b=2\nc=", "3\n"], printed_count=250)
    assert res.printed_lines() == ["device printf: 250 calls, the first 3:", "  | a=1", "  | b=2", "  | c=3"]
    assert RunnerResult("match", "f.py", "nvfp4_gemm", (1, 1, 1, 1), "leaderboard").printed_lines() == []


def test_spans_merge_and_subtract():
    """The interval arithmetic of the global bytes a later launch cannot know (Worker.sort_stores)."""
    assert merge_spans([(10, 20), (0, 5), (5, 8), (15, 30)]) == [(0, 8), (10, 30)]
    assert subtract_spans([(0, 8), (10, 30)], [(2, 4), (6, 12), (20, 40)]) == [(0, 2), (4, 6), (12, 20)]
    assert subtract_spans([(0, 8)], []) == [(0, 8)] and subtract_spans([(0, 8)], [(0, 8)]) == []


@pytest.mark.slow
def test_dsl_file_default_verdict_on_strict_data():
    res = run_submission(DSL_FILE, (256, 256, 512, 1), mode="strict")
    assert res.passed and len(res.runs) == 6, res.summary()


# ------------------------------------------------------------------ load_inline
FAST_CUDA = '''#!POPCORN leaderboard nvfp4_dual_gemm
import ctypes
from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda_runtime.h>
__global__ void k(float *x) {{ x[threadIdx.x] = 1.0f; }}
extern "C" int launch(float *x) {{
  {body}
  return cudaGetLastError();
}}
"""
path = load_inline("fast_{name}", cpp_sources="", cuda_sources=SRC, is_python_module=False, no_implicit_headers=True,
                   extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])
lib = ctypes.CDLL(path)


def custom_kernel(data: input_t) -> output_t:
    c = data[-1]
    lib.launch(ctypes.c_void_p(c.data_ptr()))
    return c
'''


@pytest.mark.slow
def test_cuda_file_matches_with_its_tma_load_and_pybind_binding():
    needs_nvcc()
    res = run_submission(CUDA_FILE, SMALL, mode="leaderboard", schedules=1)
    assert res.passed, (res.summary(), res.message, res.output[-3000:])
    (launch,) = res.launches
    assert launch["grid"] == [4, 16, 1] and launch["static_smem"] >= 1024 and launch["built_by"].startswith("nvcc")
    assert any(b.startswith("bridge load-inline") for b in res.bridges) and not res.refusals


@pytest.mark.slow
def test_runtime_call_the_stand_ins_lack_names_it_and_its_line(tmp_path):
    needs_nvcc()
    f = tmp_path / "submission.py"
    f.write_text(FAST_CUDA.format(name="occupancy", body="int n; "
                                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, 32, 0); k<<<1, 32>>>(x);"))
    res = run_submission(f, SMALL, schedules=1)
    assert res.status == "cannot-run" and res.exit_code == 3, res.summary()
    assert "cudaOccupancyMaxActiveBlocksPerMultiprocessor" in res.construct and res.where.startswith("submission.py:")


@pytest.mark.slow
def test_launch_a_b200_refuses_is_reported(tmp_path):
    needs_nvcc()
    f = tmp_path / "submission.py"
    f.write_text(FAST_CUDA.format(name="too_much_smem", body="k<<<1, 32, 300000>>>(x);"))
    res = run_submission(f, SMALL, schedules=1)
    assert res.status == "launch" and res.exit_code == 2 and "300000" in res.message, res.summary()


REFUSED_MAP = '''#!POPCORN leaderboard nvfp4_dual_gemm
import ctypes
from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <cuda.h>
extern "C" int encode(void *scales, const char **text) {
  alignas(64) CUtensorMap map;
  cuuint64_t dims[2] = {448, 128}, strides[1] = {448};
  cuuint32_t box[2] = {4, 128}, element_strides[2] = {1, 1};  // 4 bytes of UINT8 a row: not a multiple of 16
  CUresult rc = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, scales, dims, strides, box,
                                       element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                       CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  cuGetErrorString(rc, text);
  return rc;
}
"""
path = load_inline("refused_map", cpp_sources="", cuda_sources=SRC, is_python_module=False, no_implicit_headers=True,
                   extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"], extra_ldflags=["-lcuda"])
lib = ctypes.CDLL(path)


def custom_kernel(data: input_t) -> output_t:
    text = ctypes.c_char_p()
    if lib.encode(ctypes.c_void_p(data[0].data_ptr()), ctypes.byref(text)):
        raise RuntimeError("Scale tensormap failed: " + text.value.decode())
    return data[-1]
'''


@pytest.mark.slow
def test_a_tensor_map_the_driver_refuses_is_the_file_s_failure(tmp_path):
    """cuTensorMapEncodeTiled with a box row of 4 bytes (jIab-b's s_128t.py @ 2aa318ce; the driver documents
    boxDim[0] x element size as a multiple of 16 bytes): CUDA_ERROR_INVALID_VALUE, "invalid argument" in the file's
    own words as on GPU MODE's B200, and the verdict REFUSED (exit 2), not CANNOT RUN."""
    needs_nvcc()
    f = tmp_path / "submission.py"
    f.write_text(REFUSED_MAP)
    res = run_submission(f, SMALL, schedules=1)
    assert (res.status, res.verdict, res.exit_code) == ("refused", "REFUSED", 2), res.summary()
    assert "Scale tensormap failed: invalid argument" in res.message and "boxDim[0] 4" in res.message, res.message
    assert res.where.startswith("submission.py:") and res.refusals


# The head and the torch computation of C that the two stand-in files below share: each then hands the fp32 result
# to its own CUDA code, which writes C.
HEADER = r'''#!POPCORN leaderboard nvfp4_dual_gemm
import ctypes

import torch
from task import input_t, output_t
from torch.utils.cpp_extension import load_inline
'''
TORCH_C = r'''E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantize(packed, scales):
    codes = packed.view(torch.uint8)
    pairs = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(codes.shape[0], -1).long()
    return torch.tensor(E2M1)[pairs] * scales.float().repeat_interleave(16, dim=1)


def custom_kernel(data: input_t) -> output_t:
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    x = dequantize(a[:, :, 0], sfa[:, :, 0])
    r1 = x @ dequantize(b1[:, :, 0], sfb1[:, :, 0]).t()
    r2 = x @ dequantize(b2[:, :, 0], sfb2[:, :, 0]).t()
    out = (torch.nn.functional.silu(r1) * r2).contiguous()
'''


# A copy through one shared buffer, refilled by thread 0 as soon as it saw the last copy land: nothing waits for the
# other warp to have read the buffer or seen the phase. A race by the PTX ISA (a parity wait may be lapped, the buffer
# overwritten unread) that a B200's copy latency hides: the seeded late_wake schedule wakes the other warp late.
RACY = HEADER + r'''
SRC = r"""
#include <cuda_fp16.h>
constexpr int CHUNK = 256;  // floats a copy brings
__global__ void racy_copy(const float *src, __half *c, int chunks) {
  __shared__ alignas(128) float buf[CHUNK];
  __shared__ alignas(8) unsigned long long bar;
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(buf));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  for (int k = 0; k < chunks; ++k) {
    // thread 0 refills the buffer as soon as it saw the last copy land: nothing waits for the other warp to have
    // read it, or to have seen the phase (a race by the PTX ISA: a B200's copy latency hides it)
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(CHUNK * 4) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   :: "r"(d), "l"(src + k * CHUNK), "r"(CHUNK * 4), "r"(b) : "memory");
    }
    asm volatile("{\n\t.reg .pred done;\n\tWAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra WAIT;\n\t}" :: "r"(b), "r"(k & 1) : "memory");
    for (int i = threadIdx.x; i < CHUNK; i += blockDim.x) c[k * CHUNK + i] = __float2half_rn(buf[i]);
  }
}
extern "C" int launch(const float *src, void *c, int chunks) {
  racy_copy<<<1, 64>>>(src, static_cast<__half *>(c), chunks);
  return cudaGetLastError();
}
"""
path = load_inline("racy_copy", cpp_sources="", cuda_sources=SRC, is_python_module=False, no_implicit_headers=True,
                   extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])
lib = ctypes.CDLL(path)
''' + TORCH_C + r'''    lib.launch(ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(c.data_ptr()), out.numel() // 256)
    return c
'''


@pytest.mark.slow
def test_a_race_the_b200_timing_hides_is_race_not_deadlock(tmp_path):
    """The B200-timing schedule (the timed emulator's machine) matches; late_wake:3 laps the parity wait and
    deadlocks. With the B200-timing schedules first (b200, then b200~1 and b200~2 with spread load latencies) the
    verdict is RACE, naming that schedule and the deadlock: passed with --allow-notes
    (another author's file), failed without (this package's kernel, exit 2). Without b200 it is the DEADLOCK."""
    needs_nvcc()
    f = tmp_path / "submission.py"
    f.write_text(RACY)
    res = run_submission(f, SMALL, mode="leaderboard", schedules=["late_wake:3"], b200=True, allow_notes=True)
    assert res.status == "race" and res.passed and res.exit_code == 0, (res.summary(), res.message)
    assert (res.race["schedule"], res.race["status"]) == ("late_wake:3", "deadlock") and "RACE" in res.verdict
    assert [r["schedule"] for r in res.runs] == ["b200", "b200~1", "b200~2", "late_wake:3"]
    assert res.checked_elements == 128 * 128
    strict = run_submission(f, SMALL, mode="leaderboard", schedules=["late_wake:3"], b200=True)
    assert strict.status == "race" and not strict.passed and strict.exit_code == 2 and "FAILED" in strict.verdict
    seeded = run_submission(f, SMALL, mode="leaderboard", schedules=["late_wake:3"], allow_notes=True)
    assert seeded.status == "deadlock", seeded.summary()


@pytest.mark.slow
def test_a_kernel_wrong_under_the_b200_timing_stays_a_failure(tmp_path):
    """The same copy waiting for the other parity (the phase before the current one counts as complete: every wait
    passes at once) reads the buffer before any copy lands, on every schedule: the B200-timing schedule fails, and
    that failure is the verdict, not RACE."""
    needs_nvcc()
    f = tmp_path / "submission.py"
    assert RACY.count('"r"(k & 1)') == 1
    f.write_text(RACY.replace('"r"(k & 1)', '"r"((k + 1) & 1)'))
    res = run_submission(f, SMALL, mode="leaderboard", schedules=["late_wake:3"], b200=True, allow_notes=True)
    assert res.status in ("mismatch", "hazard") and not res.race and not res.passed, res.summary()
    assert [r["schedule"] for r in res.runs] == ["b200"]


# Two launches: 2 x 16 CTAs each write half of a row block of C into a workspace slice, then 16 CTAs each add their
# block's two slices into C. A later launch reads what clusters of an earlier one wrote.
SPLIT = HEADER + r'''
SRC = r"""
#include <cuda_fp16.h>
constexpr int ROWS = 8, COLS = 128;  // a CTA's block of C
// launch 0: CTA (b, s) writes half of row block b's values into slice s of the workspace
__global__ void halves(const float *out, float *ws, int blocks) {
  const int b = blockIdx.x % blocks, s = blockIdx.x / blocks;
  for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x)
    ws[(s * blocks + b) * ROWS * COLS + i] = 0.5f * out[b * ROWS * COLS + i];
}
// launch 1: CTA b sums row block b's two slices, written by two CTAs of launch 0
__global__ void reduce(const float *ws, __half *c, int blocks) {
  const int b = blockIdx.x;
  for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x)
    c[b * ROWS * COLS + i] = __float2half_rn(ws[b * ROWS * COLS + i] + ws[(blocks + b) * ROWS * COLS + i]);
}
extern "C" int launch(const float *out, float *ws, void *c, int blocks) {
  halves<<<2 * blocks, 128>>>(out, ws, blocks);
  reduce<<<blocks, 128>>>(ws, static_cast<__half *>(c), blocks);
  return cudaGetLastError();
}
"""
path = load_inline("split_reduce", cpp_sources="", cuda_sources=SRC, is_python_module=False, no_implicit_headers=True,
                   extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])
lib = ctypes.CDLL(path)
''' + TORCH_C + r'''    ws = torch.zeros(2 * out.numel())
    blocks = out.numel() // (8 * 128)
    lib.launch(ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(c.data_ptr()), blocks)
    return c
'''


@pytest.mark.slow
def test_a_sample_does_not_report_a_mismatch_the_sampling_made(tmp_path):
    """With one cluster of each launch emulated, the reducing CTA reads a slice that a CTA of launch 0 not emulated
    writes: its elements are left out of the check, named why, and with nothing left the verdict is UNCHECKED (exit
    3), not the MISMATCH its zero slice would make; every cluster: MATCH on all 16384 elements."""
    needs_nvcc()
    f = tmp_path / "submission.py"
    f.write_text(SPLIT)
    every = run_submission(f, SMALL, mode="leaderboard", schedules=1)
    assert every.status == "match" and every.checked_elements == 128 * 128 and not every.unchecked, every.summary()
    one = run_submission(f, SMALL, mode="leaderboard", schedules=1, clusters=1)
    assert (one.status, one.exit_code, one.checked_elements) == ("unchecked", 3, 0), (one.summary(), one.message)
    assert "reads 4 bytes" in one.message and "not emulated" in one.message and one.verdict == "UNCHECKED"
    assert one.unchecked.startswith("1024 elements")


# ------------------------------------------------------------------ this package's kernel through the same path
@pytest.mark.slow
def test_package_submission_through_the_runner_launches_as_captured():
    """submission.py run as any file (custom_kernel, its TVM-FFI or pointer entry) matches, with the launch the config
    path captures for the same config and SM count; the second call (the second schedule) does no torch work: the
    check of C on a sample is the first call's alone (submission.prepare)."""
    from harness.capture import capture_launch, default_host_path
    from harness.problems import DUAL_GEMM

    res = run_submission(ROOT / "submission.py", (256, 256, 512, 1), schedules=2)
    assert res.passed and not res.torch_work, (res.summary(), res.message, res.torch_work)
    import submission

    config = submission.config_for(256, 256, 512, 1)
    addresses = {name: 0x7F00_0000_0000 + (i + 1) * 0x100_0000 for i, name in enumerate(DUAL_GEMM.operands)}
    cap = capture_launch(str(ROOT / "submission.py"), config, 256, 256, 512, 1, addresses, host_path=default_host_path())
    (launch,) = res.launches
    assert (tuple(launch["grid"]), tuple(launch["block"]), tuple(launch["cluster"]), launch["dynamic_smem"],
            launch["params"], launch["registers"]) == (cap.grid, cap.block, cap.cluster, cap.dynamic_smem,
                                                       len(cap.params), cap.registers)
