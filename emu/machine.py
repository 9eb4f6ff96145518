"""The machine: clusters of CTAs of warps, the seeded scheduler, the asynchronous engine, deadlock reports.

Scheduling is adversarial but reproducible (one Schedule: a policy and a seed): the next warp, how many
instructions it runs before another warp gets a turn, when a waiter whose barrier changed wakes up, and when
each in-flight asynchronous operation (TMA copy, tcgen05 MMA/copy/commit) completes are all drawn from one
random generator, shaped by the policy (POLICIES: uniform small skews, one role kept ahead or behind, one warp
or role starved, waiters woken late so a barrier can complete whole phases while they sleep, asynchronous
completions long after issue). Asynchronous operations take effect at completion, not at issue: a TMA load
writes shared memory when it completes, an MMA reads its shared-memory operands when it executes. So reading a
stage before its full barrier completes, or refilling a stage an MMA has not consumed yet, changes the result
or trips a poison/hazard check.

Clusters do not communicate (the kernel shares nothing across clusters but disjoint tiles of C), so
they run one after another; inside a cluster every warp of every CTA interleaves.
"""
from __future__ import annotations

import bisect
import collections
import contextlib
import ctypes
import functools
import gc
import hashlib
import operator
import struct
from dataclasses import dataclass

import numpy as np

from .isa import BLOCK, JUMPED, SLEEP, Control, decode_kernel
from .lint import check_kernel
from .simt import ALL_LANES, NO_LANES, WARP, Warp
from .ptx import initial_bytes
from .state import (CLUSTER_RANK_SHIFT, POISON_BYTE, Cluster, Cta, EmulatorError, GlobalMemory, Hazard, Note,
                    Unsupported)

PDL_LAUNCH_ATTRIBUTE = 6  # cudaLaunchAttributeProgrammaticStreamSerialization (CUDA runtime API, driver_types.h)
SHARED_GENERIC_BASE = 0x0000_1000_0000_0000  # generic-address window of shared memory (emulator's choice)
LOCAL_GENERIC_BASE = 0x0000_2000_0000_0000  # generic-address window of a thread's local memory (the same)
GENERIC_WINDOW = 1 << 32  # each window's size
# The first 1 KiB of a CTA's shared window is reserved for the system (CUDA C++ Programming Guide, compute capability
# 9.0/10.0: 1 KB of shared memory per block is reserved; a CuTe DSL cubin reports 1024 bytes of static shared memory
# and no variable of its own): the kernel's static variables start after it, the dynamic buffer after those.
RESERVED_SMEM = 1024


EXIT_CHECKS = []  # functions(cta) an opcode module registers for rules that hold once a CTA has exited
SLEPT = Control("slept")  # execute_one: the warp went to sleep on a barrier (its pc already advanced)


class Deadlock(EmulatorError):
    """No warp can progress and nothing is in flight."""


class NamedBarrier:
    """bar.sync / barrier.sync id, count (PTX ISA 9.7.13.1): warps arrive with all their threads."""

    def __init__(self, cta, ident: int):
        self.cta, self.ident = cta, ident
        self.expected = None
        self.arrived = 0
        self.waiting = []
        self.generation = 0  # completed phases (emu.ops_async orders TMA-store sources by them)
        self.knowledge = {}  # what the arrivals of the current phase release (emu.mbarrier.released)

    def describe(self) -> str:
        return f"named barrier {self.ident} of CTA{self.cta.rank} ({self.arrived} of {self.expected} threads arrived)"


