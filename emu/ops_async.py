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

from . import ordering, precedents, tcgen05, tma
from .device import tensor_memory_oversubscribed
from .isa import BLOCK, family, unsupported
from .machine import AsyncOp, Cost
from .mbarrier import INIT_UNPUBLISHED, check_use, init_notes, merge, note_signal
from .ptx import Addr, Vec
from .simt import WARP, lane_addresses, type_bits
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
    return np.flatnonzero(mask).tolist()


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
        dst_op, tens, mbar_op = ins.operands[:3]
        tmap_addr = w.read_bits(tens.tensor_map, "b64", ex)
        ex.check_global_access(w, mask, ins.opcode,
                               reads={ex.tensor_map(int(a)).address for a in tmap_addr[mask]} if ex.pdl else None)
        rest = list(ins.operands[3:])
        dst = lane_addresses(ex, w, dst_op, 32)
        mbar = lane_addresses(ex, w, mbar_op, 32)
        coords = [w.read(c, "s32", ex) for c in tens.coords]
        if len(coords) != info["rank"]:
            raise Hazard(f"{ins.opcode}: {len(coords)} coordinates for a {info['rank']}-d copy")
        cta_mask = w.read(rest.pop(0), "u16", ex) if info["multicast"] else None
        for lane in _lane(mask):
            tmap = ex.tensor_map(int(tmap_addr[lane]))
            if tmap.rank != info["rank"]:
                raise Hazard(f"{ins.opcode}: the tensor map at {int(tmap_addr[lane]):#x} has rank {tmap.rank}")
            c = [int(x[lane]) for x in coords]
            # checked at issue, so the hazard names the instruction (emu.tma.SMEM_ALIGN: the rule and its sources)
            tma.check_smem_alignment(int(dst[lane]), f"{ins.where()} (lane {lane}), its destination")
            dst_cta, dst_off = SharedAddressing.resolve(w.cta, int(dst[lane]), info["cluster_dst"])
            if info["multicast"]:
                ranks = [r for r in range(16) if (int(cta_mask[lane]) >> r) & 1]
                if not ranks or max(ranks) >= len(w.cta.cluster.ctas):
                    raise Hazard(f"{ins.opcode}: ctaMask {int(cta_mask[lane]):#x} names CTAs outside the cluster")
                targets = [w.cta.cluster.ctas[r] for r in ranks]
            else:
                targets = [dst_cta]
            mbar_cta, mbar_off = SharedAddressing.resolve(w.cta, int(mbar[lane]), True)
            signals, unseen = [], []
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
                sig_bar = sig_cta.mbarriers.get(mbar_off)
                if sig_bar is None:
                    if sig_cta is w.cta:
                        raise Hazard(f"{ins.opcode}: signals shared offset {mbar_off:#x} of its own CTA (rank "
                                     f"{sig_cta.rank}), which holds no initialised mbarrier")
                    unseen.append(sig_cta)  # initialised later or never: settled when the copy lands (below)
                else:
                    check_use(sig_bar, w, ins.opcode, note=init_notes(ex, ins.site()))
                    note_signal(sig_bar, w, ex.clock)
                signals.append(sig_cta)
            nbytes = tma.box_bytes(tmap)
            run = _tma_run(ex, tmap, c, targets, dst_off, signals, mbar_off, nbytes, ins)
            cost = Cost("load", nbytes, _allocation_of(ex, tmap.address), targets)
            ex.submit(w.cta.cluster, AsyncOp(f"TMA load {c}", _settle_unseen(ex, ins, w, unseen, mbar_off, run), None,
                                             ins.line, cost, ready=_initialised(unseen, mbar_off)))


# A signal to another CTA's mbarrier that no publication reached, or that the target had not even initialised when the
# copy was issued: the memory model promises nothing (PTX ISA 9.7.13.15.9: mbarrier.init must be made visible to the
# cluster, 9.7.13.4 fence.mbarrier_init + a cluster-scope release/acquire). Hardware survives it because the signal
# lands a global-memory latency after issue, long after the peer's first instructions. Emulated: the copy completes
# only once the target is initialised, and the run carries a Note.
def _allocation_of(ex, addr: int):
    """The base of the global allocation a copy reads from (its Cost's source), or None past every allocation."""
    try:
        return ex.gmem.allocation(addr)[0]
    except Hazard:
        return None


def _initialised(ctas: list, offset: int):
    if not ctas:
        return None
    return lambda: all(offset in cta.mbarriers for cta in ctas)


def _settle_unseen(ex, ins, w, ctas: list, offset: int, run):
    if not ctas:
        return run
    issued = ex.clock

    def settle_then_run():
        for cta in ctas:
            bar = cta.mbarriers[offset]
            init_notes(ex, ins.site())(INIT_UNPUBLISHED, f"{ins.opcode} by CTA rank {w.cta.rank} signals the mbarrier "
                                                         f"at {offset:#x} of CTA rank {cta.rank}, which was not yet "
                                                         "initialised when the copy was issued")
            note_signal(bar, w, issued)
        run()

    return settle_then_run


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
        dst_op, src_op, size_op, mbar_op = ins.operands[:4]
        src = lane_addresses(ex, w, src_op, 64)
        ex.check_global_access(w, mask, ins.opcode, reads=src[mask])
        dst = lane_addresses(ex, w, dst_op, 32)
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
            bar = mbar_cta.mbarriers.get(mbar_off)
            if bar is None:
                raise Hazard(f"{ins.opcode}: signals shared offset {mbar_off:#x} of CTA rank {mbar_cta.rank}: no mbarrier")
            check_use(bar, w, ins.opcode, note=init_notes(ex, ins.site()))
            note_signal(bar, w, ex.clock)

            def run(dst_cta=dst_cta, dst_off=dst_off, g=g, nbytes=nbytes, mbar_off=mbar_off):
                data, outside = ex.gmem.read_or_poison(g, nbytes)
                if outside:
                    # Reading past a tensor is not an error the ISA defines away: it is whatever memory is mapped there.
                    # The bytes come in poisoned, so a kernel that uses them mismatches; one that never does survives.
                    ex.note("bulk-copy-reads-past-allocation", ins.site(), precedents.NOVUS_SHORT_K,
                            f"{outside} of {nbytes} bytes at {g:#x} lie outside every global allocation "
                            "(read as poison)")
                _deliver(ex, ins, dst_cta, dst_off, data, dst_cta, mbar_off, nbytes, "bulk copy",
                         f"bulk copy ({ins.where()})")
                ex.stats["bulk_copy_bytes"] = ex.stats.get("bulk_copy_bytes", 0) + nbytes

            cost = Cost("load", nbytes, _allocation_of(ex, g), (dst_cta,))
            ex.submit(w.cta.cluster, AsyncOp(f"bulk copy {g:#x}+{nbytes}", run, None, ins.line, cost))


