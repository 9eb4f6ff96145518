"""The opcode table: one decode function and one execute function per opcode family.

A decode function validates the full opcode form (every modifier) once, before anything runs, and
returns what the execute function needs; a form it does not know raises Unsupported naming the PTX
line. An execute function runs one instruction for the lanes in `mask` of a warp:

    execute(ex, warp, ins, mask) -> None | Control

ex is the running emu.machine.Machine; returning None advances the executing lanes' program counters.
"""
from __future__ import annotations

from dataclasses import dataclass

from .state import Unsupported

TABLE: dict = {}


@dataclass
class Control:
    """What an instruction did to the warp's control flow."""

    kind: str  # "jumped" (pcs already set), "block" (retry later: pcs untouched), "exit"


JUMPED = Control("jumped")
BLOCK = Control("block")
SLEEP = Control("sleep")  # the warp sleeps on a barrier until it changes (emu.ops_memory's parity wait)


def family(*names):
    """Register decode/execute for opcode bases (the first dotted part, or a longer dotted prefix)."""

    def deco(cls):
        for n in names:
            TABLE[n] = cls
        return cls

    return deco


def lookup(ins):
    for n in range(len(ins.parts), 0, -1):
        key = ".".join(ins.parts[:n])
        if key in TABLE:
            return TABLE[key]
    raise Unsupported(f"opcode {ins.opcode} is not implemented ({ins.where()})")


def unsupported(ins, why: str = "") -> Unsupported:
    return Unsupported(f"opcode form {ins.opcode} is not implemented{': ' + why if why else ''} ({ins.where()})")


def decode_kernel(kernel) -> None:
    """Decode every instruction once; collect every unsupported form before anything runs."""
    problems = []
    for ins in kernel.instrs:
        try:
            fam = lookup(ins)
            ins.info = fam.decode(ins)
            ins.handler = fam.execute
        except Unsupported as e:
            problems.append(str(e))
    if problems:
        raise Unsupported("\n".join(problems))
