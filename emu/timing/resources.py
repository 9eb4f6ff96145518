"""Resources of the timing model: first-come-first-served pipes, and the units of one SM.

A Pipe serves work in arrival order: work arriving at cycle t starts at max(t, the pipe's free time) and holds it for
its cycles. A Bandwidth is a Pipe whose work is bytes at a rate (bytes per cycle). Shares of a chip-wide resource
(HBM, L2) are Bandwidths at the chip's rate times the fraction of the chip the simulated SMs stand for
(emu.timing.call decides the fraction). Busy cycles are kept for the report's utilisations.
"""
from __future__ import annotations


class Pipe:
    def __init__(self, name: str):
        self.name = name
        self.free = 0.0
        self.busy = 0.0

    def occupy(self, t: float, cycles: float) -> tuple[float, float]:
        """(start, end) of `cycles` of work arriving at t."""
        start = t if t > self.free else self.free
        self.free = start + cycles
        self.busy += cycles
        return start, self.free


class SlotPipe(Pipe):
    """A pipe whose work takes the earliest free interval at or after its ready time, not the end of the queue:
    ptxas orders independent work so that a unit is not left idle behind a dependent chain (used for the MUFU,
    whose work arrives in PTX order but is issued in scheduled order). Intervals that end before `forget_before`
    are dropped (no work can start in the past)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.intervals = []  # sorted, disjoint [start, end] pairs

    def occupy(self, t: float, cycles: float) -> tuple[float, float]:
        iv = self.intervals
        start = t
        i = 0
        while i < len(iv) and iv[i][1] <= start:
            i += 1
        while i < len(iv) and iv[i][0] < start + cycles:
            start = max(start, iv[i][1])
            i += 1
        end = start + cycles
        iv.insert(i, [start, end])
        # merge with neighbours so the list stays short
        if i + 1 < len(iv) and iv[i + 1][0] <= end:
            iv[i][1] = iv[i + 1][1]
            del iv[i + 1]
        if i > 0 and iv[i - 1][1] >= start:
            iv[i - 1][1] = iv[i][1]
            del iv[i]
        self.free = max(self.free, end)
        self.busy += cycles
        return start, end

    def forget_before(self, t: float) -> None:
        iv = self.intervals
        k = 0
        while k < len(iv) and iv[k][1] < t:
            k += 1
        if k:
            del iv[:k]


class Bandwidth(Pipe):
    def __init__(self, name: str, bytes_per_clk: float):
        super().__init__(name)
        if bytes_per_clk <= 0:
            raise ValueError(f"{name}: bandwidth must be positive, got {bytes_per_clk}")
        self.rate = bytes_per_clk
        self.bytes = 0

    def transfer(self, t: float, nbytes: float) -> float:
        """The cycle the last of `nbytes` arriving at t has gone through."""
        self.bytes += nbytes
        return self.occupy(t, nbytes / self.rate)[1] if nbytes else t


class SM:
    """One SM's units: per sub-partition an issue slot, a MUFU pipe and a conversion pipe; the tensor core; the TMA engine; the
    shared-memory port (TMA writes, MMA operand reads, tcgen05.cp reads, shared loads and stores); the L2 -> SM path;
    the global store path; the tensor-memory read port (tcgen05.ld).

    Shared memory (switch `smem_write_bytes_per_clk`, docs/timing_hypotheses.md H1): `smem` is the read path (MMA
    operand reads, tcgen05.cp, ld/st.shared, a TMA store's source reads) and `smem_write` the write path (TMA and bulk
    copy writes, st.async arrivals). At 0 (the table's default) they are one port, the same Bandwidth object, as
    before the switch; above 0 the write path is a separate Bandwidth at that rate."""

    def __init__(self, index: int, costs):
        self.index = index
        n = int(costs.smsp_per_sm)
        self.issue = [Pipe(f"SM{index} issue {i}") for i in range(n)]
        self.mufu = [SlotPipe(f"SM{index} MUFU {i}") for i in range(n)]
        self.convert = [SlotPipe(f"SM{index} conversions {i}") for i in range(n)]
        self.tensor = Pipe(f"SM{index} tensor core")
        self.tma = Pipe(f"SM{index} TMA")
        self.smem = Bandwidth(f"SM{index} shared memory", costs.smem_bytes_per_clk)
        write = costs.smem_write_bytes_per_clk
        if write < 0:
            raise ValueError(f"smem_write_bytes_per_clk must be 0 (one port) or a rate, got {write}")
        self.smem_write = Bandwidth(f"SM{index} shared-memory writes", write) if write > 0 else self.smem
        self.l2_in = Bandwidth(f"SM{index} L2->SM", costs.l2_to_sm_bytes_per_clk)
        self.store = Bandwidth(f"SM{index} stores", costs.store_bytes_per_clk)
        self.tmem_read = Bandwidth(f"SM{index} tensor-memory reads", costs.tmem_ld_bytes_per_clk)
        self.tc_ordered = 0.0  # completion of the last tcgen05 operation issued to this SM (ISA: pipelined, in order)
        self.stores_done = 0.0  # when this SM's last global store has reached L2

    def units(self) -> list:
        write = [] if self.smem_write is self.smem else [self.smem_write]
        return [*self.issue, *self.mufu, *self.convert, self.tensor, self.tma, self.smem, *write, self.l2_in,
                self.store, self.tmem_read]
