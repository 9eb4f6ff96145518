"""The launch record and the B200's launch limits: emu.launch's .entry parser, emu.device's occupancy and tensor
memory per SM (fakes: each rule is a pure function). The same limits in the runtime stand-ins that capture a launch:
tests/harness/test_capture.py."""
from __future__ import annotations

from types import SimpleNamespace

from emu import device
from emu.launch import entry_params


def test_entry_params_parser():
    ptx = """.visible .entry k(
        .param .align 64 .b8 k_param_0[128],
        .param .u32 k_param_1, // comment
        .param .align 4 .b8 k_param_2[12]
    )
    { ret; }"""
    name, params = entry_params(ptx)
    assert name == "k" and [(p[0], p[1], p[2]) for p in params] == [("k_param_0", 128, 64), ("k_param_1", 4, 4),
                                                                      ("k_param_2", 12, 4)]


def test_occupancy_and_tensor_memory_per_sm():
    assert device.occupancy(192, 110, 217088 + 1024) == 1
    assert device.occupancy(192, 110, 100000) == 2  # smem: 233472 // 101024
    assert device.occupancy(1024, 64, 0) == 1  # 64 registers x 1024 threads fill the 65536
    assert device.occupancy(1024, 65, 0) == 0  # 72 (rounded to the 256-register warp unit) do not
    assert device.occupancy(128, None, 0) == 16  # threads per SM
    big = SimpleNamespace(grid=(148, 1, 1), block=(192, 1, 1), registers=110, dynamic_smem=216064, static_smem=1024)
    half = SimpleNamespace(grid=(148, 1, 1), block=(192, 1, 1), registers=110, dynamic_smem=100000, static_smem=1024)
    assert device.tensor_memory_oversubscribed(big, 512) is None
    assert device.tensor_memory_oversubscribed(half, 256) is None
    assert "1024 > 512" in device.tensor_memory_oversubscribed(half, 512)
    alone = SimpleNamespace(grid=(1, 1, 1), block=(192, 1, 1), registers=110, dynamic_smem=100000, static_smem=1024)
    assert device.tensor_memory_oversubscribed(alone, 512) is None  # a grid of one CTA shares its SM with nobody
