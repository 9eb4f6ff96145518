"""Asynchronous instructions: TMA tensor loads and the tcgen05 family (PTX ISA 9.7.9.25, 9.7.16).

Issue and completion are separate: the issuing lane records an AsyncOp; the machine's seeded engine
runs it later. TMA loads complete in any order (each signals its mbarrier with complete-tx);
tcgen05.mma / tcgen05.cp / tcgen05.commit issued by a CTA run in issue order (PTX ISA 9.7.16.6
"pipelined tcgen05 instructions": cp -> mma and mma -> mma by the same thread are ordered, and
commit tracks the completion of all prior asynchronous tcgen05 operations of the thread).
The data semantics live in emu.tma and emu.tcgen05; this module is the glue to the warps.
"""
from __future__ import annotations

import numpy as np

from . import tcgen05, tma
from .isa import BLOCK, family, unsupported
from .machine import AsyncOp
from .mbarrier import check_remote_use, note_signal
from .ops_memory import lane_addresses
from .ptx import Vec
from .simt import to_bits, type_bits
from .state import SHARED_OFFSET_MASK, Hazard, SharedAddressing, smem_write, store_shared


def _cta_group(ins) -> int:
    for p in ins.parts:
        if p.startswith("cta_group::"):
            return int(p.split("::")[1])
    return 1


def _group(cta, n: int) -> list:
    if n == 1:
        return [cta]
    if len(cta.cluster.ctas) < 2:
        raise Hazard("cta_group::2 in a cluster of one CTA")
    even = cta.cluster.ctas[cta.rank & ~1]
    return [even, even.peer]


def _lane(mask) -> list:
    return [int(x) for x in np.flatnonzero(mask)]


def _check_whole_warp(w, ins, mask) -> None:
    live = ~w.exited
    if (live & ~mask).any():
        raise Hazard(f"{ins.opcode} is .sync.aligned: every thread of the warp must execute it together")


# ---------------------------------------------------------------------------------------------- TMA
@family("cp.async.bulk.tensor")
class BulkTensorLoad:
    """cp.async.bulk.tensor.Nd.shared::{cta,cluster}.global.tile.mbarrier::complete_tx::bytes
    {.multicast::cluster}{.cta_group::N}{.L2::cache_hint} [dst], [tmap, {coords}], [mbar]{, ctaMask}{, policy}
    (PTX ISA 9.7.9.25.5.1)."""

    @staticmethod
    def decode(ins):
        p = ins.parts
        dims = p[4]
        allowed = {"shared::cta", "shared::cluster", "global", "tile", "mbarrier::complete_tx::bytes",
                   "multicast::cluster", "L2::cache_hint", "cta_group::1", "cta_group::2", dims}
        # .tile is the default load mode when none is given (PTX ISA 9.7.9.25.5.1 cp.async.bulk.tensor: ".load_mode
        # ... the default is .tile"); nvcc's inline-PTX users (gau-nernst's kernels) omit it.
        if not dims.endswith("d") or set(p[5:]) - allowed or "global" not in p or set(p) & {"im2col", "tile::gather4",
                                                                                               "tile::scatter4"}:
            raise unsupported(ins)
        return {"multicast": "multicast::cluster" in p, "cluster_dst": "shared::cluster" in p,
                "cta_group": _cta_group(ins), "rank": int(dims[:-1])}

    @staticmethod
    def execute(ex, w, ins, mask):
        info = ins.info
        ex.check_global_access(w, mask, ins.opcode)
        dst_op, tens, mbar_op = ins.operands[:3]
        rest = list(ins.operands[3:])
        dst = lane_addresses(ex, w, dst_op, 32)
        mbar = lane_addresses(ex, w, mbar_op, 32)
        tmap_addr = to_bits(w.read(tens.tensor_map, "b64", ex), "b64")
        coords = [w.read(c, "s32", ex) for c in tens.coords]
        if len(coords) != info["rank"]:
            raise Hazard(f"{ins.opcode}: {len(coords)} coordinates for a {info['rank']}-d copy")
        cta_mask = w.read(rest.pop(0), "u16", ex) if info["multicast"] else None
        for lane in _lane(mask):
            tmap = ex.tensor_map(int(tmap_addr[lane]))
            if tmap.rank != info["rank"]:
                raise Hazard(f"{ins.opcode}: the tensor map at {int(tmap_addr[lane]):#x} has rank {tmap.rank}")
            c = [int(x[lane]) for x in coords]
            dst_cta, dst_off = SharedAddressing.resolve(w.cta, int(dst[lane]), info["cluster_dst"])
            if info["multicast"]:
                ranks = [r for r in range(16) if (int(cta_mask[lane]) >> r) & 1]
                if not ranks or max(ranks) >= len(w.cta.cluster.ctas):
                    raise Hazard(f"{ins.opcode}: ctaMask {int(cta_mask[lane]):#x} names CTAs outside the cluster")
                targets = [w.cta.cluster.ctas[r] for r in ranks]
            else:
                targets = [dst_cta]
            mbar_cta, mbar_off = SharedAddressing.resolve(w.cta, int(mbar[lane]), True)
            signals = []
            for t in targets:  # (checked below, at issue: the issuing thread must see each barrier's init)
                # The mbarrier signalled for a destination: the same offset in that CTA; with .cta_group::2 the
                # mbarrier may sit in either CTA of the destination's pair, and the mbar operand's CTA picks
                # which (PTX ISA 9.7.9.25.5.1, .cta_group).
                if info["cta_group"] == 2:
                    sig_cta = t.cluster.ctas[(t.rank & ~1) | (mbar_cta.rank & 1)]
                elif info["multicast"]:
                    sig_cta = t
                else:
                    sig_cta = mbar_cta
                if sig_cta is not w.cta:
                    peer_bar = sig_cta.mbarriers.get(mbar_off)
                    if peer_bar is None:
                        raise Hazard(f"{ins.opcode}: signals shared offset {mbar_off:#x} of CTA rank {sig_cta.rank}, "
                                     f"which holds no initialised mbarrier")
                    check_remote_use(peer_bar, w, ins.opcode)
                    note_signal(peer_bar, w, ex.clock)
                signals.append(sig_cta)
            nbytes = tma.box_bytes(tmap)
            ex.submit(w.cta.cluster, AsyncOp(f"TMA load {c}", _tma_run(ex, tmap, c, targets, dst_off, signals, mbar_off,
                                                                    nbytes, ins), None, ins.line))


