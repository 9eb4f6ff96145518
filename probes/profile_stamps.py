"""The profile path below SM100: %globaltimer / %clock64 stamps into the profile buffer, their decode, and the timer.

KernelConfig.profile's kernel needs an SM100 GPU. This probe keeps everything of the profile path except tcgen05:
the kernel's real host side and launch (probes/device_stub.DeviceStub: the TVM-FFI entry with the profile buffer as
its eighth argument, the six TMA descriptors, grid, cluster, shared memory, the PDL attribute) and, in the device
body, the kernel's own recording helpers (submission.profile_stamp, submission.ProfileRecord) writing every slot of
the layout in the kernel's order and by the kernel's threads: thread 0 stamps entry, tmem_alloc (here: the same
point of the prologue, without tensor memory) and the SM word; the TMA warp wait_begin / wait_done around
griddepcontrol.wait, then hands stage 0 to the MMA warp; the MMA warp, after a spin standing for the first stage's
loads, first_load, hands accumulator 0 to the epilogue, then a spin per tile and mainloop_end; epilogue thread 0,
once it has accumulator 0, per tile got / a spin / released, then epilogue_end, the count and exit. The buffer is
decoded by tools/profile_buffer.py and read by tools/profile.py's statistics, as the B200 profile is.

The first H100 run (DSL 4.3.5) failed for two reasons, both fixed here:
  - "first_load > got 0" in every CTA record: the stub's MMA warp handed off to the epilogue by named barriers
    (bar.arrive 4, 160 / bar.sync 4, 160 from the four epilogue warps). The TMA warp had exited (sm_90a SASS: its
    EXIT follows its BAR.ARV 3 at once) and the epilogue left BAR.SYNC 4 before the MMA warp's BAR.ARV: read as an
    exited warp counted towards the explicit thread count (the PTX ISA releases only barriers of *all* threads when
    threads exit; the emulator counts no exited warp). The hand-offs are now the kernel's kind, mbarriers in shared
    memory (stage 0's and accumulator 0's full barriers of the kernel's storage). The named-barrier protocols run
    as diagnostics (HANDOFFS, not in the verdict): `named` (the TMA warp exits after its bar.arrive) and
    `named_held` (every warp waits at a CTA-wide barrier before exiting); the line "named barriers: ..." says which
    reading the hardware fits.
  - a time-base residual of 804 ns and spins of 1024 ns for 1003: %globaltimer is absolute on the H100 (~1.8e18 ns
    since 1970) and became float64 before subtracting, which resolves 256 ns there. tools/profile_buffer.TimeBase
    now subtracts integers first.

Before the stub, a plain-PTX probe (TIMER_PTX) reads %globaltimer in a tight loop on every SM and records each
change with %clock64: the timer's steps, resolution and update period. Its largest step is the tolerance of every
check between SMs (a read lags the true time by less than one update); without it (--emulate) the stamps' smallest
step stands in.

The loop is the leaderboard's: flush L2 (a 1 GiB write), events around 50 back-to-back calls, each writing its own
slice of a (50, 148, words) buffer; after the last repeat the buffer holds one repeat's calls. Checks (analyse; exit
1 if one of the verdict runs or the timer probe fails; each failed kind is reported once, with how many CTA records
or call boundaries show it):
  - within a CTA (one SM): every phase and hand-off, the tile count, the kernel's orders (pb.ORDER) on raw %clock64
    and on raw %globaltimer, exactly;
  - between SMs, only on %globaltimer: the orders the launch gives consecutive calls (pb.BOUNDARIES: no PDL, every
    entry after the previous call's last exit; PDL, every wait_done after it and every entry after the previous
    call's last entry), on the raw stamps within one step (on the decoded time base they are reported: there they
    follow from the raw orders and the next check);
  - the time base places every stamp within one step (and one read) of its %globaltimer reading; the spins last
    at least their cycles on it and, on average over >= 100 spins, what %globaltimer shows (within a quarter step);
  - the 50 calls' decoded span agrees with the events.
Not checked on Hopper (NOT_CHECKED, printed with the results): %clock64 between SMs (not synchronised: nothing
compares it across CTAs), %globaltimer skew between SMs finer than one step, the real kernel's own phases.
Reports the SM clock (%clock64 against %globaltimer), the time base's residuals, the smallest margin of each
boundary order, the hand-off order figures, and per call the gap and (PDL) the release after the previous call's
last exit, as the B200 fit reads them. With --json NAME.json, every run's raw buffer and the timer probe's words go
to NAME.npz; --analyse NAME.npz redoes the analysis anywhere.

    python probes/profile_stamps.py [--shape M,N,K,L] [--tiles 3] [--spin-cycles 2000] [--reps 10] [--json out.json]
                                    [--no-diagnose]
    python probes/profile_stamps.py --analyse out.npz                        # CPU: a saved run again
    python probes/profile_stamps.py --emulate [--timed] [--handoff H]        # no GPU: the stub in the emulator
"""

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(REPO))
if "--emulate" in sys.argv or "--compile-worker" in sys.argv:  # no GPU: compiled for the B200, as the emulator runs it
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")

import numpy as np  # noqa: E402

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402

import submission as S  # noqa: E402
from probes.device_stub import DeviceStub  # noqa: E402
from tools import profile_buffer as pb  # noqa: E402

