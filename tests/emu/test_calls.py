"""Calls to a .func, local memory, module .global variables and device printf (PTX ISA "call", 11.1.2 ".func", 5.1.5
".local", 5.4.4 "Variable Initializers"; CUDA C++ Programming Guide "Formatted Output"), written as nvcc writes them.
Each expected value is computed here from the ISA's description, not by the emulator's helpers."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from emu.forms import forms
from emu.printf import format_printf
from emu.ptx import ParseError
from emu.state import Hazard, Unsupported
from tests.emu.ptx_kit import STORE_TID, kernel_text, run_ptx

# f(a, b) = a * 3 + b, with a return value; its registers reuse the kernel's names (%r1, %p1), which must stay its own
ADD3 = """
.func (.param .b32 func_retval0) f(
    .param .b32 f_param_0,
    .param .b32 f_param_1
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    ld.param.b32 %r1, [f_param_0];
    ld.param.b32 %r2, [f_param_1];
    setp.eq.s32 %p1, %r1, 7;
    @%p1 bra $L__skip;
    mul.lo.s32 %r1, %r1, 3;
$L__skip:
    add.s32 %r3, %r1, %r2;
    st.param.b32 [func_retval0], %r3;
    ret;
}
"""


def call_f(a: str, b: str, dst: str, seq: int = 0) -> str:
    return f"""
    {{ // callseq {seq}, 0
    .param .b32 param0;
    .param .b32 param1;
    .param .b32 retval0;
    st.param.b32 [param0], {a};
    st.param.b32 [param1], {b};
    call.uni (retval0), f, (param0, param1);
    ld.param.b32 {dst}, [retval0];
    }} // callseq {seq}
"""


def test_call_passes_arguments_returns_a_value_and_keeps_the_callers_registers():
    body = STORE_TID + "    mov.u32 %r5, 100;\n    setp.lt.u32 %p1, %r1, 16;\n" + call_f("%r1", "%r5", "%r6") + """
    add.s32 %r6, %r6, %r5;
    @%p1 add.s32 %r6, %r6, 1000;
    st.global.u32 [%rd3], %r6;
    ret;
"""
    out, machine = run_ptx(kernel_text(body, top=ADD3), out_words=32)
    tid = np.arange(32)
    expected = np.where(tid == 7, 7, tid * 3) + 100 + 100 + np.where(tid < 16, 1000, 0)
    assert out.tolist() == expected.tolist()
    assert "call.uni (1), v, (2)" in forms(kernel_text(body, top=ADD3))


def test_a_call_under_divergence_returns_each_lane_to_its_call():
    # lanes < 8 call f from one site, the rest from another: each returns after its own call
    body = STORE_TID + """
    setp.lt.u32 %p2, %r1, 8;
    @%p2 bra $L__low;
""" + call_f("%r1", "1", "%r6", 0) + """
    bra.uni $L__join;
$L__low:
""" + call_f("%r1", "2", "%r6", 1) + """
    add.s32 %r6, %r6, 50;
$L__join:
    st.global.u32 [%rd3], %r6;
    ret;
"""
    out, _ = run_ptx(kernel_text(body, top=ADD3), out_words=32)
    tid = np.arange(32)
    expected = np.where(tid == 7, 7, tid * 3) + np.where(tid < 8, 2 + 50, 1)
    assert out.tolist() == expected.tolist()


def test_nested_calls_and_a_function_defined_after_the_kernel():
    g = """
.func (.param .b32 func_retval0) g(
    .param .b32 g_param_0
)
{
    .reg .b32 %r<5>;
    ld.param.b32 %r1, [g_param_0];
""" + call_f("%r1", "%r1", "%r2") + """
    add.s32 %r2, %r2, 1;
    st.param.b32 [func_retval0], %r2;
    ret;
}
"""
    body = STORE_TID + """
    { // callseq 9, 0
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0), g, (param0);
    ld.param.b32 %r6, [retval0];
    }
    st.global.u32 [%rd3], %r6;
    ret;
"""
    out, _ = run_ptx(kernel_text(body, top=ADD3) + g, out_words=32)
    tid = np.arange(32)
    assert out.tolist() == (np.where(tid == 7, 7, tid * 3) + tid + 1).tolist()


def test_recursion_and_unknown_functions_are_unsupported():
    rec = """
