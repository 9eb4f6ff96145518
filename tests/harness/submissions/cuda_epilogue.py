#!POPCORN leaderboard nvfp4_dual_gemm
#!POPCORN gpu NVIDIA
"""A small leaderboard submission written for the runner's tests (harness/runner.py), in CUDA through torch's
load_inline: torch dequantises the NVFP4 operands and multiplies them, then a CUDA kernel computes the epilogue
C = silu(R1) * R2 in fp16. Each CTA loads its 8 x 32 tile of R1 with a TMA load (a tensor map from
cuTensorMapEncodeTiled, an mbarrier with its transaction count), reads R2 with plain loads and stores C. Correct and
slow: what it checks is the runner's path for a CUDA file (the extension's build, its pybind binding, the driver's
tensor-map encoder, <<<>>>, cudaGetLastError)."""
import torch
from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>

void launch_silu_mul(const float *r1, const float *r2, void *c, int m, int n);

torch::Tensor silu_mul(torch::Tensor r1, torch::Tensor r2, torch::Tensor c) {
  TORCH_CHECK(r1.is_contiguous() && r2.is_contiguous(), "R1 and R2 must be contiguous");
  launch_silu_mul(r1.data_ptr<float>(), r2.data_ptr<float>(), c.data_ptr(), r1.size(0), r1.size(1));
  return c;
}
"""

CUDA_SRC = r"""
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdexcept>
#include <string>

constexpr int BOX_COLS = 32, BOX_ROWS = 8;

__global__ void __launch_bounds__(BOX_ROWS * BOX_COLS)
silu_mul_kernel(const __grid_constant__ CUtensorMap r1_map, const float *r2, __half *c, int n) {
  __shared__ alignas(128) float tile[BOX_ROWS * BOX_COLS];
  __shared__ alignas(8) unsigned long long full;
  const int col0 = blockIdx.x * BOX_COLS, row0 = blockIdx.y * BOX_ROWS;
  const unsigned full_addr = static_cast<unsigned>(__cvta_generic_to_shared(&full));
  const unsigned tile_addr = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(full_addr));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(full_addr), "r"(static_cast<int>(sizeof(tile))) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(tile_addr), "l"(&r1_map), "r"(col0), "r"(row0), "r"(full_addr) : "memory");
  }
  asm volatile("{\n\t.reg .pred done;\n\tWAIT:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n\t"
               "@!done bra WAIT;\n\t}" :: "r"(full_addr) : "memory");
  const int r = threadIdx.x / BOX_COLS, col = threadIdx.x % BOX_COLS;
  const float x = tile[r * BOX_COLS + col];
  const float y = r2[(row0 + r) * n + col0 + col];
  c[(row0 + r) * n + col0 + col] = __float2half_rn(x / (1.0f + __expf(-x)) * y);
}

void launch_silu_mul(const float *r1, const float *r2, void *c, int m, int n) {
  CUtensorMap map;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(n), static_cast<cuuint64_t>(m)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(n) * sizeof(float)};
  cuuint32_t box[2] = {BOX_COLS, BOX_ROWS}, element_strides[2] = {1, 1};
  CUresult rc = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float *>(r1), dims,
                                       strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                       CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) throw std::runtime_error("cuTensorMapEncodeTiled failed: " + std::to_string(rc));
  silu_mul_kernel<<<dim3(n / BOX_COLS, m / BOX_ROWS), BOX_ROWS * BOX_COLS>>>(map, r2, static_cast<__half *>(c), n);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(err));
}
"""

module = load_inline("cuda_epilogue", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["silu_mul"],
                     extra_cuda_cflags=["-O3", "-gencode=arch=compute_100a,code=sm_100a"], extra_ldflags=["-lcuda"])

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[rows, K/2] FP4 pairs (low nibble first) with [rows, K/16] e4m3 scales -> [rows, K] float32."""
    codes = packed.view(torch.uint8)
    pairs = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(codes.shape[0], -1).long()
    values = torch.tensor(E2M1, device=packed.device)[pairs]
    return values * scales.float().repeat_interleave(16, dim=1)


def custom_kernel(data: input_t) -> output_t:
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    x = dequantize(a[:, :, 0], sfa[:, :, 0])
    r1 = (x @ dequantize(b1[:, :, 0], sfb1[:, :, 0]).t()).contiguous()
    r2 = (x @ dequantize(b2[:, :, 0], sfb2[:, :, 0]).t()).contiguous()
    return module.silu_mul(r1, r2, c)