@family("cp.async.bulk.shared::cta", "cp.async.bulk.shared::cluster")
class BulkCopyLoad:
    """cp.async.bulk.shared::{cta,cluster}.global.mbarrier::complete_tx::bytes{.L2::cache_hint} [dst], [src], size,
    [mbar]{, policy} (PTX ISA 9.7.9.25.4.1 "cp.async.bulk": a non-tensor bulk copy of `size` bytes from global
    to shared memory, completing `size` bytes of tx-count on the mbarrier; size a multiple of 16, both
    addresses 16-byte aligned; .shared::cta destination since PTX ISA 8.6). .multicast::cluster is not
    implemented."""

    @staticmethod
    def decode(ins):
        p = ins.parts
        allowed = {"shared::cta", "shared::cluster", "global", "mbarrier::complete_tx::bytes", "L2::cache_hint"}
        if set(p[3:]) - allowed or "global" not in p or "mbarrier::complete_tx::bytes" not in p:
            raise unsupported(ins)
        return {"cluster_dst": p[3] == "shared::cluster"}

    @staticmethod
    def execute(ex, w, ins, mask):
        ex.check_global_access(w, mask, ins.opcode)
        dst_op, src_op, size_op, mbar_op = ins.operands[:4]
        dst = lane_addresses(ex, w, dst_op, 32)
        src = lane_addresses(ex, w, src_op, 64)
        size = w.read(size_op, "u32", ex)
        mbar = lane_addresses(ex, w, mbar_op, 32)
        for lane in _lane(mask):
            nbytes, g, d = int(size[lane]), int(src[lane]), int(dst[lane])
            if nbytes % 16 or g % 16 or d % 16:
                raise Hazard(f"{ins.opcode}: size {nbytes}, src {g:#x}, dst {d:#x} must be multiples of 16 (PTX ISA "
                             f"9.7.9.25.4.1)")
            dst_cta, dst_off = SharedAddressing.resolve(w.cta, d, ins.info["cluster_dst"])
            mbar_cta, mbar_off = SharedAddressing.resolve(w.cta, int(mbar[lane]), ins.info["cluster_dst"])
            if mbar_cta is not dst_cta:
                raise Hazard(f"{ins.opcode}: the mbarrier must be in the destination CTA (PTX ISA 9.7.9.25.4.1)")

            def run(dst_cta=dst_cta, dst_off=dst_off, g=g, nbytes=nbytes, mbar_off=mbar_off):
                _deliver(dst_cta, dst_off, ex.gmem.read(g, nbytes), dst_cta, mbar_off, nbytes, f"bulk copy ({ins.where()})")
                ex.stats["bulk_copy_bytes"] = ex.stats.get("bulk_copy_bytes", 0) + nbytes

            ex.submit(w.cta.cluster, AsyncOp(f"bulk copy {g:#x}+{nbytes}", run, None, ins.line))


