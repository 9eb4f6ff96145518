"""A kernel-wide static pass over the decoded PTX, run before anything executes (emu.machine.Machine, right after
emu.isa.decode_kernel): rules that hold for the kernel as a whole or that the text alone settles, whatever the
schedule. Each rule cites the PTX ISA section it enforces; every violation names its PTX line, and all of them are
reported together as one Hazard.

  cta-group        every tcgen05 instruction that takes .cta_group uses the same value (PTX ISA 9.7.16.7.1: "All
                   tcgen05 instructions within a kernel must specify the same value for the .cta_group qualifier").
  mbarrier-space   mbarrier.init / inval / test_wait / try_wait / pending_count operate on .shared{::cta} only; of
                   the others only arrive, expect_tx and complete_tx accept .shared::cluster (9.7.13.15.8 table, and
                   the syntax of 9.7.13.15.9-17). An arrive on .shared::cluster cannot return the state: its
                   destination must be the sink `_` (9.7.13.15.13); arrive.noComplete takes .shared{::cta} only.
  tmem-pairing     tensor memory a kernel allocates must be deallocated before it exits (9.7.16.7.1, 9.7.16.1.2): a
                   kernel with tcgen05.alloc has a tcgen05.dealloc, and one with tcgen05.dealloc has an alloc; an
                   immediate nCols is a power of 2 in [32, 512] (9.7.16.7.1).
  alignment        the address of a memory access is a multiple of its size (6.4.1 "Addresses as Operands", 5.4.5:
                   "all PTX instructions that access memory require that the address be aligned to a multiple of the
                   access size"; cp.async.bulk: 16 bytes, 9.7.9.25.4.1; mbarrier objects: 8 bytes, 9.7.13.15.1; a
                   tensor copy's shared-memory destination or source: 128 bytes, emu.tma.SMEM_ALIGN).
                   Statically a violation shows where the PTX pins the address down modulo the access size: each
                   register's value is tracked as residue modulo a power of two that all its definitions agree on
                   (moves of symbols and immediates, add/sub/shl/mul/mad/and/cvt/cvta of known values; anything
                   else, nothing known).
                   The emulator checks every access's actual address at execution too (emu.ops_memory, emu.ops_async).
"""
from __future__ import annotations

from . import tma
from .ptx import Addr, Imm, Reg, Sink, Sym
from .state import Hazard

_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}


