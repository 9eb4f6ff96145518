"""Issue costs from what the machine executes (issue 21 item 1; emu/timing/sass.py): a copy that the SASS issues once
per warp is charged once per warp by the timed engine, and what the warp computes stays the PTX's.

Hand-written PTX, one CTA of one warp: every lane writes 64 bytes of a 2048-byte pattern to shared memory, then a TMA
store (cp.async.bulk.tensor.2d.global.shared::cta, a 128 x 8 box of bytes, no swizzle) writes tile 0 to a 256 x 8
global tensor, executed (a) by all 32 lanes with the same operands, (b) by the lane elect.sync picks, (c) by lanes 0
and 1 with different tiles (control). The engine is checked with the rule given (no tools needed) and, where ptxas and
nvdisasm are installed (the pip wheels), on the rule read from the kernel's own SASS. Seconds each.
"""
from __future__ import annotations

import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from emu import CapturedLaunch, GlobalMemory, run_kernel, tma
from emu.ptx import parse_module
from emu.timing import call as timed_call
from emu.timing import sass
from emu.timing.call import timed_run

BOX = 128 * 8  # bytes of one store

HEADER = """.version 8.8
.target sm_100a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])
{
.reg .pred %p<8>;
.reg .b32 %r<64>;
.reg .b64 %rd<16>;
    mov.u64 %rd5, tmap;
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    mov.u32 %r20, 0;
FILL:
    shl.b32 %r21, %r1, 4;
    add.u32 %r22, %r21, %r20;
    mul.lo.u32 %r23, %r22, -1640531535;
    shl.b32 %r24, %r22, 2;
    add.u32 %r25, %r9, %r24;
    st.shared.u32 [%r25], %r23;
    add.u32 %r20, %r20, 1;
    setp.lt.u32 %p4, %r20, 16;
    @%p4 bra FILL;
    fence.proxy.async.shared::cta;
    mov.b32 %r7, 0;
    mov.b32 %r8, 0;
    mov.u32 %r3, %r9;
"""
FOOTER = """    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
    ret;
}
"""
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd5, {%r7, %r8}], [%r3];"
BODIES = {
    # (a) every lane of the warp, identical operands, no elect: what arseni_ivanov's epilogue does
    "warp": f"    {STORE}\n",
    # (b) the same store by one elected lane
    "elect": f"    elect.sync %r10|%p2, -1;\n    @%p2 {STORE}\n",
    # (c) control: lanes 0 and 1 store different tiles (x = 128 * lane) from different shared buffers
    "two_tiles": ("    setp.lt.u32 %p3, %r1, 2;\n    shl.b32 %r7, %r1, 7;\n    shl.b32 %r26, %r1, 10;\n"
                  f"    add.u32 %r3, %r9, %r26;\n    @%p3 {STORE}\n"),
    # (d) every lane, two distinct tiles (x = 128 * (lane & 1)): ptxas's uniformising loop issues one per value
    "warp_two_tiles": ("    and.b32 %r27, %r1, 1;\n    shl.b32 %r7, %r27, 7;\n    shl.b32 %r26, %r27, 10;\n"
                       f"    add.u32 %r3, %r9, %r26;\n    {STORE}\n"),
}
STORES = {"warp": 1, "elect": 1, "two_tiles": 2, "warp_two_tiles": 2}  # distinct copies the machine issues


def ptx(body: str) -> str:
    return HEADER + BODIES[body] + FOOTER


def pattern() -> np.ndarray:
    q = np.arange(512, dtype=np.uint64)
    return ((q * 0x9E3779B1) & 0xFFFFFFFF).astype(np.uint32).view(np.uint8)


def expected(body: str) -> np.ndarray:
    """The 256 x 8 global tensor after the run (zeros where no tile was stored)."""
    out = np.zeros((8, 256), np.uint8)
    smem = pattern().reshape(2, 8, 128)
    for t in range(2 if body != "warp" and body != "elect" else 1):
        out[:, 128 * t:128 * (t + 1)] = smem[t]
    return out.reshape(-1)


