"""Loads, stores, address mapping and mbarrier instructions (PTX ISA 9.7.9, 9.7.13.15)."""
from __future__ import annotations

import numpy as np

from .isa import BLOCK, SLEEP, family, unsupported
from .machine import GENERIC_WINDOW, LOCAL_GENERIC_BASE, SHARED_GENERIC_BASE, role_of
from .mbarrier import (INIT_UNORDERED, Mbarrier, check_use, init_notes, initialise, note_acquire, note_signal,
                       released, warp_key)
from .ops_async import on_shared_write
from .ordering import generic_write
from .ptx import Addr, ParamSym, Sink, Vec
from .simt import WARP, from_bits, lane_addresses, type_bits, uniform_address, uniform_value
from .state import (CLUSTER_RANK_SHIFT, POISON_BYTE, SHARED_OFFSET_MASK, Hazard, SharedAddressing, smem_gather,
                    smem_read, smem_write, store_shared, store_shared_rows)



def _space(parts) -> str:
    for p in parts:
        if p in ("param", "global", "shared", "shared::cta", "shared::cluster", "local", "const"):
            return p
    return "generic"


def _shared(ex, w, addr: int, space: str):
    return SharedAddressing.resolve(w.cta, int(addr), cluster_scope=(space == "shared::cluster"))


def _lanes_cta(ex, w, space: str, addrs: list):
    """The CTA whose shared memory every address names (each carries the CTA's rank above bit 24), or None when they
    name several (resolved lane by lane then)."""
    rank = (addrs[0] & 0xFFFFFFFF) >> CLUSTER_RANK_SHIFT
    if any((a & 0xFFFFFFFF) >> CLUSTER_RANK_SHIFT != rank for a in addrs):
        return None
    return _shared(ex, w, addrs[0], space)[0]


def _read_lanes(ex, w, space: str, addrs: list, n: int) -> np.ndarray:
    """[lanes, n] bytes: _read_bytes at each lane's address, in lane order (in one step where they share a space)."""
    if space in ("param", "global"):
        return ex.gmem.gather(addrs, n)
    cta = _lanes_cta(ex, w, space, addrs) if space.startswith("shared") else None
    if cta is None:
        return np.stack([_read_bytes(ex, w, space, a, n) for a in addrs])
    return smem_gather(cta, [a & SHARED_OFFSET_MASK for a in addrs], n)


def _write_lanes(ex, w, space: str, addrs: list, rows: np.ndarray) -> None:
    """_write_bytes of each lane's row at its address, in lane order (the data in one step where nothing can tell the
    order: one allocation or CTA, no TMA-store source, no live mbarrier in the way)."""
    n = rows.shape[1]
    if space == "global":
        ex.gmem.scatter(addrs, rows)
        for a in addrs:
            ex.log_store(a, n, w.cta.cluster)
        return
    cta = _lanes_cta(ex, w, space, addrs) if space.startswith("shared") else None
    if cta is None or cta.store_sources:  # (a TMA store's source may read between two lanes' writes)
        for a, row in zip(addrs, rows):
            _write_bytes(ex, w, space, a, row)
        return
    offsets = [a & SHARED_OFFSET_MASK for a in addrs]
    store_shared_rows(cta, offsets, rows, "store")
    for off in offsets:
        generic_write(w, cta, off, n)


def _read_bytes(ex, w, space: str, addr: int, n: int) -> np.ndarray:
    if space in ("param", "global"):
        return ex.gmem.read(int(addr), n)
    if space.startswith("shared"):
        cta, off = _shared(ex, w, addr, space)
        return smem_read(cta, off, n)
    raise Hazard(f"loads from the {space} space are not implemented")


