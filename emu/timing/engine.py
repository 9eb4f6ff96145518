"""TimedMachine: the emulator's warps and asynchronous operations on a clock.

What is simulated (the costs are emu/timing/b200.yaml's rows, named here in backquotes):
- Warps issue one instruction at a time on their SM sub-partition (warp w on sub-partition w % 4) when the
  sub-partition's issue slot is free. The PTX is not the SASS: ptxas schedules a straight run of arithmetic so that
  independent work hides latencies. So arithmetic, conversions, shuffles, register and shared loads and tcgen05.ld
  ("dataflow" instructions) never stall at issue: each destination register is ready `latency` cycles after both
  the issue and its sources (a scoreboard over the PTX registers), and MUFU and f16 conversion work takes the first
  free slot of the sub-partition's MUFU / conversion pipe (`mufu_issue` / `cvt_f16_issue` cycles each) without
  holding the issue slot. Every other instruction (stores, branches,
  barriers, mbarrier, tcgen05.mma/cp/commit/wait, fences, TMA) waits at issue for its source registers: a chain of
  arithmetic costs its latency where something consumes it, and its issue slots everywhere. Global stores go through
  the SM's store path (`store_bytes_per_clk`), shared-memory accesses through its shared-memory port, tcgen05.ld
  through the tensor-memory read port; tcgen05.wait::ld waits for them.
- A warp whose mbarrier try_wait fails sleeps until that barrier changes, then wakes `mbarrier_wake_latency` later;
  a warp held at bar.sync / barrier.cluster / a tcgen05 pair rendezvous continues `barrier_latency` after release.
- Asynchronous operations complete at a time computed when they are issued:
  * loads (TMA, bulk copies; cp.async skips the TMA engine): the SM's TMA engine (`tma_issue_cycles` per request),
    then bytes through the chip's HBM share (only the fraction of the request that is a first read of those bytes in
    the grid: 1 / reuse, see
    emu.timing.call), the chip's L2 share, each destination SM's L2 -> SM path and shared-memory port, then the
    L2 latency, plus (1 / reuse) of the extra HBM latency;
  * tcgen05.mma: the SMs of its CTA group's tensor cores in order; it lasts max(math at `mma_mac_per_clk`,
    shared-memory operand bytes at the port) and completes after `mma_latency` (by N and cta_group);
  * an L2 prefetch (cp.async.bulk.prefetch) spends its first-read share of HBM when issued; once it has arrived,
    loads of the prefetched fraction of that allocation no longer read HBM;
  * tcgen05.cp / tcgen05.commit: in order behind the SM's earlier tcgen05 operations (PTX ISA 9.7.16.6: pipelined
    tcgen05 instructions of a thread execute in order).
  Functional effects (data written, barriers signalled) happen at that completion time, in time order.
- griddepcontrol.wait, in a kernel launched with programmatic dependent launch, returns at `wait_release`.
- Spread loads (`load_spread`, a seed; off for every timed figure): each warp's ld.global takes a latency drawn
  uniformly in [`l2_hit_latency`, `hbm_latency`] instead of the L2 latency: on a B200 a load is an L2 hit, a hit on
  the far die or a first read from HBM depending on what the other SMs did, which the simulated clusters do not
  know. The verdict's spread B200-timing schedules use it (harness.verdict.B200_SPREAD): warps that wait for loads
  leave them in different orders, as on the machine.
- Switches (docs/timing_hypotheses.md H1-H15; b200.yaml's last section, each off at the behaviour above): a separate
  shared-memory write path (`smem_write_bytes_per_clk`, H1), a fixed 2-SM MMA cost (`mma_2sm_fixed_cycles`, H2),
  what loads charge to the L2 share (`l2_share_mode`, H3), TMA box rows on the L2 -> SM path (`tma_row_cycles`, H4a),
  the far die's L2 latency (`die_to_die_cycles`, H5), the tensor-map descriptor fetch (`tensormap_fetch_cycles`,
  H9), first-load HBM latency by size (`first_load_latency_table`, H10), the start cost after griddepcontrol.wait
  under PDL (`pdl_overlap_split`, H12), the store queue (`store_queue_cycles`, H14), tcgen05.ld one step early
  (`tmem_ld_lookahead`, H15).
- What the machine issues, where the SASS and the PTX disagree (emu.timing.sass, IssueMerge below): for the copy kinds
  whose SASS issues once per warp (a TMA store on uniform registers), the lanes of one warp-execution with identical
  operands are charged once; the other lanes' operations still run (the functional result is the PTX's) and complete
  with the charged one, using no resource.
Time only moves forward: the engine pops the earliest event (a warp ready to issue, or an operation completing) and a
warp runs while its next issue time is not later than the next event.
"""
from __future__ import annotations

import heapq
import time as wallclock

import numpy as np

from ..isa import BLOCK
from ..machine import EXIT_CHECKS, SLEPT, Deadlock, Machine, running
from ..ptx import Addr, Pair, Reg, TensorCoords, Vec
from ..simt import lane_addresses
from ..state import EmulatorError, Hazard
from .sass import ptx_kind