.func r(
    .param .b32 r_param_0
)
{
    { .param .b32 param0;
    st.param.b32 [param0], 1;
    call.uni r, (param0);
    }
    ret;
}
"""
    body = "{ .param .b32 param0;\n st.param.b32 [param0], 1;\n call.uni r, (param0);\n }\n ret;"
    with pytest.raises(Unsupported, match="recursive calls"):
        run_ptx(kernel_text(body, top=rec))
    ext = ".extern .func ext(\n .param .b32 ext_param_0\n);\n"
    with pytest.raises(Unsupported, match="no body"):
        run_ptx(kernel_text(body.replace("call.uni r", "call.uni ext"), top=ext))
    with pytest.raises(ParseError, match="does not declare"):
        run_ptx(kernel_text(body.replace("call.uni r", "call.uni nowhere")))


LOCAL = """
    .local .align 16 .b8 __local_depot0[32];
    .reg .b64 %SP;
    .reg .b64 %SPL;
"""


def test_local_memory_is_per_thread_and_generic_addresses_reach_it():
    # every thread writes its tid at depot+8 and 1000+tid at +12 (st.local), reads +8 back through the generic
    # address cvta.local makes (ld generic), and +12 through ld.local
    body = LOCAL + STORE_TID + """
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    add.s32 %r2, %r1, 1000;
    st.local.v2.u32 [%SPL+8], {%r1, %r2};
    ld.u32 %r3, [%SP+8];
    ld.local.u32 %r4, [%SPL+12];
    add.s32 %r5, %r3, %r4;
    st.global.u32 [%rd3], %r5;
    ret;
"""
    out, _ = run_ptx(kernel_text(body), out_words=32)
    assert out.tolist() == (2 * np.arange(32) + 1000).tolist()


def test_local_access_outside_the_frame_is_a_hazard():
    body = LOCAL + "mov.u64 %SPL, __local_depot0;\n st.local.u32 [%SPL+32], 1;\n ret;"
    with pytest.raises(Hazard, match="outside the thread's 32-byte local frame"):
        run_ptx(kernel_text(body))


FORMAT = b"blk(%d,%d) lane%02d v=%f s=%s u=%u x=%#x c=%c ll=%lld %%\n"
STR = b"hi"


def _bytes_decl(name: str, data: bytes) -> str:
    items = ", ".join(str(b) for b in data + bytes(1))
    return f".global .align 1 .b8 {name}[{len(data) + 1}] = {{{items}}};\n"


def test_device_printf_formats_each_thread_argument_buffer():
    # nvcc's layout: ints at 0, 4, 8, the double at 16 (aligned to 8), the string pointer at 24, the unsigned at 32,
    # the hex int at 36, the char (promoted to int) at 40, the long long at 48
    top = (".extern .func (.param .b32 func_retval0) vprintf\n(\n .param .b64 vprintf_param_0,\n"
           " .param .b64 vprintf_param_1\n)\n;\n" + _bytes_decl("$str", FORMAT) + _bytes_decl("$str$1", STR))
    body = """
    .local .align 16 .b8 __local_depot0[56];
    .reg .b64 %SP;
    .reg .b64 %SPL;
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
""" + STORE_TID + """
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    mov.u32 %r2, %ctaid.x;
    cvt.rn.f32.u32 %f1, %r1;
    mul.f32 %f1, %f1, 0f3F000000;
    cvt.f64.f32 %fd1, %f1;
    mov.u32 %r3, 4294967295;
    mov.u32 %r4, 65;
    mov.u64 %rd4, -5;
    st.local.v2.u32 [%SPL], {%r2, 7};
    st.local.u32 [%SPL+8], %r1;
    st.local.f64 [%SPL+16], %fd1;
    mov.u64 %rd5, $str$1;
    cvta.global.u64 %rd5, %rd5;
    st.local.u64 [%SPL+24], %rd5;
    st.local.v2.u32 [%SPL+32], {%r3, %r1};
    st.local.u32 [%SPL+40], %r4;
    st.local.u64 [%SPL+48], %rd4;
    mov.u64 %rd6, $str;
    cvta.global.u64 %rd6, %rd6;
    add.u64 %rd7, %SP, 0;
    { // callseq 0, 0
    .param .b64 param0;
    .param .b64 param1;
    .param .b32 retval0;
    st.param.b64 [param0], %rd6;
    st.param.b64 [param1], %rd7;
    call.uni (retval0), vprintf, (param0, param1);
    ld.param.b32 %r5, [retval0];
    }
    setp.lt.u32 %p1, %r1, 2;
    @%p1 st.global.u32 [%rd3], %r5;
    ret;