def _cp_async_queue(w, lane: int) -> tuple:
    """The per-thread order of non-bulk cp.async and its cp.async.mbarrier.arrive: the arrive-on waits for all of
    the thread's prior copies (an AsyncOp queue completes in submission order)."""
    return ("cp.async", w.cta.rank, w.warp_id, lane)


@family("cp.async.ca", "cp.async.cg")
class CpAsync:
    """cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size} (PTX ISA "cp.async"): a non-blocking
    copy of cp-size bytes (4, 8 or 16; .cg: 16) from global to shared memory, both addresses aligned to cp-size;
    with src-size only that many bytes are read and the rest of cp-size is zero-filled. Completion is observed
    through cp.async.mbarrier.arrive or the thread's cp.async-groups (cp.async.commit_group / wait_group below)."""

    @staticmethod
    def decode(ins):
        p = ins.parts
        if set(p[3:]) - {"shared", "shared::cta", "global"} or "global" not in p or len(ins.operands) not in (3, 4):
            raise unsupported(ins, "cache hints and L2 prefetch sizes")
        return p[2]

    @staticmethod
    def execute(ex, w, ins, mask):
        src = lane_addresses(ex, w, ins.operands[1], 64)
        ex.check_global_access(w, mask, ins.opcode, reads=src[mask])
        dst = lane_addresses(ex, w, ins.operands[0], 32)
        size = w.read(ins.operands[2], "u32", ex)
        src_size = w.read(ins.operands[3], "u32", ex) if len(ins.operands) > 3 else size
        pending, _ = _group_state(w, "cp.async")
        for lane in _lane(mask):
            n, g, d, rd = int(size[lane]), int(src[lane]), int(dst[lane]), int(src_size[lane])
            if n not in ((16,) if ins.info == "cg" else (4, 8, 16)) or g % n or d % n or rd > n:
                raise Hazard(f"{ins.opcode}: cp-size {n}, src-size {rd}, src {g:#x}, dst {d:#x} (PTX ISA \"cp.async\": "
                             f"cp-size 4, 8 or 16 (.cg 16), addresses aligned to it, src-size <= cp-size)")
            cta, off = SharedAddressing.resolve(w.cta, d, False)

            token = _GroupedOp()
            pending.setdefault(lane, []).append(token)

            def run(cta=cta, off=off, g=g, n=n, rd=rd, token=token):
                data = np.zeros(n, np.uint8)
                data[:rd] = ex.gmem.read(g, rd)
                store_shared(cta, off, data, f"cp.async ({ins.where()})")
                token.done = True

            cost = Cost("load", rd, _allocation_of(ex, g), (cta,), via="lsu")
            ex.submit(w.cta.cluster, AsyncOp(f"cp.async {g:#x}+{n}", run, _cp_async_queue(w, lane), ins.line, cost))


@family("cp.async.mbarrier")
class CpAsyncMbarrierArrive:
    """cp.async.mbarrier.arrive{.noinc}.shared{::cta}.b64 [mbar] (PTX ISA "cp.async.mbarrier.arrive"): an arrive-on
    the mbarrier, triggered once every prior cp.async of the executing thread has completed. Without .noinc the
    pending count is first incremented by one, so the arrival has no net effect on it; with .noinc it counts
    against the expected arrivals."""

    @staticmethod
    def decode(ins):
        p = ins.parts
        if p[3] != "arrive" or set(p[4:]) - {"noinc", "shared", "shared::cta", "b64"} or "b64" not in p:
            raise unsupported(ins)
        return "noinc" in p

    @staticmethod
    def execute(ex, w, ins, mask):
        addrs = lane_addresses(ex, w, ins.operands[0], 32)
        for lane in _lane(mask):
            cta, off = SharedAddressing.resolve(w.cta, int(addrs[lane]), False)
            bar = cta.mbarriers.get(off)
            if bar is None:
                raise Hazard(f"{ins.opcode}: no mbarrier at shared offset {off:#x}")
            check_use(bar, w, ins.opcode, note=init_notes(ex, ins.site()))
            if not ins.info:
                bar.pending += 1
            note_signal(bar, w, ex.clock)

            def run(bar=bar):
                bar.arrive(1, f"{ins.opcode} ({ins.where()})")

            ex.submit(w.cta.cluster, AsyncOp(f"cp.async arrive-on {off:#x}", run, _cp_async_queue(w, lane), ins.line,
                                             Cost("arrive", dests=(cta,))))


@family("cp.async.commit_group")
class CpAsyncCommitGroup:
    """cp.async.commit_group (PTX ISA 9.7.9.25.3.2): per executing thread, the cp.async operations it initiated and
    has not committed yet form a new cp.async-group (possibly empty)."""

    @staticmethod
    def decode(ins):
        if len(ins.parts) != 3 or ins.operands:
            raise unsupported(ins)
        return None

    @staticmethod
    def execute(ex, w, ins, mask):
        _commit_group(w, mask, "cp.async")


