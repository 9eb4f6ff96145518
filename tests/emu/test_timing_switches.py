"""The model switches of docs/timing_hypotheses.md (issue 21 items 3-5): each hypothesis is a row of
emu/timing/b200.yaml whose default is the engine as it was before the switch, so a hypothesis is an overrides dict
for emu.timing.costs.load. Checked here: with the defaults nothing moves (bit for bit), and each switch moves a small
hand-built case, where its mechanism binds, in the direction the hypothesis predicts.

The hand-built kernel (one CTA simulated; the grid's other CTAs read the same tiles, so an allocation's grid reuse is
the grid size): lane 0 of warp 0 inits an mbarrier and issues `nloads` TMA loads of a `width` x `rows` byte box, the
warp waits for them, then every lane writes `stores` x 16 bytes of global memory and, optionally, a dependent ALU chain
feeds a last store. Optional: a prefetch.tensormap, a chain before the first load (the loads' coordinate depends on
it), griddepcontrol.wait under programmatic dependent launch, and a second warp reading shared memory while the
loads land. Every figure is "timed" (the timed emulator's), never a measurement. Seconds each.
"""
from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from emu import CapturedLaunch, GlobalMemory, tma
from emu.machine import PDL_LAUNCH_ATTRIBUTE, Cost
from emu.timing import costs as cost_table
from emu.timing.call import timed_run
from emu.timing.engine import TimedMachine
from emu.timing.resources import SM

# switch row -> (default: today's engine, the pre-registered run value(s)), docs/timing_hypotheses.md section 5
SWITCHES = {
    "smem_write_bytes_per_clk": (0, [128]),  # H1 (the 'wide' form is smem_bytes_per_clk 160)
    "mma_2sm_fixed_cycles": (0, [3.2]),  # H2 (with mma_2sm_smem_factor 1.0)
    "l2_share_mode": (0, [1, 2]),  # H3
    "tma_row_cycles": (0, [1.53]),  # H4a
    "die_to_die_cycles": (0, [300]),  # H5
    "tensormap_fetch_cycles": (0, [470]),  # H9
    "first_load_latency_table": (0, [1]),  # H10
    "pdl_overlap_split": (0, [1]),  # H12
    "store_queue_cycles": (64, [1024]),  # H14
    "tmem_ld_lookahead": (0, [1]),  # H15
}
DEFAULTS = {name: default for name, (default, _) in SWITCHES.items()}
DATA_OFFSET = 1024  # the loads land from smem + 1 KB (the mbarrier sits at smem + 0)
READ_OFFSET = 66 * 1024  # the second warp reads shared memory from here (no load writes there)
DYNAMIC_SMEM = 200 * 1024  # one CTA per SM


