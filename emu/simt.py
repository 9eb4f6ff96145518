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
    bits = _BITS.get(ty)
    return bits if bits is not None else np.dtype(np_type(ty)).itemsize * 8


# per PTX type: (its numpy dtype, the unsigned dtype of its width): the conversions below run for every register
# operand, so the lookups are made once here
_DTYPES = {ty: (np.dtype(dt), np.dtype(_UNSIGNED[np.dtype(dt).itemsize])) for ty, dt in _NP.items()}
_BITS = {ty: np.dtype(dt).itemsize * 8 for ty, dt in _NP.items()}
_U64 = np.dtype(np.uint64)
LOW_BITS = {bits: np.uint64((1 << bits) - 1) for bits in (8, 16, 32)}  # the mask of a narrower type's bits
_UNIFORM_TYPES = {"b32": 0xFFFFFFFF, "u32": 0xFFFFFFFF, "b64": (1 << 64) - 1, "u64": (1 << 64) - 1}  # (uniform_value)
NO_LANES = bytes(WARP)  # a lane vector with no lane set, as bytes: comparing bytes is the cheapest test of a mask
ALL_LANES = bytes([1]) * WARP


def _dtypes(ty: str) -> tuple:
    found = _DTYPES.get(ty)
    return found if found is not None else (np_type(ty), None)  # np_type names the unknown type


def to_bits(values: np.ndarray, ty: str) -> np.ndarray:
    """Lane values of PTX type `ty` -> their bits zero-extended to uint64 (a new array)."""
    dt, unsigned = _dtypes(ty)
    v = values if type(values) is np.ndarray else np.asarray(values)
    if v.dtype != dt:
        v = v.astype(dt)
    return v.view(unsigned).astype(np.uint64)


def from_bits(bits: np.ndarray, ty: str) -> np.ndarray:
    """Register bits (uint64 lane vector) -> the lane values as PTX type `ty` (a new array)."""
    dt, unsigned = _dtypes(ty)
    return bits.astype(unsigned).view(dt)