CALLS = 50
SHAPE = (256, 3072, 4096, 1)  # a benchmark shape: 96 CTAs of its 1-CTA stand-in config
EMULATED_SHAPE = (256, 256, 512, 1)  # 8 CTAs: small enough for the emulator
TMA_TO_MMA_BARRIER, MMA_TO_EPILOGUE_BARRIER = 3, 4  # named barriers the kernel does not use (it has 1 and 2)
HANDOFFS = {
    "mbarrier": "mbarriers in shared memory, as the kernel's pipelines (the verdict)",
    "named": "named barriers 3 and 4, the TMA warp exiting after its bar.arrive (the first H100 run's stub)",
    "named_held": "named barriers 3 and 4, every warp waiting at a CTA-wide barrier before it exits",
}
DIAGNOSTIC_HANDOFFS = ("named", "named_held")


class ProfileStub(DeviceStub):
    """The real host side with a profile buffer; a body that stamps every slot as the kernel does (module doc)."""

    def __init__(self, config, tiles: int = 3, spin_cycles: int = 2000, handoff: str = "mbarrier"):
        super().__init__(config)
        if handoff not in HANDOFFS:
            raise ValueError(f"handoff {handoff!r}: one of {', '.join(HANDOFFS)}")
        self.tiles = tiles
        self.spin_cycles = spin_cycles
        self.handoff = handoff

    @cute.jit
    def body(self, args):
        entry = S.profile_stamp()
        pdl = self.config.pdl
        if cutlass.const_expr(pdl):
            cute.arch.griddepcontrol_launch_dependents()
        storage = S.SmemAllocator().allocate(self.shared_storage)
        K = S.DualGemmKernel
        epilogue_threads = 32 * (len(K.EPILOGUE_WARPS) + 1)  # the epilogue warps and the MMA warp
        mbarriers = self.handoff == "mbarrier"
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx = cute.arch.thread_idx()[0]
        prof = S.ProfileRecord.of_this_cta(args.profile_buf)
        stage_full = storage.ab_full_mbar.data_ptr()  # stage 0 landed: TMA warp -> MMA warp
        acc_full = storage.acc_full_mbar.data_ptr()  # accumulator 0 ready: MMA warp -> epilogue warps
        if cutlass.const_expr(mbarriers):
            if tidx == 0:
                cute.arch.mbarrier_init(stage_full, 1)
                cute.arch.mbarrier_init(acc_full, 1)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()  # as the kernel's pipeline_init_wait: every warp's prologue before the roles
        if warp_idx == K.TMA_WARP:
            wait_begin = S.profile_stamp()
            if cutlass.const_expr(pdl):
                cute.arch.griddepcontrol_wait()
            wait_done = S.profile_stamp()
            if tidx == 32 * K.TMA_WARP:
                prof.put("wait_begin", wait_begin)
                prof.put("wait_done", wait_done)
                if cutlass.const_expr(mbarriers):
                    cute.arch.mbarrier_arrive(stage_full)
            if cutlass.const_expr(not mbarriers):
                cute.arch.barrier_arrive(barrier_id=TMA_TO_MMA_BARRIER, number_of_threads=64)
        if warp_idx == K.MMA_WARP:
            if cutlass.const_expr(mbarriers):
                cute.arch.mbarrier_wait(stage_full, 0)
            else:
                cute.arch.barrier(barrier_id=TMA_TO_MMA_BARRIER, number_of_threads=64)
            _spin(self.spin_cycles)  # the first stage's loads
            first_load = S.profile_stamp()
            if cutlass.const_expr(pdl):
                cute.arch.griddepcontrol_wait()  # as the kernel's MMA warp: returns at once, the TMA warp has waited
            if tidx == 32 * K.MMA_WARP:
                prof.put("first_load", first_load)
                if cutlass.const_expr(mbarriers):
                    cute.arch.mbarrier_arrive(acc_full)
            if cutlass.const_expr(not mbarriers):
                cute.arch.barrier_arrive(barrier_id=MMA_TO_EPILOGUE_BARRIER, number_of_threads=epilogue_threads)
            _spin(self.tiles * self.spin_cycles)  # the mainloop
            mainloop_end = S.profile_stamp()
            if tidx == 32 * K.MMA_WARP:
                prof.put("mainloop_end", mainloop_end)
        if warp_idx < K.MMA_WARP:
            tmem_alloc = S.profile_stamp()  # below SM100 no tensor memory: the same point of the prologue
            if cutlass.const_expr(pdl):
                cute.arch.griddepcontrol_wait()
            if tidx == 0:
                prof.put("entry", entry)
                prof.put("tmem_alloc", tmem_alloc)
                prof.put_sm(True)  # every CTA stamps the MMA warp's phases here: all are expected
            if cutlass.const_expr(mbarriers):
                cute.arch.mbarrier_wait(acc_full, 0)
            else:
                cute.arch.barrier(barrier_id=MMA_TO_EPILOGUE_BARRIER, number_of_threads=epilogue_threads)
            for j in cutlass.range_constexpr(self.tiles):
                got = S.profile_stamp()
                if tidx == 0:
                    prof.put_handoff(j, 0, got)
                _spin(self.spin_cycles)  # the epilogue of tile j
                released = S.profile_stamp()
                if tidx == 0:
                    prof.put_handoff(j, 1, released)
            epilogue_end = S.profile_stamp()
            if tidx == 0:
                prof.put("epilogue_end", epilogue_end)
                prof.put_count(self.tiles)
            exit_stamp = S.profile_stamp()
            if tidx == 0:
                prof.put("exit", exit_stamp)
        if cutlass.const_expr(self.handoff == "named_held"):
            cute.arch.sync_threads()