def ptx(nloads=8, width=128, rows=64, prefetch=False, chain=0, wait=False, reads=0, stores=4, tail_chain=0) -> str:
    total = nloads * width * rows
    lines = [
        "    ld.param.u64 %rd1, [out];",
        "    mov.u64 %rd5, tmap;",
        "    mov.u32 %r1, %tid.x;",
        "    and.b32 %r2, %r1, 31;",
        "    mov.u32 %r9, smem;",
        "    setp.eq.u32 %p1, %r1, 0;",
        "    setp.ge.u32 %p5, %r1, 32;",
    ]
    if prefetch:
        lines.append("    prefetch.tensormap [%rd5];")
    lines += [
        "    mov.b32 %r4, 1;",
        "    @%p1 mbarrier.init.shared.b64 [%r9], %r4;",
        "    bar.sync 0;",
        "    @%p5 bra.uni READS;",
        "    mov.u32 %r30, 0;",
    ]
    lines += ["    add.u32 %r30, %r30, 1;"] * chain
    # x = 0 once the chain is done; a cp.async.bulk.tensor issues without waiting for its registers (the engine's
    # dataflow class), so a shared store, which waits, holds the loads until then
    lines += ["    and.b32 %r7, %r30, 0;", "    st.shared.u32 [%r9+8], %r7;"]
    if wait:
        lines.append("    griddepcontrol.wait;")
    lines += [f"    mov.b32 %r5, {total};", "    @%p1 mbarrier.arrive.expect_tx.shared.b64 _, [%r9], %r5;"]
    for i in range(nloads):
        lines += [f"    add.u32 %r{100 + i}, %r9, {DATA_OFFSET + i * width * rows};",
                  f"    add.u32 %r{200 + i}, %r7, {i * rows};",
                  f"    @%p1 cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes "
                  f"[%r{100 + i}], [%rd5, {{%r7, %r{200 + i}}}], [%r9];"]
    lines += [
        "LAB_WAIT:",
        "    mbarrier.try_wait.parity.shared.b64 %p2, [%r9], 0, 1000;",
        "    @%p2 bra.uni LAB_DONE;",
        "    bra.uni LAB_WAIT;",
        "LAB_DONE:",
        "    mul.wide.u32 %rd9, %r2, 16;",
        "    add.u64 %rd10, %rd1, %rd9;",
        f"    ld.shared.v4.u32 {{%r10, %r11, %r12, %r13}}, [%r9+{DATA_OFFSET}];",
    ]
    lines += [f"    st.global.v4.u32 [%rd10+{512 * i}], {{%r10, %r11, %r12, %r13}};" for i in range(stores)]
    if tail_chain:
        lines.append("    mov.u32 %r31, %r10;")
        lines += ["    add.u32 %r31, %r31, 1;"] * tail_chain
        lines.append(f"    st.global.u32 [%rd10+{512 * stores}], %r31;")
    lines.append("    bra.uni END;")
    lines.append("READS:")
    if reads:
        lines += ["    mul.lo.u32 %r60, %r2, 16;", "    add.u32 %r61, %r9, %r60;"]
        lines += [f"    ld.shared.v4.u32 {{%r20, %r21, %r22, %r23}}, [%r61+{READ_OFFSET + 512 * i}];"
                  for i in range(reads)]
    lines += ["END:", "    ret;"]
    return (".version 8.8\n.target sm_100a\n.address_size 64\n.extern .shared .align 1024 .b8 smem[];\n"
            ".visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])\n{\n"
            ".reg .pred %p<8>;\n.reg .b32 %r<300>;\n.reg .b64 %rd<16>;\n" + "\n".join(lines) + "\n}\n")


def launch(grid=1, nloads=8, width=128, rows=64, reads=0, pdl=False, stores=4, tail_chain=0, tcgen05=None, **kw):
    if tcgen05 is not None:
        return tc_launch(**tcgen05)
    gmem = GlobalMemory()
    out = gmem.alloc(512 * (stores + 1) + 64, fill=0)
    tensor = np.arange(width * rows * nloads, dtype=np.uint32).astype(np.uint8)
    base = gmem.alloc_array(tensor)
    tmap = tma.encode_tensor_map(base, 0, dims=[width, rows * nloads], strides=[width], box=[width, rows], swizzle=0)
    attrs = [(PDL_LAUNCH_ATTRIBUTE, struct.pack("<I", 1))] if pdl else []
    cap = CapturedLaunch(ptx=ptx(nloads, width, rows, reads=reads, stores=stores, tail_chain=tail_chain, **kw),
                         kernel_name="k", grid=(grid, 1, 1), block=(64 if reads else 32, 1, 1), cluster=(1, 1, 1),
                         dynamic_smem=DYNAMIC_SMEM, params=[struct.pack("<Q", out), tmap], dsl_version="",
                         launch_attrs=attrs)
    return cap, gmem