class ClusterBarrier:
    """barrier.cluster.arrive / wait (PTX ISA 9.7.13.2): every non-exited thread of the cluster arrives."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.phase = 0
        self.arrived_threads = {}  # warp -> lanes mask arrived in the current phase
        self.knowledge = {}  # phase -> what its arrivals release (emu.mbarrier.released)

    def describe(self) -> str:
        return f"cluster barrier phase {self.phase}"


# Scheduling policies: knobs of the seeded scheduler (anything not named keeps the uniform value).
#   max_quantum      a turn runs 1..max_quantum instructions of one warp
#   completion_prob  chance per scheduling step that an in-flight asynchronous operation completes (always when no
#                    warp can run)
#   priority         roles (role_of) in the order they are preferred: with probability PRIORITY_STRICTNESS the turn
#                    goes to a runnable warp of the first role that has one
#   starve           "warp" (one warp of each cluster, drawn from the seed) or "role" (one role, drawn): it runs
#                    only when no other warp can (or, rarely, STARVED_TURN_PROB of the turns, so it cannot livelock)
#   wake_prob        chance per step that a warp sleeping in a try_wait whose mbarrier has changed wakes up; below 1,
#                    the barrier may complete several phases before the waiter looks again (parity ABA)
POLICIES = {
    "uniform": {},
    "producer_first": {"priority": ("TMA", "MMA", "epilogue"), "max_quantum": 96},
    "consumer_first": {"priority": ("epilogue", "MMA", "TMA"), "max_quantum": 96},
    "starve_warp": {"starve": "warp"},
    "starve_role": {"starve": "role"},
    "late_wake": {"wake_prob": 0.01},
    "slow_async": {"completion_prob": 0.02},
}
UNIFORM = {"max_quantum": 24, "completion_prob": 0.35, "priority": (), "starve": None, "wake_prob": 1.0}
PRIORITY_STRICTNESS = 0.95
STARVED = 1 << 30  # turn-order class of a starved warp
STARVED_TURN_PROB = 0.002


class Draws:
    """A schedule's random draws: numpy's Generator.integers(low, high) and .random() on a PCG64, the same values from
    the same state, without the Generator's method call (1.3-1.6 us each; a schedule draws two to three times per
    turn, ~10^6 times per K-split verdict). They call the bit generator's own C functions (its ctypes interface:
    next_uint32 with its buffered upper half, next_double) and bound integers as numpy does (a range of at most 2^32
    values: Lemire's multiply-and-reject on 32-bit draws, numpy/random/src/distributions/distributions.c,
    buffered_bounded_lemire_uint32), so they interleave with the Generator's own draws on the same bit generator
    (tests/emu/test_scheduler.py compares the two)."""

    def __init__(self, generator: np.random.Generator):
        self.generator = generator  # (kept: its bit generator owns the state the functions below advance)
        c = generator.bit_generator.ctypes
        # PYFUNCTYPE: called holding the GIL, which the ctypes interface's CFUNCTYPE functions release and take back
        # on every call (these C functions return at once): 0.19 us a draw instead of 0.32
        self._state = c.state.value
        self._next32 = ctypes.PYFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p)(_address(c.next_uint32))
        self._next_double = ctypes.PYFUNCTYPE(ctypes.c_double, ctypes.c_void_p)(_address(c.next_double))
        # The scheduler's draws, plain callables (a method's lookups cost as much as the C call):
        # below(n), 1 <= n <= 2^32: an int in [0, n), as integers(n) (a warp, a quantum, an operation in flight);
        # random(): a float in [0, 1), as Generator.random()
        self.below = _lemire(self._next32, self._state)
        self.random = functools.partial(self._next_double, self._state)

    def integers(self, low: int, high: int | None = None) -> int:
        """An int in [low, high) ([0, low) with one argument), as int(Generator.integers(low, high))."""
        if high is None:
            low, high = 0, low
        span = high - low - 1  # numpy's rng: the largest offset
        if span < 0:
            raise ValueError(f"high <= low: {low}, {high}")
        if span == 0:
            return low  # no draw
        if span > 0xFFFFFFFF:
            return int(self.generator.integers(low, high))  # (64-bit draws: no schedule needs them)
        if span == 0xFFFFFFFF:
            return low + self._next32(self._state)
        excl = span + 1
        m = self._next32(self._state) * excl
        if m & 0xFFFFFFFF < excl:
            threshold = (0x100000000 - excl) % excl
            while m & 0xFFFFFFFF < threshold:
                m = self._next32(self._state) * excl
        return low + (m >> 32)

def _lemire(next32, state):
    """Draws.below on one bit generator's next_uint32: numpy's bounded draw of integers(n) (Draws.integers)."""

    def below(n: int) -> int:
        if n == 1:
            return 0  # (no draw, as integers)
        m = next32(state) * n
        if m & 0xFFFFFFFF < n:
            threshold = (0x100000000 - n) % n
            while m & 0xFFFFFFFF < threshold:
                m = next32(state) * n
        return m >> 32

    return below


def _address(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


@dataclass(frozen=True)
class Schedule:
    """One reproducible schedule: a policy of POLICIES and the seed of its random generator."""

    policy: str = "uniform"
    seed: int = 0

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise ValueError(f"unknown scheduling policy {self.policy!r}; known: {', '.join(POLICIES)}")

    @property
    def name(self) -> str:
        return f"{self.policy}:{self.seed}"

    @property
    def knobs(self) -> dict:
        return {**UNIFORM, **POLICIES[self.policy]}

    @staticmethod
    def parse(text: str) -> "Schedule":
        policy, _, seed = text.partition(":")
        return Schedule(policy, int(seed or 0))


class AsyncOp:
    """An in-flight asynchronous operation; `queue` orders it after earlier ops of the same queue; `ready()`, when
    given, says whether it can complete yet (a copy whose target mbarrier is not initialised yet waits for it).

    `cost` says what the operation moves or computes, for the timed scheduler (emu.timing): a Cost. The seeded
    scheduler only counts the global bytes each read asks for (Machine.traffic)."""

    __slots__ = ("name", "run", "queue", "line", "cost", "ready", "seq")  # (~10^5 made per K-split schedule)

    def __init__(self, name: str, run, queue=None, line: int = 0, cost=None, ready=None):
        self.name, self.run, self.queue, self.line, self.cost, self.ready = name, run, queue, line, cost, ready


class InFlight:
    """A cluster's asynchronous operations in flight, in issue order. Most (copies, st.async, ...) may complete at any
    time; a gated one waits behind an earlier operation of its queue or on its ready(). The seeded scheduler draws
    the r-th completable operation in issue order (pop_completable). `ops` holds the operations that may be drawn:
    every unqueued one and the first of each queue; the later ones of a queue wait apart (`waiting`) and enter `ops`,
    at their place in issue order, when the one before them completes; the unqueued ones with a ready() keep their
    positions in `ops` as operations come and go (`gated`, `gated_at`). So a draw looks at the few operations whose
    ready() may say no, not at every gated one: a split-K exchange keeps thousands of st.async in flight, and a
    six-CTA K split dozens of queued tcgen05 operations, which a bisection each per draw made 30% of its schedule.
    The draws are those of the plain list (tests/emu/test_scheduler.py)."""

    def __init__(self):
        self.ops, self.gated, self.gated_at = [], [], []
        self.heads = {}  # queue -> its first operation in flight (in ops)
        self.waiting = {}  # queue -> its later operations in flight, in issue order
        self.issued = self.size = 0

    def append(self, op) -> None:
        op.seq, self.issued = self.issued, self.issued + 1
        self.size += 1
        if op.queue is not None:
            if op.queue in self.heads:
                self.waiting.setdefault(op.queue, collections.deque()).append(op)
                return
            self.heads[op.queue] = op
        elif op.ready is not None:
            self.gated.append(op)
            self.gated_at.append(len(self.ops))
        self.ops.append(op)

    def pop_completable(self, pick):
        """Remove and return the r-th (from 0) completable operation in issue order, r = pick(how many can complete);
        None when none can."""
        if not self.gated:  # (the usual case: nothing in `ops` can say no)
            return self.take(pick(len(self.ops))) if self.ops else None
        blocked = self.blocked()
        count = len(self.ops) - len(blocked)
        if not count:
            return None
        return self.take(self.nth_completable(pick(count), blocked))

    def blocked(self) -> list[int]:
        """Positions in `ops` (ascending) of the operations that cannot complete now: the unqueued ones whose ready()
        says not yet (the later operations of a queue are not in `ops`)."""
        return [pos for op, pos in zip(self.gated, self.gated_at) if not op.ready()]

    @staticmethod
    def nth_completable(r: int, blocked: list[int]) -> int:
        """The position of the r-th (from 0) operation not in `blocked`."""
        for pos in blocked:
            if pos > r:
                break
            r += 1
        return r

    def take(self, pos: int):
        """Remove and return the operation at position `pos` of `ops` (as nth_completable names it); the next of its
        queue, if any, takes its place in issue order."""
        op = self.ops.pop(pos)
        self.size -= 1
        if self.gated:
            self._shift(pos, -1)
        if op.queue is not None:
            self._next_of(op.queue)
        elif op.ready is not None:
            i = self.gated_at.index(pos)
            del self.gated[i], self.gated_at[i]
        return op

    def remove(self, op) -> None:
        """Remove `op` wherever it is (the timed engine completes operations by time, not by draw)."""
        pos = bisect.bisect_left(self.ops, op.seq, key=_issue_number)
        if pos < len(self.ops) and self.ops[pos] is op:
            self.take(pos)
            return
        self.waiting[op.queue].remove(op)
        self.size -= 1
        if not self.waiting[op.queue]:
            del self.waiting[op.queue]

    def _next_of(self, queue) -> None:
        later = self.waiting.get(queue)
        if not later:
            del self.heads[queue]
            return
        nxt = self.heads[queue] = later.popleft()
        if not later:
            del self.waiting[queue]
        pos = bisect.bisect_left(self.ops, nxt.seq, key=_issue_number)
        self._shift(pos - 1, 1)
        self.ops.insert(pos, nxt)

    def _shift(self, after: int, by: int) -> None:
        """The gated operations' positions beyond `after` move by `by`."""
        at = self.gated_at
        for i, p in enumerate(at):
            if p > after:
                at[i] = p + by

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        """Every operation in flight, in issue order."""
        return iter(sorted([*self.ops, *(op for later in self.waiting.values() for op in later)], key=_issue_number))