@family("cp.async.wait_group", "cp.async.wait_all")
class CpAsyncWaitGroup:
    """cp.async.wait_group N (PTX ISA 9.7.9.25.3.3): the executing thread waits until at most its N most recent
    cp.async-groups are pending and all earlier ones are complete; cp.async.wait_all is cp.async.commit_group then
    cp.async.wait_group 0. Operations not committed are not waited on by wait_group."""

    @staticmethod
    def decode(ins):
        if len(ins.parts) != 3 or len(ins.operands) != (1 if ins.parts[2] == "wait_group" else 0):
            raise unsupported(ins)
        return ins.parts[2] == "wait_all"

    @staticmethod
    def execute(ex, w, ins, mask):
        if ins.info:  # a retried wait_all commits again: an empty group, complete, changes nothing
            _commit_group(w, mask, "cp.async")
            return _wait_group(w, mask, "cp.async", 0)
        return _wait_group(w, mask, "cp.async", int(w.read(ins.operands[0], "u32", ex)[0]))


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
        dst = lane_addresses(ex, w, dst_op, 32).tolist()
        mbar = lane_addresses(ex, w, mbar_op, 32).tolist()
        items = src.items if isinstance(src, Vec) else (src,)
        esize = type_bits(ty) // 8
        nbytes = esize * vec
        # every lane's bytes at once: row `lane` is what that lane stores
        rows = np.stack([w.read_bits(it, ty, ex) for it in items], axis=1).astype(f"<u{esize}").view(np.uint8)
        signalled = {}  # mbarrier address -> (CTA, offset): each mbarrier's checks once (the same warp, the same clock)
        costs = {}  # destination CTA -> the Cost of one lane's store into it (read-only: shared by the lanes)
        resolve, submit, cluster, line = SharedAddressing.resolve, ex.submit, w.cta.cluster, ins.line  # (per lane)
        label = f"st.async ({ins.where()})"  # (what a delivery's hazards name: made once, not per delivery)
        for lane in _lane(mask):
            addr = dst[lane]
            if addr % nbytes:
                raise Hazard(f"{ins.opcode}: address {addr:#x} is not aligned to the {nbytes}-byte access")
            cta, off = resolve(w.cta, addr, True)
            found = signalled.get(mbar[lane])
            if found is None:
                bar_cta, bar_off = SharedAddressing.resolve(w.cta, mbar[lane], True)
                bar = bar_cta.mbarriers.get(bar_off) if bar_cta is cta else None
                if bar_cta is cta and bar is not None:
                    check_use(bar, w, ins.opcode)  # no note: a remote use before publication is a hazard here
                    note_signal(bar, w, ex.clock)
                found = signalled[mbar[lane]] = (bar_cta, bar_off)
            bar_cta, bar_off = found
            if bar_cta is not cta:
                raise Hazard(f"{ins.opcode}: the mbarrier (CTA rank {bar_cta.rank}) and the destination (CTA rank "
                             f"{cta.rank}) must be in the same CTA (PTX ISA 9.7.9.12)")
            if bar_off not in cta.mbarriers:
                raise Hazard(f"{ins.opcode}: no initialised mbarrier at shared offset {bar_off:#x} of CTA rank "
                             f"{bar_cta.rank}")

            def run(cta=cta, off=off, data=rows[lane], bar_off=bar_off):
                _deliver(ex, ins, cta, off, data, cta, bar_off, nbytes, "st.async", label)
                ex.stats["st_async_bytes"] = ex.stats.get("st_async_bytes", 0) + nbytes

            cost = costs.get(cta.rank)
            if cost is None:
                cost = costs[cta.rank] = Cost("remote", nbytes, dests=(cta,))
            submit(cluster, AsyncOp(f"st.async {addr:#x}+{nbytes}", run, None, line, cost))


@family("cp.async.bulk.prefetch")
class BulkPrefetch:
    """cp.async.bulk.prefetch.L2.global [src], size / cp.async.bulk.prefetch.tensor.Nd.L2.global{.L2::cache_hint}
    [tmap, {coords}] (PTX ISA 9.7.9.25.4.3 / 9.7.9.25.5.3): an L2 prefetch hint with no architectural effect on
    memory contents. Functionally a no-op; the machine is told which allocation and how many bytes (the timed
    machine charges HBM for them and serves later loads of them from L2)."""

    @staticmethod
    def decode(ins):
        if "L2" not in ins.parts or "global" not in ins.parts:
            raise unsupported(ins)
        return "tensor" in ins.parts

    @staticmethod
    def execute(ex, w, ins, mask):
        for lane in _lane(mask):
            if ins.info:
                tens = ins.operands[0]
                tmap = ex.tensor_map(int(w.read_bits(tens.tensor_map, "b64", ex)[lane]))
                ex.prefetch(_allocation_of(ex, tmap.address), tma.box_bytes(tmap))
            else:
                src = int(lane_addresses(ex, w, ins.operands[0], 64)[lane])
                ex.prefetch(_allocation_of(ex, src), int(w.read(ins.operands[1], "u32", ex)[lane]))
        return None


def _deliver(ex, ins, target, dst_off, data, sig_cta, mbar_off, nbytes, what, label):
    """An asynchronous copy completes: its bytes land in `target`'s shared memory, then complete-tx of nbytes on
    the mbarrier at mbar_off of sig_cta (PTX ISA 9.7.9.25: the mbarrier::complete_tx::bytes mechanism). `what`
    names the kind of copy, `label` the copy and its instruction for a hazard: f"{what} ({ins.where()})", made by
    the caller once per instruction (a K split delivers ~10^5 st.async a schedule).
    A copy that lands after its CTA exited writes shared memory the CTA no longer owns: a Note, since the
    hardware-verified precedent survives it (nothing else ran on that SM before the bytes landed)."""
    if target.exited or sig_cta.exited:
        for cta in (target,) if target is sig_cta else (target, sig_cta):
            if cta.exited:
                ex.note("async-copy-lands-after-exit", ins.site(), precedents.NOVUS_SHORT_K,
                        f"a {what} issued here completes after CTA {cta.ctaid} exited: it writes that CTA's shared "
                        "memory and signals its mbarrier, which the next CTA on the SM may already own")
    store_shared(target, dst_off, data, label)
    bar = sig_cta.mbarriers.get(mbar_off)
    if bar is None:
        raise Hazard(f"{label} signals shared offset {mbar_off:#x} of CTA rank {sig_cta.rank}: no mbarrier")
    bar.complete_tx(nbytes, label + " complete-tx")


