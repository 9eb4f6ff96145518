"""What a sampled run (some clusters of a launch) tells its caller so that the check of C cannot be lied to by the
sampling (issue 38): each global store's cluster, the atomics among them, and the clusters that read bytes whose
contents the run does not know (emu.Machine.watch_unknown: an earlier launch's clusters that were not emulated write
them). The runner's use of it: tests/harness/test_runner.py. Hand-written PTX, no GPU."""
from __future__ import annotations

import numpy as np

from emu import GlobalMemory, run_kernel
from tests.emu.ptx_kit import kernel_text, launch, param_bytes

# CTA x reads word 8x of `inp`, adds 1 and stores it at word x of `out`; thread 0 of every CTA adds 1 to word 63
BODY = """
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [inp];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra DONE;
    mul.wide.u32 %rd3, %r1, 32;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r3, [%rd4];
    add.u32 %r3, %r3, 1;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u32 [%rd6], %r3;
    red.global.add.u32 [%rd1+252], 1;
DONE:
    ret;
"""


def run(unknown_words=()):
    ptx = kernel_text(BODY, ".param .u64 out, .param .u64 inp")
    gmem = GlobalMemory()
    out = gmem.alloc(256, fill=0)
    inp = gmem.alloc_array(np.arange(64, dtype=np.uint32))
    params = [param_bytes(out, 8, gmem, out), param_bytes(inp, 8, gmem, out)]
    unknown = [(inp + 4 * w, 4) for w in unknown_words]
    return run_kernel(launch(ptx, params, threads=32, grid=(4, 1, 1)), gmem, unknown=unknown), out


def test_each_store_names_its_cluster_and_atomics_are_kept_apart():
    r, out = run()
    m = r.machine
    assert r.status == "completed" and len(m.store_log) == len(m.store_clusters) == 8
    assert sorted(cid for (addr, n), cid in zip(m.store_log, m.store_clusters) if addr != out + 252) == [
        (x, 0, 0) for x in range(4)]
    assert m.atomic_log == [(out + 252, 4)] * 4 and not m.tainted


def test_a_cluster_that_reads_unknown_bytes_is_tainted_and_only_it():
    """Bytes of `inp` a run does not know (words 8 and 9: CTA 1 reads word 8, nobody word 9): only CTA 1's cluster is
    tainted, with the read that tainted it; a read elsewhere in the same allocation taints nothing."""
    r, _ = run(unknown_words=(8, 9))
    assert list(r.machine.tainted) == [(1, 0, 0)] and "ld.global" in r.machine.tainted[(1, 0, 0)]
    r, _ = run(unknown_words=(9, 10))
    assert not r.machine.tainted