def tc_ptx(steps=8, math=20, reuse_regs=False) -> str:
    """One warp: allocate 32 tensor-memory columns, then `steps` narrow epilogue steps (tcgen05.ld 32x32b.x4, wait::ld,
    a chain of `math` dependent adds, a 512-byte store), each step's load into its own registers (an unrolled
    epilogue) or all into the same four (reuse_regs: a rolled loop's registers)."""
    lines = ["    ld.param.u64 %rd1, [out];", "    mov.u32 %r1, %tid.x;", "    mov.u32 %r9, smem;",
             "    mul.wide.u32 %rd9, %r1, 16;", "    add.u64 %rd10, %rd1, %rd9;",
             "    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;",
             "    tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
             "    tcgen05.fence::before_thread_sync;", "    bar.sync 0;", "    tcgen05.fence::after_thread_sync;",
             "    ld.shared.u32 %r40, [%r9];"]
    lines += [f"    add.u32 %r{100 + i}, %r40, {4 * (i % 8)};" for i in range(steps)]
    for i in range(steps):
        b = 50 if reuse_regs else 150 + 4 * i
        regs = ", ".join(f"%r{b + j}" for j in range(4))
        lines += [f"    tcgen05.ld.sync.aligned.32x32b.x4.b32 {{{regs}}}, [%r{100 + i}];",
                  "    tcgen05.wait::ld.sync.aligned;"]
        lines += [f"    add.u32 %r{b}, %r{b}, 1;"] * math
        lines.append(f"    st.global.v4.u32 [%rd10+{512 * i}], {{{regs}}};")
    lines += ["    tcgen05.fence::before_thread_sync;", "    bar.sync 0;", "    tcgen05.fence::after_thread_sync;",
              "    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r40, 32;", "    ret;"]
    return (".version 8.8\n.target sm_100a\n.address_size 64\n.extern .shared .align 1024 .b8 smem[];\n"
            ".visible .entry k(.param .u64 out)\n{\n.reg .pred %p<8>;\n.reg .b32 %r<300>;\n.reg .b64 %rd<16>;\n"
            + "\n".join(lines) + "\n}\n")


def tc_launch(**kw):
    gmem = GlobalMemory()
    out = gmem.alloc(512 * kw.get("steps", 8), fill=0)
    cap = CapturedLaunch(ptx=tc_ptx(**kw), kernel_name="k", grid=(1, 1, 1), block=(32, 1, 1), cluster=(1, 1, 1),
                         dynamic_smem=4096, params=[struct.pack("<Q", out)], dsl_version="")
    return cap, gmem


def timed(overrides=None, **kw):
    cap, gmem = launch(**kw)
    t = timed_run(cap, gmem, costs=cost_table.load(overrides=overrides))
    assert t.status == "completed", t.message
    return t


def cycles(t) -> float:
    """The kernel's time (start to its last store in L2) in cycles of the table that timed it."""
    return t.kernel_us * 1e-6 * cost_table.load().clock_hz


# ------------------------------------------------------------------ the rows
def test_every_switch_is_a_row_with_its_hypothesis_and_defaults_to_today():
    c = cost_table.load()
    for name, (default, runs) in SWITCHES.items():
        row = c.rows[name]
        assert row.value == default, name
        assert re.match(r"H\d+a? \(docs/timing_hypotheses\.md\): ", row.source), name
        assert not row.fitted
        for v in runs:
            assert v != default
    for kb in (1, 2, 4, 8, 16, 32, 64):
        assert c.rows[f"hbm_latency_{kb}kb"].unit == "cycles"
    assert c.hbm_latency_1kb == c.hbm_latency  # H10's 1 KB row is today's flat latency


def test_an_unknown_override_or_switch_mode_fails():
    with pytest.raises(ValueError):
        cost_table.load(overrides={"smem_paths": 1})
    with pytest.raises(ValueError):
        timed({"l2_share_mode": 3})
    with pytest.raises(ValueError):
        timed({"smem_write_bytes_per_clk": -1})


# ------------------------------------------------------------------ defaults: nothing moves
# Timed by the engine at the commit before the switches (e7c3437), these launches' per-call times (us), exact: the
# switches at their defaults must reproduce them bit for bit. (Change them only with a deliberate change of the
# engine's default behaviour, and say so.)
BEFORE = {
    "tma": ({}, 5.326676860346583),
    "tma_grid148": ({"grid": 148}, 5.007309230087804),
    "reads": ({"reads": 256, "chain": 100}, 5.692528032619776),
    "pdl": ({"pdl": True, "wait": True, "chain": 50}, 3.9591233435270117),
    "wait_no_pdl": ({"wait": True, "chain": 50}, 5.429123343527012),
    "stores": ({"stores": 64, "tail_chain": 256}, 6.0601121304791015),
    "prefetch": ({"prefetch": True, "chain": 200}, 5.734933741080528),
    "narrow_rows": ({"width": 32, "rows": 256}, 5.326676860346583),
    "one_16kb_load": ({"nloads": 1, "rows": 128}, 5.0135270132517835),
    "tcgen05_ld": ({"tcgen05": {}}, 4.692018348623853),
}


