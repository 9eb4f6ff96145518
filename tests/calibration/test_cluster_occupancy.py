"""probes/cluster_occupancy.py: its ctypes mirrors of cuda.h's launch structs, its refusal without a GPU, and the
H200 measurement it made (tests/data/cluster_occupancy_h200.json), which submission.max_active_clusters cites."""
import ctypes
import json
import subprocess
import sys
from pathlib import Path

from probes import cluster_occupancy as probe

REPO = Path(__file__).resolve().parents[2]
H200 = json.loads((REPO / "tests" / "data" / "cluster_occupancy_h200.json").read_text())


def test_launch_structs_have_cuda_h_layout():
    """cuda.h (CUDA 13): CUlaunchAttribute is an 4-byte id, padding to 8, a 64-byte value union; CUlaunchConfig is
    seven uints, a handle, the attribute pointer and their count (56 bytes on a 64-bit host)."""
    assert ctypes.sizeof(probe.LaunchAttributeValue) == 64
    assert ctypes.sizeof(probe.LaunchAttribute) == 72 and probe.LaunchAttribute.value.offset == 8
    assert ctypes.sizeof(probe.LaunchConfig) == 56
    assert probe.LaunchConfig.queue.offset == 32 and probe.LaunchConfig.num_attrs.offset == 48


def test_without_a_gpu_it_says_so_and_exits_2():
    proc = subprocess.run([sys.executable, "probes/cluster_occupancy.py"], cwd=REPO, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "no CUDA driver or GPU" in proc.stderr


def test_h200_measurement_holds_fewer_large_clusters_than_sms_allow():
    """Measured on an H200 (132 SMs, the kernel's 229376 B per CTA): pairs fill every SM, clusters of 4 and 6 do not
    (30 and 17 where 132 // n gives 33 and 22): the reason the grid asks the driver."""
    assert H200["device"] == "NVIDIA H200" and H200["sm_count"] == 132 and H200["smem_per_cta"] == 229376
    got = {int(n): row["max_active_clusters"] for n, row in H200["clusters"].items()}
    assert got[1] == 132 and got[2] == 66
    assert got[4] == 30 < 132 // 4 and got[6] == 17 < 132 // 6
