"""Issue 14, the checks that make the emulator catch what it let through (no DSL compile, no GPU: hand-written PTX,
the runtime stand-ins built alone, fakes where a rule is a pure function):
- the B200's launch limits in the runtime stand-ins (harness/launch_stubs.c, emu.launch) and occupancy;
- the kernel-wide static pass (emu.lint);
- happens-before of mbarrier initialisation inside a CTA (a Note under arseni's precedent), re-initialisation
  (emu.mbarrier);
- the scheduling policies of the seeded scheduler (emu.machine) and the verdict's schedules (harness.verdict);
- tcgen05 ordering and proxy fences (emu.ordering).
The same checks on the real kernel and on planted bugs: tests/test_emu_kernel.py (slow)."""
from __future__ import annotations

import ctypes
import struct
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from emu import device, lint, ordering, precedents
from harness import capture
from emu.isa import decode_kernel
from emu.machine import POLICIES, STARVED, Deadlock, Machine, Schedule
from emu.mbarrier import INIT_UNORDERED, REINIT_QUIESCENT, check_use
from emu.ptx import parse_module
from harness.verdict import DEFAULT_SCHEDULES, default_sm_count, schedules_for
from emu.state import GlobalMemory, Hazard

REPO = Path(__file__).resolve().parents[1]
HEADER = ".version 8.8\n.target sm_100a\n.address_size 64\n"


def kernel_text(body: str) -> str:
    decls = ".reg .pred %p<8>;\n.reg .b32 %r<64>;\n.reg .b64 %rd<16>;"
    return (f"{HEADER}.extern .shared .align 1024 .b8 smem[];\n.visible .entry k(.param .u64 out)\n{{\n{decls}\n"
            f"{body}\n}}\n")


def run(body: str, nthreads: int = 64, schedule: Schedule | None = None):
    kernel = parse_module(kernel_text(body))
    gmem = GlobalMemory()
    out = gmem.alloc(256, fill=0)
    shape = SimpleNamespace(grid=(1, 1, 1), block=(nthreads, 1, 1), cluster=(1, 1, 1), dynamic_smem=8192,
                            params=[struct.pack("<Q", out)], launch_attrs=[])
    m = Machine(kernel, shape, gmem, schedule=schedule)
    m.run()
    return m


def lint_problems(body: str) -> str:
    kernel = parse_module(kernel_text(body))
    decode_kernel(kernel)
    try:
        lint.check_kernel(kernel)
    except Hazard as e:
        return str(e)
    return ""


# ============================================================================================ launch limits
class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class LaunchAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("val", ctypes.c_ubyte * 64)]


class LaunchConfig(ctypes.Structure):  # cudaLaunchConfig_st
    _fields_ = [("grid", Dim3), ("block", Dim3), ("dynamic_smem", ctypes.c_size_t), ("queue", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttr)), ("num_attrs", ctypes.c_uint)]


STUB_PTX = ".visible .entry k(.param .u64 p)\n.reqntid 192, 1, 1\n{\nret;\n}\n"


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    """The runtime stand-ins alone (no exported host object), primed as for a 192-thread kernel with 110 registers
    and 1024 bytes of static shared memory."""
    so = tmp_path_factory.mktemp("stubs") / "stubs.so"
    subprocess.run([capture.c_compiler(), "-shared", "-fPIC", "-o", str(so), str(capture.STUBS_C)], check=True)
    lib = ctypes.CDLL(str(so))
    lib._cudaLaunchKernelEx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def prime(lib, ptx=STUB_PTX, registers=110, static=1024, max_dynamic=231424, nonportable=0):
    capture.prime_stubs(lib, ptx, {"registers": registers, "static_smem": static})
    ctypes.c_int.in_dll(lib, "emu_max_dynamic_smem_attr").value = -1
    ctypes.c_int.in_dll(lib, "emu_nonportable_cluster_attr").value = nonportable
    if max_dynamic is not None:
        assert lib._cudaFuncSetAttribute(None, 8, max_dynamic) == 0


