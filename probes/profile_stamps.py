"""The profile path below SM100: %globaltimer / %clock64 stamps into the profile buffer, and their decode.

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

The hand-offs are the kernel's kind, mbarriers in shared memory (stage 0's and accumulator 0's full barriers of the
kernel's storage), so first_load <= got 0 holds on the hardware as in the kernel. The first H100 run (DSL 4.3.5)
used named barriers (bar.arrive / bar.sync 4, 160 between the MMA warp and the epilogue) and every CTA's
epilogue left bar.sync before the MMA warp arrived: the TMA warp had exited, and an exited warp counted as arrived at
the explicit-count barrier (MEMORY.md "stamps"; the PTX ISA leaves it open, the emulator does not count it). Those
two protocols run as diagnostics (HANDOFFS, --diagnose; not part of the verdict): `named` (the TMA warp exits after
its arrive) and `named_held` (every warp waits at a CTA-wide barrier before exiting); the line "named barriers: ..."
says which of them saw the epilogue leave early.

The loop is the leaderboard's: flush L2 (a 1 GiB write), events around 50 back-to-back calls, each writing its own
slice of a (50, 148, words) buffer; after the last repeat the buffer holds one repeat's calls. Checks (exit 1 if
one fails): every CTA of every call has every phase, in the kernel's order (raw %clock64 within the CTA), and its
tile count; the spins the decoded time base shows are the spin's cycles at the measured clock (the time base is
right); the 50 calls' decoded span agrees with the events. A failed check is reported once per kind with how many
CTA records (of how many, in which calls) show it. Reports the %globaltimer tick, the SM clock (%clock64 against
%globaltimer), the time base's residuals (per record, and one line per SM over all calls), and per call the gap
and (PDL) the release after the previous call's last exit, as the B200 fit reads them. With --json, each run's raw
buffer is written beside it (NAME.<config>.<handoff>.npz); --analyse FILE.npz redoes the analysis anywhere.

    python probes/profile_stamps.py [--shape M,N,K,L] [--tiles 3] [--spin-cycles 2000] [--reps 10] [--json out.json]
                                    [--no-diagnose]
    python probes/profile_stamps.py --analyse out.<config>.<handoff>.npz ...    # CPU: a saved run again
    python probes/profile_stamps.py --emulate [--timed] [--handoff H]           # no GPU: the stub in the emulator
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


# ----------------------------------------------------------------------------- analysis (CPU; the GPU run and tests)
def summarise(problems: list, records: int, calls: int) -> list:
    """One line per kind of problem: how many CTA records show it, of how many, in which calls, the first one.
    problems: (call, cta, what) per record, or (None, None, what) for a check of the whole run."""
    kinds: dict = {}
    for call, cta, what in problems:
        kinds.setdefault(what, []).append((call, cta))
    out = []
    for what, where in kinds.items():
        if where[0][0] is None:
            out.append(what)
            continue
        in_calls = sorted({c for c, _ in where})
        span = f"call {in_calls[0]}" if len(in_calls) == 1 else f"{len(in_calls)} of {calls} calls ({in_calls[0]}-{in_calls[-1]})"
        out.append(f"{what}: {len(where)} of {records} CTA records, {span}; first: call {where[0][0]} CTA {where[0][1]}")
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
            events_us_per_call: float | None = None, label: str = "measured") -> dict:
    """Checks and figures of a (calls, CTAs, words) buffer the stub wrote (module doc); ok: every check passed."""
    from tools.profile import Run, statistics

    run = Run(label, SHAPE, "stub", pdl, layout, words, events_us_per_call or 0.0,
              period_ns=None if words.shape[0] > 1 else 0.0)
    problems = []
    for p in run.profiles:
        problems += [(p.call, p.cta, f"missing {m}") for m in pb.missing(p, layout)]
        problems += [(p.call, p.cta, d) for d in pb.disorder(p)]
        if p.tiles != tiles:
            problems.append((p.call, p.cta, f"{p.tiles} tiles, the stub ran {tiles}"))
    tb = run.timebase
    out = {"label": label, "calls": int(words.shape[0]), "ctas": len(run.profiles), "globaltimer_tick_ns": tb.tick_ns,
           "clock_ghz": tb.ghz or None, "timebase_residual_ns": tb.residual_ns,
           "timebase_line_residual_ns": tb.line_residual_ns, "sms_on_one_line": len(tb.lines),
           "sms": len({p.sm for p in run.profiles if p.sm >= 0})}
    out["handoff_order"] = handoff_order(run.profiles)
    # A spin of spin_cycles between got and released: on the time base it lasts spin_cycles at the SM's clock, plus
    # the loop's last iteration and the stamp (a few tens of cycles).
    spins = [tb.ns(p, rel) - tb.ns(p, got) for p in run.profiles for _, got, rel in p.handoffs if rel is not None]
    if spins and tb.ghz:
        spin_ns = float(np.median(spins))
        out["spin_ns_median"] = spin_ns
        out["spin_ns_expected"] = spin_cycles / tb.ghz
        if not spin_cycles / tb.ghz <= spin_ns <= spin_cycles / tb.ghz * 1.1 + 100:
            problems.append((None, None, f"spins of {spin_cycles} cycles last {spin_ns:.0f} ns on the time base at "
                                         f"{tb.ghz:.3f} GHz: expected {spin_cycles / tb.ghz:.0f} ns"))
    if words.shape[0] > 1 and not problems:
        stats = statistics(run)
        out.update({k: stats[k] for k in ("entry_first_ns", "entry_mean_ns", "release_ns", "blocked_waits",
                                          "period_ns", "kernel_ns")})
        by_call = run.by_call()
        first = min(tb.ns(p, p.stamps["entry"]) for p in by_call[0])
        last = run.last_exit(max(by_call))
        out["decoded_span_us_per_call"] = (last - first) / 1000 / words.shape[0]
        if events_us_per_call:
            out["events_us_per_call"] = events_us_per_call
            # The events also hold the launch of call 0 and the tail after the last exit: about one gap.
            if abs(out["decoded_span_us_per_call"] - events_us_per_call) > 0.05 * events_us_per_call + 5.0 / CALLS:
                problems.append((None, None, f"decoded span {out['decoded_span_us_per_call']:.3f} us per call, events "
                                             f"{events_us_per_call:.3f} us"))
    out["problems"] = summarise(problems, len(run.profiles), int(words.shape[0]))
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


def save_run(path: Path, words: np.ndarray, meta: dict) -> None:
    """The raw buffer and what analyse needs to read it again (--analyse)."""
    np.savez_compressed(path, words=words, meta=json.dumps(meta))


def analyse_saved(path: Path) -> dict:
    with np.load(path) as f:
        words, meta = f["words"], json.loads(str(f["meta"]))
    res = analyse(words, pb.Layout.from_dict(meta["layout"]), meta["tiles"], meta["spin_cycles"], meta["pdl"],
                  meta.get("events_us_per_call"), meta["label"])
    res.update({k: meta[k] for k in ("config", "shape", "pdl", "handoff")})
    return res


# ----------------------------------------------------------------------------- the emulator (no GPU)
def compile_artifacts(fields: dict, tiles: int, spin_cycles: int, handoff: str = "mbarrier", arch: str = "sm_100a",
                      dsl: str = "default") -> Path:
    """The stub compiled in a worker process: kernel.ptx (and, for sm_100a, kernel.o for the emulator's launch).
    arch sm_90a with dsl 4.3.5: what the lent H100 compiles (no export: a check of the device code)."""
    from emu.launch import EXPORT_NAME, _dsl_env, _placeholder_libcuda, cached_compile, installed_dsl

    sources = [Path(__file__), REPO / "probes" / "device_stub.py", REPO / "submission.py"]
    key = {"sources": [hashlib.sha256(p.read_bytes()).hexdigest() for p in sources],
           "dsl": installed_dsl() if dsl == "default" else dsl, "arch": arch, "handoff": handoff,
           "config": sorted((k, repr(v)) for k, v in fields.items()), "tiles": tiles, "spin": spin_cycles}
    job = {"config": fields, "tiles": tiles, "spin_cycles": spin_cycles, "handoff": handoff, "export": EXPORT_NAME}
    env = _dsl_env(dsl)
    env["CUTE_DSL_ARCH"] = arch
    if dsl == "4.3.5":  # as emu.launch.compile_artifacts: the per-artifact switches, a placeholder libcuda
        env.update(CUTE_DSL_KEEP_PTX="1", CUTE_DSL_KEEP_CUBIN="1")
        env["LD_LIBRARY_PATH"] = f"{_placeholder_libcuda()}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
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
    from emu.calibration.gpu_probes import capture
    from emu.launch import DT_I64
    from emu.run import execute, place_inputs
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
        run = execute(cap, gmem, sched_seed, schedule=schedule)
    words = gmem.read(addresses["profile"], rows[0] * rows[1] * 8).view(np.int64).reshape(rows).copy()
    return words[None], run.status, run.message


# ----------------------------------------------------------------------------- the GPU run
def measure(shape, pdl: bool, tiles: int, spin_cycles: int, reps: int, handoff: str = "mbarrier") -> tuple:
    """(the analysis, the raw (CALLS, 148, words) buffer, what save_run keeps beside it) of one stub on this GPU."""
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
    out = analyse(words, layout, tiles, spin_cycles, pdl, per_call[-1], label)
    out.update({"config": cfg.name, "shape": list(shape), "pdl": pdl, "handoff": handoff,
                "events_us_per_call_all_reps": per_call})
    return out, words, meta


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
    ap.add_argument("--json", default=None, help="results; each run's raw buffer beside it (NAME.<config>.<handoff>.npz)")
    ap.add_argument("--no-diagnose", action="store_true", help="skip the named-barrier diagnostic runs")
    ap.add_argument("--analyse", nargs="+", default=None, metavar="NPZ", help="CPU: analyse saved runs again")
    ap.add_argument("--emulate", action="store_true", help="no GPU: run the stub in the SM100 emulator")
    ap.add_argument("--timed", action="store_true", help="with --emulate: the timed emulator")
    ap.add_argument("--handoff", choices=tuple(HANDOFFS), default="mbarrier", help="with --emulate: the stub's hand-off")
    args = ap.parse_args(argv)
    layout = pb.read_layout(REPO / "submission.py")
    results = []
    if args.analyse:
        results = [analyse_saved(Path(f)) for f in args.analyse]
    elif args.emulate:
        cfg = stand_in_config(EMULATED_SHAPE)
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        words, status, message = emulate(fields, args.tiles, args.spin_cycles, args.timed, handoff=args.handoff)
        label = "timed" if args.timed else "emulated"
        res = analyse(words, layout, args.tiles, args.spin_cycles, cfg.pdl, label=label) if status == "completed" \
            else {"label": label, "ok": False, "problems": [f"{status}: {message[:2000]}"]}
        res.update({"config": cfg.name, "shape": list(EMULATED_SHAPE), "status": status, "handoff": args.handoff})
        results.append(res)
    else:
        from probes.device_stub import exit_unless_cuda_gpu

        exit_unless_cuda_gpu("probes/profile_stamps.py", "a CUDA GPU with griddepcontrol (sm_90 or newer)", min_major=9)
        shape = tuple(int(x) for x in args.shape.split(","))
        runs = [(pdl, "mbarrier") for pdl in (True, False)]
        if not args.no_diagnose:
            runs += [(False, h) for h in DIAGNOSTIC_HANDOFFS]
        for pdl, handoff in runs:
            res, words, meta = measure(shape, pdl, args.tiles, args.spin_cycles, args.reps, handoff)
            if args.json:
                stem = Path(args.json)
                path = stem.with_name(f"{stem.stem}.{meta['config']}.{handoff}.npz")
                path.parent.mkdir(parents=True, exist_ok=True)
                save_run(path, words, meta)
                res["saved"] = path.name
            results.append(res)
    for r in results:
        print_result(r)
    verdict = named_barrier_verdict(results)
    if verdict:
        print(f"named barriers: {verdict}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "results": results,
                                               "named_barriers": verdict}, indent=1, default=str))
    return 0 if all(r["ok"] for r in results if r.get("handoff", "mbarrier") == "mbarrier") else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        _compile_worker(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
