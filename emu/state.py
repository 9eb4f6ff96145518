"""Explicit machine state: global memory, per-CTA shared and tensor memory, clusters.

Address conventions (the emulator's own choices where the PTX ISA leaves them to the implementation):
- Global addresses are 64-bit virtual addresses handed out by `GlobalMemory.alloc`.
- Shared addresses carry the CTA's rank in the cluster above bit 24: rank << 24 | byte offset. The
  shared::cta window is contained in the shared::cluster window (PTX ISA 5.1.7 "Shared State Space"),
  so an address of the executing CTA is valid in both; `mapa` swaps the rank bits. The bit position
  is the hardware's, not the ISA's: CUTLASS's SM100 2-CTA code reaches the even CTA of a pair by
  masking bit 24 of its own shared address (include/cute/arch/mma_sm100_umma.hpp,
  `Sm100MmaPeerBitMask = 0xFEFFFFFF`), and the kernel's PTX does the same (`and.b32 ..., -16777224`).
- A tensor-memory address is lane << 16 | column (PTX ISA 9.7.16.2.1 "Tensor Memory Addressing").
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from .device import TMEM_COLUMNS, TMEM_LANES

CLUSTER_RANK_SHIFT = 24
SHARED_OFFSET_MASK = (1 << CLUSTER_RANK_SHIFT) - 1
POISON_BYTE = 0xFF  # fp16 0xFFFF and fp32 0xFFFFFFFF are NaN; e4m3 0xFF is NaN
POISON_WORD = 0xFFFFFFFF


class EmulatorError(Exception):
    """Base class: every emulator failure names what it was doing."""


class Hazard(EmulatorError):
    """The kernel did something the PTX ISA leaves undefined (a race, a bad address, a misuse)."""


class Unsupported(EmulatorError):
    """An opcode form the emulator does not implement: never a silent no-op."""


@dataclass(frozen=True)
class Note:
    """A use the PTX memory model or ISA text does not promise but hardware-verified kernels rely on and survive.

    Not a failure: a run with notes ends "MATCH with notes", each naming what it is, where, and the hardware-
    verified kernel that does the same (its precedent). A rule with no such precedent is a Hazard, not a Note.
    """

    rule: str  # short stable name, e.g. "mbarrier-init-unpublished"
    where: str  # PTX line and warp role
    precedent: str  # the hardware-verified kernel that does the same
    detail: str = ""

    def describe(self) -> str:
        return f"note [{self.rule}] at {self.where}: {self.detail} (precedent: {self.precedent})"


def summarize_notes(notes) -> list[str]:
    """One line per rule: how many places, the first place and its detail, the precedent."""
    by_rule = {}
    for n in notes:
        by_rule.setdefault(n.rule, []).append(n)
    lines = []
    for rule, group in by_rule.items():
        first = group[0]
        more = f" (and {len(group) - 1} more place{'s' if len(group) > 2 else ''})" if len(group) > 1 else ""
        lines.append(f"note [{rule}] at {first.where}{more}: {first.detail} (precedent: {first.precedent})")
    return lines


class GlobalMemory:
    """Sparse global memory: allocations, each a numpy byte array at a virtual address, kept sorted by address.

    `alloc` hands out addresses of its own; `attach` places a caller's array at a given address (a live view: the
    emulator reads and writes the caller's bytes, e.g. host memory a CPU tensor owns, at the address the host code
    passed to the kernel)."""

    BASE = 0x7F00_0000_0000

    def __init__(self):
        self._allocs: list[tuple[int, np.ndarray]] = []  # (base, bytes), sorted by base, never overlapping
        self._bases: list[int] = []
        self._next = self.BASE
        self._watched = None  # (starts, ends, callback) of watch(): reads of bytes whose contents are not known

    def watch(self, ranges, callback) -> None:
        """Call callback(addr, nbytes) at every read that touches one of `ranges` ((address, bytes), disjoint): bytes
        whose contents this run does not know (an earlier launch's clusters that were not emulated write them)."""
        spans = sorted((int(a), int(a) + int(n)) for a, n in ranges if n)
        self._watched = ([a for a, _ in spans], [b for _, b in spans], callback) if spans else None

    def _touch(self, addr: int, nbytes: int) -> None:
        starts, ends, callback = self._watched
        i = bisect.bisect_right(starts, addr + nbytes - 1) - 1
        if i >= 0 and ends[i] > addr:
            callback(addr, nbytes)

    def alloc(self, nbytes: int, align: int = 1024, fill: int | None = None) -> int:
        addr = (self._next + align - 1) // align * align
        buf = np.zeros(nbytes, np.uint8) if fill is None else np.full(nbytes, fill, np.uint8)
        self.attach(addr, buf)
        self._next = max(self._next, addr + max(nbytes, 1) + 4096)  # a gap so overruns do not land in a neighbour
        return addr

    def attach(self, addr: int, buf: np.ndarray) -> None:
        """Make the uint8 array `buf` the allocation at `addr` (no copy)."""
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise ValueError("an allocation is a one-dimensional uint8 array")
        i = bisect.bisect_right(self._bases, addr)
        prev_end = self._allocs[i - 1][0] + self._allocs[i - 1][1].size if i else None
        if (prev_end is not None and prev_end > addr) or (i < len(self._bases) and self._bases[i] < addr + buf.size):
            raise ValueError(f"allocation of {buf.size} bytes at {addr:#x} overlaps another")
        self._allocs.insert(i, (addr, buf))
        self._bases.insert(i, addr)

    def alloc_array(self, data: np.ndarray, align: int = 1024) -> int:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        addr = self.alloc(raw.size, align)
        self.buffer(addr)[:] = raw
        return addr

    def buffer(self, addr: int) -> np.ndarray:
        """The whole allocation that starts at addr (a live view)."""
        i = bisect.bisect_left(self._bases, addr)
        if i < len(self._bases) and self._bases[i] == addr:
            return self._allocs[i][1]
        raise Hazard(f"no global allocation starts at {addr:#x}")

    def _holding(self, addr: int):
        """(base, buffer) of the allocation holding addr, or None."""
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0 and addr < self._bases[i] + self._allocs[i][1].size:
            return self._allocs[i]
        return None

    def allocation(self, addr: int) -> tuple[int, int]:
        """(base, size) of the allocation holding addr."""
        held = self._holding(addr)
        if held is None:
            raise Hazard(f"{addr:#x} is outside every global allocation")
        return held[0], held[1].size

    def _find(self, addr: int, nbytes: int) -> tuple[np.ndarray, int]:
        held = self._holding(addr)
        if held is None or addr + nbytes > held[0] + held[1].size:
            raise Hazard(f"global access of {nbytes} bytes at {addr:#x} is outside every allocation")
        return held[1], addr - held[0]

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        buf, off = self._find(addr, nbytes)
        if self._watched is not None:
            self._touch(addr, nbytes)
        return buf[off:off + nbytes].copy()

    def read_or_poison(self, addr: int, nbytes: int) -> tuple[np.ndarray, int]:
        """The bytes at [addr, addr+nbytes) that lie in allocations, POISON_BYTE elsewhere, and how many lay outside
        (what a read past a tensor's end sees on hardware is whatever else is mapped there: here, poison)."""
        out = np.full(nbytes, POISON_BYTE, np.uint8)
        inside = 0
        if self._watched is not None:
            self._touch(addr, nbytes)
        for i in range(max(0, bisect.bisect_right(self._bases, addr) - 1), len(self._bases)):
            base, buf = self._allocs[i]
            if base >= addr + nbytes:
                break
            lo, hi = max(addr, base), min(addr + nbytes, base + buf.size)
            if lo < hi:
                out[lo - addr:hi - addr] = buf[lo - base:hi - base]
                inside += hi - lo
        return out, nbytes - inside

    def write(self, addr: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buf, off = self._find(addr, data.size)
        buf[off:off + data.size] = data

    def gather(self, addrs: list, nbytes: int) -> np.ndarray:
        """[len(addrs), nbytes]: read(addr, nbytes) for each address, in one step when they all lie in one
        allocation (else one by one: the first outside every allocation is the Hazard)."""
        span = self._one_allocation(addrs, nbytes)
        if span is None:
            return np.stack([self.read(a, nbytes) for a in addrs])
        if self._watched is not None:  # each lane's read, as read() reports it
            for a in addrs:
                self._touch(int(a), nbytes)
        base, buf = span
        return buf[(np.asarray(addrs, np.int64) - base)[:, None] + np.arange(nbytes)]

    def scatter(self, addrs: list, rows: np.ndarray) -> None:
        """write(addr, row) for each address and uint8 row, in order: in one step when the rows land in one allocation
        and do not overlap (then the order cannot matter)."""
        nbytes = rows.shape[1]
        span = self._one_allocation(addrs, nbytes)
        starts = np.sort(np.asarray(addrs, np.int64))
        if span is None or (len(addrs) > 1 and np.diff(starts).min() < nbytes):
            for a, row in zip(addrs, rows):
                self.write(a, row)
            return
        base, buf = span
        buf[(np.asarray(addrs, np.int64) - base)[:, None] + np.arange(nbytes)] = rows

    def _one_allocation(self, addrs: list, nbytes: int):
        """(base, buffer) of the allocation that holds [a, a + nbytes) for every a in addrs, or None."""
        lo, hi = min(addrs), max(addrs)
        held = self._holding(lo)
        if held is None or hi + nbytes > held[0] + held[1].size:
            return None
        return held


@dataclass
class TensorMemoryAllocation:
    column: int
    ncols: int


@dataclass
class Cta:
    """One CTA: its coordinates, shared memory, tensor memory and mbarriers.

    Shared memory and tensor memory start poisoned (POISON_BYTE / POISON_WORD): a read of data that no
    producer wrote comes back NaN (fp16/fp32/e4m3) or -6.0 (FP4 nibble 0xF).
    """

    ctaid: tuple[int, int, int]
    rank: int  # %cluster_ctarank
    cluster: "Cluster"
    smem: np.ndarray
    tmem: np.ndarray = field(default_factory=lambda: np.full((TMEM_LANES, TMEM_COLUMNS), POISON_WORD, np.uint32))
    tmem_allocs: list = field(default_factory=list)
    relinquished: bool = False
    mbarriers: dict = field(default_factory=dict)  # shared offset -> emu.mbarrier.Mbarrier
    # The tensor core's A collector of this CTA (tcgen05.mma .collector::a::*): the A operand codes a
    # .collector::a::fill MMA kept, or None when empty (emu.tcgen05.mma, module docstring Q6).
    a_collector: object = None
    # tcgen05.mma.ws's four B collector buffers: buffer number -> the B codes a .collector::bN::fill kept, None or
    # absent when empty (emu.tcgen05.mma, module docstring Q9).
    b_collectors: dict = field(default_factory=dict)
    # Per-CTA bookkeeping of the instruction families (each named where it is used):
    store_sources: list = field(default_factory=list)  # TMA-store source spans still to be read (ops_async)
    awaiting_init: dict = field(default_factory=dict)  # mbarrier offset -> warps that used it before its init
    recent_mmas: list = field(default_factory=list)  # tcgen05.mma issues the ordering rules look back on (ordering)
    generic_unfenced: dict = field(default_factory=dict)  # warp -> generic-proxy writes not yet proxy-fenced
    rendezvous: dict = field(default_factory=dict)  # "alloc"/"dealloc" -> the pair's cta_group::2 meeting (ops_async)
    tmem_freed: list = field(default_factory=list)  # (column, columns, warp key, PTX line) a dealloc freed (ordering)
    warps: list = field(default_factory=list)  # emu.simt.Warp, by warp id (Machine.build_cluster)
    sorted_mbarriers: list = field(default_factory=list)  # the mbarriers' offsets, sorted (mbarrier_offsets)
    running: int = 0  # its warps not exited yet (each counts itself out: emu.simt.Warp.exit_lanes)

    @property
    def exited(self) -> bool:
        """Every warp of the CTA has exited (its shared memory may host another CTA from then on)."""
        return self.running == 0 and bool(self.warps)

    @property
    def peer(self) -> "Cta":
        """The other CTA of a CTA pair (cta_group::2): ranks 2i and 2i+1 (PTX ISA 9.7.16.1 "CTA pair")."""
        return self.cluster.ctas[self.rank ^ 1]


@dataclass
class Cluster:
    clusterid: tuple[int, int, int]
    dims: tuple[int, int, int]
    ctas: list = field(default_factory=list)


class SharedAddressing:
    """Resolve shared::cta / shared::cluster addresses to (cta, offset)."""

    @staticmethod
    def resolve(cta: Cta, addr: int, cluster_scope: bool) -> tuple[Cta, int]:
        addr = int(addr) & 0xFFFFFFFF
        rank = addr >> CLUSTER_RANK_SHIFT
        if rank == cta.rank:
            return cta, addr & SHARED_OFFSET_MASK
        if not cluster_scope:
            raise Hazard(f"shared::cta access at {addr:#x} names CTA rank {rank}; the executing CTA is rank {cta.rank}")
        if rank >= len(cta.cluster.ctas):
            raise Hazard(f"shared::cluster address {addr:#x} names CTA rank {rank}, cluster has {len(cta.cluster.ctas)}")
        target = cta.cluster.ctas[rank]
        if target.exited:
            # An exited CTA's shared memory is gone: distributed shared memory is valid only while the
            # target CTA runs (PTX ISA 5.1.7 / CUDA programming guide, "Distributed Shared Memory").
            raise Hazard(f"access to shared memory of CTA rank {rank} after that CTA exited")
        return target, addr & SHARED_OFFSET_MASK


def smem_read(cta: Cta, offset: int, nbytes: int) -> np.ndarray:
    if offset < 0 or offset + nbytes > cta.smem.size:
        raise Hazard(f"shared read of {nbytes} bytes at {offset:#x} outside {cta.smem.size} bytes (CTA {cta.ctaid})")
    return cta.smem[offset:offset + nbytes].copy()


def smem_gather(cta: Cta, offsets: list, nbytes: int) -> np.ndarray:
    """[len(offsets), nbytes]: smem_read at each offset (one step when all lie inside; else one by one, the first
    outside is the Hazard)."""
    if min(offsets) < 0 or max(offsets) + nbytes > cta.smem.size:
        return np.stack([smem_read(cta, off, nbytes) for off in offsets])
    return cta.smem[np.asarray(offsets, np.int64)[:, None] + np.arange(nbytes)]


def mbarrier_offsets(cta: Cta) -> list:
    """The offsets of the CTA's mbarriers, sorted. Mbarriers are only ever added (a re-init replaces one in place), so
    their count says whether the list is current."""
    if len(cta.sorted_mbarriers) != len(cta.mbarriers):
        cta.sorted_mbarriers = sorted(cta.mbarriers)
    return cta.sorted_mbarriers


def _as_bytes(data: np.ndarray) -> np.ndarray:
    if type(data) is np.ndarray and data.dtype == np.uint8 and data.ndim == 1 and data.flags.c_contiguous:
        return data
    return np.ascontiguousarray(data).view(np.uint8).reshape(-1)


def overlaps_mbarrier(cta: Cta, lo: int, hi: int) -> bool:
    """Whether [lo, hi) of the CTA's shared memory touches the 8 bytes of one of its mbarriers."""
    offsets = mbarrier_offsets(cta)
    first = bisect.bisect_left(offsets, lo - 7)  # the first mbarrier whose 8 bytes reach past `lo`
    return first < len(offsets) and offsets[first] < hi


def store_shared_rows(cta: Cta, offsets: list, rows: np.ndarray, what: str) -> None:
    """store_shared of rows[i] (uint8) at offsets[i] for each i, in order: in one step when the rows do not overlap
    and lie inside shared memory, clear of every mbarrier (then the order cannot matter)."""
    n = rows.shape[1]
    lo, hi = min(offsets), max(offsets) + n
    if lo < 0 or hi > cta.smem.size or overlaps_mbarrier(cta, lo, hi) or \
            (len(offsets) > 1 and np.diff(np.sort(offsets)).min() < n):
        for off, row in zip(offsets, rows):
            store_shared(cta, off, row, what)
        return
    cta.smem[np.asarray(offsets, np.int64)[:, None] + np.arange(n)] = rows


def store_shared(cta: Cta, offset: int, data: np.ndarray, what: str) -> None:
    """A data write into shared memory (a store, a TMA or bulk copy): it must not land on a live mbarrier,
    whose 8 bytes only the mbarrier instructions may touch (PTX ISA "mbarrier": the object is opaque)."""
    data = _as_bytes(data)
    if overlaps_mbarrier(cta, offset, offset + data.size):
        for boff in cta.mbarriers:  # the first one in initialisation order names the hazard
            if offset < boff + 8 and boff < offset + data.size:
                raise Hazard(f"{what} overwrites the live mbarrier at shared offset {boff:#x}")
    _smem_bytes_write(cta, offset, data)


def smem_write(cta: Cta, offset: int, data: np.ndarray) -> None:
    _smem_bytes_write(cta, offset, _as_bytes(data))


def _smem_bytes_write(cta: Cta, offset: int, data: np.ndarray) -> None:
    if offset < 0 or offset + data.size > cta.smem.size:
        raise Hazard(f"shared write of {data.size} bytes at {offset:#x} outside {cta.smem.size} bytes (CTA {cta.ctaid})")
    cta.smem[offset:offset + data.size] = data