_issue_number = operator.attrgetter("seq")  # bisect's key, called O(log n) times per lookup: a C getter, not a def


class TraceHash:
    """A digest of one run as it happened: every warp-instruction issued (the CTA's coordinates, the warp, the PC and
    the lanes at it, guarded-off ones included) and every asynchronous operation completed (its issue number in its
    cluster, PTX line and name), in order. Equal digests: the same schedule, to the instruction. Work on the emulator's speed
    must leave every digest unchanged (tools/emulator_bench.py hashes; tests/harness/test_trace_hashes.py). Kept by
    Machine(digest=True) as Machine.digest."""

    def __init__(self):
        self._digest = hashlib.blake2b(digest_size=16)
        self.events = 0

    def issued(self, w, pc: int, lanes: int) -> None:
        """`lanes`: the executing lanes as a 32-bit mask (bit i: lane i)."""
        self._digest.update(struct.pack("<BiiiiqI", 0, *w.cta.ctaid, w.warp_id, pc, lanes))
        self.events += 1

    def completed(self, op) -> None:
        self._digest.update(struct.pack("<Bqi", 1, op.seq, op.line) + op.name.encode())
        self.events += 1

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def lane_bits(lanes: np.ndarray) -> int:
    """A lane vector of 32 bools as a 32-bit mask (bit i: lane i)."""
    return int(np.packbits(lanes, bitorder="little").view("<u4")[0])


