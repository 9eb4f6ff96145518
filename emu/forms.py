"""Instruction forms of a PTX kernel: each instruction's full opcode (every modifier) with the shape of its operands.

Two instructions share a form when the hardware is asked for the same thing: `tcgen05.mma.cta_group::2.kind::mxf4nvf4
.block_scale.scale_vec::4X.collector::a::fill [a], v, v, v, [a], [a], v` is one form, whatever registers or
immediates it names.
What a form does not say: the values its operands hold at run time (a descriptor's bits, a tensor map's data type, an
immediate's value), which may matter as much; calibration/ptx_ledger.py compares forms across kernels with that caveat.

    forms(ptx_text)  ->  {form: count}
"""
from __future__ import annotations

import re
from collections import Counter

from .ptx import Addr, Args, Imm, Pair, Reg, Sink, Sym, TensorCoords, Vec, parse_module


def operand_shape(op) -> str:
    """A value v (a register, an immediate or a symbol's address: one hardware ask, whichever the assembler gets), an
    address [a] (any base, any offset), a vector {N}, tensor coordinates {cN}, a predicate pair v|v, the sink _, a
    call's parameter list (N)."""
    if isinstance(op, (Reg, Imm, Sym)):
        return "v"
    if isinstance(op, Addr):
        return "[a]"
    if isinstance(op, TensorCoords):
        return f"{{c{len(op.coords)}}}"
    if isinstance(op, Vec):
        return f"{{{len(op.items)}}}"
    if isinstance(op, Pair):
        return "v|v"
    if isinstance(op, Sink):
        return "_"
    if isinstance(op, Args):
        return f"({len(op.items)})"
    return type(op).__name__


# Instructions that move bits without reading them as numbers: their .uN / .sN / .bN types are one instruction.
BITS_ONLY = ("ld", "st", "mov", "shfl", "cvta", "ldu", "prmt")


def canonical_opcode(opcode: str) -> str:
    """One spelling per instruction where the PTX ISA gives several: tcgen05.mma's .block16 is .scale_vec::4X for
    kind::mxf4nvf4 (64 K-elements per MMA in 16-element blocks, four scales per row; emu/tcgen05.py Q4; DSL 4.3
    writes the one, 4.8 the other), and a load, store or move of .u32 / .s32 / .b32 bits is one instruction (PTX ISA
    5.2.2: the bit-size types; nvcc and the DSL pick different ones)."""
    if ".kind::mxf4nvf4" in opcode:
        opcode = opcode.replace(".block16", ".scale_vec::4X")
    parts = opcode.split(".")
    if parts[0] in BITS_ONLY and re.fullmatch(r"[usb](8|16|32|64)", parts[-1]):
        parts[-1] = "b" + parts[-1][1:]
    return ".".join(parts)


def canonical_form(text: str) -> str:
    """A form as written by an older emu.forms (or another tool) in today's spelling."""
    opcode, _, operands = text.partition(" ")
    return f"{canonical_opcode(opcode)} {operands}".rstrip()


def form(ins) -> str:
    return f"{canonical_opcode(ins.opcode)} {', '.join(operand_shape(op) for op in ins.operands)}".rstrip()


def forms(ptx: str) -> Counter:
    """{form: how many instructions of the kernel have it} for the PTX module's kernel."""
    return Counter(form(ins) for ins in parse_module(ptx).instrs)
