"""Loads, stores, address mapping and mbarrier instructions (PTX ISA 9.7.9, 9.7.13.15)."""
from __future__ import annotations

import numpy as np

from .isa import Control, family, unsupported
from .machine import role_of
from .ordering import generic_write
from .mbarrier import Mbarrier, check_use, initialise, note_acquire, note_signal
from .ptx import Addr, Sink, Sym, Vec
from .simt import WARP, from_bits, to_bits, type_bits
from .state import CLUSTER_RANK_SHIFT, SHARED_OFFSET_MASK, Hazard, SharedAddressing, smem_read, smem_write, store_shared

SLEEP = Control("sleep")


def lane_addresses(ex, w, op: Addr, width: int = 64) -> np.ndarray:
    """Per-lane byte addresses of an address operand [base+offset] (PTX ISA 6.4.1 "Addresses as operands")."""
    if op.base is None:
        base = np.zeros(WARP, np.uint64)
    elif isinstance(op.base, Sym):
        base = np.full(WARP, ex.symbol_address(w, op.base.name), np.uint64)
    else:
        base = to_bits(w.read(op.base, f"b{width}"), f"b{width}")
    return (base + np.uint64(op.offset & 0xFFFFFFFFFFFFFFFF)) & np.uint64((1 << width) - 1 if width < 64 else 0xFFFFFFFFFFFFFFFF)


def _space(parts) -> str:
    for p in parts:
        if p in ("param", "global", "shared", "shared::cta", "shared::cluster", "local", "const"):
            return p
    return "generic"


def _shared(ex, w, addr: int, space: str):
    return SharedAddressing.resolve(w.cta, int(addr), cluster_scope=(space == "shared::cluster"))


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
        ex.store_log.append((int(addr), data.size))
        return
    if space.startswith("shared"):
        cta, off = _shared(ex, w, addr, space)
        store_shared(cta, off, data, "store")
        generic_write(w, cta, off, data.size)
        return
    raise Hazard(f"stores to the {space} space are not implemented")


@family("ld", "st")
class LoadStore:
    """ld/st.{param,global,shared{::cta,::cluster}}{.vN}.type (PTX ISA 9.7.9.8, 9.7.9.10)."""

    @staticmethod
    def decode(ins):
        parts = ins.parts[1:]
        space = _space(parts)
        if space not in ("param", "global", "shared", "shared::cta", "shared::cluster"):
            raise unsupported(ins, f"state space {space}")
        vec = 1
        for p in parts:
            if p in ("v2", "v4", "v8"):
                vec = int(p[1:])
            elif p not in (space, parts[-1], "weak", "relaxed", "volatile", "nc", "L1::no_allocate",
                           "L2::cache_hint") and not p.startswith(("L1::", "L2::")):
                raise unsupported(ins, f"modifier .{p}")
        if ins.base == "ld" and space == "param" and ins.parts[-1] not in ("b8", "b16", "b32", "b64", "u8", "u32",
                                                                            "u64", "s32", "u16"):
            raise unsupported(ins)
        return space, vec, parts[-1]

    @staticmethod
    def execute(ex, w, ins, mask):
        space, vec, ty = ins.info
        if space == "global":
            ex.check_global_access(w, mask, ins.opcode)
        width = 32 if space.startswith("shared") else 64
        esize = type_bits(ty) // 8
        addr_op = ins.operands[1] if ins.base == "ld" else ins.operands[0]
        addrs = lane_addresses(ex, w, addr_op, width)
        misaligned = mask & (addrs % np.uint64(esize * vec) != 0)
        if misaligned.any():
            lane = int(np.flatnonzero(misaligned)[0])
            raise Hazard(f"{ins.opcode}: lane {lane} accesses {esize * vec} bytes at {int(addrs[lane]):#x}, not a multiple "
                         f"of {esize * vec} (PTX ISA 6.4.1: the address must be naturally aligned to the access size)")
        if ins.base == "ld":
            dst = ins.operands[0]
            regs = dst.items if isinstance(dst, Vec) else (dst,)
            out = [np.zeros(WARP, np.uint64) for _ in regs]
            for lane in np.flatnonzero(mask):
                raw = _read_bytes(ex, w, space, int(addrs[lane]), esize * vec)
                for i in range(vec):
                    out[i][lane] = int.from_bytes(raw[i * esize:(i + 1) * esize].tobytes(), "little")
            for r, bits in zip(regs, out):
                w.write(r, from_bits(bits, ty), ty, mask)
            return
        src = ins.operands[1]
        items = src.items if isinstance(src, Vec) else (src,)
        vals = [to_bits(w.read(it, ty, ex), ty) for it in items]
        dt = np.dtype(f"<u{esize}")
        for lane in np.flatnonzero(mask):
            data = np.array([v[lane] for v in vals], np.uint64).astype(dt).view(np.uint8)
            _write_bytes(ex, w, space, int(addrs[lane]), data)


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
        addr = to_bits(w.read(a, "u32", ex), "u32") & np.uint64(SHARED_OFFSET_MASK)
        r = to_bits(w.read(rank, "u32", ex), "u32")
        if (r[mask] >= len(w.cta.cluster.ctas)).any():
            raise Hazard(f"mapa to CTA rank {r[mask].max()} outside the cluster of {len(w.cta.cluster.ctas)}")
        w.write(d, from_bits((r << np.uint64(CLUSTER_RANK_SHIFT)) | addr, "u32"), "u32", mask)


def mbarrier_at(ex, w, addr: int, cluster_scope: bool, what: str) -> Mbarrier:
    cta, off = SharedAddressing.resolve(w.cta, addr, cluster_scope)
    if off % 8:
        raise Hazard(f"{what}: mbarrier address {addr:#x} is not 8-byte aligned")
    bar = cta.mbarriers.get(off)
    if bar is None:
        raise Hazard(f"{what}: no initialised mbarrier at shared offset {off:#x} of CTA rank {cta.rank}")
    check_use(bar, w, what)
    return bar


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
            return None
        if op in ("arrive", "expect_tx"):
            state_op = ins.operands[0]
            addr_op = ins.operands[1]
            addrs = lane_addresses(ex, w, addr_op, 32)
            extra = w.read(ins.operands[2], "u32", ex) if len(ins.operands) > 2 else None
            tokens = np.zeros(WARP, np.uint64)
            for lane in lanes:
                bar = mbarrier_at(ex, w, int(addrs[lane]), space == "shared::cluster", ins.opcode)
                note_signal(bar, w, ex.clock)
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
        # try_wait / test_wait .parity
        p_op, addr_op, parity_op = ins.operands[:3]
        addrs = lane_addresses(ex, w, addr_op, 32)
        parity = w.read(parity_op, "u32", ex)
        done = np.zeros(WARP, bool)
        last = None
        for lane in lanes:
            bar = mbarrier_at(ex, w, int(addrs[lane]), space == "shared::cluster", ins.opcode)
            done[lane] = bar.phase_complete(int(parity[lane]))
            if done[lane]:
                note_acquire(bar, w)
            last = bar
        w.write(p_op, done, "pred", mask)
        if not done[mask].any():
            w.sleep_key = (last, last.version)
            return SLEEP
        return None