@cute.jit
def _spin(cycles: cutlass.Constexpr):
    t0 = S.profile_stamp()[1]
    t = t0
    while t - t0 < cycles:
        t = S.profile_stamp()[1]


def stand_in_config(shape, pdl: bool = True):
    """The shape's config as profiling twin; a 2-CTA config becomes its 1-CTA twin with the same cluster (the 2-CTA
    ops refuse a non-SM100 arch; grid, cluster dims and descriptors are the same), as probes/pdl.py does."""
    cfg = S.config_for(*shape)
    if cfg.use_2cta:
        cfg = dataclasses.replace(cfg, mma_tile_mn=(128, cfg.mma_tile_mn[1]))
    return dataclasses.replace(cfg, pdl=pdl, profile=True, a_collector=False)


# ----------------------------------------------------------------------------- the %globaltimer probe (GPU and CPU)
# One thread per CTA, one CTA per SM (as the scheduler places them): every change of %globaltimer it sees in a tight
# read loop, with %clock64 at that read, until TIMER_SLOTS changes or TIMER_MAX_READS reads. Per CTA TIMER_WORDS
# int64: %smid, changes recorded, reads, %clock64 at the loop's start and end, 0, then (globaltimer, clock64) per
# change. Plain PTX (.target sm_90) loaded through the driver, as calibration/mufu.py's probe: nothing of the
# DSL between the instruction and the measurement.
TIMER_SLOTS, TIMER_MAX_READS, TIMER_HEADER = 512, 1 << 22, 6
TIMER_WORDS = TIMER_HEADER + 2 * TIMER_SLOTS
TIMER_PTX = r"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry globaltimer_steps(.param .u64 pout, .param .u32 pslots, .param .u32 pmax)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r1, [pslots];
    ld.param.u32 %r2, [pmax];
    mov.u32 %r3, %tid.x;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra DONE;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %smid;
    shl.b32 %r6, %r1, 1;
    add.u32 %r6, %r6, 6;
    mul.wide.u32 %rd2, %r4, %r6;
    shl.b64 %rd2, %rd2, 3;
    add.s64 %rd3, %rd1, %rd2;
    add.s64 %rd4, %rd3, 48;
    mov.u32 %r7, 0;
    mov.u32 %r8, 0;
    mov.u64 %rd10, %clock64;
    mov.u64 %rd5, %globaltimer;
LOOP:
    mov.u64 %rd6, %globaltimer;
    mov.u64 %rd7, %clock64;
    add.u32 %r8, %r8, 1;
    setp.eq.u64 %p2, %rd6, %rd5;
    @%p2 bra NEXT;
    st.global.v2.u64 [%rd4], {%rd6, %rd7};
    add.s64 %rd4, %rd4, 16;
    add.u32 %r7, %r7, 1;
    mov.u64 %rd5, %rd6;
    setp.ge.u32 %p3, %r7, %r1;
    @%p3 bra END;
NEXT:
    setp.lt.u32 %p3, %r8, %r2;
    @%p3 bra LOOP;
END:
    mov.u64 %rd11, %clock64;
    cvt.u64.u32 %rd8, %r5;
    cvt.u64.u32 %rd9, %r7;
    st.global.v2.u64 [%rd3], {%rd8, %rd9};
    cvt.u64.u32 %rd12, %r8;
    st.global.v2.u64 [%rd3+16], {%rd12, %rd10};
    mov.u64 %rd13, 0;
    st.global.v2.u64 [%rd3+32], {%rd11, %rd13};
