"""The timed emulator (emu/timing): its cost table, its resources, its engine on the tensor core's published
microbenchmarks, and a timed run of the kernel. Every figure here is "timed": the model's, not a measurement."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from emu.machine import Cost  # noqa: E402
from emu.timing import costs as cost_table  # noqa: E402
from emu.timing.engine import classify  # noqa: E402
from emu.timing.resources import SM, Bandwidth, Pipe, SlotPipe  # noqa: E402


# ------------------------------------------------------------------ the cost table
def test_every_row_has_a_value_a_unit_and_a_source():
    c = cost_table.load()
    assert c.rows, "empty cost table"
    for row in c.rows.values():
        assert row.source and len(row.source) > 20, row.name
        assert row.unit in cost_table.UNITS, row.name
    fitted = [r.name for r in c.rows.values() if r.fitted]
    assert 0 < len(fitted) <= 2, fitted  # the protocol: at most two constants fitted


def test_the_fitted_values_are_the_default_and_the_prior_is_one_flag_away():
    """One default everywhere (tools/emulate.py --timing, tools/tune.py --dry-run, the tests): the table's values,
    the fitted rows at what the calibration fitted (the report's fitted_overrides, to which its error band belongs);
    the prior table only by asking for it."""
    import json

    report = json.loads((REPO / "docs" / "timing_calibration.json").read_text())
    fitted, prior = cost_table.load(), cost_table.load(prior=True)
    assert report["fitted_overrides"] and {k: getattr(fitted, k) for k in report["fitted_overrides"]} == \
        {k: float(v) for k, v in report["fitted_overrides"].items()}
    assert prior.prior_values() == {k: getattr(prior, k) for k in report["fitted_overrides"]}
    assert all(getattr(prior, k) != getattr(fitted, k) for k in report["fitted_overrides"])
    others = [r for r in fitted.rows.values() if not r.fitted]
    assert all(getattr(prior, r.name) == r.value for r in others)


def test_every_constant_the_engine_reads_is_in_the_table():
    c = cost_table.load()
    sources = "".join((REPO / "emu" / "timing" / f).read_text() for f in ("engine.py", "call.py", "resources.py"))
    used = set(re.findall(r"\b(?:c|costs)\.([a-z][a-z0-9_]+)\b", sources))
    derived = {"clock_hz", "hbm_bytes_per_clk", "l2_bytes_per_clk", "cycles", "us", "mma_latency", "describe", "rows",
               "sm_count", "prior_values"}  # sm_count: a count, emu.device's (the one home of the chip's counts)
    missing = sorted(used - derived - set(c.rows))
    assert not missing, f"the engine reads constants the table does not have: {missing}"


def test_overrides_replace_a_row_and_unknown_names_fail():
    c = cost_table.load(overrides={"l2_to_sm_bytes_per_clk": 96})
    assert c.l2_to_sm_bytes_per_clk == 96
    with pytest.raises(ValueError):
        cost_table.load(overrides={"no_such_constant": 1})


def test_unit_conversions():
    c = cost_table.load(overrides={"clock_ghz": 2.0})
    assert c.cycles(1.0) == pytest.approx(2000)
    assert c.us(2000) == pytest.approx(1.0)
    assert c.hbm_bytes_per_clk == pytest.approx(c.hbm_tb_per_s * 1e12 / 2e9)


# ------------------------------------------------------------------ resources
def test_pipe_serves_in_arrival_order_and_counts_busy_time():
    p = Pipe("p")
    assert p.occupy(0, 10) == (0, 10)
    assert p.occupy(5, 10) == (10, 20)  # waits for the first
    assert p.occupy(30, 5) == (30, 35)
    assert p.busy == 25


def test_slot_pipe_fills_the_gaps_a_queue_would_leave():
    p = SlotPipe("mufu")
    assert p.occupy(100, 8) == (100, 108)  # a late-ready instruction
    assert p.occupy(0, 8) == (0, 8)  # an earlier-ready one is not stuck behind it
    assert p.occupy(4, 8) == (8, 16)
    assert p.occupy(95, 8) == (108, 116)  # no gap of 8 before 100 after 95: after the first
    p.forget_before(50)
    assert p.intervals and p.intervals[0][0] >= 100


def test_bandwidth_transfer_time():
    b = Bandwidth("b", 64)
    assert b.transfer(0, 6400) == pytest.approx(100)
    assert b.transfer(0, 640) == pytest.approx(110)
    assert b.bytes == 7040
    with pytest.raises(ValueError):
        Bandwidth("zero", 0)


# ------------------------------------------------------------------ the tensor core against its microbenchmarks
def _mma_cycles(n: int, cta_group: int, collector: str = "discard", count: int = 200) -> float:
    """Cycles per MMA when `count` MMAs of M=128*cta_group, N=n, K=64 (FP4) are issued back to back: the engine's
    tensor-core cost alone (no TMA traffic), as SemiAnalysis's throughput benchmark measures it."""
    from emu.timing.engine import TimedMachine

    c = cost_table.load()
    sms = [SM(i, c) for i in range(cta_group)]

    class Cta:
        def __init__(self, sm, i):
            self.sm, self.ctaid = sm, (i, 0, 0)

    ctas = [Cta(sm, i) for i, sm in enumerate(sms)]
    m = TimedMachine.__new__(TimedMachine)
    m.costs, m.now, m.trace, m.stats = c, 0.0, None, {}
    m.marks = {cta.ctaid: {"commits": []} for cta in ctas}
    m.mma_own_latency = c.mma_issue_latency + c.tcgen05_commit_latency + c.mbarrier_wake_latency
    rows_a, rows_b = 128, n // cta_group
    a_bytes = 0 if collector == "lastuse" else rows_a * 32
    op = type("Op", (), {"name": "mma", "cost": Cost("mma", m=128 * cta_group, n=n, k=64, a_bytes=a_bytes,
                                                      b_bytes=rows_b * 32, dests=ctas)})
    first = m._completion(op)
    last = first
    for _ in range(count - 1):
        last = m._completion(op)
    return (last - first) / (count - 1)


@pytest.mark.parametrize("n,cta_group,published", [(64, 1, 48.17), (128, 1, 64.18), (256, 1, 128.18),
                                                   (64, 2, 43.20), (128, 2, 64.21), (256, 2, 128.21)])
def test_mma_throughput_reproduces_the_published_cycles(n, cta_group, published):
    """SemiAnalysisAI/microbench-blackwell umma_throughput/tput_results_max.csv (both operands in shared memory)."""
    assert _mma_cycles(n, cta_group) == pytest.approx(published, abs=0.5)


def test_a_from_the_collector_reads_only_b():
    """A kept in the collector (or tensor memory) leaves the MMA compute bound: N=64 in N/2 = 32 cycles (the
    published A-in-tensor-memory rows: 32.15)."""
    assert _mma_cycles(64, 1, collector="lastuse") == pytest.approx(32.15, abs=0.5)


# ------------------------------------------------------------------ instruction classes
def test_classify_sources_and_destinations():
    from emu import ptx as ptx_mod

    text = """
.version 8.8
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<9>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<4>;
    .reg .pred %p<3>;
    add.s32 %r1, %r2, %r3;
    ex2.approx.ftz.f32 %f1, %f2;
    st.global.v4.b32 [%rd1+16], {%r4, %r5, %r6, %r7};
    @%p1 bra $L1;
$L1:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], %r1;
    cvt.rn.f16x2.f32 %r1, %f1, %f2;
    ret;
}
"""
    k = ptx_mod.parse_module(text)
    got = [classify(i) for i in k.instrs]
    assert got[0] == ("alu", ("%r2", "%r3"), ("%r1",))
    assert got[1] == ("mufu", ("%f2",), ("%f1",))
    assert got[2] == ("st_global", ("%rd1", "%r4", "%r5", "%r6", "%r7"), ())
    assert got[3][0] == "alu" and got[3][1] == ("%p1",) and got[3][2] == ()
    assert got[4] == ("alu", ("%r8", "%r1"), ("%p2",))
    assert got[5] == ("cvt16", ("%f1", "%f2"), ("%r1",))


# ------------------------------------------------------------------ the kernel, timed
@pytest.mark.slow
def test_timed_run_of_the_kernel_checks_c_and_accounts_for_its_time(tmp_path):
    from harness.timed import timed_emulate

    res, timed = timed_emulate(256, 256, 512, 1, config_name="m256n64_c2x1_e32_ac")
    assert res.status == "match", res.message
    assert timed.status == "completed"
    assert timed.per_call_us == pytest.approx(timed.start_us + timed.kernel_us)
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
    timed_line, band = p.stdout.strip().splitlines()[-2:]
    assert re.match(r"timed: \d+\.\d\d us per call \(kernel .*binds: .*\)", timed_line), timed_line
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