def launch(body: str, cubin: bytes = b""):
    gmem = GlobalMemory()
    out = gmem.alloc(2048, fill=0)
    tmap = tma.encode_tensor_map(out, 0, dims=[256, 8], strides=[256], box=[128, 8], swizzle=0)
    cap = CapturedLaunch(ptx=ptx(body), kernel_name="k", grid=(1, 1, 1), block=(32, 1, 1), cluster=(1, 1, 1),
                         dynamic_smem=4096, params=[struct.pack("<Q", out), tmap], dsl_version="", cubin=cubin)
    return cap, gmem, out


def store_bytes(timed) -> float:
    return sum(sm.store.bytes for sm in timed.machine.sms)


def fixed_rules(merge):
    return lambda cap, kernel=None: sass.IssueRules(frozenset(merge), [f"given: {sorted(merge)}"], {"status": "given"})


# ------------------------------------------------------------------ the engine, with the rule given
@pytest.mark.parametrize("body", list(BODIES))
def test_identical_lanes_of_a_merged_kind_are_charged_once_and_c_is_the_ptxs(body, monkeypatch):
    monkeypatch.setattr(timed_call, "issue_rules", fixed_rules({"tma_store"}))
    cap, gmem, out = launch(body)
    timed = timed_run(cap, gmem)
    assert timed.status == "completed", timed.message
    assert (gmem.read(out, 2048) == expected(body)).all()  # the timed pass's C
    assert store_bytes(timed) == STORES[body] * BOX
    assert timed.machine.stats.get("tma_store_bytes") == (32 if body.startswith("warp") else STORES[body]) * BOX
    merged = timed.machine.stats.get("merged_async_ops", 0)
    assert merged == {"warp": 31, "elect": 0, "two_tiles": 0, "warp_two_tiles": 30}[body]
    # the functional emulator (no clock) computes the same C
    cap2, gmem2, out2 = launch(body)
    assert run_kernel(cap2, gmem2).status == "completed"
    assert (gmem2.read(out2, 2048) == expected(body)).all()


def test_without_the_rule_the_ptx_charges_every_lane_and_says_why():
    cap, gmem, _ = launch("warp")  # no cubin in the launch record
    timed = timed_run(cap, gmem)
    assert timed.status == "completed", timed.message
    assert store_bytes(timed) == 32 * BOX
    assert timed.sass["status"] == "no cubin" and "no cubin" in timed.corrections[0]
    off = timed_run(*launch("warp")[:2], issue_from_sass=False)
    assert store_bytes(off) == 32 * BOX and "issue_from_sass=False" in off.corrections[0]


def test_the_charge_once_is_what_the_elected_store_costs(monkeypatch):
    """The whole-warp store, charged once, takes as long as the elected one (its 31 twins use nothing)."""
    monkeypatch.setattr(timed_call, "issue_rules", fixed_rules({"tma_store"}))
    warp, elect = (timed_run(*launch(b)[:2]) for b in ("warp", "elect"))
    per_lane = timed_run(*launch("warp")[:2], issue_from_sass=False)
    assert abs(warp.kernel_us - elect.kernel_us) < 0.02  # elect.sync's own few cycles
    assert per_lane.kernel_us > warp.kernel_us


def test_a_kind_the_sass_issues_per_lane_is_not_merged(monkeypatch):
    monkeypatch.setattr(timed_call, "issue_rules", fixed_rules({"tma_load"}))  # stores not in the rule
    timed = timed_run(*launch("warp")[:2])
    assert store_bytes(timed) == 32 * BOX