@family("st.async")
class StoreAsync:
    """st.async{.weak}{.shared::cluster}.mbarrier::complete_tx::bytes{.v2,.v4}.type [a], b, [mbar] (PTX ISA 9.7.9.12
    "st.async", PTX 8.1, sm_90): a non-blocking store of b to the distributed shared memory location a; when it has
    completed, a complete-tx of the stored bytes on the mbarrier mbar. a and mbar are shared::cluster addresses and
    must be in the same CTA (the ISA's restriction on the two operands); the address is aligned to the access size
    (PTX ISA 5.4.4 "Vectors": a vector access is aligned to its total size). The value is read from the registers at
    issue; the bytes land, and the mbarrier is signalled, at completion, in any order with other asynchronous
    operations. Types: b32, b64, u32, u64, s32, s64, f32, f64; .v4 only for 32-bit types."""

    TYPES = {"b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"}

    @staticmethod
    def decode(ins):
        mods = ins.parts[2:-1]
        ty = ins.parts[-1]
        vec = 1
        for m in mods:
            if m in ("v2", "v4"):
                vec = int(m[1:])
            elif m not in ("weak", "cluster", "shared::cluster", "mbarrier::complete_tx::bytes"):
                raise unsupported(ins, f"modifier .{m}")
        if "mbarrier::complete_tx::bytes" not in mods or ty not in StoreAsync.TYPES or (vec == 4 and ty[1:] == "64"):
            raise unsupported(ins)
        return vec, ty

    @staticmethod
    def execute(ex, w, ins, mask):
        vec, ty = ins.info
        dst_op, src, mbar_op = ins.operands[:3]
        dst = lane_addresses(ex, w, dst_op, 32)
        mbar = lane_addresses(ex, w, mbar_op, 32)
        items = src.items if isinstance(src, Vec) else (src,)
        esize = type_bits(ty) // 8
        values = [to_bits(w.read(it, ty, ex), ty) for it in items]
        for lane in _lane(mask):
            nbytes = esize * vec
            if int(dst[lane]) % nbytes:
                raise Hazard(f"{ins.opcode}: address {int(dst[lane]):#x} is not aligned to the {nbytes}-byte access")
            cta, off = SharedAddressing.resolve(w.cta, int(dst[lane]), True)
            bar_cta, bar_off = SharedAddressing.resolve(w.cta, int(mbar[lane]), True)
            if bar_cta is not cta:
                raise Hazard(f"{ins.opcode}: the mbarrier (CTA rank {bar_cta.rank}) and the destination (CTA rank "
                             f"{cta.rank}) must be in the same CTA (PTX ISA 9.7.9.12)")
            bar = bar_cta.mbarriers.get(bar_off)
            if bar is None:
                raise Hazard(f"{ins.opcode}: no initialised mbarrier at shared offset {bar_off:#x} of CTA rank "
                             f"{bar_cta.rank}")
            check_remote_use(bar, w, ins.opcode)
            note_signal(bar, w, ex.clock)
            data = np.array([int(v[lane]) for v in values], np.uint64).astype(f"<u{esize}").view(np.uint8)

            def run(cta=cta, off=off, data=data, bar_off=bar_off, nbytes=nbytes):
                _deliver(cta, off, data, cta, bar_off, nbytes, f"st.async ({ins.where()})")
                ex.stats["st_async_bytes"] = ex.stats.get("st_async_bytes", 0) + nbytes

            ex.submit(w.cta.cluster, AsyncOp(f"st.async {int(dst[lane]):#x}+{nbytes}", run, None, ins.line))


