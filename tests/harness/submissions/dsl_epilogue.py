#!POPCORN leaderboard nvfp4_dual_gemm
#!POPCORN gpu NVIDIA
"""A small leaderboard submission written for the runner's tests (harness/runner.py), in the CuTe DSL: torch
dequantises the NVFP4 operands and multiplies them, then a CuTe DSL kernel computes the epilogue
C = silu(R1) * R2 in fp16, one element per thread. Correct and slow: what it checks is the runner's path for a CuTe
DSL file (from_dlpack of the leaderboard's tensors, cute.compile, the launch, torch work before it)."""
import torch
from task import input_t, output_t

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 128
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


@cute.kernel
def silu_mul_kernel(r1: cute.Tensor, r2: cute.Tensor, c: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    row = i // n
    col = i - row * n
    x = r1[row, col]
    y = r2[row, col]
    c[row, col, 0] = (x / (1.0 + cute.math.exp(-x)) * y).to(cutlass.Float16)


@cute.jit
def silu_mul(r1: cute.Tensor, r2: cute.Tensor, c: cute.Tensor, m: cutlass.Int32, n: cutlass.Int32):
    silu_mul_kernel(r1, r2, c, n).launch(grid=((m * n) // THREADS, 1, 1), block=(THREADS, 1, 1))


_compiled = {}


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[rows, K/2] FP4 pairs (low nibble first) with [rows, K/16] e4m3 scales -> [rows, K] float32."""
    codes = packed.view(torch.uint8)
    pairs = torch.stack((codes & 0xF, codes >> 4), dim=-1).reshape(codes.shape[0], -1).long()
    values = torch.tensor(E2M1, device=packed.device)[pairs]
    return values * scales.float().repeat_interleave(16, dim=1)


def custom_kernel(data: input_t) -> output_t:
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    m, n, _ = c.shape
    x = dequantize(a[:, :, 0], sfa[:, :, 0])
    r1 = (x @ dequantize(b1[:, :, 0], sfb1[:, :, 0]).t()).contiguous()
    r2 = (x @ dequantize(b2[:, :, 0], sfb2[:, :, 0]).t()).contiguous()
    args = (from_dlpack(r1), from_dlpack(r2), from_dlpack(c))
    if (m, n) not in _compiled:
        _compiled[(m, n)] = cute.compile(silu_mul, *args, m, n)
    _compiled[(m, n)](*args, m, n)
    return c
