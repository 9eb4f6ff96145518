"""The timed emulator (emu/timing): its cost table, its resources, its engine on the tensor core's published
microbenchmarks. Every figure here is "timed": the model's, not a measurement. Timed runs of the kernel:
tests/harness/test_timed.py."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from emu.machine import Cost  # noqa: E402
from emu.timing import costs as cost_table  # noqa: E402
from emu.timing.engine import classify  # noqa: E402
from emu.timing.resources import SM, Bandwidth, Pipe, SlotPipe  # noqa: E402
from tests.emu.ptx_kit import kernel_text  # noqa: E402


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

    text = kernel_text("""    add.s32 %r1, %r2, %r3;
    ex2.approx.ftz.f32 %f1, %f2;
    st.global.v4.b32 [%rd1+16], {%r4, %r5, %r6, %r7};
    @%p1 bra $L1;
$L1:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], %r1;
    cvt.rn.f16x2.f32 %r1, %f1, %f2;
    ret;""", ".param .u64 p", "    .reg .b32 %r<9>;\n    .reg .b64 %rd<4>;\n    .reg .f32 %f<4>;\n"
                       "    .reg .pred %p<3>;", smem=False)
    k = ptx_mod.parse_module(text)
    got = [classify(i) for i in k.instrs]
    assert got[0] == ("alu", ("%r2", "%r3"), ("%r1",))
    assert got[1] == ("mufu", ("%f2",), ("%f1",))
    assert got[2] == ("st_global", ("%rd1", "%r4", "%r5", "%r6", "%r7"), ())
    assert got[3][0] == "alu" and got[3][1] == ("%p1",) and got[3][2] == ()
    assert got[4] == ("alu", ("%r8", "%r1"), ("%p2",))
    assert got[5] == ("cvt16", ("%f1", "%f2"), ("%r1",))


# ------------------------------------------------------------------ the wave plan
def test_timed_occupancy_counts_static_shared_memory_and_registers():
    """A launch's CTAs per SM are the hardware's (emu.device.occupancy): a kernel that declares its shared memory
    statically (NaregAmirianMegan's submission_ptx.py: no dynamic shared memory at all) holds a whole SM, not ten
    CTAs' worth; registers bind where nothing else does."""
    from types import SimpleNamespace

    from emu.timing.call import occupancy

    def launch(dynamic, static=None, registers=None, threads=192):
        return SimpleNamespace(block=(threads, 1, 1), dynamic_smem=dynamic, static_smem=static, registers=registers)

    assert occupancy(launch(0)) == 10  # threads alone: 2048 // 192
    assert occupancy(launch(0, static=200 * 1024)) == 1
    assert occupancy(launch(200 * 1024)) == 1  # the same bytes, dynamic
    assert occupancy(launch(0, static=100 * 1024)) == 2
    assert occupancy(launch(0, registers=168)) == 2  # 6 warps x 5376 registers: 2 per 65536
    assert occupancy(launch(300 * 1024)) == 1  # never below one: a launch that fits none is refused before timing