@family("cp.async.bulk.prefetch")
class BulkPrefetch:
    """cp.async.bulk.prefetch.L2.global / cp.async.bulk.prefetch.tensor.Nd.L2.global{.L2::cache_hint} (PTX ISA
    9.7.9.25.4.3 / 9.7.9.25.5.3): an L2 prefetch hint with no architectural effect on memory contents; a no-op here."""

    @staticmethod
    def decode(ins):
        if "L2" not in ins.parts or "global" not in ins.parts:
            raise unsupported(ins)
        return None

    @staticmethod
    def execute(ex, w, ins, mask):
        return None


def _deliver(target, dst_off, data, sig_cta, mbar_off, nbytes, what):
    """An asynchronous copy completes: its bytes land in `target`'s shared memory, then complete-tx of nbytes on
    the mbarrier at mbar_off of sig_cta (PTX ISA 9.7.9.25: the mbarrier::complete_tx::bytes mechanism)."""
    store_shared(target, dst_off, data, what)
    bar = sig_cta.mbarriers.get(mbar_off)
    if bar is None:
        raise Hazard(f"{what} signals shared offset {mbar_off:#x} of CTA rank {sig_cta.rank}: no mbarrier")
    bar.complete_tx(nbytes, f"{what} complete-tx")


def _tma_run(ex, tmap, coords, targets, dst_off, signals, mbar_off, nbytes, ins):
    def run():
        data = tma.tile_bytes(tmap, coords, ex.gmem.read, dst_off)
        for t, sig in zip(targets, signals):
            _deliver(t, dst_off, data, sig, mbar_off, nbytes, f"TMA load ({ins.where()})")
        ex.stats["tma_bytes"] += data.size * len(targets)

    return run


# ---------------------------------------------------------------------------------------------- tcgen05
class _Rendezvous:
    """tcgen05.alloc/dealloc .cta_group::2: one warp of each CTA of the pair issues it (PTX ISA 9.7.16.7.1)."""

    def __init__(self, kind):
        self.kind = kind
        self.waiting = []

    def describe(self):
        return f"tcgen05.{self.kind}.cta_group::2 waiting for the peer CTA's warp"


@family("tcgen05")
class Tcgen05:
    FORMS = {"alloc", "dealloc", "relinquish_alloc_permit", "mma", "cp", "ld", "wait::ld", "wait::st", "commit",
             "fence::before_thread_sync", "fence::after_thread_sync"}

    @staticmethod
    def decode(ins):
        op = ins.parts[1]
        if op not in Tcgen05.FORMS:
            raise unsupported(ins)
        n = _cta_group(ins)
        mods = set(ins.parts[2:])
        if op == "mma":
            kind = next((m.split("::")[1] for m in mods if m.startswith("kind::")), None)
            if kind != "mxf4nvf4" or "block_scale" not in mods:
                raise unsupported(ins, f"kind {kind}")
            collectors = {f"collector::a::{op}" for op in tcgen05.A_COLLECTOR_OPS}
            known = {f"cta_group::{n}", "kind::mxf4nvf4", "block_scale", "block16", "scale_vec::4X"} | collectors
            if mods - known:
                raise unsupported(ins, "modifiers " + ", ".join(sorted(mods - known)))
            usage = sorted(mods & collectors)
            if len(usage) > 1:
                raise unsupported(ins, "more than one .collector::a qualifier")
            # No qualifier means .collector::a::discard (PTX ISA tcgen05.mma, .collector_usage).
            return ("mma", n, 16, usage[0].split("::")[2] if usage else "discard")
        if op == "cp":
            if mods - {f"cta_group::{n}", "32x128b", "warpx4"} or "32x128b" not in mods or "warpx4" not in mods:
                raise unsupported(ins)
            return ("cp", n)
        if op == "ld":
            shape = next((m for m in mods if "x" in m and m[0].isdigit()), None)
            num = next((m for m in mods if m.startswith("x") and m[1:].isdigit()), None)
            if shape not in ("32x32b", "16x256b") or num is None or mods - {"sync", "aligned", shape, num, "b32"}:
                raise unsupported(ins)
            return ("ld", int(num[1:]), shape)
        if op == "commit":
            known = {f"cta_group::{n}", "mbarrier::arrive::one", "shared::cluster", "multicast::cluster", "b64"}
            if mods - known:
                raise unsupported(ins)
            return ("commit", n, "multicast::cluster" in mods)
        return (op, n)

    @staticmethod
    def execute(ex, w, ins, mask):
        op = ins.info[0]
        return _TC[op](ex, w, ins, mask)


