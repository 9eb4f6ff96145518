"""Control flow, warp collectives and barriers (PTX ISA: "bra", "ret", "exit", "bar/barrier", "barrier.cluster", "elect.sync", "shfl.sync", "fence", "griddepcontrol")."""
from __future__ import annotations

import numpy as np

from .isa import BLOCK, JUMPED, family, unsupported
from .simt import WARP
from .machine import ClusterBarrier
from .mbarrier import merge, observe, released
from .ordering import proxy_fence
from .ptx import Pair
from .state import Hazard


def _membermask(w, ins, op, ex):
    return int(w.read(op, "u32", ex)[0]) & 0xFFFFFFFF


def _require_converged(w, ins, mask, membermask: int) -> None:
    """.sync collectives: every non-exited lane named in membermask executes the same instruction."""
    members = np.array([(membermask >> i) & 1 for i in range(WARP)], bool) & ~w.exited
    missing = members & ~mask
    if missing.any():
        raise Hazard(f"{ins.opcode}: lanes {np.flatnonzero(missing).tolist()} of membermask {membermask:#x} do not "
                     f"execute it together with lanes {np.flatnonzero(mask).tolist()} (PTX ISA: .sync requires them)")


@family("bra")
class Bra:
    @staticmethod
    def decode(ins):
        if ins.parts[1:] not in ((), ("uni",)):
            raise unsupported(ins)
        return "uni" in ins.parts

    @staticmethod
    def execute(ex, w, ins, mask):
        pc = int(w.pc[mask][0])
        live_here = ~w.exited & (w.pc == pc)
        if ins.info and (mask != live_here).any():
            raise Hazard(f"bra.uni taken by lanes {np.flatnonzero(mask).tolist()} but not by "
                         f"{np.flatnonzero(live_here & ~mask).tolist()}: .uni promises a non-divergent branch")
        w.pc[mask] = ins.target
        w.pc[live_here & ~mask] += 1
        return JUMPED


@family("ret", "exit")
class Exit:
    @staticmethod
    def decode(ins):
        if len(ins.parts) != 1:
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        w.exited |= mask
        w.cta.cluster.progress += 1
        return JUMPED


@family("elect")
class Elect:
    """elect.sync d|p, membermask: one leader among the executing member lanes (PTX ISA "elect.sync").
    Which lane leads is not specified: the emulator draws it from the seed."""

    @staticmethod
    def decode(ins):
        if ins.opcode != "elect.sync":
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        dst, member_op = ins.operands
        mm = _membermask(w, ins, member_op, ex)
        _require_converged(w, ins, mask, mm)
        cands = np.flatnonzero(mask & np.array([(mm >> i) & 1 for i in range(WARP)], bool))
        leader = int(cands[int(ex.rng.integers(len(cands)))])
        w.write(dst.first, np.full(WARP, leader, np.uint32), "u32", mask)
        w.write(dst.second, np.arange(WARP) == leader, "pred", mask)


@family("shfl")
class Shfl:
    """shfl.sync.{idx,up,down,bfly}.b32 d, a, b, c, membermask (PTX ISA "shfl.sync")."""

    @staticmethod
    def decode(ins):
        if len(ins.parts) != 4 or ins.parts[1] != "sync" or ins.parts[2] not in ("idx", "up", "down", "bfly") \
                or ins.parts[3] != "b32" or len(ins.operands) != 5:
            raise unsupported(ins)
        return ins.parts[2]

    @staticmethod
    def execute(ex, w, ins, mask):
        d, a, b, c, mm_op = ins.operands
        mm = _membermask(w, ins, mm_op, ex)
        _require_converged(w, ins, mask, mm)
        val = w.read(a, "b32", ex)
        bb = w.read(b, "u32", ex).astype(np.int64)
        cc = w.read(c, "u32", ex).astype(np.int64)
        lane = np.arange(WARP)
        seg_mask = (cc >> 8) & 0x1F
        max_lane = (lane & seg_mask) | ((cc & 0x1F) & ~seg_mask)
        min_lane = lane & seg_mask
        mode = ins.info
        if mode == "idx":
            j = min_lane | (bb & 0x1F & ~seg_mask)
            ok = j <= max_lane
        elif mode == "up":
            j = lane - bb
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bb
            ok = j <= max_lane
        else:
            j = lane ^ bb
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src_ok = mask[j]
        if (mask & ~src_ok).any():
            raise Hazard(f"{ins.opcode}: source lane not executing the shuffle (undefined value)")
        if isinstance(d, Pair):
            # `d|p` form (PTX ISA "shfl.sync": "shfl.sync.mode.b32 d[|p], a, b, c, membermask"; p is true when the
            # source lane is within range, else false and d is the thread's own a). nvcc emits it for __shfl_sync.
            w.write(d.first, val[j], "b32", mask)
            w.write(d.second, ok, "pred", mask)
            return
        w.write(d, val[j], "b32", mask)


