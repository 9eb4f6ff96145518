"""Timed runs of the kernel (harness/timed.py on the timed emulator, emu/timing): C checked and the time accounted
for, PDL's saving, the CLI's timing line, trace and JSON, the exchange's cost. Every figure here is "timed": the
model's, not a measurement."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emu.timing import costs as cost_table

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_timed_run_of_the_kernel_checks_c_and_accounts_for_its_time(tmp_path):
    from harness.timed import timed_emulate

    res, timed = timed_emulate(256, 256, 512, 1, config_name="m256n64_c2x1_e32_ac")
    assert res.status == "match", res.message
    assert timed.status == "completed"
    c = cost_table.load()
    # the launch carries PDL (the config's default): its CTAs start at the table's PDL start, not after the launch gap
    assert timed.start_us == pytest.approx(c.pdl_cta_start_us) and c.pdl_cta_start_us != c.launch_gap_us
    # the kernel lasts at least its tensor core's work: every MMA's busy cycles, the simulated clusters in parallel
    mma_us = c.us(timed.stats["mma_busy_cycles"] / timed.clusters_simulated)
    assert mma_us > 0 and timed.kernel_us > mma_us
    assert sum(timed.phases_us.values()) == pytest.approx(timed.kernel_us, rel=0.15)
    assert 0 < timed.utilisation["tensor core"] < 1
    faster, timed_fast = timed_emulate(256, 256, 512, 1, config_name="m256n64_c2x1_e32_ac",
                                       costs=cost_table.load(overrides={"clock_ghz": 3.924}))
    assert timed_fast.per_call_us < timed.per_call_us  # a faster clock cannot be slower


@pytest.mark.slow
def test_pdl_saves_about_the_measured_gap():
    """Same tile with and without programmatic dependent launch: the difference is the launch gap the table holds,
    less what the prologue overlaps."""
    from harness.timed import timed_emulate

    c = cost_table.load()
    _, with_pdl = timed_emulate(256, 256, 512, 1, config_name="m128n64_c1x1_e32")
    _, without = timed_emulate(256, 256, 512, 1, config_name="m128n64_c1x1_e32_nopdl")
    saved = without.per_call_us - with_pdl.per_call_us
    assert 0.5 * (c.launch_gap_us - c.pdl_wait_release_us) < saved <= c.launch_gap_us


@pytest.mark.slow
def test_cli_timing_line_trace_and_json(tmp_path):
    trace, out = tmp_path / "t.json", tmp_path / "r.json"
    p = subprocess.run([sys.executable, "tools/emulate.py", "--timing", "--shape", "256,256,512", "--trace", str(trace),
                        "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    timed_line, variants_line, band = p.stdout.strip().splitlines()[-3:]
    assert re.match(r"timed: \d+\.\d\d us per call \(kernel .*binds: .*\)", timed_line), timed_line
    # the figure under every kept engine variant (calibration/engine_variants.json), the adopted one first
    assert re.match(r"\s*under the kept engine variants .*: B0 \d+\.\d\d, H1 separate \d+\.\d\d, .* us; worst ",
                    variants_line), variants_line
    assert "error band (docs/timing_calibration.json" in band and "held-out |error| median" in band, band
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == "busy" for e in events) and any(e.get("cat") == "tensor core" for e in events)
    assert trace.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = json.loads(out.read_text())
    assert result["label"] == "timed" and result["per_call_us"] > 0


@pytest.mark.slow
def test_the_exchange_is_timed_and_its_latency_counts():
    """st.async (the product pair's exchange) carries a "remote" cost: the run is timed, and a slower SM-to-SM network
    makes it slower."""
    from emu.timing import costs as cost_table
    from harness.timed import timed_emulate

    res, timed = timed_emulate(128, 256, 512, 1, config_name="m128n128_c1x1_e32_ppc")
    assert res.status == "match" and timed.stats.get("st_async_bytes", 0) > 0
    slow = cost_table.load(overrides={"dsmem_latency": 20000})
    _, timed_slow = timed_emulate(128, 256, 512, 1, config_name="m128n128_c1x1_e32_ppc", costs=slow)
    assert timed_slow.per_call_us > timed.per_call_us