@pytest.mark.parametrize("case", list(BEFORE))
def test_defaults_time_exactly_as_before_the_switches(case):
    kw, before = BEFORE[case]
    default = timed(None, **kw)
    explicit = timed(DEFAULTS, **kw)
    assert default.per_call_us == explicit.per_call_us and default.phases_us == explicit.phases_us
    assert default.utilisation == explicit.utilisation
    assert default.per_call_us == before


@pytest.mark.slow
@pytest.mark.parametrize("config", ["m128n64_c1x1_e32", "m256n64_c2x1_e32_ac"])
def test_the_kernel_with_explicit_defaults_times_as_with_none(config):
    """Our kernel (submission.py) at a small shape: load() and the explicit defaults time it bit for bit the same."""
    from harness.timed import timed_emulate

    _, a = timed_emulate(256, 256, 512, 1, config_name=config)
    _, b = timed_emulate(256, 256, 512, 1, config_name=config, costs=cost_table.load(overrides=DEFAULTS))
    assert a.status == b.status == "completed"
    assert a.per_call_us == b.per_call_us and a.phases_us == b.phases_us and a.utilisation == b.utilisation


# ------------------------------------------------------------------ each switch, where its mechanism binds
def delta(overrides, **kw) -> float:
    """Cycles the switch adds to the kernel (negative: saves), against the defaults."""
    return cycles(timed(overrides, **kw)) - cycles(timed(None, **kw))


def test_h1_a_separate_write_path_frees_the_port_for_reads():
    """A second warp's shared-memory reads hold the one port when the loads land (reads 128 KB, loads 64 KB at 128
    B/clk: the port binds, not L2 -> SM at 80 B/clk); a separate 128 B/clk write path, or one wide 160 B/clk port,
    lets the loads land at the L2 -> SM rate."""
    kw = BEFORE["reads"][0]
    shared = timed(None, **kw)
    separate = timed({"smem_write_bytes_per_clk": 128}, **kw)
    wide = timed({"smem_bytes_per_clk": 160}, **kw)
    assert cycles(shared) - cycles(separate) > 200
    assert cycles(wide) < cycles(shared)
    assert "shared-memory writes" in separate.utilisation and "shared-memory writes" not in shared.utilisation
    sm = separate.machine.sms[0]
    # writes: the loads; reads: warp 1's, warp 0's ld.shared.v4 and the chain's st.shared (32 lanes each)
    assert sm.smem_write.bytes == 8 * 128 * 64 and sm.smem.bytes == 256 * 512 + 32 * 16 + 32 * 4
    # without reads in the way the write path changes nothing the loads wait for
    assert abs(delta({"smem_write_bytes_per_clk": 128})) < 1.0