@contextlib.contextmanager
def running():
    """What a machine needs from the interpreter while it runs:
    - numpy's floating-point warnings off: overflow, underflow, invalid and divide give the IEEE results (inf, NaN,
      zeros) the PTX ISA's float instructions produce, so the opcode modules need no np.errstate of their own (2 us
      to enter, per instruction);
    - Python's cyclic garbage collector paused: a K split's schedule allocates some 10^5 short-lived objects (in-flight
      operations, their closures), and the collections they set off took 9% of it (measured); what the run leaves in
      cycles is collected once it ends."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with np.errstate(all="ignore"):
            yield
    finally:
        if collecting:
            gc.enable()


class Cost:
    """What an asynchronous operation uses. unit: "load" (TMA or bulk copy global -> shared: nbytes read from the
    global allocation at `source`, delivered to each CTA of `dests`), "store" (shared -> global), "mma"
    (m, n, k of one tcgen05.mma over the CTAs of `dests`, `a_bytes`/`b_bytes` read from each one's shared memory),
    "cp" (tcgen05.cp: nbytes from shared to tensor memory), "commit" (tcgen05.commit), "arrive" (an mbarrier arrival
    once the earlier operations of its queue are complete, e.g. cp.async.mbarrier.arrive), "remote" (st.async: nbytes
    into the shared memory of the CTA in `dests`, over distributed shared memory)."""

    __slots__ = ("unit", "nbytes", "source", "dests", "m", "n", "k", "a_bytes", "b_bytes", "via")

    def __init__(self, unit: str, nbytes: int = 0, source: int | None = None, dests=(), m: int = 0, n: int = 0,
                 k: int = 0, a_bytes: int = 0, b_bytes: int = 0, via: str = "tma"):
        self.unit, self.nbytes, self.source, self.dests = unit, nbytes, source, tuple(dests)
        self.m, self.n, self.k, self.a_bytes, self.b_bytes = m, n, k, a_bytes, b_bytes
        self.via = via  # a load's engine: "tma" (the TMA unit: TMA and bulk copies) or "lsu" (cp.async, per thread)


class Machine:
    def __init__(self, kernel, launch, gmem: GlobalMemory, seed: int = 0, max_quantum: int = 24,
                 completion_prob: float = 0.35, progress=None, schedule: Schedule | None = None,
                 prerequisite_writes=None, digest: bool = False):
        decode_kernel(kernel)
        check_kernel(kernel)  # kernel-wide static rules (emu.lint) before anything runs
        self.kernel = kernel
        self.launch = launch
        self.gmem = gmem
        self.schedule = schedule or Schedule("uniform", seed)
        self.seed = self.schedule.seed  # 0 is the default schedule; emu.mufu draws tanh.approx errors only under others
        knobs = self.schedule.knobs
        if schedule is None:  # the pre-policy interface: explicit quantum and completion probability
            knobs.update(max_quantum=max_quantum, completion_prob=completion_prob)
        self.knobs = knobs
        self.rng = Draws(np.random.default_rng(self.schedule.seed))
        self.mufu_rng = None  # tanh.approx error draws, made on first use (ops_alu)
        self.tensor_maps = {}  # generic address -> decoded CUtensorMap (tensor_map)
        self.max_quantum = knobs["max_quantum"]
        self.completion_prob = knobs["completion_prob"]
        self.progress = progress
        # what ran, as a digest (TraceHash); not `trace`: the timed machine's Chrome trace has that name
        self.digest = TraceHash() if digest else None
        self.param_base = self._place_params(launch.params)
        self.grid = tuple(launch.grid)
        self.block = tuple(launch.block)
        self.cluster_dims = tuple(launch.cluster) if launch.cluster else (1, 1, 1)
        self.dyn_smem = launch.dynamic_smem
        self.dynamic_smem_offset = kernel.shared_layout.dynamic_offset(RESERVED_SMEM)
        self.stats = {"warp_instructions": 0, "async_ops": 0, "mma": 0, "tma_bytes": 0}
        self.notes = {}  # (rule, where) -> emu.state.Note: model violations with a hardware-verified precedent
        self.current = None  # (warp, instruction) executing or the AsyncOp completing: where_now() names it
        self.store_log = []  # (address, nbytes) of every global store, for --clusters subsets
        self.store_clusters = []  # the cluster id of each store_log entry (log_store)
        self.atomic_log = []  # (address, nbytes) of the global atomics among them: a sum other clusters add to too
        self.tainted = {}  # cluster id -> its first read of bytes this run does not know (watch_unknown)
        self.op_cluster = None  # the cluster of the asynchronous operation completing (self.current)
        self.traffic = {}  # global allocation base -> bytes the async loads asked for (one request, any multicast)
        self.printed = []  # what device printf (vprintf) wrote, one string per thread's call, in the order they ran
        self.global_variables = {}  # module .global / .const variable -> its address, placed at first use
        # Launched with programmatic stream serialization (launch attribute 6, value an int): the previous kernel in the
        # queue may still run, so a thread touches global memory only after griddepcontrol.wait (PTX ISA
        # "griddepcontrol"; CUDA programming guide, programmatic dependent launch).
        self.pdl = any(aid == PDL_LAUNCH_ATTRIBUTE and int.from_bytes(val[:4], "little") != 0
                       for aid, val in getattr(launch, "launch_attrs", []))
        # What the grid before this one in the stream may write, as global allocations (base, size); None: not known.
        self.prerequisite_writes = (None if prerequisite_writes is None
                                    else [gmem.allocation(int(a)) for a in prerequisite_writes])
        for g, c in zip(self.grid, self.cluster_dims):
            if g % c:
                raise Hazard(f"grid {self.grid} is not a multiple of the cluster shape {self.cluster_dims}")

    # ------------------------------------------------------------------ setup
    def _place_params(self, params: list) -> int:
        """The parameter bytes in a global buffer, each at the offset the .entry declaration gives it (the
        parameter state space is addressed generically here: ld.param and cvta.param use these addresses)."""
        if len(params) != len(self.kernel.params):
            raise EmulatorError(f"launch passed {len(params)} parameters, the kernel declares {len(self.kernel.params)}")
        for p, raw in zip(self.kernel.params, params):
            if len(raw) != p.size:
                raise EmulatorError(f"parameter {p.name}: launch passed {len(raw)} bytes, PTX declares {p.size}")
        last = self.kernel.params[-1] if self.kernel.params else None
        base = self.gmem.alloc(max(last.offset + last.size if last else 0, 1), align=128)
        for p, raw in zip(self.kernel.params, params):
            self.gmem.write(base + p.offset, np.frombuffer(bytes(raw), np.uint8))
        self.param_by_name = {p.name: p for p in self.kernel.params}
        return base

    def clusters(self):
        gx, gy, gz = self.grid
        cx, cy, cz = self.cluster_dims
        for z in range(gz // cz):
            for y in range(gy // cy):
                for x in range(gx // cx):
                    yield (x, y, z)

    def build_cluster(self, cid) -> Cluster:
        cx, cy, cz = self.cluster_dims
        cl = Cluster(cid, self.cluster_dims)
        nthreads = self.block[0] * self.block[1] * self.block[2]
        for rank in range(cx * cy * cz):
            lx, ly, lz = rank % cx, (rank // cx) % cy, rank // (cx * cy)
            ctaid = (cid[0] * cx + lx, cid[1] * cy + ly, cid[2] * cz + lz)
            smem = np.full(self.dynamic_smem_offset + self.dyn_smem, POISON_BYTE, np.uint8)
            cta = Cta(ctaid, rank, cl, smem)
            cta.named_barriers = {}
            cta.warps = [Warp(cta, i, min(WARP, nthreads - i * WARP), self.kernel.reg_decls)
                         for i in range((nthreads + WARP - 1) // WARP)]
            cta.running = sum(not w.done for w in cta.warps)
            cl.ctas.append(cta)
        cl.barrier = ClusterBarrier(cl)
        cl.inflight = InFlight()
        cl.progress = 0
        cl.machine = self  # where a deep semantic rule records a Note (Machine.note)
        return cl

    # ------------------------------------------------------------------ addresses and special registers
    def symbol_address(self, warp, name: str) -> int:
        p = self.param_by_name.get(name)
        if p is not None:
            return self.param_base + p.offset
        layout = self.kernel.shared_layout
        if name in layout.offsets:
            return (warp.cta.rank << CLUSTER_RANK_SHIFT) | (RESERVED_SMEM + layout.offsets[name])
        if name in layout.dynamic_names:
            return (warp.cta.rank << CLUSTER_RANK_SHIFT) | self.dynamic_smem_offset
        kernel = self.kernel
        if name in kernel.local_layout.offsets:  # a .local variable: its offset in the thread's local frame
            return kernel.local_layout.offsets[name]
        if name in kernel.global_vars:
            return self.global_variable(name)
        if name in kernel.param_vars:
            raise Unsupported(f"the address of the call parameter {name.split('@')[0]} is not implemented (st.param / "
                              "ld.param name it directly)")
        raise EmulatorError(f"unknown symbol {name}")

    def global_variable(self, name: str) -> int:
        """A module-scope .global / .const variable's address: allocated and initialised at its first use (PTX ISA
        5.4.4; one copy per launch here: a value one launch leaves for the next is not kept)."""
        addr = self.global_variables.get(name)
        if addr is None:
            align, size, _space, ty, init = self.kernel.global_vars[name]
            addr = self.global_variables[name] = self.gmem.alloc(max(size, 1), align=max(align, 1))
            if size:
                self.gmem.write(addr, np.frombuffer(initial_bytes(ty, size, init), np.uint8))
        return addr

    def convert_address(self, v: np.ndarray, space: str, to_space: bool) -> np.ndarray:
        """cvta: the param space is addressed by its generic addresses; shared and local sit in windows of their own."""
        if space in ("param", "global"):
            return v
        if space == "local":  # a thread's local offsets <-> its generic local window
            return v - np.uint64(LOCAL_GENERIC_BASE) if to_space else v + np.uint64(LOCAL_GENERIC_BASE)
        if to_space:
            return (v - np.uint64(SHARED_GENERIC_BASE)) & np.uint64(0xFFFFFFFF)
        return v + np.uint64(SHARED_GENERIC_BASE)

    def special_register(self, w, name: str) -> np.ndarray:
        cta = w.cta
        comp = {"x": 0, "y": 1, "z": 2}
        base, _, axis = name.partition(".")
        i = comp.get(axis, 0)
        cl = cta.cluster
        tid = w.tid
        bx, by, _bz = self.block
        if base == "%tid":
            val = [tid % bx, (tid // bx) % by, tid // (bx * by)][i]
        elif base == "%ntid":
            val = self.block[i]
        elif base == "%ctaid":
            val = cta.ctaid[i]
        elif base == "%nctaid":
            val = self.grid[i]
        elif base == "%laneid":
            val = np.arange(WARP)
        elif base == "%warpid":
            val = w.warp_id
        elif base == "%cluster_ctarank":
            val = cta.rank
        elif base == "%cluster_nctarank":
            val = len(cl.ctas)
        elif base == "%clusterid":
            val = cl.clusterid[i]
        elif base == "%nclusterid":
            val = self.grid[i] // self.cluster_dims[i]
        elif base == "%cluster_ctaid":
            val = cta.ctaid[i] % self.cluster_dims[i]
        elif base == "%cluster_nctaid":
            val = self.cluster_dims[i]
        elif base == "%is_explicit_cluster":
            val = 1
        elif base == "%dynamic_smem_size":
            val = self.dyn_smem
        elif base == "%smid":
            val = self.sm_index(cta)
        elif base in ("%globaltimer", "%globaltimer_lo", "%clock64", "%clock"):
            # PTX ISA 10 "Special Registers": %globaltimer counts nanoseconds, %clock64 SM cycles. The functional
            # machine has no clock, so both count executed warp-instructions (monotone, as the ISA requires); the
            # timed machine (emu.timing.engine) gives simulated time.
            ns, cycles = self.timer()
            val = (ns if base.startswith("%globaltimer") else cycles) & (0xFFFFFFFF if base in ("%globaltimer_lo", "%clock") else (1 << 63) - 1)
        else:
            raise EmulatorError(f"special register {name} is not implemented")
        return np.broadcast_to(np.asarray(val, np.int64), (WARP,)).copy()

    def timer(self) -> tuple[int, int]:
        """(%globaltimer in ns, %clock64 in cycles) now."""
        return self.clock, self.clock

    def sm_index(self, cta) -> int:
        """%smid (PTX ISA 10 "Special Registers": the SM the CTA runs on, constant for the CTA). The functional
        machine places no CTA on an SM: CTA x + X (y + Y z) on SM of that number, which a grid of at most one CTA per
        SM (this package's persistent grids) could have."""
        x, y, z = cta.ctaid
        return x + self.grid[0] * (y + self.grid[1] * z)

    @property
    def clock(self) -> int:
        """A global order of events: the number of warp-instructions executed so far."""
        return self.stats["warp_instructions"]

    def check_global_access(self, w, mask, what: str, reads=None) -> None:
        """Under programmatic dependent launch only griddepcontrol.wait makes the prerequisite grid's writes visible
        (PTX ISA "griddepcontrol"): before it, a store or atomic races that grid, and so does a read (`reads`: the
        global addresses an access starts at) of memory it may write. Which memory that is, the stream says
        (prerequisite_writes); where it does not, every access before the wait races."""
        if not self.pdl:
            return
        waited = getattr(w, "griddep_waited", None)
        if waited is not None and not (mask & ~waited).any():
            return
        if reads is not None and self.prerequisite_writes is not None:
            for addr in reads:
                for base, size in self.prerequisite_writes:
                    if base <= int(addr) < base + size:
                        raise Hazard(f"{what}: reads global memory at {int(addr):#x} before griddepcontrol.wait, in "
                                     f"the allocation at {base:#x} that the previous grid in the stream writes (a "
                                     f"kernel launched with programmatic dependent launch)")
            return
        raise Hazard(f"{what}: global memory accessed before griddepcontrol.wait in a kernel launched with "
                     f"programmatic dependent launch (the previous kernel may still be writing it)")

    def tensor_map(self, addr: int):
        """The CUtensorMap at a generic address (a kernel parameter), decoded once."""
        cache = self.tensor_maps
        tm = cache.get(addr)
        if tm is None:
            from . import tma

            if addr % 64:
                raise Hazard(f"tensor map at {addr:#x} is not 64-byte aligned (the tensor-map parameter is declared .align 64; CUDA driver API cuTensorMapEncodeTiled: 64-byte aligned)")
            tm = cache[addr] = tma.decode_tensor_map(self.gmem.read(addr, 128).tobytes())
        return tm

    def prefetch(self, source: int, nbytes: int) -> None:
        """An L2 prefetch of nbytes of the global allocation at `source`: no effect on what any instruction computes."""

    def log_store(self, addr: int, nbytes: int, cluster, atomic: bool = False) -> None:
        """A global store (or atomic) by a CTA of `cluster`, for the check of the elements the run's clusters wrote."""
        self.store_log.append((int(addr), int(nbytes)))
        self.store_clusters.append(cluster.clusterid)
        if atomic:
            self.atomic_log.append((int(addr), int(nbytes)))

    def watch_unknown(self, ranges) -> None:
        """Global bytes ((address, bytes)) whose contents this run does not know: an earlier launch of the call wrote
        them from clusters that were not emulated. A cluster that reads any of them is tainted (`tainted`): what it
        computes depends on data the emulator did not produce, so the caller leaves its stores unchecked."""
        self.gmem.watch(ranges, self._read_unknown)

    def _read_unknown(self, addr: int, nbytes: int) -> None:
        cur = self.current
        cid = cur[0].cta.cluster.clusterid if isinstance(cur, tuple) else self.op_cluster
        self.tainted.setdefault(cid, f"reads {nbytes} bytes at {addr:#x} ({self.where_now(brief=True)})")

    def note(self, rule: str, where: str, precedent: str, detail: str = "") -> None:
        """Record a Note (emu.state.Note) once per rule and place: the run goes on."""
        self.notes.setdefault((rule, where), Note(rule, where, precedent, detail))

    # ------------------------------------------------------------------ async engine
    def submit(self, cluster, op: AsyncOp) -> None:
        cluster.inflight.append(op)
        self.stats["async_ops"] += 1
        if op.cost is not None and op.cost.unit == "load":
            self.traffic[op.cost.source] = self.traffic.get(op.cost.source, 0) + op.cost.nbytes

    def complete_one(self, cluster) -> bool:
        """Complete one in-flight operation drawn uniformly from those that can complete now; False if none can."""
        op = cluster.inflight.pop_completable(self.rng.below)
        if op is None:
            return False
        if self.digest is not None:
            self.digest.completed(op)
        self.current, self.op_cluster = op, cluster.clusterid
        try:
            op.run()
        except EmulatorError as e:
            raise type(e)(f"{e} [{self.where_now()}]") from None
        cluster.progress += 1
        return True

    def where_now(self, brief: bool = False) -> str:
        """What is running: the warp and PTX line of the instruction, or the asynchronous operation completing
        (brief: only the PTX line and the operation, the place a Note is filed under)."""
        cur = self.current
        if isinstance(cur, AsyncOp):
            if brief:
                return f"PTX line {cur.line} ({cur.name.split(' [')[0]}, completing)"
            return f"{cur.name} issued at PTX line {cur.line}, completing"
        if cur is None:
            return "outside any instruction"
        w, ins = cur
        if brief:
            return ins.site()
        return f"warp {w.warp_id} ({role_of(w.warp_id)}) of CTA {w.cta.ctaid}, {ins.where()}"

    # ------------------------------------------------------------------ running
    def run(self, cluster_ids=None) -> None:
        ids = list(self.clusters()) if cluster_ids is None else cluster_ids
        for n, cid in enumerate(ids):
            cl = self.build_cluster(cid)
            with running():
                self.run_cluster(cl)
            if self.progress:
                self.progress(n + 1, len(ids))

    def _turn_order(self, cl) -> dict:
        """warp -> class (lower runs first) for the policy's priority and starvation; {} when uniform."""
        knobs, rng = self.knobs, self.rng
        warps = [w for cta in cl.ctas for w in cta.warps]
        order = {}
        if knobs["priority"]:
            rank = {role: i for i, role in enumerate(knobs["priority"])}
            order = {w: rank.get(role_of(w.warp_id), len(rank)) for w in warps}
        starved = []
        if knobs["starve"] == "warp":
            starved = [warps[int(rng.integers(len(warps)))]]
        elif knobs["starve"] == "role":
            present = sorted({role_of(w.warp_id) for w in warps})
            role = present[int(rng.integers(len(present)))]
            starved = [w for w in warps if role_of(w.warp_id) == role]
        for w in starved:
            order[w] = STARVED
        if order:
            for w in warps:
                order.setdefault(w, 0)
        return order

    def _pick(self, runnable: list, order: dict):
        rng = self.rng
        if order:
            if rng.random() >= STARVED_TURN_PROB:
                fed = [w for w in runnable if order[w] != STARVED]
                runnable = fed or runnable
            if self.knobs["priority"] and rng.random() < PRIORITY_STRICTNESS:
                classes = [order[w] for w in runnable]
                best = min(classes)
                runnable = [w for w, c in zip(runnable, classes) if c == best]
        return runnable[int(rng.integers(len(runnable)))]

    def run_cluster(self, cl) -> None:
        warps = [w for cta in cl.ctas for w in cta.warps]
        rng = self.rng
        order = self._turn_order(cl)
        # the turn's names bound once: a K split's schedule takes ~10^6 turns, most of them a spin-waiter's three
        # instructions, so the turn itself is a large part of its cost
        below, random, inflight, step_warp = rng.below, rng.random, cl.inflight, self.step_warp
        completion_prob, max_quantum, wake_prob = self.completion_prob, self.max_quantum, self.knobs["wake_prob"]
        late = wake_prob < 1.0
        mark = None  # cluster progress when the spinners were last woken with nothing else to run
        while True:
            if inflight.size and not late:
                # Whether an operation completes first needs only whether some warp can run (the first one found
                # ends the look): a warp that the full look below would wake now wakes as well after the completion
                # (barrier versions only grow), so only a late-wake policy, whose looks draw, needs the full look
                # first. About half the turns end in a completion.
                for w in warps:
                    key = w.sleep_key
                    if (key is None or key[0].version != key[1]) and not w.done and w.blocked_on is None:
                        break
                else:
                    w = None
                if (w is None or random() < completion_prob) and self.complete_one(cl):
                    continue
            wakeable, runnable = [], []
            # Who can take a turn (rebuilt every turn, so the tests are inline): not done, not blocked, and awake or
            # asleep on an mbarrier that has changed since (sleep_key is (mbarrier, its version then)) and waking now:
            # at once, or under a late-wake policy with probability wake_prob (else it joins `wakeable`); a sleeper's
            # barrier is looked at first (most warps sleep, on a barrier that has not changed)
            for w in warps:
                key = w.sleep_key
                if key is None:
                    if not w.done and w.blocked_on is None:
                        runnable.append(w)
                elif key[0].version != key[1] and not w.done and w.blocked_on is None:
                    if late and random() >= wake_prob:
                        wakeable.append(w)
                    else:
                        w.sleep_key = None
                        runnable.append(w)
            if late and inflight.size and (not runnable or random() < completion_prob):
                if self.complete_one(cl):
                    continue
            if not runnable and wakeable:  # nothing else can happen: the late wakers wake now
                for w in wakeable:
                    w.sleep_key = None
                continue
            if not runnable:
                if all(w.done for w in warps):
                    if inflight:  # none can ever be ready: nothing is left to initialise their mbarriers
                        raise Deadlock(f"cluster {cl.clusterid} exited with asynchronous operations that can never "
                                       "complete (their target mbarrier was never initialised): "
                                       + ", ".join(f"{o.name} (PTX line {o.line})" for o in list(inflight)[:4]))
                    break
                sleepers = [w for w in warps if not w.done and w.blocked_on is None and w.sleep_key is not None]
                if sleepers and cl.progress != mark:
                    # Every remaining warp spins on an incomplete mbarrier and nothing is in flight: let the
                    # spinners run once more (a try_wait may be a probe, not a wait); if no state changes, stop.
                    mark = cl.progress
                    for w in sleepers:
                        w.sleep_key = None
                    continue
                raise Deadlock(self.deadlock_report(cl))
            w = self._pick(runnable, order) if order else runnable[below(len(runnable))]
            step_warp(w, 1 + below(max_quantum))
        # Operations still in flight when their CTA exited were completed above, in the seeded order, after the exit:
        # each one's delivery checks the CTAs it touches (emu.ops_async: a write into an exited CTA's shared memory, a
        # store reading it). Then the per-CTA exit rules: tensor memory released (PTX ISA 9.7.16.7.1) and EXIT_CHECKS.
        for cta in cl.ctas:
            if cta.tmem_allocs:
                raise Hazard(f"CTA {cta.ctaid} exited with tensor memory still allocated: {cta.tmem_allocs}")
            for check in EXIT_CHECKS:
                check(cta)

    def step_warp(self, w, quantum: int) -> None:
        cl = w.cta.cluster
        execute_one = self.execute_one
        for _ in range(quantum):
            if w.done:
                cl.progress += 1
                return
            ctl = execute_one(w)
            if ctl is BLOCK or ctl is SLEPT or w.blocked_on is not None or w.sleep_key is not None:
                return

    def execute_one(self, w):
        """Run the warp's next instruction (the lanes at its smallest PC). Returns None when the warp may go on,
        BLOCK when it must retry the same instruction later, SLEPT when it went to sleep on a barrier."""
        pc = w.upc
        if pc >= 0:  # converged (emu.simt.Warp): every live lane at upc
            lanes = w.live
        else:
            pc, lanes = w.select_lanes()
        if self.digest is not None:
            self.digest.issued(w, pc, lane_bits(lanes))
        try:
            ins = self.kernel.instrs[pc]
        except IndexError:
            raise Hazard(f"warp {w.warp_id} of CTA {w.cta.ctaid} ran past the end of the kernel") from None
        w.last_line = ins.line
        self.current = (w, ins)
        mask = lanes
        self.stats["warp_instructions"] += 1
        guard = ins.guard
        if guard is not None:
            g = w.register(guard[0].name)
            if lanes is w.live and w.all_lanes:  # every lane runs: the predicate's own bytes say who executes
                executing = g.tobytes()
                if executing == (ALL_LANES if guard[1] else NO_LANES):  # every lane's guard is false: skipped
                    w.advance(lanes)
                    return None
                if executing != (NO_LANES if guard[1] else ALL_LANES):
                    mask = lanes & ~g if guard[1] else lanes & g
            else:
                mask = lanes & ~g if guard[1] else lanes & g
                executing = mask.tobytes()
                if executing == NO_LANES:  # every lane's guard is false: the instruction is skipped
                    w.advance(lanes)
                    return None
                if executing == (w.live_bytes if lanes is w.live else lanes.tobytes()):
                    mask = lanes  # every lane at the PC executes: handlers may take their whole-warp paths
        try:
            ctl = ins.handler(self, w, ins, mask)
        except EmulatorError as e:
            if ins.where() in str(e):
                raise
            raise type(e)(f"{e} [warp {w.warp_id} ({role_of(w.warp_id)}) of CTA {w.cta.ctaid}, {ins.where()}]") from None
        if ctl is None:
            w.advance(lanes)
        elif ctl is BLOCK or ctl is JUMPED:
            return ctl if ctl is BLOCK else None
        elif ctl is SLEEP:
            w.advance(lanes)
            return SLEPT
        else:
            raise EmulatorError(f"bad control {ctl}")
        return None

    # ------------------------------------------------------------------ reports
    def deadlock_report(self, cl) -> str:
        lines = [f"deadlock in cluster {cl.clusterid}: no warp can progress and nothing is in flight"]
        for cta in cl.ctas:
            for w in cta.warps:
                if w.done:
                    continue
                where = f"PTX line {w.last_line}"
                if w.blocked_on is not None:
                    what = f"blocked on {w.blocked_on.describe()}"
                elif w.sleep_key is not None:
                    what = f"spinning on {w.sleep_key[0].describe()}"
                    lapped = getattr(w.sleep_key[0], "lapped", {}).get((cta.rank, w.warp_id))
                    if lapped:
                        what += f"; {lapped}"
                else:
                    what = "runnable?"
                lines.append(f"  CTA{cta.rank} {cta.ctaid} warp {w.warp_id} ({role_of(w.warp_id)}) at {where}: {what}")
        return "\n".join(lines)


def role_of(warp_id: int) -> str:
    """Warp roles of submission.py's kernel (and NVIDIA's persistent GEMM): 0-3 epilogue, 4 MMA, 5 TMA."""
    return {4: "MMA", 5: "TMA"}.get(warp_id, "epilogue" if warp_id < 4 else "extra")
