"""Control flow, warp collectives and barriers (PTX ISA: "bra", "ret", "exit", "bar/barrier", "barrier.cluster", "elect.sync", "shfl.sync", "fence", "griddepcontrol")."""
from __future__ import annotations

import numpy as np

from .isa import BLOCK, JUMPED, family, unsupported
from .simt import WARP
from .machine import EXIT_CHECKS, ClusterBarrier
from .mbarrier import merge, observe, released
from .ordering import proxy_fence
from . import printf
from .ops_memory import call_param, read_thread
from .ptx import Args, Imm, Pair, ParamSym
from .state import Hazard, Unsupported


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
        if ins.info and not (mask is w.live and w.upc >= 0):  # (a converged warp's whole-warp branch is uniform)
            pc = int(w.pc[mask][0])
            live_here = ~w.exited & (w.pc == pc)
            if (mask != live_here).any():
                raise Hazard(f"bra.uni taken by lanes {np.flatnonzero(mask).tolist()} but not by "
                             f"{np.flatnonzero(live_here & ~mask).tolist()}: .uni promises a non-divergent branch")
        w.jump(mask, ins.target)
        return JUMPED


@family("ret", "exit")
class Exit:
    """exit, and ret: the end of the kernel for the lanes in no call, a return to the call for the others (PTX ISA
    "ret": it returns from the function to the instruction after the call; in the kernel it ends the thread). Each
    lane returns to its own innermost call, with its return values copied to that call's (ret{.uni}: the same)."""

    @staticmethod
    def decode(ins):
        if ins.parts[1:] not in ((), ("uni",)) or (ins.base == "exit" and len(ins.parts) != 1):
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        if ins.base == "ret" and w.frames:
            return _return(ex, w, mask)
        w.exit_lanes(mask)
        w.cta.cluster.progress += 1
        return JUMPED


class Frame:
    """One call the lanes are in: where they return to, which lanes are still inside, and the (caller's, callee's)
    return-value parameters to copy back at ret."""

    def __init__(self, return_pc: int, lanes: np.ndarray, returns: list):
        self.return_pc, self.lanes, self.returns = return_pc, lanes, returns


def _current_pc(w, mask) -> int:
    return w.upc if w.upc >= 0 else int(w.pc[int(np.flatnonzero(mask)[0])])


def _return(ex, w, mask):
    """ret by the lanes of `mask`: each to the innermost call it is in (the frames, innermost last); lanes in no call
    end (a ret in the kernel's own code while other lanes are in a function)."""
    left = mask.copy()
    targets = []
    for frame in reversed(w.frames):
        lanes = frame.lanes & left
        if not lanes.any():
            continue
        for caller, (callee, size) in frame.returns:
            if ex.kernel.param_vars[caller.name] != size:
                raise Hazard(f"ret: the call's return value {caller.name.split('@')[0]} has "
                             f"{ex.kernel.param_vars[caller.name]} bytes, the function's {callee.split('@')[0]} {size}")
            call_param(w, caller.name, size)[lanes] = call_param(w, callee, size)[lanes]
        targets.append((lanes, frame.return_pc + 1))
        frame.lanes = frame.lanes & ~lanes
        left &= ~lanes
    w.frames = [f for f in w.frames if f.lanes.any()]
    if len(targets) == 1 and not left.any():
        w.jump(mask, targets[0][1])
        return JUMPED
    pcs = w.pc
    here = w.live & (pcs == pcs[int(np.flatnonzero(mask)[0])])
    pcs[here & ~mask] += 1
    for lanes, target in targets:
        pcs[lanes] = target
    if left.any():
        w.exit_lanes(left)
        w.cta.cluster.progress += 1
    return JUMPED


