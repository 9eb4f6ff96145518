"""The GPU probes probes/tma_loads.py and probes/epilogue.py, run in the SM100 emulator (calibration/gpu_probes.py).

Every result here is "emulated": the probes' own stub kernels (the kernel's `_ring_and_loads`, `_load_rows`, epilogue
views and stores) compiled for sm_100a, launched by their real host code through the runtime stand-ins, run in emu/
on the probes' own inputs (reference.generate_input on CPU), and judged by the probes' own `compare` functions.
On SM100 the TMA probe checks all six loads (the H200 run could check only SFA, SFB1, SFB2).
CPU only (needs cc and the DSL, no GPU); each config's first run compiles in a subprocess (~5 s), cached after.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from calibration import gpu_probes as E  # noqa: E402

# each probe compiles its stub as it does on a GPU, with --enable-tvm-ffi, and is called through that entry
pytestmark = pytest.mark.needs_tvm_ffi("the probes compile and call their stub kernels through TVM-FFI")
TMA_IDS = ["m128n64", "m128n128"]
EPI_IDS = ["m128n64", "m128n128", "m128n64_e16"]


@pytest.mark.slow
@pytest.mark.parametrize("fields", E.TMA_CONFIGS, ids=TMA_IDS)
def test_tma_probe_emulated_all_six_loads(fields):
    res = E.run_probe("tma", fields)
    assert res.loads == ("A", "B1", "B2", "SFA", "SFB1", "SFB2")
    assert res.status == "ok", res.line() + "\n" + res.message
    assert res.stats["tma_bytes"] > 0


@pytest.mark.slow
def test_tma_probe_emulated_other_scheduler_seed():
    res = E.run_probe("tma", E.TMA_CONFIGS[0], sched_seed=7)
    assert res.status == "ok", res.line() + "\n" + res.message


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(E.NEGATIVES))
def test_tma_probe_emulated_negative_controls_are_rejected(variant):
    """The kernel loading the previous k-tile, or another N tile's CTA dumping: the probe's check rejects exactly the
    affected operands (all six for the k-tile; B1, B2, SFB1, SFB2 for the N tile, while A and SFA still pass)."""
    res = E.run_probe("tma", E.TMA_CONFIGS[0], variant=variant)
    ok, why = E.negative_verdict(res, variant)
    assert ok, why + "\n" + res.message


@pytest.mark.slow
@pytest.mark.parametrize("fields", E.EPILOGUE_CONFIGS, ids=EPI_IDS)
def test_epilogue_probe_emulated(fields):
    res = E.run_probe("epilogue", fields)
    assert res.status == "ok", res.line() + "\n" + res.message


@pytest.mark.slow
def test_epilogue_probe_emulated_negative_control_unwritten_c_is_rejected():
    """Only some clusters run: the rest of C keeps its NaN poison and the probe's check must say so."""
    res = E.run_probe("epilogue", E.EPILOGUE_CONFIGS[0], clusters=3)
    assert res.status == "rejected" and "misplaced or unwritten" in res.message, res.message


@pytest.mark.slow
def test_pdl_launch_is_judged_and_the_stub_waits():
    """The probes launch with PDL (the config's default): the stub waits (griddepcontrol.wait) before its global
    accesses, as the kernel does, so the emulator's PDL rule passes (the kernel without its wait is a planted bug: harness/mutants.py)."""
    fields = E.TMA_CONFIGS[0]
    assert fields.get("pdl", True)
    assert "griddepcontrol.wait" in (E.compile_artifacts("tma", dict(fields)) / "kernel.ptx").read_text()
    assert E.run_probe("tma", fields).status == "ok"