DONE:
    ret;
}
"""


def run_timer_probe() -> np.ndarray:
    """TIMER_PTX on this GPU, one CTA of 32 threads per SM: its (CTAs, TIMER_WORDS) words."""
    import struct

    import torch

    from calibration.ptx_launch import launch_ptx

    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.full((ctas, TIMER_WORDS), -1, dtype=torch.int64, device="cuda")
    launch_ptx(TIMER_PTX, "globaltimer_steps", ctas, 32, [struct.pack("<Q", out.data_ptr()),
                                                          struct.pack("<I", TIMER_SLOTS),
                                                          struct.pack("<I", TIMER_MAX_READS)])
    return out.cpu().numpy()


def timer_steps(words: np.ndarray) -> dict:
    """What TIMER_PTX's words say of %globaltimer: its steps (ns between the values a tight read loop sees change),
    their resolution (gcd), the update period in cycles and at the clock fitted over the changes, the loop's cost per
    read; `step_ns`, the largest step, is the tolerance of every check that compares %globaltimer between SMs (a
    read lags the true time by less than one update). Problems: a CTA that saw fewer than 2 changes, a step <= 0
    (the timer went back or stood still between two "changes"), a %clock64 that did not advance."""
    w = np.asarray(words, dtype=np.int64)
    problems, steps, periods, rates, read_ns, sms = [], [], [], [], [], set()
    for cta, rec in enumerate(w):
        sm, n, reads, c0, c1 = (int(x) for x in rec[:5])
        if n < 2:
            problems.append(f"CTA {cta}: %globaltimer changed {n} times in {reads} reads")
            continue
        sms.add(sm)
        pts = rec[TIMER_HEADER:TIMER_HEADER + 2 * n].reshape(n, 2)
        ds, dc = np.diff(pts[:, 0]), np.diff(pts[:, 1])
        if (ds <= 0).any():
            problems.append(f"CTA {cta} (SM {sm}): %globaltimer steps of {int(ds.min())} ns (it went back or stood "
                            "still)")
        if (dc <= 0).any():
            problems.append(f"CTA {cta} (SM {sm}): %clock64 did not advance between two changes of %globaltimer")
        steps.append(ds)
        periods.append(dc)
        span_ns, span_clk = int(pts[-1, 0] - pts[0, 0]), int(pts[-1, 1] - pts[0, 1])
        if span_ns > 0 and span_clk > 0:
            rates.append(span_clk / span_ns)
            read_ns.append((c1 - c0) / (span_clk / span_ns) / max(reads, 1))
    out = {"ctas": int(len(w)), "sms": len(sms), "problems": problems, "ok": not problems}
    if not steps:
        return out
    s, c = np.concatenate(steps), np.concatenate(periods)
    values, counts = np.unique(s, return_counts=True)
    order = np.argsort(-counts)[:6]
    ghz = float(np.median(rates)) if rates else None
    out.update({
        "step_ns": int(s.max()),
        "step_median_ns": float(np.median(s)),
        "resolution_ns": int(np.gcd.reduce(s[s > 0])) if (s > 0).any() else None,
        "steps_ns_histogram": {str(int(values[i])): int(counts[i]) for i in order},
        "steps": int(s.size),
        "clock_ghz": ghz,
        "update_cycles_median": float(np.median(c)),
        "update_ns_median": float(np.median(c)) / ghz if ghz else None,
        "read_ns": float(np.median(read_ns)) if read_ns else None,
    })
    return out


# ----------------------------------------------------------------------------- analysis of the stub (CPU)
NOT_CHECKED = (
    "%clock64 between SMs: each SM's counter has its own origin and no synchronisation, so no check compares it "
    "across CTAs; orders between SMs are read on %globaltimer, or on the time base it places each SM's clock on",
    "%globaltimer skew between SMs below the tolerance (one update step): the cross-SM orders are resolved to that "
    "step, no finer",
    "the real kernel's own phases and orders (tcgen05 MMAs, tensor memory, TMA loads, a 2-CTA pair's peer records): "
    "SM100 only; the stub keeps the layout, the recording helpers, the threads that stamp and the kernel's kind of "
    "hand-off (mbarriers)",
)


FUNCTIONAL_CLOCK = ("the functional emulator's %globaltimer and %clock64 both count warp-instructions machine-wide, "
                    "so a stamp's two reads lie apart by whatever other warps ran between them")


def summarise(problems: list, records: int, calls: int) -> list:
    """One line per kind of problem: how many CTA records (or call boundaries) show it, in which calls, the first
    one with its detail. problems: (call, cta, kind, detail); cta None: a check between calls; call None: of the
    whole run."""
    kinds: dict = {}
    for call, cta, kind, detail in problems:
        kinds.setdefault(kind, []).append((call, cta, detail))
    out = []
    for kind, where in kinds.items():
        call, cta, detail = where[0]
        if call is None:
            out.append(f"{kind}: {detail}" if detail else kind)
            continue
        in_calls = sorted({c for c, _, _ in where})
        span = (f"call {in_calls[0]}" if len(in_calls) == 1 else
                f"{len(in_calls)} of {calls} calls ({in_calls[0]}-{in_calls[-1]})")
        unit = f"of {max(calls - 1, 0)} call boundaries" if cta is None else f"of {records} CTA records"
        first = f"call {call}" + ("" if cta is None else f" CTA {cta}") + (f" ({detail})" if detail else "")
        out.append(f"{kind}: {len(where)} {unit}, {span}; first: {first}")
    return out


def handoff_order(profiles: list) -> dict:
    """The MMA warp -> epilogue hand-off as %clock64 shows it, per CTA record: whether epilogue thread 0 was past the
    hand-off (got 0) before the MMA warp stamped first_load, which it stamps before its arrive; and got 0 after the
    TMA warp's last stamp (wait_done, just before its arrive and, with `named`, its exit), in cycles."""
    early, lead, after_tma = 0, [], []
    n = 0
    for p in profiles:
        ev = {k: v[1] for k, v in p.events().items()}
        if "first_load" not in ev or "got 0" not in ev:
            continue
        n += 1
        early += ev["got 0"] < ev["first_load"]
        lead.append(ev["first_load"] - ev["got 0"])
        if "wait_done" in ev:
            after_tma.append(ev["got 0"] - ev["wait_done"])
    med = lambda xs: float(np.median(xs)) if xs else None  # noqa: E731
    return {"ctas": n, "got_before_first_load": int(early), "first_load_minus_got_cycles_median": med(lead),
            "got_minus_tma_wait_done_cycles_median": med(after_tma)}