@family("call")
class Call:
    """call{.uni} [(ret),] func, [(args)] (PTX ISA "call", 11.1.2 ".func", 5.1.6.2 "Device Function Parameters"): the
    arguments' per-thread `.param` copies become the callee's formals, the lanes continue at its first instruction and
    ret brings them back (Exit). A direct call of a `.func` with a body in the module, or of the CUDA runtime's
    vprintf (device printf: emu.printf; the text kept in Machine.printed). An indirect call, or a call of another
    body-less `.extern .func`, is Unsupported: what it does is not in the module."""

    @staticmethod
    def decode(ins):
        fn = ins.callee
        if ins.parts[1:] not in ((), ("uni",)) or fn is None:
            raise unsupported(ins)
        lists = [op for op in ins.operands if isinstance(op, Args)]
        callee_at = next(i for i, op in enumerate(ins.operands) if not isinstance(op, Args))
        returns = lists[0].items if callee_at == 1 else ()
        args = lists[-1].items if len(ins.operands) > callee_at + 1 else ()
        if not all(isinstance(op, ParamSym) for op in returns + args):
            raise unsupported(ins, "arguments other than .param variables")
        if fn.start < 0 and fn.name != "vprintf":
            raise unsupported(ins, f"{fn.name} is an .extern function with no body in the module (of those only the "
                                   "CUDA runtime's vprintf is known)")
        if len(args) != len(fn.formals) or len(returns) > len(fn.retvals):
            raise unsupported(ins, f"{len(args)} arguments and {len(returns)} return values for {fn.name}'s "
                                   f"{len(fn.formals)} and {len(fn.retvals)}")
        return returns, args

    @staticmethod
    def execute(ex, w, ins, mask):
        returns, args = ins.info
        fn = ins.callee
        sizes = ex.kernel.param_vars
        if fn.start < 0:
            return _vprintf(ex, w, ins, mask, returns, args)
        for actual, (formal, size) in zip(args, fn.formals):
            if sizes[actual.name] < size:
                raise Hazard(f"{ins.opcode}: the argument {actual.name.split('@')[0]} has {sizes[actual.name]} bytes, "
                             f"{fn.name}'s parameter {formal.split('@')[0]} {size}")
            call_param(w, formal, size)[mask] = call_param(w, actual.name, sizes[actual.name])[mask, :size]
        w.frames.append(Frame(_current_pc(w, mask), mask.copy(), list(zip(returns, fn.retvals))))
        w.jump(mask, fn.start)
        return JUMPED


def _c_string(ex, w, lane: int, addr: int) -> bytes:
    """The NUL-terminated bytes at a generic address, as thread `lane` reads them (at most printf.MAX_STRING)."""
    out = bytearray()
    while len(out) < printf.MAX_STRING:
        byte = int(read_thread(ex, w, lane, "generic", addr + len(out), 1)[0])
        if byte == 0:
            break
        out.append(byte)
    return bytes(out)


def _vprintf(ex, w, ins, mask, returns, args):
    """vprintf(format, arguments) for each lane of mask, in lane order: the text to Machine.printed, the number of
    arguments read to the return value (-1 for a NULL format). Its two arguments are those its `.extern .func`
    declaration gives it (Call.decode checked the count)."""
    formats = call_param(w, args[0].name, 8).view("<u8")[:, 0]
    buffers = call_param(w, args[1].name, 8).view("<u8")[:, 0]
    result = np.zeros(WARP, np.int32)
    strings = {}
    for lane in np.flatnonzero(mask).tolist():
        if formats[lane] == 0:
            result[lane] = -1
            continue
        key = int(formats[lane])
        if key not in strings:
            strings[key] = _c_string(ex, w, lane, key)
        buffer = int(buffers[lane])
        text, result[lane] = printf.format_printf(
            strings[key], lambda offset, n: read_thread(ex, w, lane, "generic", buffer + offset, n),
            lambda address: _c_string(ex, w, lane, address))
        ex.printed.append(text)
    if returns:
        call_param(w, returns[0].name, 4)[mask] = result.view(np.uint8).reshape(WARP, 4)[mask]
    return None


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
        w.barriers_joined.add(ident)
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
            bar.generation += 1
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


@family("bar.warp.sync")
class WarpBarrier:
    """bar.warp.sync membermask (PTX ISA "bar.warp.sync"; CUDA __syncwarp): each thread waits until every thread of
    membermask has executed a bar.warp.sync with the same mask. The scheduler runs a warp's lanes at its smallest PC,
    so the lanes that reach this instruction together are the converged ones; a member lane that is elsewhere is at a
    later PC and cannot be waited for here: that is refused, not passed through (its ordering would be lost)."""

    @staticmethod
    def decode(ins):
        if len(ins.parts) != 3 or len(ins.operands) != 1:
            raise unsupported(ins)

    @staticmethod
    def execute(ex, w, ins, mask):
        membermask = _membermask(w, ins, ins.operands[0], ex)
        if not all((membermask >> lane) & 1 for lane in np.flatnonzero(mask)):
            raise Hazard(f"{ins.opcode}: executing lanes {np.flatnonzero(mask).tolist()} are not all in membermask "
                         f"{membermask:#x} (PTX ISA: undefined)")
        members = np.array([(membermask >> i) & 1 for i in range(WARP)], bool) & ~w.exited
        if (members & ~mask).any():
            raise Unsupported(f"{ins.opcode}: lanes {np.flatnonzero(members & ~mask).tolist()} of membermask "
                              f"{membermask:#x} are at a later PC; this scheduler cannot wait for them ({ins.where()})")


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
            # the warp's generic writes to shared memory so far are ordered before its later async-proxy operations
            # (PTX ISA 9.7.13.4, proxy fences): emu.ordering stops counting them (TMA-store sources, tcgen05.cp)
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


