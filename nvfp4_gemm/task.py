"""Types of the nvfp4_gemm leaderboard (API-compatible with gpu-mode/reference-kernels@f83cb92a,
problems/nvidia/nvfp4_gemm/task.py): the input is the 7-tuple (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)."""
from typing import TypedDict, TypeVar

import torch

# (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)
input_t = TypeVar(
    "input_t",
    bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
)
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    l: int
    seed: int