def analyse(words: np.ndarray, layout: pb.Layout, tiles: int, spin_cycles: int, pdl: bool,
            events_us_per_call: float | None = None, label: str = "measured", step_ns: float | None = None,
            read_ns: float | None = None, without_clock: str | None = None) -> dict:
    """Checks and figures of a (calls, CTAs, words) buffer the stub wrote; ok: every check passed. step_ns: the
    %globaltimer step timer_steps measured (the tolerance of the checks between SMs); None: the stamps' own smallest
    step stands in (said in `tolerance_from`). read_ns: what one %globaltimer read costs (timer_steps): a stamp's
    %clock64 is read that much after its %globaltimer, so the time base may place a stamp up to one step plus one
    read off its %globaltimer reading (0 without the probe). without_clock: why the stamps have no clock to check a
    time base against (the functional emulator's); the time-base and spin checks are then left out, and that is
    said.

    Checks: per CTA record, every phase and hand-off, the stub's tile count, the orders of pb.ORDER on raw %clock64
    and on raw %globaltimer (one SM: exact); between SMs, the orders the launch gives consecutive calls
    (pb.BOUNDARIES) on raw %globaltimer within one step (the decoded margins are reported: they follow from the raw
    ones and the next check); the time base places every stamp within one step and one read of its %globaltimer
    reading; the spins last at least their cycles on it, and on average what %globaltimer shows them last (within a
    quarter step: the floors' errors average out over >= 100 spins); the 50 calls' decoded span agrees with the
    events."""
    from tools.profile import Run, statistics

    run = Run(label, SHAPE, "stub", pdl, layout, words, events_us_per_call or 0.0,
              period_ns=None if words.shape[0] > 1 else 0.0)
    tb = run.timebase
    tol = float(step_ns) if step_ns else float(tb.tick_ns)
    calls = int(words.shape[0])
    problems = []
    for p in run.profiles:
        problems += [(p.call, p.cta, f"missing {m}", "") for m in pb.missing(p, layout)]
        problems += [(p.call, p.cta, d, "") for timer in pb.TIMERS for d in pb.disorder(p, timer)]
        if p.tiles != tiles:
            problems.append((p.call, p.cta, f"tiles other than the stub's {tiles}", f"{p.tiles}"))
    out = {"label": label, "calls": calls, "ctas": len(run.profiles),
           "sms": len({p.sm for p in run.profiles if p.sm >= 0}), "globaltimer_tick_ns": tb.tick_ns,
           "tolerance_ns": tol, "tolerance_from": "the %globaltimer probe's largest step" if step_ns else
           "the stamps' smallest %globaltimer step (no %globaltimer probe)", "clock_ghz": tb.ghz or None,
           "timebase_residual_ns": tb.residual_ns, "timebase_line_residual_ns": tb.line_residual_ns,
           "sms_on_one_line": len(tb.lines), "handoff_order": handoff_order(run.profiles)}
    if without_clock:
        out["timebase_checks"] = f"not checked: {without_clock}"
    elif not tb.ghz:
        problems.append((None, None, "time base: no SM clock fitted", "no SM with stamps spread over 10 ticks"))
    elif tb.residual_ns > tol + (read_ns or 0.0):
        problems.append((None, None, "time base: stamps placed off their %globaltimer reading",
                         f"up to {tb.residual_ns:.1f} ns, more than one step and one read "
                         f"({tol:.0f} + {read_ns or 0.0:.1f} ns)"))
    # Between SMs only %globaltimer is common. The decoded margins are reported, not checked: each decoded stamp is
    # within the residual of its %globaltimer reading (checked above), so they follow from the raw ones.
    axes = {"%globaltimer": lambda p, s: float(s[0] - tb.origin_ns)}
    if tb.ghz:
        axes["time base"] = tb.ns
    out["boundary_margin_min_ns"] = {}
    for axis, at in axes.items():
        margins = pb.boundary_margins(run.profiles, pdl, at)
        for order in sorted({o for _, o, _ in margins}):
            out["boundary_margin_min_ns"][f"{axis}: {order}"] = min(m for _, o, m in margins if o == order)
        if axis == "%globaltimer":
            problems += [(call, None, f"%globaltimer: {order} out of the launch order between SMs",
                          f"{m:.0f} ns, tolerance one step, {tol:.0f} ns") for call, order, m in margins if m < -tol]
    pairs = [(p, got, rel) for p in run.profiles for _, got, rel in p.handoffs if rel is not None]
    if pairs and tb.ghz and not without_clock:
        decoded = np.array([tb.ns(p, rel) - tb.ns(p, got) for p, got, rel in pairs])
        on_timer = np.array([rel[0] - got[0] for _, got, rel in pairs], dtype=np.float64)
        expected = spin_cycles / tb.ghz
        out.update({"spin_ns_median": float(np.median(decoded)), "spin_ns_expected": expected,
                    "spin_minus_globaltimer_ns_mean": float(np.mean(decoded - on_timer)), "spins": len(pairs)})
        # each at the rate its record's clock is read at (its SM's own line may differ from the median a little)
        short = int((decoded < np.array([spin_cycles / tb.ghz_of(p) for p, _, _ in pairs])).sum())
        if short:
            problems.append((None, None, "spins shorter than their cycles on the time base",
                             f"{short} of {len(pairs)} below {spin_cycles} cycles at their SM's clock (median "
                             f"{tb.ghz:.3f} GHz: {expected:.0f} ns)"))
        if len(pairs) >= 100 and abs(out["spin_minus_globaltimer_ns_mean"]) > tol / 4:
            problems.append((None, None, "spins on the time base disagree with %globaltimer",
                             f"mean difference {out['spin_minus_globaltimer_ns_mean']:.1f} ns over {len(pairs)} "
                             f"spins, more than a quarter step ({tol / 4:.1f} ns)"))
    if calls > 1 and not problems:
        stats = statistics(run)
        out.update({k: stats[k] for k in ("entry_first_ns", "entry_mean_ns", "release_ns", "blocked_waits",
                                          "period_ns", "kernel_ns")})
        by_call = run.by_call()
        first = min(tb.ns(p, p.stamps["entry"]) for p in by_call[0])
        out["decoded_span_us_per_call"] = (run.last_exit(max(by_call)) - first) / 1000 / calls
        if events_us_per_call:
            out["events_us_per_call"] = events_us_per_call
            # The events also hold the launch of call 0 and the tail after the last exit: about one gap.
            if abs(out["decoded_span_us_per_call"] - events_us_per_call) > 0.05 * events_us_per_call + 5.0 / CALLS:
                problems.append((None, None, "decoded span disagrees with the events",
                                 f"{out['decoded_span_us_per_call']:.3f} us per call, events "
                                 f"{events_us_per_call:.3f} us"))
    elif calls > 1:
        out["statistics"] = "not computed: a check above failed"
    out["problems"] = summarise(problems, len(run.profiles), calls)
    out["ok"] = not problems
    return out