def _write_bytes(ex, w, space: str, addr: int, data: np.ndarray) -> None:
    if space == "global":
        ex.gmem.write(int(addr), data)
        ex.log_store(addr, data.size, w.cta.cluster)
        return
    if space.startswith("shared"):
        cta, off = _shared(ex, w, addr, space)
        on_shared_write(ex, w, cta, off, data.size)
        store_shared(cta, off, data, "store")
        generic_write(w, cta, off, data.size)
        return
    raise Hazard(f"stores to the {space} space are not implemented")


def local_frame(ex, w) -> np.ndarray:
    """[lane, byte]: the threads' local memory, one frame of every .local variable the kernel and its functions
    declare (emu.ptx: one frame per function, not per call, as recursion is refused), poisoned until written."""
    if w.local is None:
        w.local = np.full((WARP, max(ex.kernel.local_layout.static_bytes, 1)), POISON_BYTE, np.uint8)
    return w.local


def _local_bytes(ex, w, lane: int, addr: int, n: int) -> np.ndarray:
    """A live view of n bytes of lane's local memory at its local address `addr`."""
    frame = local_frame(ex, w)
    if addr + n > frame.shape[1]:
        raise Hazard(f"a local access of {n} bytes at {addr:#x} is outside the thread's {frame.shape[1]}-byte local "
                     "frame (the .local variables its kernel and functions declare)")
    return frame[lane, addr:addr + n]


def generic_space(addr: int) -> tuple[str, int]:
    """(state space, address in it) of a generic address (PTX ISA 6.4.1.1 "Generic Addressing": the shared and local
    windows inside the generic space, everything else global; the windows' places are the emulator's choice,
    emu.machine)."""
    for space, base in (("shared", SHARED_GENERIC_BASE), ("local", LOCAL_GENERIC_BASE)):
        if base <= addr < base + GENERIC_WINDOW:
            return space, addr - base
    return "global", addr


def read_thread(ex, w, lane: int, space: str, addr: int, n: int, what: str = "") -> np.ndarray:
    """n bytes one thread reads at `addr` of `space` (local, generic, or a shared space); `what`: the instruction,
    whose global reads are checked against programmatic dependent launch (Machine.check_global_access)."""
    if space == "generic":
        space, addr = generic_space(addr)
    if space == "local":
        return _local_bytes(ex, w, lane, addr, n).copy()
    if space == "global" and what:
        ex.check_global_access(w, np.arange(WARP) == lane, what, reads=[addr])
    return _read_bytes(ex, w, space, addr, n)


def _write_thread(ex, w, lane: int, space: str, addr: int, data: np.ndarray) -> None:
    if space == "generic":
        space, addr = generic_space(addr)
    if space == "local":
        _local_bytes(ex, w, lane, addr, data.size)[:] = data
        return
    if space == "global":
        ex.check_global_access(w, np.arange(WARP) == lane, "a generic store")
    _write_bytes(ex, w, space, addr, data)


def call_param(w, name: str, size: int) -> np.ndarray:
    """[lane, byte]: a call parameter's per-thread storage (emu.ptx.ParamSym), undefined (poisoned) until written."""
    rows = w.call_params.get(name)
    if rows is None:
        rows = w.call_params[name] = np.full((WARP, size), POISON_BYTE, np.uint8)
    return rows


