"""The first call's fallbacks with the kernel's own launches in the emulator (harness/runner.py runs submission.py as the
leaderboard does): each failure a runner may meet is planted in a copy of submission.py, and the call must still
return the right C, with the stderr line naming what failed and what ran instead (submission.prepare; the same paths
on the CPU without the emulator: tests/package/test_first_contact.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.runner import run_submission

ROOT = Path(__file__).resolve().parents[2]
SHAPE = (256, 128, 512, 1)  # chain: m256n64_c2x1_e32_ac (default rule), then SAFE_CONFIG m128n64_c1x1_e32_nopdl
TVM_FFI_COMPILE = '            launcher = cute.compile(kernel, *_fake_operands(), options="--enable-tvm-ffi")\n'


@dataclass(frozen=True)
class Fault:
    name: str
    old: str  # a line of submission.py (exactly once)
    new: str
    said: tuple  # what the stderr line must say
    quick: bool = False

    def plant(self, folder: Path) -> Path:
        text = (ROOT / "submission.py").read_text()
        assert text.count(self.old) == 1, f"{self.name}: the planted line is not in submission.py once: {self.old!r}"
        path = folder / "submission.py"
        path.write_text(text.replace(self.old, self.new))
        return path


FAULTS = [
    # a wrong result from the first config's device code (the A collector's two B operands swapped): the check of C
    # on a sample catches it, the next config (no collector) computes C
    Fault("wrong_c", "            [desc_lo(buffer, self.b_stage_bytes) for buffer in (storage.sB1, storage.sB2)],\n",
          "            [desc_lo(buffer, self.b_stage_bytes) for buffer in (storage.sB2, storage.sB1)],\n",
          ("m128n64_c1x1_e32_nopdl, TVM-FFI launch", "fell back past: m256n64_c2x1_e32_ac (TVM-FFI): C wrong at "),
          quick=True),
    # apache-tvm-ffi that does not match the runner's DSL or torch: its compile fails, the pointer launcher runs
    Fault("tvm_ffi_compile", TVM_FFI_COMPILE, '            raise RuntimeError("planted: the TVM-FFI compile fails")\n',
          ("m256n64_c2x1_e32_ac, pointer launch", "(TVM-FFI): RuntimeError: planted: the TVM-FFI compile fails")),
    # its first launch fails (a dtype DLPack cannot hand over)
    Fault("tvm_ffi_launch", TVM_FFI_COMPILE,
          '            launcher = lambda *tensors: (_ for _ in ()).throw(TypeError("planted: DLPack refuses"))\n',
          ("m256n64_c2x1_e32_ac, pointer launch", "(TVM-FFI): TypeError: planted: DLPack refuses")),
    # the driver's cluster query fails: the count is assumed and said
    Fault("cluster_query", "        clusters = utils.HardwareInfo().get_max_active_clusters(cluster_ctas)\n",
          '        raise OSError("planted: cuOccupancyMaxActiveClusters failed")\n',
          ("m256n64_c2x1_e32_ac, TVM-FFI launch, 74 clusters of 2 (the driver's query failed: OSError: planted",)),
    # the first config does not compile on this DSL: every path of it fails, the next config runs
    Fault("config_compile", "        self.config = config\n",
          '        self.config = config\n        if config.a_collector:\n'
          '            raise RuntimeError("planted: this config does not compile here")\n',
          ("m128n64_c1x1_e32_nopdl, TVM-FFI launch", "m256n64_c2x1_e32_ac (TVM-FFI): RuntimeError: planted",
           "m256n64_c2x1_e32_ac (pointer): RuntimeError: planted")),
]


@pytest.mark.parametrize("fault", [f if f.quick else pytest.param(f, marks=pytest.mark.slow) for f in FAULTS],
                         ids=lambda f: f.name)
def test_first_call_survives_the_planted_failure(fault, tmp_path):
    res = run_submission(fault.plant(tmp_path), SHAPE, schedules=1)
    assert res.passed, (res.summary(), res.message, res.output[-3000:])
    (line,) = [x for x in res.output.splitlines() if x.startswith("submission: nvfp4_dual_gemm 256x128x512x1: ")]
    for words in fault.said:
        assert words in line, line
    assert line.count("C checked on a sample: ok") == 1