@family("bar", "barrier")
class NamedBarrierSync:
    """bar.sync / barrier.sync a{, b} (PTX ISA 9.7.13.1): b threads (a multiple of 32) or the whole CTA."""

    @staticmethod
    def decode(ins):
        if ins.parts[1:2] == ("cluster",):
            return ClusterBarrierOp.decode(ins)
        if ins.opcode not in ("bar.sync", "barrier.sync", "barrier.sync.aligned", "bar.arrive", "barrier.arrive"):
            raise unsupported(ins)
        return ("named", "arrive" in ins.parts)

    @staticmethod
    def execute(ex, w, ins, mask):
        if ins.info[0] == "cluster":
            return ClusterBarrierOp.execute(ex, w, ins, mask)
        from .machine import NamedBarrier

        live = ~w.exited
        if (live & ~mask).any():
            raise Hazard(f"{ins.opcode} executed by a divergent warp (lanes {np.flatnonzero(live & ~mask).tolist()} absent)")
        ident = int(w.read(ins.operands[0], "u32", ex)[0])
        count = int(w.read(ins.operands[1], "u32", ex)[0]) if len(ins.operands) > 1 else len(w.cta.warps) * WARP
        if count % WARP:
            raise Hazard(f"{ins.opcode}: thread count {count} is not a multiple of the warp size")
        bars = w.cta.named_barriers
        bar = bars.get(ident)
        if bar is None:
            bar = bars[ident] = NamedBarrier(w.cta, ident)
        if bar.expected is None:
            bar.expected = count
        elif bar.expected != count:
            raise Hazard(f"{ins.opcode} {ident}: thread count {count} differs from {bar.expected} of the other arrivals")
        bar.arrived += WARP
        if bar.arrived > bar.expected:
            raise Hazard(f"{bar.describe()}: more threads arrived than expected")
        merge(bar.knowledge, released(w, ex.clock))
        arrive_only = ins.info[1]
        if bar.arrived == bar.expected:
            for other in bar.waiting:
                other.blocked_on = None
                other.pc[other.pc_at_block] += 1
                observe(other, bar.knowledge)
            observe(w, bar.knowledge)
            bar.waiting.clear()
            bar.arrived, bar.expected, bar.knowledge = 0, None, {}
            w.cta.cluster.progress += 1
            return None
        if arrive_only:
            return None
        w.blocked_on = bar
        w.pc_at_block = mask.copy()
        bar.waiting.append(w)
        return BLOCK