def _tma_run(ex, tmap, coords, targets, dst_off, signals, mbar_off, nbytes, ins):
    def run():
        data = tma.tile_bytes(tmap, coords, ex.gmem.read, dst_off)
        label = f"TMA load ({ins.where()})"
        for t, sig in zip(targets, signals):
            _deliver(ex, ins, t, dst_off, data, sig, mbar_off, nbytes, "TMA load", label)
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
    FORMS = {"alloc", "dealloc", "relinquish_alloc_permit", "mma", "cp", "shift", "ld", "st", "wait::ld", "wait::st",
             "commit", "fence::before_thread_sync", "fence::after_thread_sync"}

    @staticmethod
    def decode(ins):
        op = ins.parts[1]
        if op not in Tcgen05.FORMS:
            raise unsupported(ins)
        n = _cta_group(ins)
        mods = set(ins.parts[2:])
        if op == "shift":  # tcgen05.shift.cta_group.down [taddr] (PTX ISA 9.7.16.9.3)
            if mods != {f"cta_group::{n}", "down"}:
                raise unsupported(ins)
            return ("shift", n)
        if op == "mma":
            return ("mma", n) + _mma_form(ins, n, mods)
        if op == "cp":
            shape = next((m for m in mods if m in {s for s, _ in tcgen05.CP_SHAPES}), None)
            multicast = next((m for m in mods if m.startswith("warpx")), None)
            if (shape, multicast) not in tcgen05.CP_SHAPES:
                raise unsupported(ins, "shape and multicast")
            if mods - {f"cta_group::{n}", shape, multicast}:
                # the decompressing .b8x16.b6x16_p32 / .b4x16_p64 forms: their padded source is in the text (emu.tcgen05
                # Q7), where each element lands in its 8-bit tensor-memory container is not
                raise unsupported(ins, "source decompression " + ", ".join(sorted(mods - {f"cta_group::{n}", shape,
                                                                                           multicast}))
                                  + " (where a 4- / 6-bit element lands in its 8-bit tensor-memory container is drawn "
                                    "only: PTX ISA 9.7.16.9.1 figures 195, 197, 198; emu.tcgen05 Q7)")
            return ("cp", n, shape, multicast)
        if op in ("ld", "st"):
            shape = next((m for m in mods if "x" in m and m[0].isdigit()), None)
            num = next((m for m in mods if m.startswith("x") and m[1:].isdigit()), None)
            pack = "pack::16b" if op == "ld" else "unpack::16b"
            if shape not in tcgen05.TMEM_LD_SHAPES or num is None or mods - {"sync", "aligned", shape, num, "b32", pack}:
                raise unsupported(ins)
            return (op, int(num[1:]), shape, pack in mods)
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