def named_barrier_verdict(results: list) -> str | None:
    """What the diagnostic runs say about an explicit-count bar.sync and exited warps (None without them)."""
    seen = {r["handoff"]: r["handoff_order"] for r in results if r.get("handoff") in DIAGNOSTIC_HANDOFFS}
    if set(seen) != set(DIAGNOSTIC_HANDOFFS):
        return None
    named, held = seen["named"], seen["named_held"]
    counts = (f"epilogue past bar.sync before the MMA warp's bar.arrive in {named['got_before_first_load']} of "
              f"{named['ctas']} CTA records with the TMA warp exited, {held['got_before_first_load']} of "
              f"{held['ctas']} with it held")
    if named["got_before_first_load"] > named["ctas"] / 2 and held["got_before_first_load"] == 0:
        return f"an exited warp counts as arrived at an explicit-count bar.sync ({counts})"
    if named["got_before_first_load"] == 0 and held["got_before_first_load"] == 0:
        return f"an exited warp does not count at an explicit-count bar.sync ({counts})"
    return f"neither reading fits: {counts}"


def save_runs(path: Path, runs: list, timer_words: np.ndarray | None) -> None:
    """Every run's raw buffer (the rows of the CTAs that ran) and what analyse needs to read it again, and the
    %globaltimer probe's words, in one file (--analyse)."""
    arrays = {} if timer_words is None else {"timer": timer_words}
    for i, (words, meta) in enumerate(runs):
        ran = np.nonzero((words[:, :, 0] != pb.NOT_WRITTEN).any(axis=0))[0]
        arrays[f"run{i}"] = words[:, :int(ran.max()) + 1 if ran.size else 0]
    metas = [meta for _, meta in runs]
    np.savez_compressed(path, meta=json.dumps(metas), **arrays)


def analyse_saved(path: Path) -> tuple:
    """(the %globaltimer probe's analysis or None, each run's analysis) of a save_runs file."""
    with np.load(path) as f:
        metas = json.loads(str(f["meta"]))
        timer = timer_steps(f["timer"]) if "timer" in f.files else None
        if timer is not None and metas:
            timer["label"] = metas[0]["label"]
        results = []
        for i, meta in enumerate(metas):
            res = analyse(f[f"run{i}"], pb.Layout.from_dict(meta["layout"]), meta["tiles"], meta["spin_cycles"],
                          meta["pdl"], meta.get("events_us_per_call"), meta["label"],
                          step_ns=timer.get("step_ns") if timer else None,
                          read_ns=timer.get("read_ns") if timer else None)
            res.update({k: meta[k] for k in ("config", "shape", "pdl", "handoff")})
            results.append(res)
    return timer, results


# ----------------------------------------------------------------------------- the emulator (no GPU)
def compile_artifacts(fields: dict, tiles: int, spin_cycles: int, handoff: str = "mbarrier", arch: str = "sm_100a",
                      dsl: str = "default") -> Path:
    """The stub compiled in a worker process: kernel.ptx (and, for sm_100a, kernel.o for the emulator's launch).
    arch sm_90a with dsl 4.3.5: what the lent H100 compiles (no export: a check of the device code)."""
    from harness import dsl as dsl_release
    from harness.capture import cached_compile, dsl_env
    from harness.compile_worker import EXPORT_NAME

    sources = [Path(__file__), REPO / "probes" / "device_stub.py", REPO / "submission.py"]
    key = {"sources": [hashlib.sha256(p.read_bytes()).hexdigest() for p in sources],
           "dsl": dsl_release.resolve(dsl), "arch": arch, "handoff": handoff,
           "config": sorted((k, repr(v)) for k, v in fields.items()), "tiles": tiles, "spin": spin_cycles}
    job = {"config": fields, "tiles": tiles, "spin_cycles": spin_cycles, "handoff": handoff, "export": EXPORT_NAME}
    env = dsl_env(dsl)
    env["CUTE_DSL_ARCH"] = arch
    return cached_compile("probes", key, job, Path(__file__), "--compile-worker", env)