class Warp:
    """One warp: per-lane program counters, exit flags and registers.

    Divergence and reconvergence: the warp executes, each step, the lanes whose program counter is the
    smallest among its runnable lanes. Lanes that branched ahead wait there until the others catch up,
    so structured branches reconverge at their join point and loops run lanes in lockstep.

    Most of the time every live lane is at one PC (the warp is converged): `upc` holds that PC and `live` (a read-only
    lane vector, replaced, never changed in place) names the lanes, so choosing the next lanes and moving them on
    costs no vector work. Once a handler moves some lanes (through `pc`, the per-lane vector) the warp counts as
    diverged (`upc` = -1) until select_lanes finds every live lane at one PC again.
    """

    def __init__(self, cta, warp_id: int, nthreads: int, kernel_regs: dict):
        self.cta = cta
        self.warp_id = warp_id
        self.nthreads = nthreads  # threads of this warp that exist (blockDim may not be a multiple of 32)
        self._pcs = np.zeros(WARP, np.int64)
        self.upc = 0
        self.exited = np.arange(WARP) >= nthreads
        self._lanes_changed()
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
        self.local = None  # [lane, byte] the threads' .local frames, made at their first local access (ops_memory)
        self.call_params: dict = {}  # ParamSym name -> [lane, byte]: call arguments, formals, return values
        self.frames: list = []  # the calls the lanes are in, innermost last (ops_control.Call)
        self.last_line = 0

    # -------------------------------------------------------------- identity
    @property
    def tid(self) -> np.ndarray:
        return self.warp_id * WARP + np.arange(WARP)

    def _lanes_changed(self) -> None:
        live = ~self.exited
        live.flags.writeable = False
        self.live = live
        self.live_bytes = live.tobytes()
        self.all_lanes = self.live_bytes == ALL_LANES  # every one of the 32 lanes is live
        self.done = self.live_bytes == NO_LANES  # every lane has exited (the scheduler asks per step)

    def exit_lanes(self, mask: np.ndarray) -> None:
        running = not self.done
        self.exited |= mask
        self._lanes_changed()
        if running and self.done:
            self.cta.running -= 1

    @property
    def pc(self) -> np.ndarray:
        """The lanes' program counters (writable: a handler that moves some lanes writes here; the warp then counts as
        diverged until select_lanes finds every live lane at one PC). Entries of exited lanes mean nothing."""
        if self.upc >= 0:
            self._pcs[:] = self.upc
            self.upc = -1
        return self._pcs

    def select_lanes(self) -> tuple[int, np.ndarray]:
        """(pc, lanes): the smallest PC of the live lanes and the lanes at it (`live` itself when converged)."""
        if self.upc >= 0:
            return self.upc, self.live
        pcs, live = self._pcs, self.live
        pc = int(pcs[live].min())
        lanes = live & (pcs == pc)
        if lanes.tobytes() == self.live_bytes:  # reconverged
            self.upc = pc
            return pc, live
        return pc, lanes

    def advance(self, lanes: np.ndarray) -> None:
        """The lanes (as select_lanes named them) move on to the next instruction."""
        if lanes is self.live and self.upc >= 0:
            self.upc += 1
        else:
            self.pc[lanes] += 1

    def jump(self, lanes: np.ndarray, target: int) -> None:
        """The lanes (as select_lanes named them) continue at `target`; the other live lanes at their PC move on."""
        if lanes is self.live and self.upc >= 0:
            self.upc = target
            return
        pcs = self.pc
        here = self.live & (pcs == pcs[lanes][0])
        pcs[lanes] = target
        pcs[here & ~lanes] += 1

    # -------------------------------------------------------------- registers
    def _reg(self, name: str) -> np.ndarray:
        r = self.regs.get(name)
        if r is None:
            # Registers start undefined (PTX ISA 5.1.1): poison them so a read of one is visible.
            r = np.full(WARP, 0xFFFFFFFFFFFFFFFF, np.uint64) if not _is_pred(name, self.reg_types) else np.zeros(WARP, bool)
            self.regs[name] = r
        return r

    def register(self, name: str) -> np.ndarray:
        """A register's lane vector itself: its bits (uint64), or bools for a predicate; not a copy, so the caller only
        reads it."""
        if self.pending_tmem_ld and name in self.pending_tmem_ld:
            self.pending_tmem_ld[name].finish()
        r = self.regs.get(name)
        return r if r is not None else self._reg(name)

    def read(self, op, ty: str, ctx=None) -> np.ndarray:
        """The operand's lane values as PTX type `ty` (a new numpy vector of 32)."""
        kind = type(op)
        if kind is Reg:
            name = op.name
            if self.pending_tmem_ld and name in self.pending_tmem_ld:
                self.pending_tmem_ld[name].finish()
            r = self.regs.get(name)
            if r is None:
                r = self._reg(name)
            if ty == "pred":
                return r.copy()
            if r.dtype == bool:
                return r.astype(np_type(ty))
            return from_bits(r, ty)
        if kind is Imm:
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
        if kind is Sym:
            if ctx is None:
                raise EmulatorError(f"symbol {op.name} needs a context")
            return np.full(WARP, ctx.symbol_address(self, op.name), np.uint64).astype(np_type(ty))
        raise EmulatorError(f"cannot read operand {op!r} as .{ty}")

    def read_bits(self, op, ty: str, ctx=None) -> np.ndarray:
        """to_bits(read(op, ty, ctx), ty): the operand read as `ty`, its bits zero-extended to uint64 (a new vector).
        A register's are its own low bits, taken without the round trip through `ty` (two conversions each way, a
        few us an operand)."""
        if type(op) is Reg and ty != "pred":
            name = op.name
            if self.pending_tmem_ld and name in self.pending_tmem_ld:
                self.pending_tmem_ld[name].finish()
            r = self.regs.get(name)
            if r is None:
                r = self._reg(name)
            if r.dtype is _U64:  # (a predicate's bools read as a number are 0 or 1 of that type: below)
                bits = _BITS.get(ty)
                if bits == 64:
                    return r.copy()
                if bits is not None:
                    return r & LOW_BITS[bits]
        return to_bits(self.read(op, ty, ctx), ty)

    def write(self, op, values: np.ndarray, ty: str, mask: np.ndarray) -> None:
        kind = type(op)
        if kind is Sink:
            return
        if kind is not Reg:
            raise EmulatorError(f"cannot write operand {op!r}")
        if ty != "pred":
            self.set_bits(op, to_bits(values if getattr(values, "shape", None) == (WARP,)
                                      else np.broadcast_to(values, (WARP,)), ty), mask)
            return
        name = op.name
        if self.pending_tmem_ld and name in self.pending_tmem_ld:
            self.pending_tmem_ld[name].finish()
        r = self.regs.get(name)
        if r is None:
            r = self._reg(name)
        if type(values) is bool and mask is self.live and self.all_lanes:
            r.fill(values)
        else:
            r[mask] = bool(values) if type(values) is bool or np.ndim(values) == 0 else np.asarray(values, bool)[mask]

    def set_bits(self, op, bits: np.ndarray, mask: np.ndarray) -> None:
        """Write register bits (a new uint64 lane vector, zero-extended, which the caller keeps no reference to) to the
        operand, for the lanes in mask: what write() does once it has the bits."""
        kind = type(op)
        if kind is Sink:
            return
        if kind is not Reg:
            raise EmulatorError(f"cannot write operand {op!r}")
        name = op.name
        if self.pending_tmem_ld and name in self.pending_tmem_ld:
            self.pending_tmem_ld[name].finish()
        r = self.regs.get(name)
        if r is None:
            if mask is self.live and self.all_lanes and not _is_pred(name, self.reg_types):
                self.regs[name] = bits  # a first write by every lane: no undefined value to keep
                return
            r = self._reg(name)
        if r.dtype == bool:
            r[mask] = bits[mask] != 0
        elif mask is self.live and self.all_lanes:  # every lane writes: the new bits are the register
            self.regs[name] = bits
        else:
            r[mask] = bits[mask]


