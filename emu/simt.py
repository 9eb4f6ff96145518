"""Warp state and typed register access, vectorised over the 32 lanes of a warp.

Every register holds its bits zero-extended in a uint64 lane vector; predicates are bool vectors.
A read reinterprets the bits as the instruction's type (PTX ISA 5.2 "Types": b/u/s/f of 8–64 bits),
a write stores the bits of the value, masked to the lanes that execute.
"""
from __future__ import annotations

import numpy as np

from .ptx import Addr, Imm, Reg, Sink, Sym
from .state import EmulatorError

WARP = 32

_NP = {
    "b8": np.uint8, "u8": np.uint8, "s8": np.int8,
    "b16": np.uint16, "u16": np.uint16, "s16": np.int16, "f16": np.float16,
    "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32,
    "b64": np.uint64, "u64": np.uint64, "s64": np.int64, "f64": np.float64,
}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def np_type(ty: str):
    try:
        return _NP[ty]
    except KeyError:
        raise EmulatorError(f"unknown PTX type .{ty}") from None


def type_bits(ty: str) -> int:
    return np.dtype(np_type(ty)).itemsize * 8


def to_bits(values: np.ndarray, ty: str) -> np.ndarray:
    """Lane values of PTX type `ty` -> their bits zero-extended to uint64."""
    dt = np_type(ty)
    v = np.asarray(values)
    if v.dtype != dt:
        v = v.astype(dt)
    return v.view(_UNSIGNED[v.itemsize]).astype(np.uint64)


def from_bits(bits: np.ndarray, ty: str) -> np.ndarray:
    dt = np.dtype(np_type(ty))
    return bits.astype(_UNSIGNED[dt.itemsize]).view(dt)