WARP_EVENT, OP_EVENT, TIMEOUT_EVENT = 0, 1, 2
MUFU_BASES = {"ex2", "rcp", "tanh", "lg2", "sin", "cos", "rsqrt", "sqrt"}
# Instructions whose first operand is not a destination register.
NO_DEST_BASES = {"st", "bar", "barrier", "bra", "fence", "prefetch", "griddepcontrol", "exit", "ret", "red", "cp",
                 "membar", "trap", "setmaxnreg", "tcgen05", "call"}
NO_DEST_FORMS = {("mbarrier", "init"), ("mbarrier", "expect_tx")}
# Dataflow instruction classes: no stall at issue for their sources (see the module docstring).
DATAFLOW = {"alu", "alu64", "fp32x2", "mufu", "cvt16", "ld_param", "ld_smem", "ld_dsmem", "shfl", "elect", "tmem_ld"}
# Instructions a tcgen05.ld is not moved above by the lookahead switch (tmem_ld_lookahead, H15): synchronisation and
# the other tcgen05 operations (the lookahead's step boundary, tcgen05.wait::ld, is handled apart).
LOOKAHEAD_FENCES = {"mbarrier", "bar", "barrier", "fence", "membar", "griddepcontrol", "tcgen05"}
SWITCHES = {"l2_share_mode": (0, 1, 2), "first_load_latency_table": (0, 1), "pdl_overlap_split": (0, 1),
            "tmem_ld_lookahead": (0, 1)}


def _regs(op) -> list:
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, Vec):
        return [x.name for x in op.items if isinstance(x, Reg)]
    if isinstance(op, Addr):
        return [op.base.name] if isinstance(op.base, Reg) else []
    if isinstance(op, Pair):
        return [op.first.name, op.second.name]
    if isinstance(op, TensorCoords):
        return _regs(op.tensor_map) + [x.name for x in op.coords if isinstance(x, Reg)]
    return []