def check_kernel(kernel) -> None:
    """Run every rule over `kernel` (an emu.ptx.Kernel with decoded instructions); raise one Hazard listing all
    violations."""
    problems = []
    for rule in RULES:
        problems += rule(kernel)
    if problems:
        raise Hazard("static check of the kernel's PTX failed:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------------------------------------- cta-group
def _cta_group_of(ins) -> int | None:
    for p in ins.parts:
        if p.startswith("cta_group::"):
            return int(p.split("::")[1])
    return None


def cta_group_rule(kernel) -> list:
    """PTX ISA 9.7.16.7.1: one .cta_group value for every tcgen05 instruction of the kernel."""
    seen = {}
    for ins in kernel.instrs:
        if ins.base == "tcgen05":
            n = _cta_group_of(ins)
            if n is not None:
                seen.setdefault(n, []).append(ins)
    if len(seen) < 2:
        return []
    lines = "; ".join(f".cta_group::{n} at PTX lines {', '.join(str(i.line) for i in group[:6])}"
                      + (" ..." if len(group) > 6 else "") for n, group in sorted(seen.items()))
    return [f"[cta-group] tcgen05 instructions of one kernel use different .cta_group values ({lines}); PTX ISA "
            f"9.7.16.7.1: all tcgen05 instructions within a kernel must specify the same value"]


# ---------------------------------------------------------------------------------------------- mbarrier-space
_CTA_ONLY = {"init", "inval", "test_wait", "try_wait", "pending_count"}


def mbarrier_space_rule(kernel) -> list:
    """PTX ISA 9.7.13.15.8: which mbarrier operations accept an object in .shared::cluster."""
    out = []
    for ins in kernel.instrs:
        if ins.base != "mbarrier":
            continue
        op, mods = ins.parts[1], set(ins.parts[2:])
        cluster = "shared::cluster" in mods
        if cluster and (op in _CTA_ONLY or "noComplete" in mods):
            out.append(f"[mbarrier-space] {ins.where()}: mbarrier.{op}{'.noComplete' if 'noComplete' in mods else ''} "
                       f"on .shared::cluster; only arrive, expect_tx and complete_tx support a .shared::cluster object "
                       f"(PTX ISA 9.7.13.15.8)")
        if cluster and op == "arrive" and ins.operands and not isinstance(ins.operands[0], Sink):
            out.append(f"[mbarrier-space] {ins.where()}: mbarrier.arrive on .shared::cluster cannot return the state; "
                       f"its destination must be the sink `_` (PTX ISA 9.7.13.15.13)")
    return out


# ---------------------------------------------------------------------------------------------- tmem-pairing
def tmem_pairing_rule(kernel) -> list:
    """PTX ISA 9.7.16.7.1 / 9.7.16.1.2: allocations are freed before the kernel exits; nCols a power of 2 in [32, 512]."""
    allocs = [i for i in kernel.instrs if i.parts[:2] == ("tcgen05", "alloc")]
    deallocs = [i for i in kernel.instrs if i.parts[:2] == ("tcgen05", "dealloc")]
    out = []
    if allocs and not deallocs:
        out.append(f"[tmem-pairing] tcgen05.alloc at PTX line {allocs[0].line} but no tcgen05.dealloc in the kernel: "
                   f"all tensor memory allocated must be deallocated before the kernel exits (PTX ISA 9.7.16.7.1)")
    if deallocs and not allocs:
        out.append(f"[tmem-pairing] tcgen05.dealloc at PTX line {deallocs[0].line} but no tcgen05.alloc in the kernel: "
                   f"taddr must point to a previous allocation (PTX ISA 9.7.16.7.1)")
    for ins in allocs + deallocs:
        ncols = ins.operands[1] if len(ins.operands) > 1 else None
        if isinstance(ncols, Imm):
            n = int(ncols.value)
            if n < 32 or n > 512 or n & (n - 1):
                out.append(f"[tmem-pairing] {ins.where()}: nCols {n} is not a power of 2 in [32, 512] (PTX ISA "
                           f"9.7.16.7.1)")
    return out


# ---------------------------------------------------------------------------------------------- alignment
# A register's value as the PTX text pins it down: value = residue (mod modulus), modulus a power of two. Symbols
# give (their alignment, 0), immediates (EXACT, value); arithmetic combines them; a value nothing is known about is
# (1, 0). Over several definitions the result is what all of them share.
EXACT = 1 << 64
UNKNOWN = (1, 0)


def _pow2_dividing(*values: int) -> int:
    """The largest power of two dividing every value (EXACT for all zeros)."""
    acc = 0
    for v in values:
        acc |= int(v) & (EXACT - 1)
    return EXACT if acc == 0 else acc & -acc


def _join(a: tuple, b: tuple) -> tuple:
    m = _pow2_dividing(a[0], b[0], a[1] - b[1])
    return (m, a[1] % m)


def _symbol_alignment(kernel, name: str) -> int:
    if name in kernel.shared_vars:
        return kernel.shared_vars[name][0]
    for p in kernel.params:
        if p.name == name:
            return p.align
    return 1


def register_residues(kernel) -> dict:
    """Register name -> (modulus, residue) every definition in the kernel agrees on: a fixed point that starts from
    'no constraint yet' (None) and only ever coarsens, so loops (a base plus a stride) settle on what all their
    iterations share."""
    defs = {}
    for ins in kernel.instrs:
        if ins.operands and isinstance(ins.operands[0], Reg) and ins.base not in ("st", "bra") \
                and not ins.opcode.startswith(("mbarrier.init", "tcgen05.alloc", "tcgen05.dealloc")):
            defs.setdefault(ins.operands[0].name, []).append(ins)
    known = dict.fromkeys(defs)

    def of(op):
        if isinstance(op, Imm):
            return UNKNOWN if op.is_float else (EXACT, int(op.value) % EXACT)
        if isinstance(op, Reg):
            return known[op.name] if op.name in defs else UNKNOWN
        if isinstance(op, Sym):
            return (_symbol_alignment(kernel, op.name), 0)
        return UNKNOWN

    def value(ins):
        b, ops = ins.base, [of(op) for op in ins.operands[1:]]
        if any(v is None for v in ops):
            return None
        if b in ("mov", "cvta", "cvt") and len(ops) == 1:
            return ops[0]
        if b in ("add", "sub") and len(ops) == 2:
            (ma, ca), (mb, cb) = ops
            m = min(ma, mb)
            return (m, (ca + cb if b == "add" else ca - cb) % m)
        if b == "shl" and len(ops) == 2 and ops[1][0] == EXACT:
            m = min(ops[0][0] << ops[1][1], EXACT)
            return (m, (ops[0][1] << ops[1][1]) % m)
        if b in ("mul", "mad") and "lo" in ins.parts and len(ops) >= 2:
            m = min(_pow2_dividing(*ops[0]) * _pow2_dividing(*ops[1]), EXACT)  # both factors' alignments multiply
            if b == "mad":
                m = min(m, ops[2][0])
                return (m, ops[2][1] % m)
            return (m, 0)
        if b == "and" and len(ops) == 2:  # clears bits: at least as aligned as either operand
            return (max(_pow2_dividing(*ops[0]), _pow2_dividing(*ops[1])), 0)
        return UNKNOWN

    changed = True
    while changed:
        changed = False
        for name, ins_list in defs.items():
            new = known[name]
            for i in ins_list:
                v = value(i)
                if v is not None:
                    new = v if new is None else _join(new, v)
            if new != known[name]:
                known[name], changed = new, True
    return {name: UNKNOWN if v is None else v for name, v in known.items()}


def _access_size(ins) -> int | None:
    """Bytes one lane's ld/st accesses (type bytes x vector length)."""
    if ins.base not in ("ld", "st"):
        return None
    bits = ins.parts[-1][1:]
    if bits not in _TYPE_BYTES:
        return None
    vec = next((int(p[1:]) for p in ins.parts if p in ("v2", "v4", "v8")), 1)
    return _TYPE_BYTES[bits] * vec


def _required(ins) -> list:
    """(address operand, alignment it needs, what) for the memory operands of `ins` with a size rule."""
    b, ops = ins.base, ins.operands
    size = _access_size(ins)
    if size:
        addr = ops[1] if b == "ld" else ops[0]
        return [(addr, size, f"a {size}-byte access")] if isinstance(addr, Addr) else []
    if ins.opcode.startswith("cp.async.bulk.") and not ins.opcode.startswith(("cp.async.bulk.tensor",
                                                                             "cp.async.bulk.prefetch",
                                                                             "cp.async.bulk.commit",
                                                                             "cp.async.bulk.wait")):
        return [(op, 16, "a bulk copy (16-byte aligned, PTX ISA 9.7.9.25.4.1)") for op in ops[:2] if isinstance(op, Addr)]
    if ins.opcode.startswith("cp.async.bulk.tensor"):
        # a load's destination [dst] comes first, a store's source [src] after [tmap, {coords}]
        smem, role = (ops[0], "destination") if ins.parts[5].startswith("shared") else (ops[1], "source")
        return [(smem, tma.SMEM_ALIGN, f"a tensor copy's shared-memory {role} ({tma.SMEM_ALIGN_SOURCE})")] \
            if isinstance(smem, Addr) else []
    if b == "mbarrier":
        addr = next((op for op in ops if isinstance(op, Addr)), None)
        return [(addr, 8, "an mbarrier object (8-byte aligned, PTX ISA 9.7.13.15.1)")] if addr else []
    return []


def alignment_rule(kernel) -> list:
    """PTX ISA 6.4.1 / 5.4.5: an address must be a multiple of the access size; flagged where the PTX proves it is not."""
    known = register_residues(kernel)
    out = []
    for ins in kernel.instrs:
        for addr, need, what in _required(ins):
            if isinstance(addr.base, Reg):
                mod, res = known.get(addr.base.name, UNKNOWN)
            elif isinstance(addr.base, Sym):
                mod, res = _symbol_alignment(kernel, addr.base.name), 0
            else:
                mod, res = EXACT, 0
            if mod >= need and (res + addr.offset) % need:
                out.append(f"[alignment] {ins.where()}: {what} at an address = {(res + addr.offset) % mod} modulo "
                           f"{min(mod, 1 << 20)}: not a multiple of {need} (PTX ISA 6.4.1: the address must be "
                           f"naturally aligned to the access size)")
    return out


RULES = (cta_group_rule, mbarrier_space_rule, tmem_pairing_rule, alignment_rule)