class Warp:
    """One warp: per-lane program counters, exit flags and registers.

    Divergence and reconvergence: the warp executes, each step, the lanes whose program counter is the
    smallest among its runnable lanes. Lanes that branched ahead wait there until the others catch up,
    so structured branches reconverge at their join point and loops run lanes in lockstep.
    """

    def __init__(self, cta, warp_id: int, nthreads: int, kernel_regs: dict):
        self.cta = cta
        self.warp_id = warp_id
        self.nthreads = nthreads  # threads of this warp that exist (blockDim may not be a multiple of 32)
        self.pc = np.zeros(WARP, np.int64)
        self.exited = np.arange(WARP) >= nthreads
        self.done = bool(self.exited.all())  # every lane has exited (kept by exit_lanes: the scheduler asks per step)
        self.regs: dict = {}
        self.reg_types = kernel_regs
        self.blocked_on = None  # a barrier object while the warp cannot proceed
        self.sleep_key = None  # an mbarrier the warp last found incomplete (a spin-wait hint)
        self.known: dict = {}  # CTA rank -> machine clock up to which this warp has observed that CTA's releases
        self.seen: dict = {}  # (CTA rank, warp id) -> latest clock of that warp's actions ordered before this warp's
        self.pending_tmem_ld: dict = {}  # register name -> an unfinished tcgen05.ld (see ops_async._tc_ld)
        self.pending_tmem_st: list = []  # tcgen05.st not yet waited for (ops_async._tc_st): written at wait::st
        self.barriers_joined: set = set()  # named barriers this warp has arrived at (ops_control, ops_async)
        self.setmaxnreg_log: list = []  # the setmaxnreg this warp executed, in order (ops_control)
        self.last_line = 0

    # -------------------------------------------------------------- identity
    @property
    def tid(self) -> np.ndarray:
        return self.warp_id * WARP + np.arange(WARP)

    def exit_lanes(self, mask: np.ndarray) -> None:
        self.exited |= mask
        self.done = bool(self.exited.all())

    def select_lanes(self) -> tuple[int, np.ndarray]:
        live = ~self.exited
        pc = int(self.pc[live].min())
        return pc, live & (self.pc == pc)

    # -------------------------------------------------------------- registers
    def _reg(self, name: str) -> np.ndarray:
        r = self.regs.get(name)
        if r is None:
            # Registers start undefined (PTX ISA 5.1.1): poison them so a read of one is visible.
            r = np.full(WARP, 0xFFFFFFFFFFFFFFFF, np.uint64) if not _is_pred(name, self.reg_types) else np.zeros(WARP, bool)
            self.regs[name] = r
        return r

    def read(self, op, ty: str, ctx=None) -> np.ndarray:
        """The operand's lane values as PTX type `ty` (a numpy vector of 32)."""
        if isinstance(op, Reg):
            if self.pending_tmem_ld and op.name in self.pending_tmem_ld:
                self.pending_tmem_ld[op.name].finish()
            r = self._reg(op.name)
            if ty == "pred":
                return r.copy()
            if r.dtype == bool:
                return r.astype(np_type(ty))
            return from_bits(r, ty)
        if isinstance(op, Imm):
            if ty == "pred":
                return np.full(WARP, bool(op.value))
            dt = np_type(ty)
            if np.dtype(dt).kind == "f":
                return np.full(WARP, op.value, dt)
            if op.is_float:  # a floating-point literal as a bit or integer type is its IEEE bits (PTX ISA 4.5.2):
                # `mov.b32 %r, 0f3F800000` holds 0x3F800000, as 1.0 in the f32 operation that reads %r later
                size = np.dtype(dt).itemsize
                packed = np.array([op.value], {2: np.float16, 4: np.float32, 8: np.float64}[size]).view(_UNSIGNED[size])
                return np.full(WARP, packed[0], _UNSIGNED[size]).view(dt)
            bits = int(op.value) & ((1 << type_bits(ty)) - 1)
            return np.full(WARP, bits, _UNSIGNED[np.dtype(dt).itemsize]).view(dt)
        if isinstance(op, Sym):
            if ctx is None:
                raise EmulatorError(f"symbol {op.name} needs a context")
            return np.full(WARP, ctx.symbol_address(self, op.name), np.uint64).astype(np_type(ty))
        raise EmulatorError(f"cannot read operand {op!r} as .{ty}")

    def write(self, op, values: np.ndarray, ty: str, mask: np.ndarray) -> None:
        if isinstance(op, Sink):
            return
        if not isinstance(op, Reg):
            raise EmulatorError(f"cannot write operand {op!r}")
        if self.pending_tmem_ld and op.name in self.pending_tmem_ld:
            self.pending_tmem_ld[op.name].finish()
        r = self._reg(op.name)
        if ty == "pred":
            r[mask] = np.asarray(values, bool)[mask] if np.ndim(values) else bool(values)
            return
        bits = to_bits(values if getattr(values, "shape", None) == (WARP,) else np.broadcast_to(values, (WARP,)), ty)
        if r.dtype == bool:
            r[mask] = bits[mask] != 0
        else:
            r[mask] = bits[mask]

    def write_bits(self, name: str, bits: np.ndarray, mask: np.ndarray) -> None:
        r = self._reg(name)
        r[mask] = bits[mask]


def _is_pred(name: str, reg_types: dict) -> bool:
    if name in reg_types:
        return reg_types[name] == "pred"
    base = name.split("@")[0].rstrip("0123456789")
    for decl, ty in reg_types.items():
        if decl.split("@")[0] == base or decl == name:
            return ty == "pred"
    return base == "%p"


def lane_addresses(ex, w, op: Addr, width: int = 64) -> np.ndarray:
    """Per-lane byte addresses of an address operand [base+offset] (PTX ISA 6.4.1 "Addresses as operands")."""
    if op.base is None:
        base = np.zeros(WARP, np.uint64)
    elif isinstance(op.base, Sym):
        base = np.full(WARP, ex.symbol_address(w, op.base.name), np.uint64)
    else:
        base = to_bits(w.read(op.base, f"b{width}"), f"b{width}")
    return (base + np.uint64(op.offset & 0xFFFFFFFFFFFFFFFF)) & np.uint64((1 << width) - 1 if width < 64 else 0xFFFFFFFFFFFFFFFF)