# ------------------------------------------------------------------ the SASS (ptxas + nvdisasm / cuobjdump)
def compile_cubin(text: str) -> bytes:
    tool = sass.find_tool("ptxas")
    if tool is None:
        pytest.skip("no ptxas (pip wheel nvidia-cuda-nvcc, $PTXAS, PATH or /usr/local/cuda): no SASS to read")
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(text)
        p = subprocess.run([tool["path"], "-arch=sm_100a", str(src), "-o", str(out)], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return out.read_bytes()


def need(tool: str):
    if sass.find_tool(tool) is None:
        pytest.skip(f"no {tool} (pip wheel, ${tool.upper()}, PATH or /usr/local/cuda)")


@pytest.mark.parametrize("body,mode", [("warp", "warp"), ("elect", "warp"), ("two_tiles", "per_value"),
                                       ("warp_two_tiles", "per_value")])
def test_the_sass_of_a_whole_warp_store_is_one_utmastg(body, mode):
    """ptxas makes one UTMASTG of a whole-warp store on uniform operands (and drops the elect of the elected one);
    lane-dependent operands get a uniformising loop (R2UR + BRA.U.ANY), one trip per distinct value."""
    need("nvdisasm")
    cap, _, _ = launch(body, compile_cubin(ptx(body)))
    rules = sass.issue_rules(cap, parse_module(cap.ptx))
    assert rules.report["status"] == "read", rules.report
    assert rules.report["ptx"] == {"tma_store": 1}
    modes = rules.report["sass"]["tma_store"]
    assert sum(modes.values()) == 1 and modes[mode] == 1, modes
    assert rules.merge == {"tma_store"}
    assert any("TMA store" in c and "issue once" in c for c in rules.corrections)


@pytest.mark.parametrize("body", ["warp", "warp_two_tiles"])
def test_timed_from_the_kernels_own_sass(body):
    need("nvdisasm")
    cap, gmem, out = launch(body, compile_cubin(ptx(body)))
    timed = timed_run(cap, gmem)
    assert timed.status == "completed", timed.message
    assert store_bytes(timed) == STORES[body] * BOX
    assert (gmem.read(out, 2048) == expected(body)).all()
    assert timed.sass["merge"] == ["tma_store"]


LOAD = """.version 8.8
.target sm_100a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])
{
.reg .pred %p<8>;
.reg .b32 %r<64>;
.reg .b64 %rd<16>;
    mov.u64 %rd5, tmap;
    mov.u32 %r9, smem;
    add.u32 %r3, %r9, 1024;
    mov.b32 %r7, 0;
    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd5, {%r7, %r7}], [%r9];
    cp.async.bulk.prefetch.tensor.2d.L2.global [%rd5, {%r7, %r7}];
    ret;
}
"""


def test_the_sass_of_a_whole_warp_load_issues_per_lane_and_a_prefetch_once():
    """A load signals its mbarrier (complete_tx) per copy, so ptxas loops ELECT + UTMALDG once per active lane: the
    PTX's per-lane charge is the machine's. A prefetch is one UTMAPF."""
    need("nvdisasm")
    cap = CapturedLaunch(ptx=LOAD, kernel_name="k", grid=(1, 1, 1), block=(32, 1, 1), cluster=(1, 1, 1),
                         dynamic_smem=4096, params=[], dsl_version="", cubin=compile_cubin(LOAD))
    rules = sass.issue_rules(cap, parse_module(LOAD))
    assert rules.report["sass"]["tma_load"]["per_lane"] == 1
    assert rules.report["sass"]["tma_prefetch"]["warp"] == 1
    assert rules.merge == {"tma_prefetch"}
    assert any("TMA load" in c and "per lane" in c for c in rules.corrections)


def test_cuobjdump_reads_the_same_as_nvdisasm():
    need("nvdisasm")
    need("cuobjdump")
    cubin = compile_cubin(ptx("warp_two_tiles"))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        listings = {t: subprocess.run([sass.find_tool(t)["path"], flag, str(path)], capture_output=True,
                                      text=True).stdout for t, flag in (("nvdisasm", "-c"), ("cuobjdump", "-sass"))}
    got = {}
    for tool, text in listings.items():
        ins = sass.parse_listing(text)["k"]
        i = next(j for j, x in enumerate(ins) if x.opcode.startswith("UTMASTG"))
        got[tool] = (sass.issue_mode(ins, sass.loops(ins), i), [(x.addr, x.opcode, x.target) for x in ins])
    assert got["nvdisasm"][0] == "per_value"
    assert got["nvdisasm"] == got["cuobjdump"]


def test_a_fatbinary_image_is_read_and_a_garbage_one_falls_back():
    need("nvdisasm")
    cubin = compile_cubin(ptx("warp"))
    wrapped = bytes.fromhex("50ed55ba") + bytes(60) + cubin + bytes(100)  # the cubin inside a larger image
    cap, _, _ = launch("warp", wrapped)
    assert sass.issue_rules(cap).merge == {"tma_store"}
    cap, gmem, _ = launch("warp", b"not a module image")
    timed = timed_run(cap, gmem)
    assert store_bytes(timed) == 32 * BOX and timed.sass["status"].startswith("unreadable")
    assert "could not be read" in timed.corrections[0]


# ------------------------------------------------------------------ R2UR / S2UR in the hot loops (reported)
LISTING = """
\t.section\t.text.k,"ax",@progbits
k:
        /*0000*/                   S2UR UR4, SR_CgaCtaId ;
.L_x_0:
        /*0010*/                   R2UR UR5, R2 ;
        /*0020*/                   S2UR UR6, SR_CTAID.X ;
        /*0030*/                   UTCQMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR11], UPT ;
        /*0040*/                   R2UR UR7, R3 ;
        /*0050*/               @P0 BRA `(.L_x_0) ;
        /*0060*/                   EXIT ;
"""


def test_hot_loop_r2ur_and_s2ur_are_counted():
    ins = sass.parse_listing(LISTING)["k"]
    assert [x.opcode for x in ins][:2] == ["S2UR", "R2UR"] and ins[5].target == 0x10
    assert sass.hot_loops(ins) == [{"role": "MMA", "from": "0x0010", "to": "0x0050", "instructions": 5, "R2UR": 2,
                                    "S2UR": 1}]


# ------------------------------------------------------------------ L2 prefetches (UTMAPF / UBLKPF: one per warp)
PREFETCH = {"tma_prefetch": "cp.async.bulk.prefetch.tensor.2d.L2.global [%rd5, {%r7, %r8}];",
            "bulk_prefetch": "ld.param.u64 %rd1, [out];\n    mov.u32 %r4, 1024;\n"
                             "    cp.async.bulk.prefetch.L2.global [%rd1], %r4;"}


def prefetch_launch(kind: str, cubin: bool):
    text = HEADER + "    " + PREFETCH[kind] + "\n    ret;\n}\n"
    cap, gmem, out = launch("warp", compile_cubin(text) if cubin else b"")
    cap.ptx = text
    return cap, gmem


@pytest.mark.parametrize("kind", list(PREFETCH))
def test_a_whole_warp_prefetch_is_charged_once(kind, monkeypatch):
    """Its first-read share of HBM once (the tensor is read by no load: reuse 1), with the rule; 32 times without."""
    once = timed_run(*prefetch_launch(kind, False)[:2], issue_from_sass=False)
    assert once.machine.hbm.bytes == 32 * BOX
    monkeypatch.setattr(timed_call, "issue_rules", fixed_rules({kind}))
    timed = timed_run(*prefetch_launch(kind, False)[:2])
    assert timed.machine.hbm.bytes == BOX and timed.machine.stats["merged_async_ops"] == 31


@pytest.mark.parametrize("kind,opcode", [("tma_prefetch", "UTMAPF"), ("bulk_prefetch", "UBLKPF")])
def test_the_sass_of_a_whole_warp_prefetch_is_one_instruction(kind, opcode):
    need("nvdisasm")
    cap, gmem = prefetch_launch(kind, True)
    rules = sass.issue_rules(cap, parse_module(cap.ptx))
    assert rules.report["sass"][kind] == {"warp": 1, "per_value": 0, "per_lane": 0} and rules.merge == {kind}
    assert timed_run(cap, gmem).machine.hbm.bytes == BOX


def test_ptxas_drops_the_elect_of_an_elected_store():
    """The elected store and the whole-warp one compile to the same SASS: to ptxas, 32 identical stores are one."""
    need("nvdisasm")
    listings = []
    for body in ("warp", "elect"):
        ins, tool, why = sass.disassemble(compile_cubin(ptx(body)), "k")
        assert ins is not None, why
        listings.append([(x.guard, x.opcode, x.operands) for x in ins])
    assert listings[0] == listings[1]
    assert sum(op.startswith("UTMASTG") for _, op, _ in listings[0]) == 1
    assert not any(op.startswith("ELECT") for _, op, _ in listings[0])


def test_no_disassembler_falls_back_to_the_ptx_charge_and_says_so(monkeypatch):
    need("nvdisasm")
    cap, gmem, _ = launch("warp", compile_cubin(ptx("warp")))
    monkeypatch.setattr(sass, "_CACHE", {})
    monkeypatch.setattr(sass, "find_tool", lambda name: None)
    timed = timed_run(cap, gmem)
    assert timed.status == "completed" and store_bytes(timed) == 32 * BOX
    assert "no nvdisasm" in timed.corrections[0] and "no cuobjdump" in timed.corrections[0]
    assert timed.sass["status"].startswith("unreadable")