def try_launch(lib, grid=(2, 1, 1), block=(192, 1, 1), smem=200000, cluster=(1, 1, 1)):
    attr = LaunchAttr()
    attr.id = capture.CLUSTER_DIM_ATTR
    struct.pack_into("<III", attr.val, 0, *cluster)
    cfg = LaunchConfig(Dim3(*grid), Dim3(*block), smem, None, ctypes.pointer(attr), 1)
    param = ctypes.c_uint64(0)
    args = (ctypes.c_void_p * 1)(ctypes.addressof(param))
    rc = lib._cudaLaunchKernelEx(ctypes.addressof(cfg), None, ctypes.addressof(args))
    refusal = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_refusal"))).decode()
    return rc, refusal


def test_stand_ins_launch_what_a_b200_launches(stubs):
    prime(stubs)
    assert try_launch(stubs) == (0, "")
    assert ctypes.c_int.in_dll(stubs, "emu_launches").value == 1


@pytest.mark.parametrize("kwargs,prime_kw,code,words", [
    ({"smem": 232448}, {}, 1, "dynamic 232448 + static 1024"),  # static counts against the per-block maximum
    ({"smem": 220000}, {"max_dynamic": 100000}, 1, "cudaFuncAttributeMaxDynamicSharedMemorySize"),
    ({"smem": 60000}, {"max_dynamic": None}, 1, "above 48 KiB"),
    ({"block": (256, 1, 1)}, {}, 1, ".reqntid is 192"),
    ({"block": (2048, 1, 1)}, {}, 9, "per-block limits"),
    ({"block": (1024, 1, 1)}, {"ptx": STUB_PTX.replace(".reqntid 192, 1, 1\n", ""), "registers": 255}, 701,
     "per block"),
    ({"grid": (16, 1, 1), "cluster": (9, 1, 1)}, {}, 913, "cluster of 9 CTAs > 8"),
    ({"grid": (17, 1, 1), "cluster": (17, 1, 1)}, {"nonportable": 1}, 913, "cluster of 17 CTAs > 16"),
    ({"grid": (3, 1, 1), "cluster": (2, 1, 1)}, {}, 913, "not a multiple of the cluster"),
])
def test_stand_ins_refuse_what_a_b200_refuses(stubs, kwargs, prime_kw, code, words):
    prime(stubs, **prime_kw)
    rc, refusal = try_launch(stubs, **kwargs)
    assert rc == code and words in refusal, (rc, refusal)


def test_non_portable_cluster_needs_the_attribute(stubs):
    prime(stubs, nonportable=1)
    assert try_launch(stubs, grid=(16, 1, 1), cluster=(16, 1, 1)) == (0, "")


def test_dynamic_shared_memory_attribute_cannot_exceed_opt_in_less_static(stubs):
    prime(stubs)
    assert stubs._cudaFuncSetAttribute(None, 8, 232448) == 1  # 232448 > 232448 - 1024
    refusal = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(stubs, "emu_refusal"))).decode()
    assert "opt-in maximum per block less 1024 bytes of static" in refusal


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


def test_dsl_error_lines():
    text = "warning: x\n\nError: kernel 'k' launch shared memory exceeds current GPU arch sm_100a allowed.\nok\n"
    assert capture.dsl_errors(text) == ["Error: kernel 'k' launch shared memory exceeds current GPU arch sm_100a allowed."]
    assert capture.dsl_errors("no errors here\nerror-free\n") == []


# ============================================================================================ static pass
CLEAN = """
    mov.u32 %r1, smem;
    add.s32 %r2, %r1, 16;
    st.shared.v4.b32 [%r2], {%r3, %r4, %r5, %r6};
    mbarrier.init.shared.b64 [%r1+8], 1;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1+64], 32;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r7, 32;
    ret;
"""


def test_lint_passes_a_clean_kernel():
    assert lint_problems(CLEAN) == ""


