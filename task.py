"""Types shared by submission.py and reference.py (API-compatible with the leaderboard's task.py).

`from task import input_t, output_t` works here exactly as on the GPU MODE leaderboard.
"""
from typing import TypedDict, TypeVar

import torch

# (a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted, sfb2_permuted, c)
input_t = TypeVar(
    "input_t",
    bound=tuple[
        torch.Tensor, torch.Tensor, torch.Tensor,
        torch.Tensor, torch.Tensor, torch.Tensor,
        torch.Tensor, torch.Tensor, torch.Tensor,
        torch.Tensor,
    ],
)
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    l: int
    seed: int