def _is_pred(name: str, reg_types: dict) -> bool:
    if name in reg_types:
        return reg_types[name] == "pred"
    base = name.split("@")[0].rstrip("0123456789")
    for decl, ty in reg_types.items():
        if decl.split("@")[0] == base or decl == name:
            return ty == "pred"
    return base == "%p"


def uniform_bits(w, r: np.ndarray, mask: np.ndarray) -> int | None:
    """The value (as an int) that every lane of `mask` holds in the uint64 lane vector `r`, or None if they differ."""
    if mask is w.live and w.all_lanes:
        raw = r.tobytes()
        return int(r[0]) if raw == raw[:8] * WARP else None
    vals = r[mask]
    first = vals[0]
    return int(first) if (vals == first).all() else None


def uniform_value(w, op, ty: str, mask: np.ndarray) -> int | None:
    """An operand of an unsigned or bit type of 32 or 64 bits (register or integer immediate) read as `ty` when every
    lane of `mask` holds the same value: that value as an int; None when the lanes differ (or for another kind of
    operand or type: callers then read lane vectors)."""
    low = _UNIFORM_TYPES.get(ty)
    kind = type(op)
    if low is None:
        return None
    if kind is Reg:
        r = w.register(op.name)
        if r.dtype is not _U64:  # (a predicate's bools)
            return None
        v = uniform_bits(w, r, mask)
        return None if v is None else v & low
    if kind is Imm and not op.is_float:
        return int(op.value) & low
    return None


def uniform_address(ex, w, op: Addr, width: int, mask: np.ndarray) -> int | None:
    """lane_addresses' address when every lane of `mask` names the same one (as an int), else None."""
    base = op.base
    if base is None:
        v = 0
    elif type(base) is Sym:
        v = ex.symbol_address(w, base.name)
    else:
        v = uniform_value(w, base, "b64" if width == 64 else "b32", mask)
        if v is None:
            return None
    return (v + (op.offset & 0xFFFFFFFFFFFFFFFF)) & ((1 << width) - 1)


def lane_addresses(ex, w, op: Addr, width: int = 64) -> np.ndarray:
    """Per-lane byte addresses of an address operand [base+offset] (PTX ISA 6.4.1 "Addresses as operands")."""
    if op.base is None:
        base = np.zeros(WARP, np.uint64)
    elif isinstance(op.base, Sym):
        base = np.full(WARP, ex.symbol_address(w, op.base.name), np.uint64)
    else:
        base = w.read_bits(op.base, f"b{width}")
    return (base + np.uint64(op.offset & 0xFFFFFFFFFFFFFFFF)) & np.uint64((1 << width) - 1 if width < 64 else 0xFFFFFFFFFFFFFFFF)
