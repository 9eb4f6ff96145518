"""Programmatic dependent launch (PTX ISA "griddepcontrol"): only griddepcontrol.wait makes the prerequisite grid's
writes visible, so before it a kernel may read only memory the previous grid in the stream does not write, and may
store nothing (Machine.check_global_access; the stream says what that grid writes: run_kernel's
prerequisite_writes)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from emu import GlobalMemory, run_kernel
from emu.machine import PDL_LAUNCH_ATTRIBUTE
from tests.emu.ptx_kit import kernel_text, launch

PDL = [(PDL_LAUNCH_ATTRIBUTE, struct.pack("<I", 1))]
PROLOGUE = """
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd4, [src];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    add.s64 %rd5, %rd4, %rd2;
"""
# each thread copies its word of src to out; the load comes before the wait, the store after it
LOAD_FIRST = PROLOGUE + """
    ld.global.u32 %r2, [%rd5];
    griddepcontrol.wait;
    st.global.u32 [%rd3], %r2;
    ret;
"""
STORE_FIRST = PROLOGUE + """
    st.global.u32 [%rd3], %r1;
    griddepcontrol.wait;
    ret;
"""


def run(body: str, writes: tuple | None, pdl: bool = True):
    """Run body on one warp with out and src (32 words each); writes names the buffers the previous grid writes."""
    ptx = kernel_text(body, params=".param .u64 out, .param .u64 src")
    gmem = GlobalMemory()
    buffers = {"out": gmem.alloc(128, fill=0), "src": gmem.alloc_array(np.arange(100, 132, dtype=np.uint32))}
    cap = launch(ptx, [struct.pack("<Q", buffers["out"]), struct.pack("<Q", buffers["src"])], threads=32,
                 launch_attrs=PDL if pdl else ())
    prior = None if writes is None else [buffers[name] for name in writes]
    result = run_kernel(cap, gmem, prerequisite_writes=prior)
    return result, gmem.read(buffers["out"], 128).view(np.uint32)


def test_a_read_of_memory_the_previous_grid_does_not_write_may_come_before_the_wait():
    result, out = run(LOAD_FIRST, writes=("out",))
    assert result.status == "completed", result.message
    assert (out == np.arange(100, 132)).all()


@pytest.mark.parametrize("writes, says", [
    (None, "the previous kernel may still be writing it"),  # the stream does not say: every access races
    (("src",), "that the previous grid in the stream writes"),
])
def test_a_read_before_the_wait_races_what_the_previous_grid_may_write(writes, says):
    result, _ = run(LOAD_FIRST, writes=writes)
    assert result.status == "hazard" and "before griddepcontrol.wait" in result.message and says in result.message


def test_a_store_before_the_wait_races_even_where_the_previous_grid_writes_elsewhere():
    result, _ = run(STORE_FIRST, writes=("src",))
    assert result.status == "hazard" and "before griddepcontrol.wait" in result.message


def test_without_pdl_the_order_is_the_stream_s_and_nothing_races():
    result, out = run(LOAD_FIRST, writes=None, pdl=False)
    assert result.status == "completed" and (out == np.arange(100, 132)).all()