@pytest.mark.parametrize("edit,words", [
    (("tcgen05.dealloc.cta_group::1", "tcgen05.dealloc.cta_group::2"), "[cta-group]"),
    (("    ret;", "    mbarrier.try_wait.parity.shared::cluster.b64 %p1, [%r1+8], 0;\n    ret;"), "[mbarrier-space]"),
    (("    ret;", "    mbarrier.arrive.shared::cluster.b64 %rd1, [%r1+8];\n    ret;"), "sink `_`"),
    (("    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r7, 32;\n", ""), "[tmem-pairing]"),
    (("shared::cta.b32 [%r1+64], 32;", "shared::cta.b32 [%r1+64], 48;"), "nCols 48"),
    (("add.s32 %r2, %r1, 16;", "add.s32 %r2, %r1, 8;"), "[alignment]"),
    (("mbarrier.init.shared.b64 [%r1+8], 1;", "mbarrier.init.shared.b64 [%r1+4], 1;"), "8-byte aligned"),
])
def test_lint_rules(edit, words):
    body = CLEAN.replace(*edit)
    assert body != CLEAN
    assert words in lint_problems(body)


def test_lint_alignment_only_where_the_ptx_proves_it():
    # a base loaded from memory is unknown: only the execution-time check can judge it
    body = CLEAN.replace("add.s32 %r2, %r1, 16;", "ld.shared.u32 %r2, [%r1];")
    assert lint_problems(body) == ""
    known = lint.register_residues(parse_module(kernel_text(
        "mov.u32 %r1, smem;\nshl.b32 %r2, %r3, 4;\nadd.s32 %r4, %r1, %r2;\nand.b32 %r5, %r6, -128;\nret;")))
    assert known["%r1"] == (1024, 0) and known["%r4"] == (16, 0) and known["%r5"] == (128, 0)


def test_misaligned_vector_access_is_a_hazard_at_execution():
    with pytest.raises(Hazard, match="not a multiple of 16"):
        run("""
    mov.u32 %r1, smem;
    ld.shared.u32 %r2, [%r1];
    add.s32 %r3, %r2, 8;
    st.shared.v4.b32 [%r3], {%r4, %r5, %r6, %r7};
    ret;
""", nthreads=32)


# ============================================================================================ mbarrier init order
INIT_THEN_USE = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    ld.param.u64 %rd1, [out];
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra USE;
    mbarrier.init.shared.b64 [%r9], 32;
    mov.b32 %r2, 1;
    st.volatile.global.u32 [%rd1], %r2;
USE:
    SYNC
    setp.lt.u32 %p4, %r1, 32;
    @%p4 bra DONE;
SPIN:
    ld.volatile.global.u32 %r3, [%rd1];
    setp.eq.u32 %p5, %r3, 0;
    @%p5 bra SPIN;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
DONE:
    ret;