@family("ld", "st")
class LoadStore:
    """ld/st.{param,global,shared{::cta,::cluster},local,const}{.vN}.type and the generic forms (no space: the
    address's window decides, PTX ISA 6.4.1.1) (PTX ISA 9.7.9.8, 9.7.9.10), with the cache operators
    of PTX ISA 9.7.9.1 "Cache Operators" (ld: .ca .cg .cs .lu .cv; st: .wb .cg .cs .wt, e.g. st.global.wt of
    __stwt): they choose how caches hold the line, never the value a single thread's access moves. ld/st.param of a
    call's parameter (emu.ptx.ParamSym: `[param0]`, `[f_param_0]`, `[func_retval0]`) moves the thread's own copy."""

    CACHE_OPERATORS = {"ld": ("ca", "cg", "cs", "lu", "cv"), "st": ("wb", "cg", "cs", "wt")}

    @staticmethod
    def decode(ins):
        parts = ins.parts[1:]
        space = _space(parts)
        if space not in ("param", "global", "shared", "shared::cta", "shared::cluster", "local", "generic") \
                and not (space == "const" and ins.base == "ld"):
            raise unsupported(ins, f"state space {space}")
        vec = 1
        for p in parts:
            if p in ("v2", "v4", "v8"):
                vec = int(p[1:])
            elif p not in (space, parts[-1], "weak", "relaxed", "volatile", "nc", "L1::no_allocate",
                           "L2::cache_hint") + LoadStore.CACHE_OPERATORS[ins.base] \
                    and not p.startswith(("L1::", "L2::")):
                raise unsupported(ins, f"modifier .{p}")
        addr_op = ins.operands[1] if ins.base == "ld" else ins.operands[0]
        if space == "param" and isinstance(addr_op, Addr) and isinstance(addr_op.base, ParamSym):
            return "call_param", vec, parts[-1]
        if ins.base == "ld" and space == "param" and ins.parts[-1] not in ("b8", "b16", "b32", "b64", "u8", "u32",
                                                                            "u64", "s32", "u16"):
            raise unsupported(ins)
        # constant memory is global memory, read-only, here (the module's .const variables)
        return "global" if space == "const" else space, vec, parts[-1]

    @staticmethod
    def execute(ex, w, ins, mask):
        space, vec, ty = ins.info
        if space in ("call_param", "local", "generic"):
            return _per_thread(ex, w, ins, mask, space, vec, ty)
        width = 32 if space.startswith("shared") else 64
        esize = type_bits(ty) // 8
        addr_op = ins.operands[1] if ins.base == "ld" else ins.operands[0]
        addrs = lane_addresses(ex, w, addr_op, width)
        if space == "global":
            ex.check_global_access(w, mask, ins.opcode, reads=addrs[mask] if ins.base == "ld" else None)
        misaligned = mask & (addrs % np.uint64(esize * vec) != 0)
        if misaligned.any():
            lane = int(np.flatnonzero(misaligned)[0])
            raise Hazard(f"{ins.opcode}: lane {lane} accesses {esize * vec} bytes at {int(addrs[lane]):#x}, not a multiple "
                         f"of {esize * vec} (PTX ISA 6.4.1: the address must be naturally aligned to the access size)")
        lanes = np.flatnonzero(mask)
        lane_addrs = addrs[lanes].tolist()
        if ins.base == "ld":
            dst = ins.operands[0]
            regs = dst.items if isinstance(dst, Vec) else (dst,)
            # each lane's bytes, its vec elements little-endian, the rows in lane order
            values = _read_lanes(ex, w, space, lane_addrs, esize * vec).view(f"<u{esize}")
            for i, r in enumerate(regs):
                bits = np.zeros(WARP, np.uint64)
                bits[lanes] = values[:, i]
                w.write(r, from_bits(bits, ty), ty, mask)
            return
        src = ins.operands[1]
        items = src.items if isinstance(src, Vec) else (src,)
        vals = [w.read_bits(it, ty, ex) for it in items]
        rows = np.stack(vals, axis=1)[lanes].astype(f"<u{esize}").view(np.uint8)  # [lanes, vec * esize]
        _write_lanes(ex, w, space, lane_addrs, rows)


