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
from harness.runner import is_package_kernel, run_cases, run_submission

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


# ------------------------------------------------------------------ this package's kernel through the same path
@pytest.mark.slow
def test_package_submission_through_the_runner_launches_as_captured():
    """submission.py run as any file (custom_kernel, its TVM-FFI or pointer entry) matches, with the launch the config
    path captures for the same config and SM count."""
    from harness.capture import capture_launch, default_host_path
    from harness.problems import DUAL_GEMM

    res = run_submission(ROOT / "submission.py", (256, 256, 512, 1), schedules=1)
    assert res.passed and not res.torch_work, (res.summary(), res.message, res.torch_work)
    import submission

    config = submission.config_for(256, 256, 512, 1)
    addresses = {name: 0x7F00_0000_0000 + (i + 1) * 0x100_0000 for i, name in enumerate(DUAL_GEMM.operands)}
    cap = capture_launch(str(ROOT / "submission.py"), config, 256, 256, 512, 1, addresses, host_path=default_host_path())
    (launch,) = res.launches
    assert (tuple(launch["grid"]), tuple(launch["block"]), tuple(launch["cluster"]), launch["dynamic_smem"],
            launch["params"], launch["registers"]) == (cap.grid, cap.block, cap.cluster, cap.dynamic_smem,
                                                       len(cap.params), cap.registers)