def _compile_worker(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out"])
    try:  # 4.3.5 checks for a driver after writing the PTX and cubin: skipped (nothing is run here)
        from cutlass.base_dsl import compiler as _dsl_compiler

        if hasattr(_dsl_compiler.Compiler, "_check_cuda_dependencies_once"):
            _dsl_compiler.Compiler._check_cuda_dependencies_once = lambda self, shared_libs: None
    except ImportError:
        pass
    sm100 = os.environ.get("CUTE_DSL_ARCH", "sm_100a").startswith("sm_100")
    if not sm100:
        from probes.device_stub import admit_this_gpu_for_host_side

        admit_this_gpu_for_host_side()
    cfg = S.KernelConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["config"].items()})
    compiled = cute.compile(ProfileStub(cfg, job["tiles"], job["spin_cycles"], job["handoff"]).profiled,
                            *S._fake_operands(), S._fake_profile_buffer(), options="--enable-tvm-ffi")
    ptxs = sorted((out / "dump").glob("*.ptx"))
    if len(ptxs) != 1:
        raise RuntimeError(f"expected one PTX file in the dump, found {[p.name for p in ptxs]}")
    shutil.copy(ptxs[0], out / "kernel.ptx")
    if sm100:
        compiled.export_to_c(str(out / "kernel.o"), job["export"])
    (out / "meta.json").write_text(json.dumps({"dsl_version": str(getattr(cutlass, "__version__", "")),
                                               "config": cfg.name}))


def emulate(fields: dict, tiles: int = 3, spin_cycles: int = 2000, timed: bool = False, shape=EMULATED_SHAPE,
            sched_seed: int = 0, handoff: str = "mbarrier", schedule=None) -> tuple:
    """The stub in the SM100 emulator (functional: %globaltimer and %clock64 count instructions, under `schedule`,
    an emu.machine.Schedule, default the uniform one with sched_seed; timed: simulated time): (the (1, CTAs, words)
    buffer it wrote, the run's status and message)."""
    import reference
    from calibration.gpu_probes import capture
    from harness.problems import DT_I64
    from emu import run_kernel
    from harness.problems import place_inputs
    from emu.state import GlobalMemory

    art = compile_artifacts(fields, tiles, spin_cycles, handoff)
    data = reference.generate_input(*shape, 1111, device="cpu")
    gmem = GlobalMemory()
    addresses = place_inputs(gmem, data, *shape)
    rows = (S.SM_COUNT, S.PROFILE_WORDS)
    addresses["profile"] = gmem.alloc_array(np.full(rows, pb.NOT_WRITTEN, np.int64))
    cap = capture(art, shape, addresses, (("profile", DT_I64, rows, (rows[1], 1)),))
    if timed:
        from emu.timing.call import timed_run

        run = timed_run(cap, gmem, seed=sched_seed, full_grid=True)
    else:
        run = run_kernel(cap, gmem, sched_seed, schedule=schedule)
    words = gmem.read(addresses["profile"], rows[0] * rows[1] * 8).view(np.int64).reshape(rows).copy()
    return words[None], run.status, run.message


# ----------------------------------------------------------------------------- the GPU run
def measure(shape, pdl: bool, tiles: int, spin_cycles: int, reps: int, handoff: str = "mbarrier",
            step_ns: float | None = None, read_ns: float | None = None) -> tuple:
    """(the analysis, the raw (CALLS, 148, words) buffer, what save_runs keeps beside it) of one stub on this GPU."""
    import torch

    from probes.device_stub import admit_this_gpu_for_host_side
    from probes.dispatch import leaderboard_tensors

    cfg = stand_in_config(shape, pdl)
    admit_this_gpu_for_host_side()
    launch = cute.compile(ProfileStub(cfg, tiles, spin_cycles, handoff).profiled, *S._fake_operands(),
                          S._fake_profile_buffer(), options="--enable-tvm-ffi")
    a, b1, b2, _, _, _, sfa, sfb1, sfb2, c = leaderboard_tensors(*shape)
    buf = torch.full((CALLS, S.SM_COUNT, S.PROFILE_WORDS), pb.NOT_WRITTEN, dtype=torch.int64, device="cuda")
    slices = list(buf.unbind(0))
    flush = torch.empty(1 << 28, dtype=torch.int32, device="cuda")  # 1 GiB, as probes/pdl.py
    per_call = []
    for _ in range(3):
        for s in slices:
            launch(a, b1, b2, sfa, sfb1, sfb2, c, s)
    for _ in range(reps):
        torch.cuda.synchronize()
        flush.fill_(1)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for s in slices:
            launch(a, b1, b2, sfa, sfb1, sfb2, c, s)
        end.record()
        torch.cuda.synchronize()
        per_call.append(start.elapsed_time(end) * 1000 / CALLS)
    layout = pb.read_layout(REPO / "submission.py")
    label = f"measured ({torch.cuda.get_device_name()})"
    words = buf.cpu().numpy()
    meta = {"label": label, "config": cfg.name, "shape": list(shape), "pdl": pdl, "handoff": handoff, "tiles": tiles,
            "spin_cycles": spin_cycles, "events_us_per_call": per_call[-1], "layout": layout.as_dict()}
    out = analyse(words, layout, tiles, spin_cycles, pdl, per_call[-1], label, step_ns, read_ns)
    out.update({"config": cfg.name, "shape": list(shape), "pdl": pdl, "handoff": handoff,
                "events_us_per_call_all_reps": per_call})
    return out, words, meta