class ClusterBarrierOp:
    """barrier.cluster.arrive{.relaxed|.release}{.aligned} / barrier.cluster.wait{.acquire}{.aligned}
    (PTX ISA 9.7.13.2): the phase completes when every non-exited thread of the cluster has arrived;
    a wait returns once the phase its thread arrived in has completed."""

    @staticmethod
    def decode(ins):
        kind = ins.parts[2]
        mods = set(ins.parts[3:])
        if kind not in ("arrive", "wait") or mods - {"relaxed", "release", "acquire", "aligned"}:
            raise unsupported(ins)
        return ("cluster", kind)

    @staticmethod
    def _try_complete(cl) -> None:
        bar = cl.barrier
        live = [(x, ~x.exited) for cta in cl.ctas for x in cta.warps]
        if all(((m & ~bar.arrived_threads.get(x, np.zeros(WARP, bool))) == 0).all() for x, m in live):
            bar.phase += 1
            bar.arrived_threads.clear()
            for cta in cl.ctas:
                for x in cta.warps:
                    if isinstance(x.blocked_on, ClusterBarrier):
                        x.blocked_on = None
            cl.progress += 1

    @staticmethod
    def execute(ex, w, ins, mask):
        cl = w.cta.cluster
        bar = cl.barrier
        if ins.info[1] == "arrive":
            prev = bar.arrived_threads.get(w, np.zeros(WARP, bool))
            if (prev & mask).any():
                raise Hazard("barrier.cluster.arrive twice in one phase by the same thread")
            bar.arrived_threads[w] = prev | mask
            w.cluster_arrive_phase = bar.phase
            merge(bar.knowledge.setdefault(bar.phase, {}), released(w, ex.clock))
            for mb in w.cta.mbarriers.values():  # the release half of publishing an mbarrier's initialisation
                if mb.fenced and mb.published_phase is None and mb.init_thread[0] is w and mask[mb.init_thread[1]]:
                    mb.published_phase = bar.phase
            ClusterBarrierOp._try_complete(cl)
            return None
        if getattr(w, "cluster_arrive_phase", None) is None:
            raise Hazard("barrier.cluster.wait without a preceding barrier.cluster.arrive by the same thread")
        if bar.phase > w.cluster_arrive_phase:
            observe(w, bar.knowledge.get(w.cluster_arrive_phase, {}))
            w.cluster_synced_phase = w.cluster_arrive_phase
            w.cluster_arrive_phase = None
            return None
        w.blocked_on = bar
        return BLOCK


@family("fence")
class Fence:
    """fence.* orders memory accesses. The emulator executes every access in one global order, so
    ordering fences have nothing to do; fence.mbarrier_init publishes mbarrier initialisation to the
    cluster (PTX ISA 9.7.13.4 "membar/fence"): remote arrivals on a barrier before that are a hazard."""

    KNOWN = {"fence.mbarrier_init.release.cluster", "fence.proxy.async.shared::cta", "fence.proxy.async",
             "fence.acq_rel.cta", "fence.acq_rel.cluster", "fence.sc.cta", "fence.sc.cluster",
             "fence.proxy.async.shared::cluster", "fence.acq_rel.gpu", "fence.sc.gpu"}

    @staticmethod
    def decode(ins):
        if ins.opcode not in Fence.KNOWN:
            raise unsupported(ins)
        return ins.opcode

    @staticmethod
    def execute(ex, w, ins, mask):
        if ins.info.startswith("fence.proxy.async"):
            proxy_fence(w)
        if ins.info in ("fence.mbarrier_init.release.cluster", "fence.acq_rel.cluster", "fence.sc.cluster"):
            for bar in w.cta.mbarriers.values():
                if bar.init_thread is not None and bar.init_thread[0] is w and mask[bar.init_thread[1]]:
                    bar.fenced = True
                    bar.fenced_at = ex.clock


@family("prefetch")
class Prefetch:
    """prefetch.tensormap and prefetch of data: cache hints with no effect on values (PTX ISA 9.7.9.15)."""

    @staticmethod
    def decode(ins):
        if ins.opcode not in ("prefetch.tensormap", "prefetch.global.L2", "prefetch.param.tensormap",
                              "prefetch.global.tensormap"):
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        return None


@family("griddepcontrol")
class GridDepControl:
    """griddepcontrol.wait / launch_dependents (PTX ISA "griddepcontrol"). The emulator runs one
    kernel, so the prerequisite grid has always completed and dependents have nothing to start; what it
    checks is the rule that makes programmatic dependent launch safe: under such a launch no thread
    touches global memory before its griddepcontrol.wait (Machine.check_global_access)."""

    @staticmethod
    def decode(ins):
        if ins.opcode not in ("griddepcontrol.wait", "griddepcontrol.launch_dependents"):
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        if ins.opcode == "griddepcontrol.wait":
            prev = getattr(w, "griddep_waited", None)
            w.griddep_waited = mask.copy() if prev is None else prev | mask
        return None