def _per_thread(ex, w, ins, mask, space: str, vec: int, ty: str) -> None:
    """ld/st of memory each thread has its own of (a call parameter, local memory), or through generic addresses
    (each lane's window resolved on its own): lane by lane, in lane order."""
    esize = type_bits(ty) // 8
    n = esize * vec
    addr_op = ins.operands[1] if ins.base == "ld" else ins.operands[0]
    if space == "call_param":
        size = ex.kernel.param_vars[addr_op.base.name]
        if addr_op.offset < 0 or addr_op.offset + n > size:
            raise Hazard(f"{ins.opcode}: {n} bytes at offset {addr_op.offset} of the {size}-byte parameter "
                         f"{addr_op.base.name.split('@')[0]}")
        rows = call_param(w, addr_op.base.name, size)[:, addr_op.offset:addr_op.offset + n]
        addrs = None
    else:
        addrs = lane_addresses(ex, w, addr_op, 64)
        misaligned = mask & (addrs % np.uint64(n) != 0)
        if misaligned.any():
            lane = int(np.flatnonzero(misaligned)[0])
            raise Hazard(f"{ins.opcode}: lane {lane} accesses {n} bytes at {int(addrs[lane]):#x}, not a multiple of "
                         f"{n} (PTX ISA 6.4.1: the address must be naturally aligned to the access size)")
    lanes = np.flatnonzero(mask)
    if ins.base == "ld":
        dst = ins.operands[0]
        regs = dst.items if isinstance(dst, Vec) else (dst,)
        data = np.zeros((WARP, n), np.uint8)
        for lane in lanes:
            data[lane] = rows[lane] if addrs is None else read_thread(ex, w, int(lane), space, int(addrs[lane]), n,
                                                                      ins.opcode)
        values = data.view(f"<u{esize}")
        for i, r in enumerate(regs):
            w.write(r, from_bits(values[:, i].astype(np.uint64), ty), ty, mask)
        return
    src = ins.operands[1]
    items = src.items if isinstance(src, Vec) else (src,)
    data = np.stack([w.read_bits(it, ty, ex) for it in items], axis=1).astype(f"<u{esize}").view(np.uint8)
    for lane in lanes:
        if addrs is None:
            rows[lane] = data[lane]
        else:
            _write_thread(ex, w, int(lane), space, int(addrs[lane]), data[lane])


def _flush_subnormal(x: np.float32) -> np.float32:
    return np.float32(np.copysign(0.0, x)) if 0 < abs(x) < np.finfo(np.float32).tiny else x


@family("atom", "red")
class AtomicAdd:
    """atom{.sem}{.scope}.global.add.type d, [a], b and red{.sem}{.scope}.global.add.type [a], b (PTX ISA "atom",
    "red"): an indivisible read-modify-write of the global word at a; atom returns the old value. A warp's lanes
    apply theirs one after another (the ISA orders same-address atomics only as some serial order; the emulator's
    is lane order). .add.f32 rounds to nearest even and flushes subnormal inputs and results to sign-preserving
    zero (PTX ISA "atom" / "red"). The address must be aligned to the type's size. Only .add on .global is here."""

    TYPES = {"f32": np.float32, "u32": np.uint32, "s32": np.int32, "u64": np.uint64}
    QUALIFIERS = {"relaxed", "acquire", "release", "acq_rel", "cta", "cluster", "gpu", "sys", "global"}

    @staticmethod
    def decode(ins):
        parts = ins.parts[1:]
        if len(parts) < 3 or parts[-2] != "add" or parts[-1] not in AtomicAdd.TYPES or "global" not in parts[:-2] \
                or set(parts[:-2]) - AtomicAdd.QUALIFIERS:
            raise unsupported(ins, "only atom/red .global.add.{f32,u32,s32,u64}")
        return parts[-1]

    @staticmethod
    def execute(ex, w, ins, mask):
        ty = ins.info
        dt = AtomicAdd.TYPES[ty]
        esize = np.dtype(dt).itemsize
        ex.check_global_access(w, mask, ins.opcode)
        returns = ins.base == "atom"
        addr_op, b_op = ins.operands[1:3] if returns else ins.operands[:2]
        addrs = lane_addresses(ex, w, addr_op, 64)
        vals = w.read(b_op, ty, ex)
        old = np.zeros(WARP, dt)
        for lane in np.flatnonzero(mask):
            a = int(addrs[lane])
            if a % esize:
                raise Hazard(f"{ins.opcode} at {a:#x}: not aligned to {esize} bytes (PTX ISA \"atom\")")
            cur = ex.gmem.read(a, esize).view(dt)[0]
            if ty == "f32":
                new = _flush_subnormal(np.float32(_flush_subnormal(cur) + _flush_subnormal(vals[lane])))
            else:
                new = dt(cur + vals[lane])
            ex.gmem.write(a, np.array([new], dt).view(np.uint8))
            ex.log_store(a, esize, w.cta.cluster, atomic=True)
            old[lane] = cur
        if returns:
            w.write(ins.operands[0], old, ty, mask)