@family("setmaxnreg")
class SetMaxNReg:
    """setmaxnreg.{inc,dec}.sync.aligned.u32 imm-reg-count (PTX ISA "setmaxnreg", miscellaneous instructions; sm_90a+):
    a hint to raise (.inc) or lower (.dec) the warp's per-thread register maximum, served from a per-CTA pool. No
    value changes, so no state here beyond its rules:
    - imm-reg-count is an immediate in [24, 256], a multiple of 8;
    - .sync.aligned: every thread of the warp executes it together;
    - "The same setmaxnreg instruction must be executed by all warps in a warpgroup" (four contiguous warps, the
      first a multiple of 4; a block that ends inside a warpgroup has only the warps that exist), and "after
      executing a setmaxnreg instruction, all warps in the warpgroup must synchronize explicitly before executing
      subsequent setmaxnreg instructions": the n-th setmaxnreg of each warp of a warpgroup must be the same
      instruction, no warp may issue its (n+1)-th before every warp of its warpgroup issued its n-th, and at exit
      every warp of a warpgroup has issued as many as the others.
    Not checked: the count against the warp's current maximum (ptxas decides that, after the PTX) and the pool's
    size (.inc blocks until registers are free; a pool never refilled would hang on hardware)."""

    @staticmethod
    def decode(ins):
        if ins.parts[1:] not in (("inc", "sync", "aligned", "u32"), ("dec", "sync", "aligned", "u32")):
            raise unsupported(ins)
        (count,) = ins.operands
        if not isinstance(count, Imm):
            raise unsupported(ins, "imm-reg-count must be an immediate")
        n = int(count.value)
        if not 24 <= n <= 256 or n % 8:
            raise Hazard(f"{ins.where()}: setmaxnreg count {n} must be a multiple of 8 in [24, 256]")
        return ins.parts[1], n

    @staticmethod
    def execute(ex, w, ins, mask):
        live = ~w.exited
        if (live & ~mask).any():
            raise Hazard(f"{ins.opcode} is .sync.aligned: lanes {np.flatnonzero(live & ~mask).tolist()} do not execute it")
        group = warpgroup_of(w)
        mine = w.setmaxnreg_log
        n = len(mine)
        for other in group:
            theirs = other.setmaxnreg_log
            if len(theirs) > n and theirs[n] is not ins:
                raise Hazard(f"{ins.opcode}: warp {w.warp_id} executes {ins.where()} as its setmaxnreg #{n + 1}; warp "
                             f"{other.warp_id} of its warpgroup executed {theirs[n].where()} (the same instruction "
                             "must be executed by all warps in a warpgroup)")
            if len(theirs) < n:
                raise Hazard(f"{ins.opcode}: warp {w.warp_id} issues its setmaxnreg #{n + 1} before warp {other.warp_id} "
                             f"of its warpgroup issued #{n} (the warpgroup must synchronize between setmaxnreg)")
        mine.append(ins)
        return None


def warpgroup_of(w) -> list:
    """The existing warps of w's warpgroup: warps 4g..4g+3 of the CTA (PTX ISA "warpgroup")."""
    first = w.warp_id - w.warp_id % 4
    return [x for x in w.cta.warps if first <= x.warp_id < first + 4]


def _check_warpgroups_at_exit(cta) -> None:
    """At CTA exit every warp of a warpgroup has executed the same number of setmaxnreg (SetMaxNReg)."""
    for w in cta.warps[::4]:
        counts = {x.warp_id: len(x.setmaxnreg_log) for x in warpgroup_of(w)}
        if len(set(counts.values())) > 1:
            raise Hazard(f"CTA {cta.ctaid}: warps of one warpgroup executed different numbers of setmaxnreg {counts} "
                         "(the same setmaxnreg must be executed by all warps in a warpgroup)")


EXIT_CHECKS.append(_check_warpgroups_at_exit)