def classify(ins) -> tuple:
    """(cost class, source registers, destination registers) of one instruction, computed once."""
    b, p = ins.base, ins.parts
    if b in MUFU_BASES and "approx" in p:
        cls = "mufu"
    elif b == "cvt" and any("f16" in x for x in p[1:]):
        cls = "cvt16"
    elif b == "ld":
        cls = ("ld_param" if "param" in p else "ld_dsmem" if "shared::cluster" in p else
               "ld_smem" if any(x.startswith("shared") for x in p) else "ld_global")
    elif b == "st":
        cls = "st_global" if "global" in p else "st_smem" if any(x.startswith("shared") for x in p) else "alu"
    elif b in ("shfl", "elect"):
        cls = b
    elif b in ("atom", "red"):
        cls = "atomic"
    elif b in ("bar", "barrier"):
        cls = "barrier"
    elif b == "tcgen05":
        cls = {"ld": "tmem_ld", "wait::ld": "tmem_wait"}.get(p[1], "tcgen05")
    elif b == "griddepcontrol" and p[1] == "wait":
        cls = "griddep_wait"
    elif p[-1] == "f32x2" and b in ("add", "sub", "mul", "fma"):  # one FADD2/FMUL2/FFMA2 (b200.yaml fp32x2_issue)
        cls = "fp32x2"
    elif b in ("add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "min", "max", "neg") and p[-1][-2:] == "64":
        cls = "alu64"
    else:
        cls = "alu"
    ops = list(ins.operands)
    has_dest = b not in NO_DEST_BASES and tuple(p[:2]) not in NO_DEST_FORMS and ops
    dsts = _regs(ops[0]) if has_dest else []
    srcs = [r for op in (ops[1:] if has_dest else ops) for r in _regs(op)]
    if ins.guard is not None:
        srcs.append(ins.guard[0].name)
    return cls, tuple(srcs), tuple(dsts)


def _lane_values(w, op) -> list:
    """The per-lane values (numpy vectors of 32) an operand reads: registers, address bases, tensor-map and
    coordinate registers. Immediates and symbols are the same in every lane and add nothing."""
    if isinstance(op, Reg):
        return [w.read(op, "b64")]
    if isinstance(op, Addr):
        return [w.read(op.base, "b64")] if isinstance(op.base, Reg) else []
    if isinstance(op, TensorCoords):
        return _lane_values(w, op.tensor_map) + [v for c in op.coords for v in _lane_values(w, c)]
    if isinstance(op, Vec):
        return [v for x in op.items for v in _lane_values(w, x)]
    return []


class _IssueGroup:
    """The lanes of one warp-execution of a copy whose kind the SASS issues once per distinct operands: their
    operand keys in lane order (the order the ops_async handlers issue one operation per active lane in)."""

    def __init__(self, w, ins, lanes):
        mask = lanes
        if ins.guard is not None:
            g = w.read(ins.guard[0], "pred")
            mask = lanes & (~g if ins.guard[1] else g)
        values = [v for op in ins.operands for v in _lane_values(w, op)]
        self.keys = [tuple(int(v[lane]) for v in values) for lane in np.flatnonzero(mask)]
        self.next = 0
        self.charged = {}  # operand key -> the charged operation's completion (True for a prefetch)

    def take(self):
        """The operand key of the lane whose operation is being issued now (None past the active lanes)."""
        if self.next >= len(self.keys):
            return None
        self.next += 1
        return self.keys[self.next - 1]


class IssueMerge:
    """The SASS rule (emu.timing.sass) on a Machine: `merge_kinds` names the copy kinds (emu.timing.sass.ptx_kind)
    whose identical lanes issue once. While a warp executes a PTX instruction of such a kind, each operation its
    handler issues is matched with its lane's operand key; `twin()` says whether an identical one was charged."""

    merge_kinds = frozenset()
    issuing = None

    def setup_merge(self, merge_kinds) -> None:
        self.merge_kinds = frozenset(merge_kinds or ())
        self.issuing = None
        for ins in self.kernel.instrs:
            ins.issue_kind = ptx_kind(ins)

    def execute_one(self, w):
        if self.merge_kinds:
            pc, lanes = w.select_lanes()
            if pc < len(self.kernel.instrs) and self.kernel.instrs[pc].issue_kind in self.merge_kinds:
                self.issuing = _IssueGroup(w, self.kernel.instrs[pc], lanes)
        try:
            return super().execute_one(w)
        finally:
            self.issuing = None

    def twin(self):
        """(this operation's operand key or None, what the identical charged one recorded or None)."""
        g = self.issuing
        key = g.take() if g is not None else None
        if key is None:
            return None, None
        found = g.charged.get(key)
        if found is not None:
            self.stats["merged_async_ops"] = self.stats.get("merged_async_ops", 0) + 1
        return key, found


class ProbeMachine(IssueMerge, Machine):
    """The functional pass of a timed call (emu.timing.call): a Machine whose read traffic per allocation (what
    the reuse of each allocation is computed from) counts an operation the SASS rule merges once."""

    def __init__(self, kernel, launch, gmem, seed: int = 0, merge_kinds=(), prerequisite_writes=None):
        super().__init__(kernel, launch, gmem, seed=seed, prerequisite_writes=prerequisite_writes)
        self.setup_merge(merge_kinds)

    def submit(self, cluster, op) -> None:
        key, found = self.twin()
        if found is not None:
            cluster.inflight.append(op)
            self.stats["async_ops"] += 1
            return
        if key is not None:
            self.issuing.charged[key] = True
        super().submit(cluster, op)


class TimedMachine(IssueMerge, Machine):
    """emu.machine.Machine with a clock. `placement` maps each simulated cluster id to (start cycle, [SM per CTA]);
    `shares` holds the chip-wide Bandwidths (HBM, L2) already scaled to the simulated SMs' share; `reuse` maps a
    global allocation base to how many times the grid reads each of its bytes (emu.timing.call); `merge_kinds` the
    copy kinds the SASS issues once per distinct operands (emu.timing.sass.issue_rules; empty: the PTX's per-lane
    charge)."""

    def __init__(self, kernel, launch, gmem, costs, placement: dict, shares: dict, reuse: dict, wait_release: float,
                 seed: int = 0, trace=None, progress=None, merge_kinds=(), prerequisite_writes=None,
                 load_spread: int | None = None):
        super().__init__(kernel, launch, gmem, seed=seed, prerequisite_writes=prerequisite_writes)
        self.setup_merge(merge_kinds)
        # a generator of its own, so the spread schedules leave every other draw as the unspread one makes it
        self.load_draws = np.random.default_rng(load_spread) if load_spread is not None else None
        self.costs = costs
        self.placement = placement
        self.hbm, self.l2 = shares["hbm"], shares["l2"]
        self.reuse = reuse
        self.wait_release = wait_release
        self.trace = trace
        self.tick = progress
        self.now = 0.0
        self.heap = []
        self.seq = 0
        # CTA id -> {"start", "first_load", "first_mma", "last_mma", "commits": [...], "exit" (its last warp done),
        # "end" (and its stores in L2)}
        self.marks = {}
        self.sms = sorted({id(sm): sm for _, sms in placement.values() for sm in sms}.values(), key=lambda s: s.index)
        self.queue_done = {}  # in-order async queue -> completion of its last operation
        self.prefetched = {}  # global allocation base -> [(arrival, fraction of the allocation)] of L2 prefetches
        c = costs
        for name, modes in SWITCHES.items():
            if getattr(c, name) not in modes:
                raise ValueError(f"cost-table switch {name} = {getattr(c, name):g}: not one of {modes}")
        # H5: an L2 access pays the far die's extra latency half the time (SMs and lines split over two dies); the
        # average is charged wherever an L2 hit latency is (0: l2_hit_latency exactly, as before the switch).
        self.l2_latency = c.l2_hit_latency + 0.5 * c.die_to_die_cycles
        # H10: the first-read HBM latency of a load by its bytes (None: hbm_latency for every load)
        self.hbm_table = ([(1024, c.hbm_latency_1kb), (2048, c.hbm_latency_2kb), (4096, c.hbm_latency_4kb),
                           (8192, c.hbm_latency_8kb), (16384, c.hbm_latency_16kb), (32768, c.hbm_latency_32kb),
                           (65536, c.hbm_latency_64kb)] if c.first_load_latency_table else None)
        self.pdl_split = bool(c.pdl_overlap_split) and self.pdl  # H12: only under programmatic dependent launch
        self.lookahead = bool(c.tmem_ld_lookahead)  # H15
        self.tmap_ready = {}  # H9: (CTA id, tensor-map address) -> when the descriptor is on chip
        self.tmap_used = None  # (address, TensorMap) of the tensor map the instruction executing now read last
        self.cur_warp = None  # the warp whose instruction is executing (its CTA issues the copies it submits)
        self.latency = {"alu": c.alu_latency, "alu64": c.alu_latency * 2, "mufu": c.mufu_latency,
                        "cvt16": c.alu_latency, "ld_param": c.param_load_latency, "ld_smem": c.smem_load_latency,
                        "ld_dsmem": c.dsmem_load_latency, "ld_global": self.l2_latency, "st_global": 0,
                        "st_smem": 0, "shfl": c.shfl_latency, "elect": c.elect_latency, "barrier": 0,
                        "tmem_ld": c.tmem_ld_latency, "tmem_wait": 0, "tcgen05": 0, "griddep_wait": 0,
                        "atomic": self.l2_latency, "fp32x2": c.alu_latency}
        self.issue_cycles = {"alu64": c.alu64_issue, "fp32x2": c.fp32x2_issue}
        # The published single-MMA latency runs from issue to the waiting thread seeing the commit's arrival; the parts
        # this engine adds itself are taken off it.
        self.mma_own_latency = c.mma_issue_latency + c.tcgen05_commit_latency + c.mbarrier_wake_latency
        for ins in kernel.instrs:
            ins.timing = classify(ins)

    def timer(self) -> tuple[int, int]:
        """Simulated time: %globaltimer in ns at the table's clock, %clock64 in cycles (both from the call's frame, where
        the previous kernel ended at 0)."""
        return int(self.costs.us(self.now) * 1000), int(self.now)

    def sm_index(self, cta) -> int:
        return cta.sm.index

    def tensor_map(self, addr: int):
        """Machine.tensor_map, remembering which map the executing copy uses (its descriptor fetch, H9; its box rows,
        H4a): every tensor copy and tensor L2 prefetch reads its map just before it is submitted."""
        tm = super().tensor_map(addr)
        self.tmap_used = (addr, tm)
        return tm

    # ------------------------------------------------------------------ events
    def _push(self, t: float, kind: int, obj) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, obj))

    def _wake(self, w, t: float) -> None:
        w.parked = None
        self._push(max(t, w.t_next), WARP_EVENT, w)
        if self.trace is not None:
            self.trace.end_wait(w, t)

    def _park(self, w, why: str) -> None:
        w.parked = why
        w.park_serial = getattr(w, "park_serial", 0) + 1
        w.cta.cluster.parked.append(w)
        if why == "sleep":
            # try_wait suspends for a system-dependent time limit, then returns false and the PTX loop tries again
            # (PTX ISA 9.7.13.15.16): a warp whose wait was only a probe goes on even if the barrier never changes.
            self._push(self.now + self.costs.try_wait_timeout, TIMEOUT_EVENT, (w, w.park_serial))
        if self.trace is not None:
            what = w.blocked_on.describe() if w.blocked_on is not None else (
                w.sleep_key[0].describe() if w.sleep_key is not None else "retry")
            self.trace.begin_wait(w, self.now, what)

    def _scan(self, cl) -> None:
        """Wake the cluster's parked warps whose barrier changed or was released."""
        if cl.progress == cl.scan_mark:
            return
        cl.scan_mark = cl.progress
        keep = []
        c = self.costs
        for w in cl.parked:
            if w.parked == "sleep":
                bar, version = w.sleep_key
                if bar.version != version:
                    w.sleep_key = None
                    self._wake(w, self.now + c.mbarrier_wake_latency)
                    continue
            elif w.parked == "blocked":
                if w.blocked_on is None:
                    self._wake(w, self.now + c.barrier_latency)
                    continue
            else:  # retry: an instruction that could not complete yet (e.g. a bulk wait_group)
                self._wake(w, self.now + 1)
                continue
            keep.append(w)
        cl.parked = keep

    # ------------------------------------------------------------------ running
    def run(self, cluster_ids=None) -> None:
        ids = list(self.placement) if cluster_ids is None else cluster_ids
        self.clusters_run = []
        for cid in ids:
            start, sms = self.placement[cid]
            cl = self.build_cluster(cid)
            cl.parked, cl.scan_mark = [], -1
            self.clusters_run.append(cl)
            for cta, sm in zip(cl.ctas, sms):
                cta.sm = sm
                self.marks[cta.ctaid] = {"start": start, "commits": []}
                for w in cta.warps:
                    w.smsp = w.warp_id % len(sm.issue)
                    # H12 (pdl_split): the start cost is charged after the warp's first griddepcontrol.wait instead
                    w.t_next = start if self.pdl_split else start + self.costs.cta_start_cycles
                    w.start_cost_due = self.pdl_split
                    w.reg_ready = {}
                    w.tmem_ready = 0.0
                    w.parked = None
                    if self.lookahead:
                        w.ld_anchor = start  # H15: the earliest a tcgen05.ld may start (the last step boundary)
                        w.touched = {}  # register -> the last time an instruction read or wrote it
                    self._push(w.t_next, WARP_EVENT, w)
        with running():  # (emu.machine.running: no float warnings, no cycle collections while it runs)
            t0, last_report = wallclock.time(), wallclock.time()
            while True:
                while self.heap:
                    t, _, kind, obj = heapq.heappop(self.heap)
                    self.now = t
                    if kind == OP_EVENT:
                        cl, op = obj
                        if op.ready is not None and not op.ready():  # e.g. its target mbarrier is not initialised yet
                            self._push(self.now + self.costs.mbarrier_wake_latency, OP_EVENT, obj)
                            continue
                        cl.inflight.remove(op)
                        self.current, self.op_cluster = op, cl.clusterid
                        try:
                            op.run()
                        except EmulatorError as e:
                            raise type(e)(f"{e} [{self.where_now()}]") from None
                        cl.progress += 1
                        self._scan(cl)
                    elif kind == TIMEOUT_EVENT:
                        w, serial = obj
                        if w.parked == "sleep" and w.park_serial == serial:
                            w.sleep_key = None
                            w.cta.cluster.parked.remove(w)
                            self._wake(w, self.now)
                    else:
                        self._advance(obj)
                    if self.tick is not None and wallclock.time() - last_report > 5:
                        last_report = wallclock.time()
                        self.tick(self.now, self.stats["warp_instructions"], wallclock.time() - t0)
                if not self._wake_spinners():
                    break
        for cl in self.clusters_run:
            if any(not w.done for cta in cl.ctas for w in cta.warps):
                raise Deadlock(self.deadlock_report(cl))
            for cta in cl.ctas:  # the per-CTA exit rules, as the seeded scheduler applies them
                if cta.tmem_allocs:
                    raise Hazard(f"CTA {cta.ctaid} exited with tensor memory still allocated: {cta.tmem_allocs}")
                for check in EXIT_CHECKS:
                    check(cta)

    def _wake_spinners(self) -> bool:
        """Nothing is scheduled: every remaining warp sleeps on an incomplete mbarrier or is blocked. A try_wait may be
        a probe rather than a wait, so let the sleepers run once more; if that changes nothing, it is a deadlock."""
        woke = False
        for cl in self.clusters_run:
            sleepers = [w for w in cl.parked if w.parked == "sleep"]
            if sleepers and cl.progress != getattr(cl, "spin_mark", None):
                cl.spin_mark = cl.progress
                for w in sleepers:
                    w.sleep_key = None
                    cl.parked.remove(w)
                    self._wake(w, self.now + 1)
                woke = True
        return woke

    def _advance(self, w) -> None:
        """Issue the warp's instructions while none of them would issue after the next scheduled event."""
        if w.done or w.parked is not None:
            return
        instrs = self.kernel.instrs
        cl = w.cta.cluster
        while True:
            pc, lanes = w.select_lanes()
            if pc >= len(instrs):
                raise Hazard(f"warp {w.warp_id} of CTA {w.cta.ctaid} ran past the end of the kernel")
            ins = instrs[pc]
            t = self._issue_time(w, ins)
            if self.heap and t > self.heap[0][0]:
                self._push(t, WARP_EVENT, w)
                return
            self.now = t
            nlanes = int(lanes.sum())
            if self.costs.tensormap_fetch_cycles and ins.base == "prefetch" and "tensormap" in ins.parts:
                self._tensormap_prefetch(w, ins, lanes)
            self.cur_warp = w
            self.tmap_used = None
            ctl = self.execute_one(w)
            self._account(w, ins, t, nlanes)
            if ctl is BLOCK or ctl is SLEPT:
                self._park(w, "sleep" if ctl is SLEPT else "blocked" if w.blocked_on is not None else "retry")
                self._scan(cl)
                return
            if w.done:
                self._cta_exit_check(w.cta)
                self._scan(cl)
                return
            if cl.progress != cl.scan_mark:
                self._scan(cl)

    def _issue_time(self, w, ins) -> float:
        cls, srcs, _ = ins.timing
        sm = w.cta.sm
        t = max(self.now, w.t_next, sm.issue[w.smsp].free)
        if cls in DATAFLOW:
            return t
        t = max(t, self._sources_ready(w, srcs))
        if cls == "tmem_wait":
            t = max(t, w.tmem_ready)
        elif cls in ("st_global", "atomic"):
            t = max(t, sm.store.free - self.costs.store_queue_cycles)
        elif cls == "griddep_wait" and self.pdl:
            t = max(t, self.wait_release)
        return t

    @staticmethod
    def _sources_ready(w, srcs) -> float:
        ready, t = w.reg_ready, 0.0
        for r in srcs:
            v = ready.get(r)
            if v is not None and v > t:
                t = v
        return t

    def _account(self, w, ins, t: float, nlanes: int) -> None:
        cls, srcs, dsts = ins.timing
        sm = w.cta.sm
        c = self.costs
        issue = self.issue_cycles.get(cls, 1)
        sm.issue[w.smsp].occupy(t, issue)
        w.t_next = t + issue
        if cls == "griddep_wait" and w.start_cost_due:  # H12: the start cost after the wait returns
            w.t_next += c.cta_start_cycles
            w.start_cost_due = False
        start = max(t, self._sources_ready(w, srcs)) if cls in DATAFLOW else t
        if cls == "tmem_ld" and self.lookahead:  # H15: as early as the last step boundary, if its registers allow
            addr, dest = _tmem_ld_regs(ins)
            start = max(w.ld_anchor, self._sources_ready(w, addr), *(w.touched.get(d, 0.0) for d in dest))
        if cls in ("mufu", "cvt16"):
            pipe, cycles = (sm.mufu[w.smsp], c.mufu_issue) if cls == "mufu" else (sm.convert[w.smsp], c.cvt_f16_issue)
            pipe.forget_before(self.now)
            start = pipe.occupy(start, cycles)[0]
        ready = start + self.latency[cls]
        if cls == "ld_global" and self.load_draws is not None:
            ready = start + self.load_draws.uniform(c.l2_hit_latency, c.hbm_latency)
        if cls == "tmem_ld":
            nbytes = 32 * 4 * len(dsts)
            ready = sm.tmem_read.transfer(start, nbytes) + c.tmem_ld_latency
            w.tmem_ready = max(w.tmem_ready, ready)
        elif cls in ("st_global", "st_smem", "ld_smem", "atomic"):
            nbytes = nlanes * _access_bytes(ins)
            if cls in ("st_global", "atomic"):  # an atomic's read-modify-write happens at L2
                done = max(sm.store.transfer(t, nbytes), self.l2.transfer(t, nbytes)) + self.l2_latency
                sm.stores_done = max(sm.stores_done, done)
            else:
                sm.smem.transfer(t, nbytes)
        for d in dsts:
            w.reg_ready[d] = ready
        if self.lookahead:
            self._track_lookahead(w, ins, cls, *(_tmem_ld_regs(ins) if cls == "tmem_ld" else (srcs, dsts)),
                                  t + issue, start, ready)
        if self.trace is not None:
            self.trace.busy(w, t, t + issue, ins)

    @staticmethod
    def _track_lookahead(w, ins, cls, srcs, dsts, issued, start, ready) -> None:
        """H15's bookkeeping: the step boundary (a tcgen05.wait::ld or a synchronising instruction) and when each
        register was last read (at its reader's start) or written (when its value is ready)."""
        if cls == "tmem_wait" or (ins.base in LOOKAHEAD_FENCES and cls != "tmem_ld"):
            w.ld_anchor = max(w.ld_anchor, issued)
        touched = w.touched
        for r in srcs:
            touched[r] = max(touched.get(r, 0.0), start)
        for d in dsts:
            touched[d] = max(touched.get(d, 0.0), ready)

    def _cta_exit_check(self, cta) -> None:
        if all(x.done for x in cta.warps):
            self.marks[cta.ctaid]["exit"] = self.now
            self.marks[cta.ctaid]["end"] = max(self.now, cta.sm.stores_done)

    # ------------------------------------------------------------------ asynchronous operations
    def _tensormap_prefetch(self, w, ins, lanes) -> None:
        """H9: a prefetch.tensormap starts the fetch of the descriptors it names, for the warp's CTA."""
        mask = lanes
        if ins.guard is not None:
            g = w.read(ins.guard[0], "pred")
            mask = lanes & (~g if ins.guard[1] else g)
        if not mask.any():
            return
        addrs = lane_addresses(self, w, ins.operands[0], 64)
        for a in {int(x) for x in addrs[np.flatnonzero(mask)]}:
            self.tmap_ready.setdefault((w.cta.ctaid, a), self.now + self.costs.tensormap_fetch_cycles)

    def _descriptor(self, t: float, tmap) -> float:
        """H9: when a TMA of the tensor map `tmap` ((address, TensorMap) or None), issued at t by the executing warp's
        CTA, can start: after the map's descriptor fetch (the first use or a prefetch.tensormap starts it)."""
        fetch = self.costs.tensormap_fetch_cycles
        if not fetch or tmap is None or self.cur_warp is None:
            return t
        key = (self.cur_warp.cta.ctaid, tmap[0])
        ready = self.tmap_ready.get(key)
        if ready is None:
            ready = self.tmap_ready[key] = t + fetch
        return max(t, ready)

    def prefetch(self, source: int, nbytes: int) -> None:
        """An L2 prefetch: its first-read share of HBM is spent now; once it has arrived, the prefetched fraction of
        the allocation is served from L2 (loads of it issued later pay no first-read HBM share or latency)."""
        tmap, self.tmap_used = self.tmap_used, None
        key, found = self.twin()
        if found is not None:  # an identical lane's prefetch, issued once (emu.timing.sass)
            return
        if key is not None:
            self.issuing.charged[key] = True
        t = self._descriptor(self.now, tmap)  # a tensor prefetch needs its tensor map too (H9)
        if source is None:  # past every allocation: nothing to keep
            return
        first = 1.0 / max(self.reuse.get(source, 1.0), 1.0)
        done = self.hbm.transfer(t, nbytes * first) + self.costs.hbm_latency
        size = self.gmem.allocation(source)[1]
        self.prefetched.setdefault(source, []).append((done, nbytes / size))

    def _first_read(self, source: int) -> float:
        """The part of a load of `source` read from HBM for the first time: 1 / reuse, less what prefetches landed."""
        landed = sum(frac for done, frac in self.prefetched.get(source, ()) if done <= self.now)
        return max(0.0, 1.0 - landed) / max(self.reuse.get(source, 1.0), 1.0)

    def submit(self, cluster, op) -> None:
        cluster.inflight.append(op)
        self.stats["async_ops"] += 1
        tmap, self.tmap_used = self.tmap_used, None
        key, found = self.twin()
        if found is not None:  # an identical lane's copy, issued once (emu.timing.sass): done with it, using nothing
            self._push(found, OP_EVENT, (cluster, op))
            return
        if tmap is not None and not op.name.startswith(("TMA load", "TMA store")):
            tmap = None  # not a tensor copy (only those read a tensor map just before they are submitted)
        done = self._completion(op, tmap)
        if key is not None:
            self.issuing.charged[key] = done
        if op.queue is not None:
            done = max(done, self.queue_done.get(op.queue, 0.0))
            self.queue_done[op.queue] = done
        if op.cost.unit == "commit":  # its arrival, in order behind the MMAs it tracks
            self.marks[op.cost.dests[0].ctaid]["commits"].append(done)
        self._push(done, OP_EVENT, (cluster, op))

    def _completion(self, op, tmap=None) -> float:
        """When `op`, issued now, completes; `tmap` is the (address, TensorMap) a tensor copy reads (else None)."""
        cost, c, t = op.cost, self.costs, self.now
        if cost is None:
            raise Hazard(f"{op.name}: an asynchronous operation without a cost record cannot be timed")
        if cost.unit == "load":
            first = self._first_read(cost.source)
            issuer = cost.dests[0].sm if cost.dests else None
            sms = [d.sm for d in cost.dests]
            # A TMA or bulk copy is one request to the SM's TMA unit; a cp.async is one thread's part of a warp's
            # load instruction, which the load/store unit issues with the warp (PTX ISA "cp.async": non-bulk, per thread)
            t_req = self._descriptor(t, tmap)  # H9
            t0 = issuer.tma.occupy(t_req, c.tma_issue_cycles)[1] if cost.via == "tma" else t_req
            done = max(self.hbm.transfer(t0, cost.nbytes * first), self._l2_share(t0, cost),
                       *(self._l2_to_sm(sm, t0, cost, tmap) for sm in sms),
                       *(sm.smem_write.transfer(t0, cost.nbytes) for sm in sms))
            hbm = self._first_load_latency(cost.nbytes) if self.hbm_table else c.hbm_latency
            done += self.l2_latency + first * (hbm - self.l2_latency)
            self._mark(cost.dests[0], "first_load", t)
            if self.trace is not None:
                self.trace.unit(cost.dests[0], "TMA", t, done, op.name)
            return done
        if cost.unit == "mma":
            sms = [d.sm for d in cost.dests]
            start = max(t + c.mma_issue_latency, *(sm.tensor.free for sm in sms), *(sm.tc_ordered for sm in sms))
            per_sm_rows = cost.m // len(sms)
            math = per_sm_rows * cost.n * cost.k / c.mma_mac_per_clk
            nbytes = (cost.a_bytes + cost.b_bytes) * (c.mma_2sm_smem_factor if len(sms) == 2 else 1.0)
            port = max(sm.smem.transfer(start, nbytes) for sm in sms) - start
            if len(sms) == 2 and c.mma_2sm_fixed_cycles:  # H2: a per-instruction cost of the pair, not the port's
                port += c.mma_2sm_fixed_cycles
            busy = max(math, port)
            for sm in sms:
                sm.tensor.occupy(start, busy)
            done = start + max(busy, c.mma_latency(cost.n, len(sms)) - self.mma_own_latency)
            for sm in sms:
                sm.tc_ordered = max(sm.tc_ordered, start)
            self._mark(cost.dests[0], "first_mma", start)
            self.marks[cost.dests[0].ctaid]["last_mma"] = done
            self.stats["mma_busy_cycles"] = self.stats.get("mma_busy_cycles", 0.0) + busy
            if self.trace is not None:
                self.trace.unit(cost.dests[0], "tensor core", start, start + busy, op.name)
            return done
        if cost.unit == "cp":
            sms = [d.sm for d in cost.dests]
            start = max(t + c.mma_issue_latency, *(sm.tc_ordered for sm in sms))
            for sm in sms:
                sm.smem.transfer(start, cost.nbytes)
                sm.tc_ordered = start
            return start + c.tcgen05_cp_latency
        if cost.unit == "remote":  # st.async: through the cluster's SM-to-SM network into the receiver's shared memory
            return cost.dests[0].sm.smem_write.transfer(t, cost.nbytes) + c.dsmem_latency
        if cost.unit in ("commit", "arrive"):  # in order behind its queue's earlier operations (submit())
            return t + c.tcgen05_commit_latency
        if cost.unit == "store":
            sm = cost.dests[0].sm
            t = self._descriptor(t, tmap)  # H9
            done = max(sm.smem.transfer(t, cost.nbytes), sm.store.transfer(t, cost.nbytes),
                       self.l2.transfer(t, cost.nbytes)) + self.l2_latency
            sm.stores_done = max(sm.stores_done, done)
            return done
        raise Hazard(f"{op.name}: unknown cost unit {cost.unit}")

    def _l2_share(self, t0: float, cost) -> float:
        """A load's use of the chip-wide L2 share (l2_share_mode, H3): 0 its bytes; 1 its bytes less the coalesced
        fraction when its allocation's grid reuse is at least l2_coalesce_min_reuse; 2 nothing."""
        c, mode = self.costs, self.costs.l2_share_mode
        if mode == 0:
            return self.l2.transfer(t0, cost.nbytes)
        if mode == 2:
            return t0
        if self.reuse.get(cost.source, 1.0) >= c.l2_coalesce_min_reuse:
            return self.l2.transfer(t0, cost.nbytes * (1.0 - c.l2_coalesced_fraction))
        return self.l2.transfer(t0, cost.nbytes)

    def _l2_to_sm(self, sm, t0: float, cost, tmap) -> float:
        """A load on one destination SM's L2 -> SM path: its bytes at l2_to_sm_bytes_per_clk, or (tma_row_cycles, H4a)
        a tensor load's box rows at tma_row_cycles each (a row: up to 128 bytes of the inner box)."""
        rate = self.costs.tma_row_cycles
        if not rate or tmap is None:
            return sm.l2_in.transfer(t0, cost.nbytes)
        tm = tmap[1]
        rows = -(-tm.inner_box_bytes // 128)
        for n in tm.box_counts[1:]:
            rows *= n
        sm.l2_in.bytes += cost.nbytes
        return sm.l2_in.occupy(t0, rows * rate)[1]

    def _first_load_latency(self, nbytes: float) -> float:
        """H10: the first-read HBM latency of a load of nbytes, linear between the measured sizes (the 1 KB row below
        1 KB, the last segment's slope above 64 KB)."""
        table = self.hbm_table
        if nbytes <= table[0][0]:
            return table[0][1]
        for (x0, y0), (x1, y1) in zip(table, table[1:]):
            if nbytes <= x1:
                return y0 + (y1 - y0) * (nbytes - x0) / (x1 - x0)
        (x0, y0), (x1, y1) = table[-2], table[-1]
        return y1 + (y1 - y0) * (nbytes - x1) / (x1 - x0)

    def _mark(self, cta, key: str, t: float) -> None:
        m = self.marks[cta.ctaid]
        if key not in m:
            m[key] = t


def _tmem_ld_regs(ins) -> tuple:
    """(address registers, destination registers) of a tcgen05.ld. classify() lists its destination vector among its
    sources (tcgen05 is in NO_DEST_BASES), which the default timing keeps; the lookahead (H15) needs them apart."""
    regs = getattr(ins, "tmem_ld_regs", None)
    if regs is None:
        ops = list(ins.operands)
        srcs = [r for op in ops[1:] for r in _regs(op)] + ([ins.guard[0].name] if ins.guard is not None else [])
        regs = ins.tmem_ld_regs = (tuple(srcs), tuple(_regs(ops[0])))
    return regs


def _access_bytes(ins) -> int:
    """Bytes one lane moves in a ld/st: vector width x element size."""
    vec = next((int(p[1:]) for p in ins.parts if p in ("v2", "v4", "v8")), 1)
    ty = ins.parts[-1]
    bits = int("".join(ch for ch in ty if ch.isdigit()) or 32)
    return vec * max(bits // 8, 1)


def utilisation(sms: list, span: float) -> dict:
    """Busy fraction of every unit of the simulated SMs (the busiest of each kind), over `span` cycles."""
    out = {}
    if span <= 0:
        return out
    for sm in sms:
        for unit in sm.units():
            kind = unit.name.split(" ", 1)[1].rstrip("0123456789 ").strip()
            out[kind] = max(out.get(kind, 0.0), unit.busy / span)
    return out