@family("mapa")
class Mapa:
    """mapa.shared::cluster.u32 d, a, rank: a's shared location in CTA `rank` of the cluster (PTX ISA 9.7.9.22)."""

    @staticmethod
    def decode(ins):
        if ins.opcode != "mapa.shared::cluster.u32":
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        d, a, rank = ins.operands
        addr = w.read_bits(a, "u32", ex) & np.uint64(SHARED_OFFSET_MASK)
        r = w.read_bits(rank, "u32", ex)
        if (r[mask] >= len(w.cta.cluster.ctas)).any():
            raise Hazard(f"mapa to CTA rank {r[mask].max()} outside the cluster of {len(w.cta.cluster.ctas)}")
        w.write(d, from_bits((r << np.uint64(CLUSTER_RANK_SHIFT)) | addr, "u32"), "u32", mask)


class AwaitInit:
    """What a warp that used an mbarrier no thread has initialised yet waits for (MbarrierOps: the use is retried once
    the init happens; if it never does, the deadlock report names this)."""

    def __init__(self, cta, offset: int):
        self.cta, self.offset = cta, offset

    def describe(self) -> str:
        return (f"mbarrier.init at CTA{self.cta.rank}+{self.offset:#x} (the warp used that mbarrier before any thread "
                "initialised it)")


def distinct_addresses(addrs, lanes) -> tuple:
    """The lanes' addresses, each once, in lane order (mostly one: every lane names the same mbarrier)."""
    first = int(addrs[lanes[0]])
    return (first,) if (addrs[lanes] == first).all() else tuple({int(addrs[lane]): None for lane in lanes})


def await_uninitialised(ex, w, ins, addrs: tuple, cluster_scope: bool) -> bool:
    """Using an mbarrier before its mbarrier.init is ordered before the use is undefined (PTX ISA 9.7.13.15.9: the
    object must be initialised before any other mbarrier operation on it). A hardware-verified kernel does it and
    survives (the init comes in the first instructions of warp 0, the use later on another warp): the warp waits for
    the init, with a Note. `addrs`: the distinct addresses the lanes name, in lane order. True when the warp must
    wait."""
    for addr in addrs:
        cta, off = SharedAddressing.resolve(w.cta, addr, cluster_scope)
        if off not in cta.mbarriers:
            init_notes(ex, ins.site())(INIT_UNORDERED, f"warp {w.warp_id} of CTA rank {w.cta.rank} uses the mbarrier at "
                                                       f"{off:#x} of CTA rank {cta.rank} before any thread initialised "
                                                       "it (no barrier orders the init before this use)")
            w.blocked_on = AwaitInit(cta, off)
            cta.awaiting_init.setdefault(off, []).append(w)
            return True
    return False


def mbarrier_at(ex, w, addr: int, cluster_scope: bool, what: str) -> Mbarrier:
    cta, off = SharedAddressing.resolve(w.cta, addr, cluster_scope)
    if off % 8:
        raise Hazard(f"{what}: mbarrier address {addr:#x} is not 8-byte aligned")
    bar = cta.mbarriers.get(off)
    if bar is None:
        raise Hazard(f"{what}: no initialised mbarrier at shared offset {off:#x} of CTA rank {cta.rank}")
    if warp_key(w) not in bar.ordered_users:  # (else check_use returns at once: no note callback to make)
        check_use(bar, w, what, note=init_notes(ex, f"PTX line {w.last_line} ({what})"))
    return bar