def _mma_form(ins, n: int, mods: set) -> tuple:
    """(kind, scale_vec, collector usage) of a tcgen05.mma (PTX ISA tcgen05.mma syntax): .kind::*, .block_scale with
    .scale_vec::NX or the block size that names it (.block16 / .block32: K / block scales a row), .collector::a::*
    (none is ::discard); tcgen05.mma.ws (9.7.16.10.9.3): its B collector's "bN::op" as the usage (none is b0::discard,
    emu.tcgen05 Q9). The sparse (.sp) forms and .ashift are not implemented."""
    ws = "ws" in mods
    mods = mods - {"ws"}
    if ins.parts[1] != "mma" or "sp" in ins.parts:
        raise unsupported(ins, "the sparse (.sp) forms")
    kind = next((m.split("::")[1] for m in mods if m.startswith("kind::")), None)
    if kind not in tcgen05.MMA_KINDS:
        raise unsupported(ins, f"kind {kind}")
    spec = tcgen05.MMA_KINDS[kind]
    scaled = spec.scale_vecs is not None
    if scaled != ("block_scale" in mods):
        raise unsupported(ins, f"kind::{kind} {'needs' if scaled else 'takes no'} .block_scale")
    scale_vecs = {int(m.split("::")[1][:-1]) for m in mods if m.startswith("scale_vec::")}
    scale_vecs |= {spec.k // int(m[5:]) for m in mods if m in ("block16", "block32")}
    if len(scale_vecs) > 1 or (scale_vecs and not scaled):
        raise unsupported(ins, "scale_vec / block qualifiers")
    collectors = ({f"collector::b{i}::{op}" for i in range(4) for op in tcgen05.A_COLLECTOR_OPS} if ws else
                  {f"collector::a::{op}" for op in tcgen05.A_COLLECTOR_OPS})
    known = {f"cta_group::{n}", f"kind::{kind}", "block_scale", "block16", "block32"} | collectors | {
        f"scale_vec::{v}X" for v in (1, 2, 4)}
    if mods - known:
        raise unsupported(ins, "modifiers " + ", ".join(sorted(mods - known)))
    usage = sorted(mods & collectors)
    if len(usage) > 1:
        raise unsupported(ins, "more than one .collector::a qualifier")
    masks = [op for op in ins.operands if isinstance(op, Vec)]
    if masks and (scaled or ws or len(masks) > 1 or ins.operands[4] is not masks[0] or len(masks[0].items) != 4 * n):
        raise unsupported(ins, "disable-output-lane where the ISA's dense form does not put it (4 words a CTA)")
    if len(ins.operands) - len(masks) not in ((7,) if scaled else (5, 6)):
        raise unsupported(ins, "operands")
    if ws:  # no qualifier means .collector::b0::discard (PTX ISA tcgen05.mma.ws)
        return kind, None, usage[0].split("::", 1)[1] if usage else "b0::discard"
    # No qualifier means .collector::a::discard (PTX ISA tcgen05.mma, .collector_usage).
    return kind, scale_vecs.pop() if scale_vecs else None, usage[0].split("::")[2] if usage else "discard"


def _pair_rendezvous(w, ins, mask, kind: str, payload: tuple):
    """tcgen05.alloc/dealloc .cta_group::2: one warp of each CTA of the pair issues it (PTX ISA 9.7.16.7.1).
    The first warp blocks; the second gets the first's payload back and releases it. None: blocked."""
    group = _group(w.cta, 2)
    rv = group[0].rendezvous.get(kind)
    if rv is None:
        rv = group[0].rendezvous[kind] = _Rendezvous(kind)
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


def _tc_note(ex, ins, precedent: str):
    """note(rule, detail) for emu.tcgen05: a Note at this instruction, under `precedent`."""
    return lambda rule, detail: ex.note(rule, ins.site(), precedent, detail)


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
    taddr = tcgen05.tmem_alloc(_group(w.cta, n), ncols, _tc_note(ex, ins, precedents.JIAB_ALLOC_136))
    for cta in _group(w.cta, n):
        ordering.allocated(cta, taddr, ncols)
    for cta in _group(w.cta, n):
        why = tensor_memory_oversubscribed(ex.launch, sum(x.ncols for x in cta.tmem_allocs))
        if why and (ex.pdl or max(ex.launch.cluster) > 1):
            raise Hazard(f"{ins.opcode}: {why}")
        if why:  # one-CTA clusters, no programmatic dependent launch: no CTA waits for another, so they serialise
            ex.note("tmem-oversubscribed-serialises", ins.site(), precedents.TMEM_SERIALISED,
                    f"{why}; no CTA of this launch waits for another (1-CTA clusters, no programmatic dependent "
                    f"launch), so on a B200 they serialise where the emulator runs them side by side")
    for cta, addr in dsts:  # the column address goes to each issuing CTA's shared memory
        owner, off = SharedAddressing.resolve(cta, addr, False)
        smem_write(owner, off, np.array([taddr], np.uint32).view(np.uint8))
    return None


def _tc_dealloc(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    ordering.issued(ex, w, ins, "dealloc")
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
    ordering.dealloc_frees(ex, w, ins, _group(w.cta, n), taddr & 0xFFFF, ncols)
    tcgen05.tmem_dealloc(_group(w.cta, n), taddr, ncols, _tc_note(ex, ins, precedents.JIAB_ALLOC_136))
    return None


def _tc_relinquish(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    tcgen05.tmem_relinquish(_group(w.cta, ins.info[1]) if ins.info[1] == 1 else [w.cta])
    return None


def _issuing_queue(w):
    return ("tcgen05", w.cta.cluster.clusterid, w.cta.rank)


def _tc_mma(ex, w, ins, mask):
    """tcgen05.mma [d], a, b, idesc, {[sfa], [sfb],} {disable_output_lane,} enable_input_d {, scale_input_d} (PTX
    ISA tcgen05.mma): the .block_scale kinds take the two scale-factor addresses, the dense kinds an optional
    disable-output-lane vector (4 words a CTA) and kind::f16 / tf32 an optional immediate scale-input-d (_mma_form
    checked the operands); tcgen05.mma.ws ends in an optional 64-bit zero-column-mask-desc instead. An all-zero
    disable-output-lane disables nothing (CUTLASS's SM100_MMA_* atoms always pass zeros:
    include/cute/arch/mma_sm100_umma.hpp); a set bit is Unsupported, as which tensor-memory lane each bit
    names (and, under cta_group::2, in which CTA) is not written in a source we have."""
    _, n, kind, scale_vec, collector = ins.info
    scaled = tcgen05.MMA_KINDS[kind].scale_vecs is not None
    operands = list(ins.operands)
    d_op, a_op, b_op, i_op = operands[:4]
    if isinstance(operands[4], Vec):
        words = np.stack([w.read(op, "b32", ex) for op in operands[4].items])
        if words[:, mask].any():
            raise unsupported(ins, "a disable-output-lane bit set (which lane each bit names is not in a source at "
                                   "hand)")
        operands = operands[:4] + operands[5:]
    sf_ops = operands[4:6] if scaled else []
    rest = operands[4 + len(sf_ops):]
    ws = collector.startswith("b")  # tcgen05.mma.ws: its sixth operand is a zero-column-mask-desc (emu.tcgen05 Q9)
    zero_mask = w.read_bits(rest.pop(), "b64", ex) if ws and len(rest) == 2 else np.zeros(WARP, np.uint64)
    d = lane_addresses(ex, w, d_op, 32)
    a_in_tmem = isinstance(a_op, Addr)  # [a-tmem]: A in tensor memory (PTX ISA 9.7.16.10.9.1)
    a = lane_addresses(ex, w, a_op, 32) if a_in_tmem else w.read_bits(a_op, "b64", ex)
    b = w.read_bits(b_op, "b64", ex)
    idesc = w.read_bits(i_op, "b32", ex)
    sfa, sfb = (lane_addresses(ex, w, op, 32) for op in sf_ops) if scaled else (None, None)
    en = w.read(rest[0], "pred", ex)
    scale_d = w.read(rest[1], "u32", ex) if len(rest) == 2 else np.zeros(WARP, np.uint32)
    group = _group(w.cta, n)
    ordering.issued(ex, w, ins, "mma")
    for lane in _lane(mask):
        args = dict(d_taddr=int(d[lane]), a_desc=int(a[lane]), b_desc=int(b[lane]), idesc=int(idesc[lane]),
                    sfa_taddr=int(sfa[lane]) if scaled else None, sfb_taddr=int(sfb[lane]) if scaled else None,
                    accumulate=bool(en[lane]), scale_input_d=int(scale_d[lane]), zero_column_mask=int(zero_mask[lane]))
        footprint = ordering.mma_footprint(group, args["d_taddr"], args["sfa_taddr"], args["sfb_taddr"], args["idesc"],
                                           args["a_desc"] if a_in_tmem else None, ws)
        ordering.mma_overwrites(ex, w, ins, footprint)
        ordering.mma_reads_stores(ex, w, ins, ordering.mma_tmem_reads(footprint, args["sfa_taddr"]))
        ordering.mma_issued(w, footprint, ex.clock, ins.line)

        def run(args=args):
            tcgen05.mma(group, **args, kind=kind, scale_vec=scale_vec, collector=collector,
                        note=_tc_note(ex, ins, precedents.JIAB_SFA_PER_QUADRANT), a_in_tmem=a_in_tmem)
            ex.stats["mma"] += 1
            if collector in ("use", "lastuse"):
                ex.stats["mma_a_from_collector"] = ex.stats.get("mma_a_from_collector", 0) + 1

        ex.submit(w.cta.cluster, AsyncOp("tcgen05.mma", run, _issuing_queue(w), ins.line,
                                         _mma_cost(group, args["idesc"], kind, collector, a_in_tmem)))
    return None


def _mma_cost(group, idesc: int, kind: str, collector: str, a_in_tmem: bool = False) -> Cost:
    """Per CTA of the group: M/len(group) rows of A from its shared memory (none when A comes from the collector or
    from tensor memory) and N/len(group) rows of B (cta_group::2 splits B between the pair; none when .ws takes B
    from a collector buffer), K elements a row at the kind's element size (module docstring of emu.tcgen05, Q1-Q9).
    The timed engine's MAC rate is FP4's for every kind (b200.yaml: fitted on FP4 kernels only)."""
    d = tcgen05.decode_instr_descriptor(idesc, kind)
    rows_a, rows_b = d.m // len(group), d.n // len(group)
    row_bytes = {fmt: d.k * tcgen05.element_bits(fmt, kind) // 8 for fmt in (d.a_format, d.b_format)}
    a_bytes = 0 if collector in ("use", "lastuse") or a_in_tmem else rows_a * row_bytes[d.a_format]
    b_bytes = 0 if collector.endswith(("::use", "::lastuse")) else rows_b * row_bytes[d.b_format]
    return Cost("mma", m=d.m, n=d.n, k=d.k, a_bytes=a_bytes, b_bytes=b_bytes, dests=group)


def _tc_cp(ex, w, ins, mask):
    _, n, shape, multicast = ins.info
    rows, row_bytes = tcgen05.CP_SHAPES[(shape, multicast)]
    t = lane_addresses(ex, w, ins.operands[0], 32)
    s = w.read_bits(ins.operands[1], "b64", ex)
    group = _group(w.cta, n)
    ordering.issued(ex, w, ins, "cp")
    for lane in _lane(mask):
        taddr, sdesc = int(t[lane]), int(s[lane])
        ordering.cp_issued(ex, w, ins, group, taddr, row_bytes // 4)
        addrs = tcgen05.cp_source_addresses(tcgen05.decode_smem_descriptor(sdesc), rows, row_bytes)
        for cta in group:  # the source rows from each CTA's own shared memory (emu.tcgen05 Q4)
            ordering.async_read(cta, int(addrs.min()), int(addrs.max()) + 1 - int(addrs.min()),
                                f"{ins.opcode} ({ins.where()})")
        ex.submit(w.cta.cluster, AsyncOp("tcgen05.cp", lambda taddr=taddr, sdesc=sdesc:
                                         tcgen05.tmem_copy(group, taddr, sdesc, shape, multicast),
                                         _issuing_queue(w), ins.line, Cost("cp", rows * row_bytes, dests=group)))
    return None


def _tc_shift(ex, w, ins, mask):
    """tcgen05.shift.cta_group.down [taddr] (emu.tcgen05.tmem_shift_down): asynchronous, in its CTA's tcgen05 queue as
    tcgen05.cp is, and tracked by tcgen05.commit like it (PTX ISA 9.7.16.6: the mma / cp / shift a commit covers)."""
    _, n = ins.info
    t = lane_addresses(ex, w, ins.operands[0], 32)
    group = _group(w.cta, n)
    ordering.issued(ex, w, ins, "cp")
    for lane in _lane(mask):
        taddr = int(t[lane])
        ordering.cp_issued(ex, w, ins, group, taddr, 8, "tcgen05.shift")
        ex.submit(w.cta.cluster, AsyncOp("tcgen05.shift", lambda taddr=taddr: tcgen05.tmem_shift_down(group, taddr),
                                         _issuing_queue(w), ins.line, Cost("cp", 31 * 32, dests=group)))
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

        ordering.commit(w, ex.clock)
        for _, bar in bars:
            check_use(bar, w, ins.opcode, note=init_notes(ex, ins.site()))
            note_signal(bar, w, ex.clock)
            merge(bar.phase_releases, ordering.commit_entries(w))

        def run(bars=bars):
            for tcta, bar in bars:
                bar.arrive(1, f"tcgen05.commit ({ins.where()})")

        ex.submit(w.cta.cluster, AsyncOp("tcgen05.commit", run, _issuing_queue(w), ins.line, Cost("commit", dests=(w.cta,))))
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

    def __init__(self, ex, w, taddr, regs, mask, num, shape, pack, half_offset):
        self.ex, self.w, self.taddr, self.regs, self.mask, self.num = ex, w, taddr, regs, mask, num
        self.shape, self.pack, self.half_offset = shape, pack, half_offset

    def finish(self):
        w = self.w
        for r in self.regs:
            w.pending_tmem_ld.pop(r.name, None)
        ordering.ld_read(w, self, self.ex.clock)
        vals = tcgen05.tmem_load(w.cta, self.taddr, w.warp_id % 4, self.num, self.shape, self.pack,
                                 self.half_offset)  # [32 threads, registers]
        for r, bits in zip(self.regs, vals.T.astype(np.uint64)):  # (a row per register: its lanes' bits)
            w.set_bits(r, bits, self.mask)


def _half_offset(ex, w, ins, shape: str, operand) -> int:
    """.16x32bx2's immHalfSplitoff: the columns between its two halves (PTX ISA 9.7.16.8.3), an immediate."""
    if shape != "16x32bx2":
        return 0
    if operand is None:
        raise Hazard(f"{ins.opcode}: .16x32bx2 takes an immHalfSplitoff operand")
    return int(w.read(operand, "u32", ex)[0])


def _tc_ld(ex, w, ins, mask):
    """tcgen05.ld.sync.aligned.{32x32b,16x64b,16x128b,16x256b,16x32bx2}.xN{.pack::16b}.b32 (emu.tcgen05.tmem_load)."""
    _check_whole_warp(w, ins, mask)
    _, num, shape, pack = ins.info
    regs = ins.operands[0].items if isinstance(ins.operands[0], Vec) else (ins.operands[0],)
    if len(regs) != num * tcgen05.TMEM_LD_SHAPES[shape][1]:  # PTX ISA 9.7.16.8.3: registers per .num repetition
        raise Hazard(f"{ins.opcode}: {len(regs)} destination registers for .{shape}.x{num}")
    half = _half_offset(ex, w, ins, shape, ins.operands[2] if len(ins.operands) > 2 else None)
    taddr = lane_addresses(ex, w, ins.operands[1], 32)
    first = _lane(mask)[0]
    if (taddr[mask] != taddr[first]).any():
        raise Hazard(f"{ins.opcode}: the tensor-memory address must be warp-uniform")
    lane_field, col = tcgen05.split_taddr(int(taddr[first]))
    lane, other_quadrant = tcgen05.tmem_ld_first_lane(lane_field, w.warp_id % 4, tcgen05.TMEM_LD_SHAPES[shape][0],
                                                      ins.opcode)
    if other_quadrant:
        ex.note("tmem-lane-quadrant-from-warp", ins.site(), precedents.TMEM_LANE_FROM_WARP,
                f"warp {w.warp_id} gives lane field {lane_field}, which names quadrant {lane_field >> 5}; it reads "
                f"lanes {lane}.. of its own quadrant {w.warp_id % 4} (emu.tcgen05.tmem_ld_first_lane)")
        ex.stats["tmem_ld_lane_remapped"] = ex.stats.get("tmem_ld_lane_remapped", 0) + 1
    ordering.issued(ex, w, ins, "ld")
    for r in regs:
        if r.name in w.pending_tmem_ld:
            w.pending_tmem_ld[r.name].finish()
    # (w.live is never changed in place: kept as it is, the finish writes whole registers)
    pending = _PendingTmemLoad(ex, w, (lane << 16) | col, regs, mask if mask is w.live else mask.copy(), num, shape,
                               pack, half)
    first_col, ncols = tcgen05.tmem_footprint(shape, num, pack, half)
    ordering.ld_after_dealloc(ex, w, ins, col + first_col, ncols)
    ordering.ld_issued(w, pending, col + first_col, ncols, ins.line)
    for r in regs:
        w.pending_tmem_ld[r.name] = pending
    return None


def _tc_st(ex, w, ins, mask):
    """tcgen05.st.sync.aligned.{shape}.xN{.unpack::16b}.b32 (emu.tcgen05.tmem_store): the registers are read at issue; the
    write is asynchronous until the warp's tcgen05.wait::st (PTX ISA 9.7.16.8.4, 9.7.16.8.5), so the emulator makes
    it there, as late as the ISA allows: tensor memory read before it (by this warp or, without the wait and a
    synchronisation, by any other) holds what it held before."""
    _check_whole_warp(w, ins, mask)
    _, num, shape, pack = ins.info
    # [taddr], r; .16x32bx2: [taddr], immHalfSplitoff, r (PTX ISA 9.7.16.8.4)
    half = _half_offset(ex, w, ins, shape, ins.operands[1] if len(ins.operands) > 2 else None)
    src = ins.operands[-1]
    regs = src.items if isinstance(src, Vec) else (src,)
    if len(regs) != num * tcgen05.TMEM_LD_SHAPES[shape][1]:
        raise Hazard(f"{ins.opcode}: {len(regs)} source registers for .{shape}.x{num}")
    taddr = lane_addresses(ex, w, ins.operands[0], 32)
    first = _lane(mask)[0]
    if (taddr[mask] != taddr[first]).any():
        raise Hazard(f"{ins.opcode}: the tensor-memory address must be warp-uniform")
    values = np.stack([w.read(r, "b32", ex) for r in regs], axis=1).astype(np.uint32)  # [32 threads, registers]
    ordering.issued(ex, w, ins, "st")
    first_col, ncols = tcgen05.tmem_footprint(shape, num, pack, half)
    ordering.st_issued(ex, w, ins, tcgen05.split_taddr(int(taddr[first]))[1] + first_col, ncols)
    w.pending_tmem_st.append((int(taddr[first]), num, shape, values, pack, half))
    return None


def _tc_wait(ex, w, ins, mask):
    _check_whole_warp(w, ins, mask)
    if ins.info[0] == "wait::st":
        for taddr, num, shape, values, pack, half in w.pending_tmem_st:
            tcgen05.tmem_store(w.cta, taddr, w.warp_id % 4, num, shape, values, pack, half)
        w.pending_tmem_st.clear()
        ordering.st_waited(w, ex.clock)
    if ins.info[0] == "wait::ld":
        for pending in list({id(p): p for p in w.pending_tmem_ld.values()}.values()):
            pending.finish()
        ordering.ld_waited(w, ex.clock)
    return None


def _tc_fence(ex, w, ins, mask):
    # Ordering of tcgen05 operations around thread synchronisation (PTX ISA 9.7.16.6.3): the emulator runs the
    # operations in one order either way; emu.ordering records which orders the kernel established.
    ordering.fence(w, ins.info[0], ex.clock)
    return None


_TC = {"alloc": _tc_alloc, "dealloc": _tc_dealloc, "relinquish_alloc_permit": _tc_relinquish, "mma": _tc_mma,
       "cp": _tc_cp, "shift": _tc_shift, "commit": _tc_commit, "ld": _tc_ld, "st": _tc_st, "wait::ld": _tc_wait,
       "wait::st": _tc_wait, "fence::before_thread_sync": _tc_fence, "fence::after_thread_sync": _tc_fence}


# ---------------------------------------------------------------------------------------------- TMA store, bulk groups
class _GroupedOp:
    """An asynchronous operation tracked by async-groups (bulk or cp.async): its completion flag."""

    def __init__(self):
        self.done = False


def _group_state(w, kind: str):
    """Per-thread async-group state of a warp for `kind` ("bulk": cp.async.bulk's bulk async-groups; "cp.async": the
    non-bulk cp.async-groups; PTX keeps the two apart): lane -> uncommitted ops, lane -> committed groups (oldest
    first)."""
    groups = getattr(w, "async_groups", None)
    if groups is None:
        groups = w.async_groups = {}
    return groups.setdefault(kind, ({}, {}))


def _commit_group(w, mask, kind: str) -> None:
    """Each executing thread's uncommitted operations of `kind` form a new group (possibly empty)."""
    pending, groups = _group_state(w, kind)
    for lane in _lane(mask):
        groups.setdefault(lane, []).append(pending.pop(lane, []))


def _wait_group(w, mask, kind: str, n: int):
    """BLOCK until, for each executing thread, at most its n most recent groups of `kind` are pending and all earlier
    ones are complete (whatever the state of those n)."""
    _, groups = _group_state(w, kind)
    for lane in _lane(mask):
        gs = groups.get(lane, [])
        if any(not all(t.done for t in g) for g in gs[:max(len(gs) - n, 0)]):
            return BLOCK  # retried later; the engine completes in-flight operations meanwhile
        while gs and all(t.done for t in gs[0]):  # complete groups at the old end no longer matter
            gs.pop(0)
    return None


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
        tmap_addr = w.read_bits(tens.tensor_map, "b64", ex)
        coords = [w.read(c, "s32", ex) for c in tens.coords]
        if len(coords) != info["rank"]:
            raise Hazard(f"{ins.opcode}: {len(coords)} coordinates for a {info['rank']}-d copy")
        src = lane_addresses(ex, w, src_op, 32)
        pending, _ = _group_state(w, "bulk")
        for lane in _lane(mask):
            tmap = ex.tensor_map(int(tmap_addr[lane]))
            if tmap.rank != info["rank"]:
                raise Hazard(f"{ins.opcode}: the tensor map at {int(tmap_addr[lane]):#x} has rank {tmap.rank}")
            c = [int(x[lane]) for x in coords]
            tma.check_smem_alignment(int(src[lane]), f"{ins.where()} (lane {lane}), its source")
            cta, off = SharedAddressing.resolve(w.cta, int(src[lane]), False)
            token = _GroupedOp()
            pending.setdefault(lane, []).append(token)
            source = _StoreSource(ex, ins, w, tmap, c, cta, off, token)
            ex.submit(w.cta.cluster, AsyncOp(f"TMA store {c}", source.read_and_store, None, ins.line,
                                             Cost("store", tma.box_bytes(tmap), dests=(cta,))))
        return None


def _store_box_bytes(tmap) -> int:
    """Bytes of shared memory a TMA store of `tmap`'s box reads (rows of the inner box, or of the swizzle span)."""
    rows = 1
    for c in tmap.box_counts[1:]:
        rows *= c
    return rows * (tmap.swizzle_bytes if tmap.swizzle else tmap.inner_box_bytes)


class _StoreSource:
    """The shared-memory source of one TMA store, from issue until its issuer's synchronization epoch is over.

    The PTX rules a TMA store (an async-proxy read of shared memory) relies on: the bytes were written by generic
    stores fenced into the async proxy (fence.proxy.async, PTX ISA 9.7.13.4 "membar/fence", proxy fences) and
    ordered before the issue (a barrier with the writers), and nobody rewrites them until cp.async.bulk.wait_group.read
    says the store has read them (PTX ISA 9.7.9.25.6.2). The emulator reads the source when the store completes.
    A kernel that breaks these rules is racing; the hardware-verified precedent (arseni_ivanov's epilogue: every warp
    writes its part of the C tile, warp 0 issues the store right away with no fence or barrier, and never waits for
    it) survives because a store reads its source a while after issue and long before the next rewrite. That timing
    is what the emulator gives such a kernel, each time with a Note:
    - a generic write into the source by another warp in the issuer's epoch (no barrier the two share has completed
      since the issue) belongs to this store: if the store has already read, it reads and stores again, later;
    - any later write (the issuer's own after the issue, or another warp's after a shared barrier) is a reuse: the
      store reads the old bytes first;
    - unfenced generic writes in the source at issue, and a store still reading after its CTA exited, are noted.
    """

    def __init__(self, ex, ins, w, tmap, coords, cta, off, token):
        self.ex, self.ins, self.issuer, self.tmap, self.coords, self.cta, self.off, self.token = \
            ex, ins, w, tmap, coords, cta, off, token
        self.hi = off + _store_box_bytes(tmap)
        self.epoch = {b: bar.generation for b, bar in cta.named_barriers.items()}  # a barrier made later: 0
        self.snapshot = None  # the bytes read early, before a reuse
        self.read = False
        self.restore_pending = False
        cta.store_sources.append(self)
        unfenced = ordering.unfenced_writers(cta, off, self.hi)
        if unfenced:
            ex.note("bulk-store-without-proxy-fence", ins.site(), precedents.ARSENI_C_STORE,
                    f"the TMA store's source [{off:#x}, {self.hi:#x}) holds bytes written by generic stores of warps "
                    f"{sorted(unfenced)} with no fence.proxy.async after them")

    def _completed_since_issue(self, barrier_id) -> bool:
        return self.cta.named_barriers[barrier_id].generation != self.epoch.get(barrier_id, 0)

    def same_epoch(self, w) -> bool:
        """No barrier that w and the issuer have both joined has completed since the issue."""
        if w is self.issuer:
            return False
        return not any(self._completed_since_issue(b) for b in _joined(w) & _joined(self.issuer))

    def epoch_over(self) -> bool:
        return any(self._completed_since_issue(b) for b in _joined(self.issuer)) or self.cta.exited

    def read_and_store(self):
        if self.cta.exited:
            self.ex.note("bulk-store-reads-after-exit", self.ins.site(), precedents.ARSENI_C_STORE,
                         f"the TMA store reads shared memory of CTA {self.cta.ctaid} after it exited (no "
                         "cp.async.bulk.wait_group before the exit)")
        image = self.snapshot if self.snapshot is not None else self.cta.smem[self.off:self.hi].copy()
        self._store(image)
        self.read = True
        self.token.done = True

    def _restore(self):
        self.restore_pending = False
        self._store(self.snapshot if self.snapshot is not None else self.cta.smem[self.off:self.hi].copy())

    def _store(self, image):
        if self.hi > self.cta.smem.size:
            raise Hazard(f"TMA store source [{self.off:#x}, {self.hi:#x}) outside {self.cta.smem.size} bytes of shared "
                         f"memory (CTA {self.cta.ctaid})")

        def write(addr, data):
            self.ex.gmem.write(addr, data)
            self.ex.log_store(addr, data.size, self.cta.cluster)

        n = tma.tile_store(self.tmap, self.coords, image, self.off, write)
        self.ex.stats["tma_store_bytes"] = self.ex.stats.get("tma_store_bytes", 0) + n

    def before_write(self, w, lo: int, hi: int) -> None:
        """A generic store of warp w to [lo, hi) of this CTA's shared memory is about to happen."""
        if hi <= self.off or self.hi <= lo:
            return
        if self.same_epoch(w):
            self.ex.note("bulk-store-source-unsynchronized", self.ins.site(), precedents.ARSENI_C_STORE,
                         f"warp {w.warp_id} writes [{lo:#x}, {hi:#x}) of a TMA store's source after warp "
                         f"{self.issuer.warp_id} issued the store, with no barrier between them")
            if self.read and not self.restore_pending:
                # it read too early for the hardware's timing: it reads (and stores) again, later
                self.restore_pending = True
                self.ex.submit(self.cta.cluster, AsyncOp("TMA store (late read)", self._restore, None, self.ins.line))
            return
        if (not self.read or self.restore_pending) and self.snapshot is None:
            # the (late) read must have happened before this rewrite: it reads the bytes as they are now
            if not self.read:
                self.ex.note("bulk-store-source-reused-before-read", self.ins.site(), precedents.ARSENI_C_STORE,
                             f"warp {w.warp_id} rewrites [{lo:#x}, {hi:#x}) of a TMA store's source before any "
                             "cp.async.bulk.wait_group.read covered the store")
            self.snapshot = self.cta.smem[self.off:self.hi].copy()


def _joined(w) -> set:
    return w.barriers_joined


def on_shared_write(ex, w, cta, off: int, nbytes: int):
    """Called by generic stores to shared memory before they write: the TMA-store sources they touch (_StoreSource).
    (The unfenced-write log the proxy-fence rules read is emu.ordering's: generic_write, proxy_fence.)"""
    sources = cta.store_sources
    if sources:
        sources[:] = [x for x in sources if not (x.read and not x.restore_pending and x.epoch_over())]
        for x in sources:
            x.before_write(w, off, off + nbytes)


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
        _commit_group(w, mask, "bulk")


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
        return _wait_group(w, mask, "bulk", int(w.read(ins.operands[0], "u32", ex)[0]))