def print_timer(t: dict) -> None:
    figures = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in t.items() if k not in ("problems", "ok")}
    print(f"%globaltimer probe ({t.get('label', 'measured')}): {'OK' if t['ok'] else 'FAILED'} {json.dumps(figures)}",
          flush=True)
    for p in t["problems"][:20]:
        print("  " + p)


def print_result(r: dict) -> None:
    gate = "" if r.get("handoff", "mbarrier") == "mbarrier" else " [diagnostic, not in the verdict]"
    head = (f"{r['label']} {r['config']} {tuple(r['shape'])} hand-off {r.get('handoff', 'mbarrier')}: "
            f"{'OK' if r['ok'] else 'FAILED'}{gate}")
    figures = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
               if k not in ("problems", "ok", "label", "config", "shape", "handoff", "events_us_per_call_all_reps")}
    print(head, json.dumps(figures), flush=True)
    for p in r["problems"]:
        print("  " + p)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default=",".join(map(str, SHAPE)), help="M,N,K,L (its config's 1-CTA stand-in)")
    ap.add_argument("--tiles", type=int, default=3, help="hand-offs per CTA")
    ap.add_argument("--spin-cycles", type=int, default=2000, help="SM cycles per stand-in stage / tile")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None, help="results; every run's raw buffer and the %%globaltimer probe's words "
                                                 "beside it (NAME.npz)")
    ap.add_argument("--no-diagnose", action="store_true", help="skip the named-barrier diagnostic runs")
    ap.add_argument("--analyse", default=None, metavar="NPZ", help="CPU: analyse a saved run again")
    ap.add_argument("--emulate", action="store_true", help="no GPU: run the stub in the SM100 emulator")
    ap.add_argument("--timed", action="store_true", help="with --emulate: the timed emulator")
    ap.add_argument("--handoff", choices=tuple(HANDOFFS), default="mbarrier",
                    help="with --emulate: the stub's hand-off")
    args = ap.parse_args(argv)
    layout = pb.read_layout(REPO / "submission.py")
    timer, results = None, []
    if args.analyse:
        timer, results = analyse_saved(Path(args.analyse))
    elif args.emulate:
        cfg = stand_in_config(EMULATED_SHAPE)
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        words, status, message = emulate(fields, args.tiles, args.spin_cycles, args.timed, handoff=args.handoff)
        label = "timed" if args.timed else "emulated"
        res = analyse(words, layout, args.tiles, args.spin_cycles, cfg.pdl, label=label,
                      without_clock=None if args.timed else FUNCTIONAL_CLOCK) if status == "completed" \
            else {"label": label, "ok": False, "problems": [f"{status}: {message[:2000]}"]}
        res.update({"config": cfg.name, "shape": list(EMULATED_SHAPE), "status": status, "handoff": args.handoff})
        results.append(res)
    else:
        from probes.device_stub import exit_unless_cuda_gpu

        exit_unless_cuda_gpu("probes/profile_stamps.py", "a CUDA GPU with griddepcontrol (sm_90 or newer)", min_major=9)
        import torch

        shape = tuple(int(x) for x in args.shape.split(","))
        try:
            timer_words = run_timer_probe()
            timer = timer_steps(timer_words)
        except Exception as e:  # noqa: BLE001 - the stub runs still go on, with the stamps' own step
            timer_words, timer = None, {"ok": False, "problems": [f"the probe did not run: {type(e).__name__}: {e}"]}
        timer["label"] = f"measured ({torch.cuda.get_device_name()})"
        print_timer(timer)
        runs = [(pdl, "mbarrier") for pdl in (True, False)]
        if not args.no_diagnose:
            runs += [(False, h) for h in DIAGNOSTIC_HANDOFFS]
        saved = []
        for pdl, handoff in runs:
            res, words, meta = measure(shape, pdl, args.tiles, args.spin_cycles, args.reps, handoff,
                                       timer.get("step_ns"), timer.get("read_ns"))
            results.append(res)
            saved.append((words, meta))
        if args.json:
            path = Path(args.json).with_suffix(".npz")
            path.parent.mkdir(parents=True, exist_ok=True)
            save_runs(path, saved, timer_words)
            print(f"raw buffers: {path} (python probes/profile_stamps.py --analyse {path.name} redoes this analysis)")
    if timer is not None and args.analyse:
        print_timer(timer)
    for r in results:
        print_result(r)
    verdict = named_barrier_verdict(results)
    if verdict:
        print(f"named barriers: {verdict}")
    print("not checked by this probe:")
    for line in NOT_CHECKED:
        print("  " + line)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "globaltimer": timer,
                                               "results": results, "named_barriers": verdict,
                                               "not_checked": NOT_CHECKED}, indent=1, default=str))
    verdict_runs = [r["ok"] for r in results if r.get("handoff", "mbarrier") == "mbarrier"]
    return 0 if all(verdict_runs) and (timer is None or timer["ok"]) else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        _compile_worker(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