def lane_mbarriers(ex, w, addrs, lanes, cluster_scope: bool, what: str) -> list:
    """mbarrier_at for each lane, resolved once per distinct address: the lanes of one instruction mostly name one
    mbarrier, and repeating the lookup and its initialisation check for the same warp and barrier changes nothing."""
    found = {}
    out = []
    for lane in lanes:
        addr = int(addrs[lane])
        bar = found.get(addr)
        if bar is None:
            bar = found[addr] = mbarrier_at(ex, w, addr, cluster_scope, what)
        out.append(bar)
    return out


@family("mbarrier")
class MbarrierOps:
    """mbarrier.init / arrive / arrive.expect_tx / try_wait.parity / test_wait.parity (PTX ISA 9.7.13.15)."""

    @staticmethod
    def decode(ins):
        parts = ins.parts[1:]
        op = parts[0]
        mods = set(parts[1:])
        space = "shared::cluster" if "shared::cluster" in mods else "shared"
        allowed = {"shared", "shared::cta", "shared::cluster", "b64", "release", "acquire", "cta", "cluster",
                   "relaxed", "parity", "expect_tx"}
        if op not in ("init", "arrive", "try_wait", "test_wait", "expect_tx") or mods - allowed:
            raise unsupported(ins)
        if op in ("try_wait", "test_wait") and "parity" not in mods:
            raise unsupported(ins, "phase-token waits")
        if op == "init" and space == "shared::cluster":
            raise unsupported(ins)
        return op, "expect_tx" in mods, space

    @staticmethod
    def execute(ex, w, ins, mask):
        op, expect_tx, space = ins.info
        cl = w.cta.cluster
        if op in ("try_wait", "test_wait"):
            return _parity_wait(ex, w, ins, mask, space == "shared::cluster")
        lanes = np.flatnonzero(mask)
        if op == "init":
            addrs = lane_addresses(ex, w, ins.operands[0], 32)
            counts = w.read(ins.operands[1], "u32", ex)
            for lane in lanes:
                cta, off = SharedAddressing.resolve(w.cta, int(addrs[lane]), False)
                if off % 8:
                    raise Hazard(f"mbarrier.init at {off:#x}: not 8-byte aligned")
                initialise(cta, off, int(counts[lane]), w, int(lane), ins.line, ex.clock,
                           lambda rule, precedent, detail: ex.note(rule, f"{ins.where()} ({role_of(w.warp_id)})",
                                                                   precedent, detail))
                smem_write(cta, off, np.zeros(8, np.uint8))
                for waiter in cta.awaiting_init.pop(off, []):
                    waiter.blocked_on = None
            return None
        if op in ("arrive", "expect_tx"):
            state_op = ins.operands[0]
            addr_op = ins.operands[1]
            addrs = lane_addresses(ex, w, addr_op, 32)
            if await_uninitialised(ex, w, ins, distinct_addresses(addrs, lanes), space == "shared::cluster"):
                return BLOCK
            extra = w.read(ins.operands[2], "u32", ex) if len(ins.operands) > 2 else None
            tokens = np.zeros(WARP, np.uint64)
            release = released(w, ex.clock)  # the same for every lane of the warp
            # The lanes mostly signal one mbarrier: signalling it again in the same phase adds nothing (the same
            # release, merged by maximum), and a whole warp's 32 merges were 3% of a K-split schedule
            signalled, signalled_phase = None, None
            for lane, bar in zip(lanes, lane_mbarriers(ex, w, addrs, lanes, space == "shared::cluster", ins.opcode)):
                if bar is not signalled or bar.phase != signalled_phase:
                    note_signal(bar, w, ex.clock, release)
                    signalled, signalled_phase = bar, bar.phase
                if op == "expect_tx":
                    bar.expect_tx(int(extra[lane]), ins.opcode)
                    continue
                if expect_tx:
                    bar.expect_tx(int(extra[lane]), ins.opcode)
                    tokens[lane] = bar.arrive(1, ins.opcode)
                else:
                    tokens[lane] = bar.arrive(int(extra[lane]) if extra is not None else 1, ins.opcode)
            cl.progress += 1
            if not isinstance(state_op, Sink) and op == "arrive":
                w.write(state_op, tokens, "b64", mask)
            return None


