"""Verdict notes (emu.state.Note): PTX model violations that hardware-verified kernels survive are recorded, named
with their precedent (emu/precedents.py), and the run goes on the way the hardware behaved; the same uses without
such a precedent stay hazards. Hand-written PTX, no DSL, no GPU; a few seconds in all."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from emu import precedents
from emu.machine import Deadlock
from emu.state import Cluster, Cta, Hazard
from emu.tcgen05 import tmem_alloc, tmem_load
from emu.tma import encode_tensor_map
from tests.emu.ptx_kit import WAIT, kernel_text, run_ptx

SRC = np.arange(256, dtype=np.uint32)  # the src buffer
LAUNCH = {"out_words": 256, "dynamic_smem": 8192}


def kernel(body: str, maps=()) -> str:
    """The kernel `k(out, src, MAP...)`: each name of `maps` a 128-byte tensor-map parameter."""
    return kernel_text(body, ", ".join([".param .u64 out", ".param .u64 src"]
                                       + [f".param .align 64 .b8 {n}[128]" for n in maps]))


def rules(m) -> set:
    return {n.rule for n in m.notes.values()}


PROLOGUE = """
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [src];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    setp.ne.u32 %p1, %r1, 0;
"""

# ------------------------------------------------------------------ bulk copies
def bulk_copy(offset_bytes: int, nbytes: int, wait: bool, use: bool) -> str:
    """Lane 0 copies nbytes from src + offset_bytes into smem + 1024 (the src allocation holds 1024 bytes)."""
    return PROLOGUE + f"""
    @%p1 bra DONE_ALL;
    mov.b32 %r2, 1;
    mbarrier.init.shared.b64 [%r9], %r2;
    add.s32 %r3, %r9, 1024;
    add.s64 %rd3, %rd2, {offset_bytes};
    mov.b32 %r4, {nbytes};
    mbarrier.arrive.expect_tx.shared.b64 _, [%r9], %r4;
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r3], [%rd3], %r4, [%r9];
""" + (WAIT if wait else "") + ("""
    ld.shared.u32 %r5, [%r3];
    st.global.u32 [%rd1], %r5;
    ld.shared.u32 %r6, [%r3+48];
    st.global.u32 [%rd1+4], %r6;
""" if use else "") + """
DONE_ALL:
    ret;
"""


def test_bulk_copy_inside_its_source_has_no_note():
    out, m = run_ptx(kernel(bulk_copy(64, 64, wait=True, use=True)), [SRC], **LAUNCH)
    assert list(out[:2]) == [16, 28] and not m.notes


def test_bulk_copy_past_the_allocation_is_a_note_and_reads_poison():
    # bytes 1024..1087 of a 1024-byte allocation: novus677's short-K launch reads scales past the tensors this way
    out, m = run_ptx(kernel(bulk_copy(992, 64, wait=True, use=True)), [SRC], **LAUNCH)
    assert rules(m) == {"bulk-copy-reads-past-allocation"}
    note = next(iter(m.notes.values()))
    assert note.precedent == precedents.NOVUS_SHORT_K and "32 of 64 bytes" in note.detail
    assert out[0] == 248  # inside: the source's data
    assert out[1] == 0xFFFFFFFF  # past the end: poison, so a kernel that uses them mismatches


def test_copy_landing_after_exit_is_a_note():
    seen = set()
    for seed in range(8):
        _, m = run_ptx(kernel(bulk_copy(0, 64, wait=False, use=False)), [SRC], seed=seed, **LAUNCH)
        seen |= rules(m)
    assert "async-copy-lands-after-exit" in seen and seen <= {"async-copy-lands-after-exit"}


# ------------------------------------------------------------------ mbarrier used before its init
def test_mbarrier_used_before_init_waits_for_it():
    # warp 1 waits on the barrier that warp 0 initialises after a delay, with no barrier between (arseni's TMA warp)
    body = PROLOGUE + """
    shr.u32 %r2, %r1, 5;
    setp.eq.u32 %p2, %r2, 1;
    @%p2 bra WAITER;
    @%p1 bra END;
    mov.b32 %r3, 0;
SPIN:
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p3, %r3, 40;
    @%p3 bra SPIN;
    mov.b32 %r4, 1;
    mbarrier.init.shared.b64 [%r9], %r4;
    mbarrier.arrive.shared.b64 _, [%r9];
    bra END;
WAITER:
""" + WAIT + """
    st.global.u32 [%rd1], %r2;
END:
    ret;