def _mma_cycles(n: int, cta_group: int, overrides=None, count: int = 100) -> float:
    """Cycles per MMA (M = 128 x cta_group, N = n, K = 64, FP4, both operands from shared memory) issued back to back:
    the engine's tensor-core charge alone, as the throughput microbenchmark measures it (tests/test_emu_timing.py)."""
    c = cost_table.load(overrides=overrides)
    sms = [SM(i, c) for i in range(cta_group)]

    class Cta:
        def __init__(self, sm, i):
            self.sm, self.ctaid = sm, (i, 0, 0)

    ctas = [Cta(sm, i) for i, sm in enumerate(sms)]
    m = TimedMachine.__new__(TimedMachine)
    m.costs, m.now, m.trace, m.stats = c, 0.0, None, {}
    m.marks = {cta.ctaid: {"commits": []} for cta in ctas}
    m.mma_own_latency = c.mma_issue_latency + c.tcgen05_commit_latency + c.mbarrier_wake_latency
    op = type("Op", (), {"name": "mma", "cost": Cost("mma", m=128 * cta_group, n=n, k=64, a_bytes=128 * 32,
                                                      b_bytes=n // cta_group * 32, dests=ctas)})
    first = m._completion(op)
    last = first
    for _ in range(count - 1):
        last = m._completion(op)
    return (last - first) / (count - 1)


def test_h2_a_fixed_cost_per_2sm_mma_matches_the_published_rows():
    """umma_throughput/tput_results_max.csv lines 128, 132, 133 (2-SM N = 64 / 128 / 256: 43.20 / 64.21 / 128.21
    cycles): (4096 + 1024) B at 128 B/clk + 3.2 = 43.2 at N = 64, compute-bound above; 1-SM MMAs unchanged."""
    fixed = {"mma_2sm_fixed_cycles": 3.2, "mma_2sm_smem_factor": 1.0}
    assert _mma_cycles(64, 2, fixed) == pytest.approx(43.2, abs=0.01)
    assert _mma_cycles(128, 2, fixed) == pytest.approx(64.21, abs=0.5)
    assert _mma_cycles(256, 2, fixed) == pytest.approx(128.21, abs=0.5)
    # the two forms agree at N = 64 by construction and part above it (line 129, N = 80: 45.54 measured)
    assert _mma_cycles(80, 2, fixed) == pytest.approx((4096 + 1280) / 128 + 3.2)
    assert _mma_cycles(80, 2) == pytest.approx((4096 + 1280) * 1.08 / 128)
    for n in (64, 128):
        assert _mma_cycles(n, 1, fixed) == _mma_cycles(n, 1)


def test_h3_the_l2_share_coalesced_or_off_when_many_ctas_read_the_tiles():
    """148 CTAs read the same 64 KB (grid reuse 148): the chip's L2 share (58 B/clk per SM) binds the loads. Coalesced
    charges 83% of the bytes to it, off nothing (then L2 -> SM at 80 B/clk binds); a grid of 8 (reuse 8 < 16) is not
    coalesced."""
    kw = BEFORE["tma_grid148"][0]
    delivered = timed(None, **kw)
    coalesced = timed({"l2_share_mode": 1}, **kw)
    off = timed({"l2_share_mode": 2}, **kw)
    assert cycles(off) < cycles(coalesced) < cycles(delivered)
    assert coalesced.machine.l2.bytes == pytest.approx(0.83 * 8 * 128 * 64 + 32 * 16 * 4)
    assert off.machine.l2.bytes == 32 * 16 * 4  # the stores' bytes only
    assert "L2 share" in delivered.binds.split(",")[0] and "L2->SM" in off.binds.split(",")[0]
    few = timed(None, grid=8)
    assert few.per_call_us == timed({"l2_share_mode": 1}, grid=8).per_call_us


def test_h4a_tma_loads_cost_box_rows_not_bytes():
    """The same 64 KB as 512 rows of 128 B or 2048 rows of 32 B: the same time by bytes (today), 1.53 cycles a row
    on the L2 -> SM path with tma_row_cycles (783 vs 3133 cycles against 819 by bytes)."""
    wide, narrow = BEFORE["tma"][0], BEFORE["narrow_rows"][0]
    rows = {"tma_row_cycles": 1.53}
    assert timed(None, **wide).per_call_us == timed(None, **narrow).per_call_us
    assert delta(rows, **wide) == pytest.approx(512 * 1.53 - 65536 / 80, abs=2)
    assert delta(rows, **narrow) == pytest.approx(2048 * 1.53 - 65536 / 80, abs=2)


def test_h5_the_far_die_adds_half_its_latency_to_each_l2_round_trip():
    """148 CTAs (the loads almost all L2 hits): the loads' L2 latency and the stores' arrival each take +150 cycles
    on average; a load of first-read bytes (grid of 1) pays the measured HBM latency as before."""
    d = delta({"die_to_die_cycles": 300}, **BEFORE["tma_grid148"][0])
    assert d == pytest.approx(150 * 147 / 148 + 150, abs=2)
    assert delta({"die_to_die_cycles": 300}) == pytest.approx(150, abs=2)  # the stores' arrival only


def test_h6_the_clock_is_read_from_the_table_each_time():
    kw = BEFORE["stores"][0]
    first = timed(None, **kw)
    slow = timed({"clock_ghz": 1.856}, **kw)
    again = timed(None, **kw)
    assert again.per_call_us == first.per_call_us
    assert slow.kernel_us / first.kernel_us == pytest.approx(1.962 / 1.856, rel=0.01)


def test_h9_the_descriptor_fetch_hides_behind_a_prefetch():
    """The first TMA of the map waits 470 cycles for its descriptor, unless a prefetch.tensormap issued at least
    that long before (an 800-cycle chain) fetched it; a short chain hides part of it."""
    fetch = {"tensormap_fetch_cycles": 470}
    assert delta(fetch, chain=200) == pytest.approx(470, abs=1)
    assert delta(fetch, prefetch=True, chain=200) == 0
    part = delta(fetch, prefetch=True, chain=50)
    assert 0 < part < 470


def test_h10_first_load_latency_by_size():
    """One first-read load (grid of 1): 16 KB pays the measured 3590 cycles instead of 1413; 8 KB loads 2088; 1 KB
    as before."""
    table = {"first_load_latency_table": 1}
    assert delta(table, **BEFORE["one_16kb_load"][0]) == pytest.approx(3590 - 1413, abs=1)
    assert delta(table, **BEFORE["tma"][0]) == pytest.approx(2088 - 1413, abs=1)
    assert delta(table, nloads=1, rows=8) == 0
    c = cost_table.load(overrides=table)
    m = TimedMachine.__new__(TimedMachine)
    m.hbm_table = [(1024 << i, getattr(c, f"hbm_latency_{1 << i}kb")) for i in range(7)]
    assert m._first_load_latency(12288) == pytest.approx((2088 + 3590) / 2)
    assert m._first_load_latency(512) == 1413 and m._first_load_latency(131072) == pytest.approx(5405 + 2 * 819)


def test_h12_under_pdl_the_start_cost_follows_the_wait():
    """PDL: the CTA is resident at 0.30 us and its wait released at 0.72 us; split charges the residual start after
    the wait, so the kernel ends later by the 0.42 us window less the prologue (a 200-cycle chain). Without PDL
    nothing changes."""
    c = cost_table.load()
    kw = BEFORE["pdl"][0]
    later = timed({"pdl_overlap_split": 1}, **kw).per_call_us - timed(None, **kw).per_call_us
    window = c.pdl_wait_release_us - c.pdl_cta_start_us
    assert window - c.us(300) < later < window
    kw = BEFORE["wait_no_pdl"][0]
    assert timed({"pdl_overlap_split": 1}, **kw).per_call_us == timed(None, **kw).per_call_us


def test_h13_tmem_ld_latency_is_charged_per_load():
    """Eight narrow steps each wait for their tcgen05.ld: 150 more cycles of latency cost 8 x 150."""
    assert delta({"tmem_ld_latency": 200}, tcgen05={}) == pytest.approx(8 * 150, abs=1)


def test_h14_a_deep_store_queue_lets_the_warp_run_past_its_stores():
    """64 stores of 512 B (8 cycles each at 64 B/clk), then a 256-add chain and a last store: with a 64-cycle queue
    the warp waits for the store path before the chain, with 1024 cycles it does not."""
    assert delta({"store_queue_cycles": 1024}, **BEFORE["stores"][0]) < -300
    assert delta({"store_queue_cycles": 1024}) == 0  # four stores never fill the queue


def test_h15_lookahead_issues_the_next_tcgen05_ld_one_step_early():
    """Unrolled (own registers per step): each step's load is issued at the previous wait, its 50 cycles hidden behind
    the step's math; rolled (the same registers): the next load would overwrite what the math reads, so no
    lookahead, beyond the first load's address arithmetic."""
    saved = -delta({"tmem_ld_lookahead": 1}, tcgen05={})
    assert saved == pytest.approx(7 * 50, abs=10)
    assert -delta({"tmem_ld_lookahead": 1}, tcgen05={"reuse_regs": True}) < 10