"""


def test_mbarrier_use_before_ordered_init_is_noted_whatever_the_interleaving():
    """Warp 1 sees warp 0's flag in global memory (a plain load: no synchronization) and uses the barrier: in
    emulated time the init came first, but nothing orders it before the use. arseni_ivanov's B200-verified kernel
    does the same (its TMA warp never synchronises with warp 0's inits), so the run says so in a Note under that
    precedent rather than a Hazard; without the precedent (no note callback) it is a Hazard."""
    m = run(INIT_THEN_USE.replace("    SYNC\n", ""))
    notes = list(m.notes.values())
    assert [n.rule for n in notes] == [INIT_UNORDERED], notes
    assert "before its initialisation by warp 0" in notes[0].detail
    assert notes[0].precedent == precedents.ARSENI_INIT_UNORDERED
    assert run(INIT_THEN_USE.replace("    SYNC\n", "    bar.sync 0;\n")).notes == {}  # a CTA barrier orders it
    init, user = SimpleNamespace(warp_id=0), SimpleNamespace(warp_id=1, seen={})
    init.cta = user.cta = SimpleNamespace(rank=0)
    bar = SimpleNamespace(cta=init.cta, init_thread=(init, 0), init_clock=5, init_line=7, offset=0)
    with pytest.raises(Hazard, match="before its initialisation by warp 0"):
        check_use(bar, user, "mbarrier.arrive")
    user.seen[(0, 0)] = 5  # it observed the init (e.g. through bar.sync)
    check_use(bar, user, "mbarrier.arrive")


REINIT = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    mbarrier.init.shared.b64 [%r9], COUNT;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    mbarrier.init.shared.b64 [%r9], 2;
DONE:
    ret;
"""


def test_reinitialising_a_live_mbarrier():
    with pytest.raises(Hazard, match="in the middle of phase 0"):
        run(REINIT.replace("COUNT", "2"), nthreads=32)  # one of two arrivals already counted
    m = run(REINIT.replace("COUNT", "1"), nthreads=32)  # the arrival completed phase 0: nothing is lost
    assert [n.rule for n in m.notes.values()] == [REINIT_QUIESCENT]
    whole_warp = "    mov.u32 %r9, smem;\n    mbarrier.init.shared.b64 [%r9], 1;\n    ret;\n"
    assert run(whole_warp, nthreads=32).notes == {}  # 32 lanes of one instruction: one initialisation


# ============================================================================================ schedules
class FakeWarp:  # hashable by identity, as emu.simt.Warp is
    def __init__(self, warp_id):
        self.warp_id = warp_id


def fake_cluster(warp_ids=range(6)):
    return SimpleNamespace(ctas=[SimpleNamespace(warps=[FakeWarp(i) for i in warp_ids])])


def picks(policy: str, seed: int = 0, n: int = 2000) -> list:
    m = Machine.__new__(Machine)
    m.schedule = Schedule(policy, seed)
    m.knobs = m.schedule.knobs
    m.rng = np.random.default_rng(seed)
    cl = fake_cluster()
    order = m._turn_order(cl)
    warps = cl.ctas[0].warps
    return [m._pick(warps, order).warp_id for _ in range(n)], order


def test_priority_policies_keep_one_role_ahead():
    tma, _ = picks("producer_first")
    epi, _ = picks("consumer_first")
    uni, _ = picks("uniform")
    assert tma.count(5) / len(tma) > 0.9  # warp 5: the TMA role
    assert sum(w < 4 for w in epi) / len(epi) > 0.9  # warps 0-3: the epilogue role
    assert 0.1 < uni.count(5) / len(uni) < 0.25


@pytest.mark.parametrize("policy", ["starve_warp", "starve_role"])
def test_starved_warps_run_only_when_nothing_else_can(policy):
    chosen, order = picks(policy, seed=3)
    starved = {w.warp_id for w, o in order.items() if o == STARVED}
    assert starved and sum(w in starved for w in chosen) / len(chosen) < 0.01


ABA = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra SYNC;
    mbarrier.init.shared.b64 [%r9], 1;
SYNC:
    bar.sync 0;
    setp.lt.u32 %p4, %r1, 32;
    @%p4 bra PRODUCE;
    {
    .reg .pred P1;
    LAB_WAIT:
    mbarrier.try_wait.parity.shared.b64 P1, [%r9], 0;
    @P1 bra.uni DONE;
    bra.uni LAB_WAIT;
    DONE:
    }
    ret;
PRODUCE:
    @%p3 bra EXIT;
    mbarrier.arrive.shared.b64 %rd5, [%r9];
""" + "    add.s32 %r20, %r20, 1;\n" * 40 + """    mbarrier.arrive.shared.b64 %rd5, [%r9];
EXIT:
    ret;
"""


def test_late_wake_lets_a_waiter_miss_whole_phases():
    """A waiter for phase 0 that sleeps through phases 0 and 1 sees parity 0 again and waits forever (parity ABA):
    the late-wake policy produces that; waking waiters at once rarely does."""
    def deadlocks(policy):
        n = 0
        for seed in range(10):
            try:
                run(ABA, schedule=Schedule(policy, seed))
            except Deadlock:
                n += 1
        return n

    assert deadlocks("late_wake") >= 5 > deadlocks("uniform")


def test_schedules_and_small_shape_sm_count():
    assert Schedule.parse("late_wake:7") == Schedule("late_wake", 7) and Schedule("slow_async", 3).name == "slow_async:3"
    with pytest.raises(ValueError, match="unknown scheduling policy"):
        Schedule("fastest")
    assert schedules_for(None, 10) == [Schedule(s.policy, s.seed + 10) for s in DEFAULT_SCHEDULES]
    cycle = schedules_for(10)
    assert cycle[:6] == schedules_for(None) and len(cycle) == 10  # the default verdict's schedules come first
    assert {s.policy for s in cycle} == set(POLICIES) and len({s.seed for s in cycle}) == 10
    assert schedules_for(3) == schedules_for(None)[:3]
    assert schedules_for(["uniform:1", Schedule("late_wake", 2)]) == [Schedule("uniform", 1), Schedule("late_wake", 2)]
    one_cta = SimpleNamespace(cta_tile_mn=(128, 64), cluster_mn=(1, 1))
    pair = SimpleNamespace(cta_tile_mn=(128, 64), cluster_mn=(2, 1))
    assert default_sm_count(one_cta, 256, 512, 1) == 4  # 16 tiles: 4 per CTA
    assert default_sm_count(one_cta, 128, 256, 1) == 1
    assert default_sm_count(pair, 256, 512, 1) == 4  # 8 clusters of 2 CTAs: 2 clusters walk 4 tiles each
    assert default_sm_count(one_cta, 4096, 4096, 1) is None  # not a small shape: the B200's 148


# ============================================================================================ tcgen05 ordering
FENCES = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    shr.u32 %r8, %r1, 5;
    setp.ne.u32 %p1, %r8, 0;
    @%p1 bra INIT_DONE;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 32;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra INIT_DONE;
    mbarrier.init.shared.b64 [%r9], 32;
INIT_DONE:
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    @%p1 bra CONSUMER;
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r21}, [%r20];
    tcgen05.wait::ld.sync.aligned;
    BEFORE
    mbarrier.arrive.shared.b64 %rd5, [%r9];
    bar.sync 0;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
    ret;
CONSUMER:
    {
    .reg .pred P1;
    LAB_WAIT:
    mbarrier.try_wait.parity.shared.b64 P1, [%r9], 0;
    @P1 bra.uni DONE;
    bra.uni LAB_WAIT;
    DONE:
    }
    AFTER
    add.s32 %r22, %r20, 2097152;
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r23}, [%r22];
    tcgen05.wait::ld.sync.aligned;
    BEFORE
    bar.sync 0;
    ret;
"""


def test_tcgen05_across_threads_needs_the_fences():
    """PTX ISA 9.7.16.6.4.4: tcgen05.ld; wait::ld; fence::before_thread_sync; arrive -> wait; fence::after_thread_sync;
    tcgen05 operation. Without the fences the run still matches (the emulator runs everything in one order) and each
    missing fence is a note naming its precedent."""
    bare = run(FENCES.replace("    BEFORE\n", "").replace("    AFTER\n", ""))
    rules = sorted({n.rule for n in bare.notes.values()})
    assert rules == [ordering.FENCE_AFTER, ordering.FENCE_BEFORE]
    assert all(n.precedent for n in bare.notes.values())
    fenced = run(FENCES.replace("BEFORE", "tcgen05.fence::before_thread_sync;")
                 .replace("AFTER", "tcgen05.fence::after_thread_sync;"))
    assert fenced.notes == {}


def test_copy_over_columns_an_unobserved_mma_reads_is_a_note():
    cta = SimpleNamespace(rank=0, recent_mmas=[])
    warp = SimpleNamespace(cta=cta, warp_id=4, seen={})
    notes = []
    ex = SimpleNamespace(note=lambda *a: notes.append(a), clock=100)
    ins = SimpleNamespace(where=lambda: "PTX line 9: tcgen05.cp", line=9)
    # an MMA at clock 50: accumulator columns [0, 64), SFA [256, 260), SFB [260, 262) (N = 64)
    ordering.mma_issued(warp, ordering.mma_footprint([cta], 0, 256, 260, (64 >> 3) << 17), 50, 7)
    ordering.cp_issued(ex, warp, ins, [cta], 300)  # other columns: nothing to say
    assert notes == []
    ordering.cp_issued(ex, warp, ins, [cta], 256)
    assert [n[0] for n in notes] == [ordering.MMA_THEN_CP]
    warp.seen[("tcdone", 0, 4)] = 50  # a completed commit covering it was observed: ordered
    notes.clear()
    ordering.cp_issued(ex, warp, ins, [cta], 256)
    assert notes == []


PROXY = """
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9+64], 32;
    bar.sync 0;
    ld.shared.b32 %r20, [%r9+64];
    shl.b32 %r2, %r1, 4;
    add.s32 %r3, %r9, %r2;
    st.shared.v4.b32 [%r3+1024], {%r1, %r1, %r1, %r1};
    FENCE
    bar.sync 0;
    add.s32 %r4, %r9, 1024;
    shr.u32 %r5, %r4, 4;
    cvt.u64.u32 %rd1, %r5;
    or.b64 %rd2, %rd1, 70403103981568;
    setp.ne.u32 %p3, %r1, 0;
    @%p3 bra DONE;
    tcgen05.cp.cta_group::1.32x128b.warpx4 [%r20], %rd2;
    mbarrier.init.shared.b64 [%r9], 1;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r9];
    {
    .reg .pred P1;
    LAB_WAIT:
    mbarrier.try_wait.parity.shared.b64 P1, [%r9], 0;
    @P1 bra.uni DONE;
    bra.uni LAB_WAIT;
    DONE:
    }
DONE:
    bar.sync 0;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
    ret;
"""


def test_async_proxy_reads_need_fence_proxy_async():
    """st.shared, then tcgen05.cp reads those bytes through the async proxy (PTX ISA 9.7.16.6.5)."""
    with pytest.raises(Hazard, match="fence.proxy.async"):
        run(PROXY.replace("    FENCE\n", ""), nthreads=32)
    run(PROXY.replace("FENCE", "fence.proxy.async.shared::cta;"), nthreads=32)


# ============================================================================================ no apache-tvm-ffi
def test_correctness_script_takes_the_pointer_launcher_without_tvm_ffi(tmp_path):
    """Where apache-tvm-ffi is missing (the Modal runner), test_correctness.py's emulated checks capture the pointer
    fallback custom_kernel takes there. Simulated: a tvm_ffi package that fails to import shadows the real one."""
    (tmp_path / "tvm_ffi").mkdir()
    (tmp_path / "tvm_ffi" / "__init__.py").write_text("raise ImportError('apache-tvm-ffi is not installed (simulated)')\n")
    code = ("import submission as s; from harness.capture import default_host_path; "
            "print(s.USE_TVM_FFI, default_host_path())")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       env={"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "CUTE_DSL_ARCH": "sm_100a"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["False", "pointer"]


def test_the_emulator_cli_falls_back_to_the_pointer_launcher_without_tvm_ffi(tmp_path):
    """With only the core packages (no apache-tvm-ffi), tools/emulate.py with no --host-path compiles, captures and
    emulates the launcher custom_kernel takes there (the pointer fallback) instead of failing on the DSL's
    CONFIG_MISSING_TVM_FFI: one config, one schedule, a small shape."""
    (tmp_path / "tvm_ffi").mkdir()
    (tmp_path / "tvm_ffi" / "__init__.py").write_text("raise ImportError('apache-tvm-ffi is not installed (simulated)')\n")
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "CUTE_DSL_ARCH": "sm_100a",
           "HOME": str(tmp_path), **{k: v for k, v in os.environ.items() if k == "EMU_LAUNCH_CACHE"}}
    p = subprocess.run([sys.executable, "tools/emulate.py", "--shape", "128,128,256", "--config", "m128n64_c1x1_e32",
                        "--schedules", "1"], cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "pointer fallback" in p.stdout and "emulated MATCH" in p.stdout


@pytest.mark.slow
def test_correctness_emulated_checks_run_without_tvm_ffi(tmp_path):
    """The same, end to end: test_correctness.run_emulator_checks compiles, captures and emulates the pointer launcher
    (one config, one generator, one schedule) with apache-tvm-ffi unimportable, and it matches."""
    (tmp_path / "tvm_ffi").mkdir()
    (tmp_path / "tvm_ffi" / "__init__.py").write_text("raise ImportError('apache-tvm-ffi is not installed (simulated)')\n")
    code = ("import test_correctness as t, submission as s; "
            "cfg = next(c for c in s.TUNE_SPACE if c.name == 'm128n64_c1x1_e32'); "
            "print('RESULT', *t.run_emulator_checks([cfg], modes=('strict',), schedules=1))")
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin", "CUTE_DSL_ARCH": "sm_100a",
           "EMU_LAUNCH_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "pointer fallback" in p.stdout and "PASS  emulated MATCH" in p.stdout
    assert p.stdout.split("RESULT")[1].split() == ["1", "0"]