"""
    out, m = run_ptx(kernel(body), [SRC], threads=64, **LAUNCH)
    assert out[0] == 1 and rules(m) == {"mbarrier-used-before-init"}


def test_mbarrier_never_initialised_is_a_deadlock_naming_the_wait():
    body = PROLOGUE + WAIT + "    ret;"
    with pytest.raises(Deadlock, match="mbarrier.init at CTA0"):
        run_ptx(kernel(body), [SRC], **LAUNCH)


# ------------------------------------------------------------------ TMA store sources
def c_map(gmem, out):
    """A 2-D tensor map over the out buffer: 8 rows of 32 u32 (128 bytes), one box, no swizzle."""
    return encode_tensor_map(out, 2, dims=[32, 8], strides=[128], box=[32, 8])  # dtype 2: UINT32


def tma_store(before_issue: str, after_issue: str, tail: str = "") -> str:
    """Warps 0-3 each write their 2 rows (64 u32) of a 1 KiB C tile in shared memory, warp 0 issues its TMA store."""
    return """
    ld.param.u64 %rd1, [out];
    mov.u64 %rd5, cmap;
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    add.s32 %r10, %r9, 1024;
    shl.b32 %r2, %r1, 3;
    add.s32 %r3, %r10, %r2;
    add.s32 %r4, %r1, 100;
    shr.u32 %r5, %r1, 5;
    setp.ne.u32 %p1, %r5, 0;
    st.shared.v2.u32 [%r3], {%r4, %r4};
""" + before_issue + """
    @%p1 bra AFTER;
    elect.sync %r6|%p2, -1;
    @!%p2 bra AFTER;
    mov.b32 %r7, 0;
    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd5, {%r7, %r7}], [%r10];
    cp.async.bulk.commit_group;
AFTER:
""" + after_issue + tail + """
    ret;
"""


SYNCED = "    fence.proxy.async.shared::cta;\n    bar.sync 1, 128;\n"
WAIT_READ = "    @%p1 bra W;\n    cp.async.bulk.wait_group.read 0;\nW:\n    bar.sync 2, 128;\n"


def store_run(before, after, tail="", seed=0):
    """C (256 words: thread t's value t + 100 in words 2t, 2t + 1) and the machine."""
    return run_ptx(kernel(tma_store(before, after, tail), ["cmap"]), [SRC, c_map], threads=128, seed=seed, **LAUNCH)


def test_fenced_synchronized_waited_store_has_no_note():
    for seed in range(3):
        out, m = store_run(SYNCED, WAIT_READ, seed=seed)
        assert (out[::2] == np.arange(128) + 100).all()
        assert not m.notes


def test_store_without_fence_or_barrier_reads_the_late_writes_with_notes():
    # arseni's epilogue: no fence.proxy.async, no barrier before the issue, no wait for the store
    seen = set()
    for seed in range(6):
        out, m = store_run("", "", seed=seed)
        assert (out[::2] == np.arange(128) + 100).all()  # every warp's rows arrive, as on the hardware
        seen |= rules(m)
    assert {"bulk-store-without-proxy-fence", "bulk-store-source-unsynchronized", "bulk-store-reads-after-exit"} <= seen
    assert all(n.precedent == precedents.ARSENI_C_STORE for n in m.notes.values())


def test_store_source_reused_before_read_keeps_the_old_bytes():
    # after a barrier every warp rewrites its rows with 7 before any wait_group.read: the store keeps the first data
    rewrite = SYNCED + "    mov.b32 %r8, 7;\n    bar.sync 3, 128;\n    st.shared.v2.u32 [%r3], {%r8, %r8};\n"
    seen = set()
    for seed in range(6):
        out, m = store_run(SYNCED, rewrite, seed=seed)
        assert (out[::2] == np.arange(128) + 100).all()
        seen |= rules(m)
    assert "bulk-store-source-reused-before-read" in seen


# ------------------------------------------------------------------ tensor memory
def test_tmem_outside_the_allocation_is_a_note_with_a_machine_and_a_hazard_without():
    cl = Cluster((0, 0, 0), (1, 1, 1))
    cta = Cta((0, 0, 0), 0, cl, np.zeros(1024, np.uint8))
    cl.ctas.append(cta)
    col = tmem_alloc([cta], 256)
    with pytest.raises(Hazard, match="not inside one tensor-memory allocation"):
        tmem_load(cta, col + 256, 0, 16)  # a bare cluster has no machine to file notes: strict
    seen = []
    cl.machine = SimpleNamespace(note=lambda *a: seen.append(a), where_now=lambda brief=False: "here")
    tmem_load(cta, col + 256, 0, 16)  # arseni's 304 of 256 columns
    assert seen and seen[0][0] == "tmem-outside-allocation" and seen[0][2] == precedents.ARSENI_TMEM_COLUMNS
    with pytest.raises(Hazard, match="outside tensor memory"):
        tmem_load(cta, 500, 0, 16)  # past column 511 stays a hazard


def test_tcgen05_ld_lane_field_of_another_quadrant_is_a_note():
    # every warp of a warpgroup loads with lane field 0 (novus677's epilogue): each reads its own quadrant
    body = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, smem;
    shr.u32 %r5, %r1, 5;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra WAITALLOC;
    mov.b32 %r2, 32;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], %r2;
WAITALLOC:
    bar.sync 0;
    ld.shared.u32 %r3, [%r9];
    tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r4}, [%r3];
    tcgen05.wait::ld.sync.aligned;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    @%p1 bra DONE;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, %r2;
DONE:
    ret;
"""
    _, m = run_ptx(kernel(body), [SRC], threads=128, **LAUNCH)  # (the fence: the loads are ordered before the
    # dealloc, emu.ordering)
    assert rules(m) == {"tmem-lane-quadrant-from-warp"}  # warps 1-3 name quadrant 0; warp 0 does not
    assert m.stats["tmem_ld_lane_remapped"] == 3