"""
    run = run_ptx(kernel_text(body, top=top), out_words=2, threads=4, grid=(2, 1, 1))
    expected = [f"blk({b},7) lane{t:02d} v={t * 0.5:f} s=hi u=4294967295 x={t:#x} c=A ll=-5 %\n"
                for b in range(2) for t in range(4)]
    assert run.machine.printed == expected
    assert run.words.tolist() == [9, 9]  # the arguments read: CUDA's printf returns that, not the characters


def test_printf_star_width_and_short_sizes():
    buffer = struct.pack("<iiI", 6, -3, 0x12345) + bytes(4) + struct.pack("<d", -1.5)
    text, count = format_printf(b"[%*d|%hx|%.2e]", lambda off, n: buffer[off:off + n], None)
    assert (text, count) == (f"[{-3:6d}|{0x2345:x}|{-1.5:.2e}]", 4)


def test_global_variable_initialisers_and_an_unreadable_one():
    top = ".global .align 8 .f64 e = 0d4005BF0A8B145769;\n.global .align 4 .b32 w[3] = {1, 2};\n"
    body = STORE_TID + """
    mov.u64 %rd4, w;
    ld.global.u32 %r2, [%rd4+4];
    ld.global.u32 %r3, [%rd4+8];
    mov.u64 %rd5, e;
    ld.global.v2.u32 {%r4, %r5}, [%rd5];
    add.s32 %r2, %r2, %r3;
    setp.eq.u32 %p1, %r5, 0x4005BF0A;
    @!%p1 add.s32 %r2, %r2, 1000;
    st.global.u32 [%rd3], %r2;
    ret;
"""
    out, _ = run_ptx(kernel_text(body, top=top), out_words=32)
    assert set(out.tolist()) == {2}  # w = {1, 2, 0}: the rest zero-filled; e's high word as written
    bad = ".global .align 8 .u64 p = generic(w);\n.global .align 4 .b32 w[1];\n"
    with pytest.raises(Unsupported, match="initializer"):
        run_ptx(kernel_text(STORE_TID + "mov.u64 %rd4, p;\n ld.global.u64 %rd5, [%rd4];\n ret;", top=bad))


def test_a_function_with_its_own_local_frame_a_struct_argument_and_printf():
    """nvcc's shapes inside a .func: a by-value struct argument (`.param .align 8 .b8 p[16]`, ld.param.v2), the
    function's own __local_depot1 with %SP / %SPL of its own, and a printf from inside it."""
    top = (".extern .func (.param .b32 func_retval0) vprintf\n(\n .param .b64 vprintf_param_0,\n"
           " .param .b64 vprintf_param_1\n)\n;\n" + _bytes_decl("$str", b"t%d s=%d\n") + """
.func (.param .b32 func_retval0) g(
    .param .align 8 .b8 g_param_0[16]
)
{
    .local .align 8 .b8 __local_depot1[8];
    .reg .b64 %SP;
    .reg .b64 %SPL;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    mov.u64 %SPL, __local_depot1;
    cvta.local.u64 %SP, %SPL;
    ld.param.v2.u32 {%r1, %r2}, [g_param_0];
    ld.param.u32 %r3, [g_param_0+8];
    add.s32 %r4, %r2, %r3;
    st.local.v2.u32 [%SPL], {%r1, %r4};
    mov.u64 %rd1, $str;
    cvta.global.u64 %rd2, %rd1;
    add.u64 %rd3, %SP, 0;
    { // callseq 1, 0
    .param .b64 param0;
    .param .b64 param1;
    .param .b32 retval0;
    st.param.b64 [param0], %rd2;
    st.param.b64 [param1], %rd3;
    call.uni (retval0), vprintf, (param0, param1);
    }
    st.param.b32 [func_retval0], %r4;
    ret;
}
""")
    body = STORE_TID + """
    { // callseq 0, 0
    .param .align 8 .b8 param0[16];
    .param .b32 retval0;
    mov.u32 %r2, 10;
    st.param.v2.u32 [param0], {%r1, %r2};
    st.param.u32 [param0+8], %r1;
    call.uni (retval0), g, (param0);
    ld.param.b32 %r6, [retval0];
    }
    st.global.u32 [%rd3], %r6;
    ret;
"""
    run = run_ptx(kernel_text(body, top=top), out_words=4, threads=4)
    assert run.words.tolist() == [10 + t for t in range(4)]
    assert run.machine.printed == [f"t{t} s={10 + t}\n" for t in range(4)]