def _pair_rendezvous(w, ins, mask, kind: str, payload: tuple):
    """tcgen05.alloc/dealloc .cta_group::2: one warp of each CTA of the pair issues it (PTX ISA 9.7.16.7.1).
    The first warp blocks; the second gets the first's payload back and releases it. None: blocked."""
    group = _group(w.cta, 2)
    attr = f"{kind}_rendezvous"
    rv = getattr(group[0], attr, None)
    if rv is None:
        rv = _Rendezvous(kind)
        setattr(group[0], attr, rv)
    others = [x for x in rv.waiting if x[0].cta is not w.cta]
    if not others:
        rv.waiting.append((w, mask.copy(), payload))
        w.blocked_on = rv
        return None
    peer_w, peer_mask, peer_payload = others[0]
    rv.waiting.remove(others[0])
    peer_w.blocked_on = None
    peer_w.pc[peer_mask] += 1
    w.cta.cluster.progress += 1
    return peer_w, peer_payload


def _tc_alloc(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    n = ins.info[1]
    dst = int(lane_addresses(ex, w, ins.operands[0], 32)[_lane(mask)[0]])
    ncols = int(w.read(ins.operands[1], "u32", ex)[0])
    dsts = [(w.cta, dst)]
    if n == 2:
        met = _pair_rendezvous(w, ins, mask, "alloc", (dst, ncols))
        if met is None:
            return BLOCK
        peer_w, (peer_dst, peer_cols) = met
        if peer_cols != ncols:
            raise Hazard(f"{ins.opcode}: the pair's warps ask for {ncols} and {peer_cols} columns")
        dsts.append((peer_w.cta, peer_dst))
    taddr = tcgen05.tmem_alloc(_group(w.cta, n), ncols)
    for cta, addr in dsts:  # the column address goes to each issuing CTA's shared memory
        owner, off = SharedAddressing.resolve(cta, addr, False)
        smem_write(owner, off, np.array([taddr], np.uint32).view(np.uint8))
    return None


def _tc_dealloc(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    n = ins.info[1]
    taddr = int(w.read(ins.operands[0], "u32", ex)[_lane(mask)[0]])
    ncols = int(w.read(ins.operands[1], "u32", ex)[0])
    if n == 2:
        met = _pair_rendezvous(w, ins, mask, "dealloc", (taddr, ncols))
        if met is None:
            return BLOCK
        _, peer = met
        if peer != (taddr, ncols):
            raise Hazard(f"{ins.opcode}: the pair's warps free different tensor memory ({taddr:#x}/{ncols} vs "
                         f"{peer[0]:#x}/{peer[1]})")
    tcgen05.tmem_dealloc(_group(w.cta, n), taddr, ncols)
    return None


def _tc_relinquish(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    tcgen05.tmem_relinquish(_group(w.cta, ins.info[1]) if ins.info[1] == 1 else [w.cta])
    return None


def _issuing_queue(w):
    return ("tcgen05", w.cta.cluster.clusterid, w.cta.rank)


def _tc_mma(ex, w, ins, mask):
    _, n, block, collector = ins.info
    d_op, a_op, b_op, i_op, sfa_op, sfb_op, en_op = ins.operands[:7]
    if len(ins.operands) != 7:
        raise unsupported(ins, "disable-output-lane / extra operands")
    d = lane_addresses(ex, w, d_op, 32)
    a = to_bits(w.read(a_op, "b64", ex), "b64")
    b = to_bits(w.read(b_op, "b64", ex), "b64")
    idesc = to_bits(w.read(i_op, "b32", ex), "b32")
    sfa = lane_addresses(ex, w, sfa_op, 32)
    sfb = lane_addresses(ex, w, sfb_op, 32)
    en = w.read(en_op, "pred", ex)
    group = _group(w.cta, n)
    for lane in _lane(mask):
        args = (int(d[lane]), int(a[lane]), int(b[lane]), int(idesc[lane]), int(sfa[lane]), int(sfb[lane]), bool(en[lane]))

        def run(args=args):
            tcgen05.mma_block_scaled(group, args[0], args[1], args[2], args[3], args[4], args[5], args[6],
                                     kind="mxf4nvf4", block=block, collector=collector)
            ex.stats["mma"] += 1
            if collector in ("use", "lastuse"):
                ex.stats["mma_a_from_collector"] = ex.stats.get("mma_a_from_collector", 0) + 1

        ex.submit(w.cta.cluster, AsyncOp("tcgen05.mma", run, _issuing_queue(w), ins.line))
    return None


def _tc_cp(ex, w, ins, mask):
    n = ins.info[1]
    t = lane_addresses(ex, w, ins.operands[0], 32)
    s = to_bits(w.read(ins.operands[1], "b64", ex), "b64")
    group = _group(w.cta, n)
    for lane in _lane(mask):
        taddr, sdesc = int(t[lane]), int(s[lane])
        ex.submit(w.cta.cluster, AsyncOp("tcgen05.cp", lambda taddr=taddr, sdesc=sdesc:
                                         tcgen05.tmem_copy_32x128b_warpx4(group, taddr, sdesc),
                                         _issuing_queue(w), ins.line))
    return None


def _tc_commit(ex, w, ins, mask):
    _, n, multicast = ins.info
    mbar = lane_addresses(ex, w, ins.operands[0], 32)
    cta_mask = w.read(ins.operands[1], "u16", ex) if multicast else None
    for lane in _lane(mask):
        addr = int(mbar[lane])
        if multicast:
            off = addr & SHARED_OFFSET_MASK
            ranks = [r for r in range(16) if (int(cta_mask[lane]) >> r) & 1]
            targets = [(w.cta.cluster.ctas[r], off) for r in ranks]
        else:
            tcta, off = SharedAddressing.resolve(w.cta, addr, True)
            targets = [(tcta, off)]
        # validate now (a bad address is the issuing instruction's fault), arrive later
        bars = []
        for tcta, off in targets:
            bar = tcta.mbarriers.get(off)
            if bar is None:
                raise Hazard(f"{ins.opcode}: no mbarrier at shared offset {off:#x} of CTA rank {tcta.rank}")
            bars.append((tcta, bar))

        for _, bar in bars:
            check_remote_use(bar, w, ins.opcode)
            note_signal(bar, w, ex.clock)

        def run(bars=bars):
            for tcta, bar in bars:
                bar.arrive(1, f"tcgen05.commit ({ins.where()})")

        ex.submit(w.cta.cluster, AsyncOp("tcgen05.commit", run, _issuing_queue(w), ins.line))
    return None


class _PendingTmemLoad:
    """A tcgen05.ld whose tensor-memory read has not happened yet.

    tcgen05.ld is asynchronous (PTX ISA 9.7.16.8.3): it may read tensor memory at any time until
    tcgen05.wait::ld. The emulator reads as late as it can, at the wait or at the first use of a
    destination register, so a tensor-memory write the kernel lets in before its wait::ld (an
    accumulator stage released too early) changes the loaded values.
    A register read before wait::ld itself is not a hazard: ptxas gives LDTM a scoreboard that the first
    consumer waits on (this kernel's cubin, cuobjdump -sass: `LDTM.x32 R36` sets write barrier 2, the next
    FMUL waits on it), and NVIDIA's hardware-verified persistent block-scaled GEMM example reads the
    registers before its wait::ld as well.
    """

    def __init__(self, w, taddr, regs, mask, num, shape="32x32b", stats=None):
        self.w, self.taddr, self.regs, self.mask, self.num, self.shape = w, taddr, regs, mask, num, shape
        self.stats = stats

    def finish(self):
        w = self.w
        for r in self.regs:
            w.pending_tmem_ld.pop(r.name, None)
        load = tcgen05.tmem_load_16x256b if self.shape == "16x256b" else tcgen05.tmem_load_32x32b
        before = getattr(w.cta, "pair_lane_loads", 0)
        vals = load(w.cta, self.taddr, w.warp_id % 4, self.num)  # [32 threads, registers]
        if self.stats is not None and getattr(w.cta, "pair_lane_loads", 0) != before:
            # a load at lanes 128..255 of the pair's odd CTA (emu.tcgen05._pair_lane): counted, so reports show it
            self.stats["tmem_ld_pair_lanes"] = self.stats.get("tmem_ld_pair_lanes", 0) + 1
        for i, r in enumerate(self.regs):
            w.write_bits(r.name, vals[:, i].astype(np.uint64), self.mask)


def _tc_ld(ex, w, ins, mask):
    """tcgen05.ld.sync.aligned.32x32b.xN (lane t of warp w reads TMEM lane 32*(w%4)+t, N columns) and
    .16x256b.xN (emu.tcgen05.tmem_load_16x256b)."""
    _check_whole_warp(w, ins, mask)
    num = ins.info[1]
    shape = ins.info[2] if len(ins.info) > 2 else "32x32b"
    regs = ins.operands[0].items if isinstance(ins.operands[0], Vec) else (ins.operands[0],)
    per_rep = 4 if shape == "16x256b" else 1  # PTX ISA 9.7.16.8.3 Table 49: registers per .num repetition
    if len(regs) != num * per_rep:
        raise Hazard(f"{ins.opcode}: {len(regs)} destination registers for .{shape}.x{num}")
    taddr = lane_addresses(ex, w, ins.operands[1], 32)
    first = _lane(mask)[0]
    if (taddr[mask] != taddr[first]).any():
        raise Hazard(f"{ins.opcode}: the tensor-memory address must be warp-uniform")
    for r in regs:
        if r.name in w.pending_tmem_ld:
            w.pending_tmem_ld[r.name].finish()
    pending = _PendingTmemLoad(w, int(taddr[first]), regs, mask.copy(), num, shape, ex.stats)
    for r in regs:
        w.pending_tmem_ld[r.name] = pending
    return None


def _tc_wait(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    if ins.info[0] == "wait::ld":
        for pending in list({id(p): p for p in w.pending_tmem_ld.values()}.values()):
            pending.finish()
    return None


def _tc_fence(ex, w, ins, mask):
    # Ordering of tcgen05 operations around thread synchronisation (PTX ISA 9.7.16.6.4): the emulator runs
    # tcgen05.ld/st synchronously at issue and MMAs in issue order, so these fences have no effect here.
    return None


_TC = {"alloc": _tc_alloc, "dealloc": _tc_dealloc, "relinquish_alloc_permit": _tc_relinquish, "mma": _tc_mma,
       "cp": _tc_cp, "commit": _tc_commit, "ld": _tc_ld, "wait::ld": _tc_wait, "wait::st": _tc_wait,
       "fence::before_thread_sync": _tc_fence, "fence::after_thread_sync": _tc_fence}


# ---------------------------------------------------------------------------------------------- TMA store, bulk groups
class _BulkOp:
    """A bulk asynchronous operation tracked by bulk async-groups (its completion flag)."""

    def __init__(self):
        self.done = False


def _bulk_state(w):
    """Per-thread bulk async-group state of a warp: lane -> uncommitted ops, lane -> committed groups (oldest first)."""
    st = getattr(w, "bulk_groups", None)
    if st is None:
        st = w.bulk_groups = ({}, {})
    return st


@family(*(f"cp.async.bulk.tensor.{d}d.global" for d in range(1, 6)))
class BulkTensorStore:
    """cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group{.L2::cache_hint} [tmap, {coords}], [src]{, policy}
    (PTX ISA 9.7.9.25.5.1 "cp.async.bulk.tensor", shared::cta -> global direction, completion mechanism
    .bulk_group: the operation joins the executing thread's current bulk async-group, committed by
    cp.async.bulk.commit_group and waited on by cp.async.bulk.wait_group).

    Emulated as one asynchronous operation that, when the seeded engine completes it, reads the box from shared
    memory and writes it to global memory (emu.tma.tile_store). Until a wait_group covers it the kernel may not
    rewrite the source, and a rewrite before then changes what is stored."""

    @staticmethod
    def decode(ins):
        p = ins.parts
        dims = p[4]
        allowed = {"global", "shared::cta", "tile", "bulk_group", "L2::cache_hint", dims}
        if (not dims.endswith("d") or p[5] != "global" or p[6] != "shared::cta" or set(p[5:]) - allowed
                or "tile" not in p or "bulk_group" not in p):
            raise unsupported(ins)
        return {"rank": int(dims[:-1]), "cache_hint": "L2::cache_hint" in p}

    @staticmethod
    def execute(ex, w, ins, mask):
        info = ins.info
        tens, src_op = ins.operands[:2]
        tmap_addr = to_bits(w.read(tens.tensor_map, "b64", ex), "b64")
        coords = [w.read(c, "s32", ex) for c in tens.coords]
        if len(coords) != info["rank"]:
            raise Hazard(f"{ins.opcode}: {len(coords)} coordinates for a {info['rank']}-d copy")
        src = lane_addresses(ex, w, src_op, 32)
        pending, _ = _bulk_state(w)
        for lane in _lane(mask):
            tmap = ex.tensor_map(int(tmap_addr[lane]))
            if tmap.rank != info["rank"]:
                raise Hazard(f"{ins.opcode}: the tensor map at {int(tmap_addr[lane]):#x} has rank {tmap.rank}")
            c = [int(x[lane]) for x in coords]
            cta, off = SharedAddressing.resolve(w.cta, int(src[lane]), False)
            token = _BulkOp()
            pending.setdefault(lane, []).append(token)
            ex.submit(w.cta.cluster, AsyncOp(f"TMA store {c}", _tma_store_run(ex, tmap, c, cta, off, token, ins),
                                             None, ins.line))
        return None


def _tma_store_run(ex, tmap, coords, cta, off, token, ins):
    from .state import smem_read

    def run():
        counts = tmap.box_counts
        rows = 1
        for c in counts[1:]:
            rows *= c
        total = rows * (tmap.swizzle_bytes if tmap.swizzle else tmap.inner_box_bytes)
        image = smem_read(cta, off, total)

        def write(addr, data):
            ex.gmem.write(addr, data)
            ex.store_log.append((int(addr), int(data.size)))

        ex.stats["tma_store_bytes"] = ex.stats.get("tma_store_bytes", 0) + tma.tile_store(tmap, coords, image, off, write)
        token.done = True

    return run


@family("cp.async.bulk.commit_group")
class BulkCommitGroup:
    """cp.async.bulk.commit_group (PTX ISA 9.7.9.25.6.1): per executing thread, the bulk async operations it
    initiated and has not committed yet form a new bulk async-group (possibly empty)."""

    @staticmethod
    def decode(ins):
        if len(ins.parts) != 4 or ins.operands:
            raise unsupported(ins)
        return None

    @staticmethod
    def execute(ex, w, ins, mask):
        pending, groups = _bulk_state(w)
        for lane in _lane(mask):
            groups.setdefault(lane, []).append(pending.pop(lane, []))
        return None


@family("cp.async.bulk.wait_group")
class BulkWaitGroup:
    """cp.async.bulk.wait_group{.read} N (PTX ISA 9.7.9.25.6.2): the executing thread waits until at most the N
    most recent of its bulk async-groups are pending and all earlier ones are complete; with .read, until the
    operations of those groups have finished reading their source. The emulator completes a store's read and
    its global write together, so .read waits for the same event (never shorter than the ISA allows)."""

    @staticmethod
    def decode(ins):
        mods = ins.parts[3:]
        if tuple(mods) not in (("wait_group",), ("wait_group", "read")) or len(ins.operands) != 1:
            raise unsupported(ins)
        return None

    @staticmethod
    def execute(ex, w, ins, mask):
        n = int(w.read(ins.operands[0], "u32", ex)[0])
        _, groups = _bulk_state(w)
        for lane in _lane(mask):
            gs = groups.get(lane, [])
            # every group but the N most recent must be complete, whatever the state of those N
            if any(not all(t.done for t in g) for g in gs[:max(len(gs) - n, 0)]):
                return BLOCK  # retried later; the engine completes in-flight operations meanwhile
            while gs and all(t.done for t in gs[0]):  # complete groups at the old end no longer matter
                gs.pop(0)
        return None
