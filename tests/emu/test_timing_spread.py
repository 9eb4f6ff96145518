"""Spread global-load latencies (emu.timing.engine "Spread loads", the verdict's b200~N schedules): off, every
ld.global costs the L2 latency as before; on, each warp's load takes a seeded draw between an L2 hit's and a first
HBM read's latency, so warps that wait for their loads leave them in different orders. A hand-built kernel: each
warp runs a chain of `loads` dependent ld.global (a pointer chase through a table of zeros) and stores the last
value. Every figure is "timed" (the timed emulator's), never a measurement."""
from __future__ import annotations

import struct

import pytest

from emu import CapturedLaunch, GlobalMemory
from emu.timing import costs as cost_table
from emu.timing.call import timed_run

LOADS = 16


def chase(warps: int = 1):
    lines = ["    ld.param.u64 %rd1, [table];", "    ld.param.u64 %rd2, [out];", "    mov.u64 %rd3, %rd1;"]
    for _ in range(LOADS):  # each address depends on the value the last load returned (zero: the table's start)
        lines += ["    ld.global.u64 %rd4, [%rd3];", "    add.u64 %rd3, %rd1, %rd4;"]
    lines += ["    mov.u32 %r1, %tid.x;", "    mul.wide.u32 %rd5, %r1, 8;", "    add.u64 %rd6, %rd2, %rd5;",
              "    st.global.u64 [%rd6], %rd4;", "    ret;"]
    ptx = (".version 8.8\n.target sm_100a\n.address_size 64\n"
           ".visible .entry k(.param .u64 table, .param .u64 out)\n{\n.reg .b32 %r<8>;\n.reg .b64 %rd<16>;\n"
           + "\n".join(lines) + "\n}\n")
    gmem = GlobalMemory()
    table, out = gmem.alloc(4096, fill=0), gmem.alloc(8 * 32 * warps, fill=0)
    cap = CapturedLaunch(ptx=ptx, kernel_name="k", grid=(1, 1, 1), block=(32 * warps, 1, 1), cluster=(1, 1, 1),
                         dynamic_smem=0, params=[struct.pack("<Q", table), struct.pack("<Q", out)], dsl_version="")
    return cap, gmem


def kernel_cycles(load_spread=None, warps: int = 1) -> float:
    cap, gmem = chase(warps)
    t = timed_run(cap, gmem, load_spread=load_spread)
    assert t.status == "completed", t.message
    return t.kernel_us * 1e-6 * cost_table.load().clock_hz


def test_spread_loads_draw_between_an_l2_hit_and_a_first_hbm_read():
    c = cost_table.load()
    fixed = kernel_cycles()
    spread = [kernel_cycles(seed) for seed in (1, 2, 3)]
    # the chain is the kernel: LOADS latencies and the same arithmetic and store around them each time
    around = fixed - LOADS * c.l2_hit_latency
    for t in spread:
        assert around + LOADS * c.l2_hit_latency < t < around + LOADS * c.hbm_latency
    assert len(set(spread)) == 3  # each seed its own draws
    assert kernel_cycles(1) == spread[0]  # and the same draws every time
    assert kernel_cycles(None) == fixed  # off: exactly as before


def test_warps_of_one_cta_draw_their_own_latencies():
    """With four warps chasing, the kernel ends with the slowest warp: later than one warp with the same seed's first
    draws, unless all four drew alike (they do not)."""
    assert kernel_cycles(1, warps=4) > kernel_cycles(1, warps=1)
    assert kernel_cycles(None, warps=4) == pytest.approx(kernel_cycles(None, warps=1), abs=50)  # issue slots only