def _parity_wait(ex, w, ins, mask, cluster_scope: bool):
    """mbarrier.try_wait.parity / test_wait.parity p, [addr], parity: per lane, whether the phase of that parity has
    completed (PTX ISA 9.7.13.15.16); a warp none of whose lanes saw it complete sleeps on the barrier (SLEEP)."""
    p_op, addr_op, parity_op = ins.operands[:3]
    addr = uniform_address(ex, w, addr_op, 32, mask)
    if addr is not None:  # every lane names one mbarrier (a waiting warp's usual case): one evaluation, no lane vectors
        cta, off = SharedAddressing.resolve(w.cta, addr, cluster_scope)
        bar = cta.mbarriers.get(off)
        if bar is None:  # (await_uninitialised's case: the warp waits for the init)
            if await_uninitialised(ex, w, ins, (addr,), cluster_scope):
                return BLOCK
        parity = uniform_value(w, parity_op, "u32", mask)
        if parity is not None:
            key = warp_key(w)
            if bar is None or key not in bar.ordered_users:  # (else mbarrier_at would find what we have)
                bar = mbarrier_at(ex, w, addr, cluster_scope, ins.opcode)
            ok = _phase_seen(w, key, bar, parity)
            w.write(p_op, ok, "pred", mask)
            if not ok:
                w.sleep_key = (bar, bar.version)
                return SLEEP
            return None
    lanes = np.flatnonzero(mask)
    addrs = lane_addresses(ex, w, addr_op, 32)
    if await_uninitialised(ex, w, ins, distinct_addresses(addrs, lanes), cluster_scope):
        return BLOCK
    parity = w.read(parity_op, "u32", ex)
    done = np.zeros(WARP, bool)
    last = None
    # one evaluation per distinct (mbarrier, parity), in lane order: the lanes of a wait mostly name one barrier
    # and one parity, and the acquire and the warp's wait record are the warp's, not a lane's
    codes = (addrs[lanes].astype(np.uint64) << np.uint64(1)) | (parity[lanes].astype(np.uint64) & np.uint64(1))
    if (codes == codes[0]).all():
        groups = [lanes]
    else:
        distinct, first = np.unique(codes, return_index=True)
        groups = [lanes[codes == distinct[i]] for i in np.argsort(first)]
    bars = lane_mbarriers(ex, w, addrs, [group[0] for group in groups], cluster_scope, ins.opcode)
    key = warp_key(w)
    for group, bar in zip(groups, bars):
        done[group] = _phase_seen(w, key, bar, int(parity[group[0]]))
        if group[-1] == lanes[-1]:
            last = bar  # the highest lane's barrier: what a warp still waiting sleeps on
    w.write(p_op, done, "pred", mask)
    if not done[mask].any():
        w.sleep_key = (last, last.version)
        return SLEEP
    return None


def _phase_seen(w, key, bar, parity: int) -> bool:
    """Whether the phase of `parity` has completed on `bar`, as warp w's (key: warp_key(w)) parity wait sees it: the
    acquire of a completed phase (and the warp's wait record), or the reason a failing wait was lapped."""
    if bar.phase_complete(parity):
        note_acquire(bar, w)
        bar.waited[key] = bar.phase
        bar.lapped.pop(key, None)
        return True
    why = bar.lapped_wait(key, parity)
    if why:
        bar.lapped[key] = why
    return False
