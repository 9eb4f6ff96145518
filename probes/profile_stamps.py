"""The profile path below SM100: %globaltimer / %clock64 stamps into the profile buffer, and their decode.

KernelConfig.profile's kernel needs an SM100 GPU. This probe keeps everything of the profile path except tcgen05:
the kernel's real host side and launch (probes/device_stub.DeviceStub: the TVM-FFI entry with the profile buffer as
its eighth argument, the six TMA descriptors, grid, cluster, shared memory, the PDL attribute) and, in the device
body, the kernel's own recording helpers (submission.profile_stamp, submission.ProfileRecord) writing every slot of
the layout in the kernel's order and by the kernel's threads: thread 0 stamps entry, tmem_alloc (here: the same
point of the prologue, without tensor memory) and the SM word; the TMA warp wait_begin / wait_done around
griddepcontrol.wait; the MMA warp, after a named barrier with the TMA warp and a spin standing for the first stage,
first_load, then a spin per tile and mainloop_end; epilogue thread 0, after a named barrier with the MMA warp, per
tile got / a spin / released, then epilogue_end, the count and exit. The buffer is decoded by
tools/profile_buffer.py and read by tools/profile.py's statistics, as the B200 profile is.

The loop is the leaderboard's: flush L2 (a 1 GiB write), events around 50 back-to-back calls, each writing its own
slice of a (50, 148, words) buffer; after the last repeat the buffer holds one repeat's calls. Checks (exit 1 if
one fails): every CTA of every call has every phase, in the kernel's order, and its tile count; the spins the
decoded time base shows are the spin's cycles at the measured clock (the time base is right); the 50 calls' decoded
span agrees with the events. Reports the %globaltimer tick, the SM clock (%clock64 against %globaltimer), and per
call the gap and (PDL) the release after the previous call's last exit, as the B200 fit reads them.

    python probes/profile_stamps.py [--shape M,N,K,L] [--tiles 3] [--spin-cycles 2000] [--reps 10] [--json out.json]
    python probes/profile_stamps.py --emulate [--timed]     # no GPU: the same stub in the SM100 emulator
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


class ProfileStub(DeviceStub):
    """The real host side with a profile buffer; a body that stamps every slot as the kernel does (module doc)."""

    def __init__(self, config, tiles: int = 3, spin_cycles: int = 2000):
        super().__init__(config)
        self.tiles = tiles
        self.spin_cycles = spin_cycles

    def body(self, args):
        entry = S.profile_stamp()
        if cutlass.const_expr(self.config.pdl):
            cute.arch.griddepcontrol_launch_dependents()
        S.SmemAllocator().allocate(self.shared_storage)
        _stamp_phases(args.profile_buf, entry[0], entry[1], self.config.pdl, self.tiles, self.spin_cycles)


@cute.jit
def _spin(cycles: cutlass.Constexpr):
    t0 = S.profile_stamp()[1]
    t = t0
    while t - t0 < cycles:
        t = S.profile_stamp()[1]


@cute.jit
def _stamp_phases(buf: cute.Tensor, entry_ns: cutlass.Int64, entry_clk: cutlass.Int64, pdl: cutlass.Constexpr,
                  tiles: cutlass.Constexpr, spin_cycles: cutlass.Constexpr):
    K = S.DualGemmKernel
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    tidx = cute.arch.thread_idx()[0]
    prof = S.ProfileRecord.of_this_cta(buf)
    cute.arch.sync_threads()  # as the kernel's pipeline_init_wait: every warp's prologue before the roles
    if warp_idx == K.TMA_WARP:
        wait_begin = S.profile_stamp()
        if cutlass.const_expr(pdl):
            cute.arch.griddepcontrol_wait()
        wait_done = S.profile_stamp()
        if tidx == 32 * K.TMA_WARP:
            prof.put("wait_begin", wait_begin)
            prof.put("wait_done", wait_done)
        cute.arch.barrier_arrive(barrier_id=TMA_TO_MMA_BARRIER, number_of_threads=64)
    if warp_idx == K.MMA_WARP:
        cute.arch.barrier(barrier_id=TMA_TO_MMA_BARRIER, number_of_threads=64)
        _spin(spin_cycles)  # the first stage's loads
        first_load = S.profile_stamp()
        if cutlass.const_expr(pdl):
            cute.arch.griddepcontrol_wait()  # as the kernel's MMA warp: returns at once, the TMA warp has waited
        if tidx == 32 * K.MMA_WARP:
            prof.put("first_load", first_load)
        cute.arch.barrier_arrive(barrier_id=MMA_TO_EPILOGUE_BARRIER, number_of_threads=32 * (len(K.EPILOGUE_WARPS) + 1))
        _spin(tiles * spin_cycles)  # the mainloop
        mainloop_end = S.profile_stamp()
        if tidx == 32 * K.MMA_WARP:
            prof.put("mainloop_end", mainloop_end)
    if warp_idx < K.MMA_WARP:
        tmem_alloc = S.profile_stamp()  # below SM100 no tensor memory: the same point of the prologue
        if cutlass.const_expr(pdl):
            cute.arch.griddepcontrol_wait()
        if tidx == 0:
            prof.put("entry", (entry_ns, entry_clk))
            prof.put("tmem_alloc", tmem_alloc)
            prof.put_sm(True)  # every CTA stamps the MMA warp's phases here: all are expected
        cute.arch.barrier(barrier_id=MMA_TO_EPILOGUE_BARRIER, number_of_threads=32 * (len(K.EPILOGUE_WARPS) + 1))
        for j in cutlass.range_constexpr(tiles):
            got = S.profile_stamp()
            if tidx == 0:
                prof.put_handoff(j, 0, got)
            _spin(spin_cycles)  # the epilogue of tile j
            released = S.profile_stamp()
            if tidx == 0:
                prof.put_handoff(j, 1, released)
        epilogue_end = S.profile_stamp()
        if tidx == 0:
            prof.put("epilogue_end", epilogue_end)
            prof.put_count(tiles)
        exit_stamp = S.profile_stamp()
        if tidx == 0:
            prof.put("exit", exit_stamp)


def stand_in_config(shape, pdl: bool = True):
    """The shape's config as profiling twin; a 2-CTA config becomes its 1-CTA twin with the same cluster (the 2-CTA
    ops refuse a non-SM100 arch; grid, cluster dims and descriptors are the same), as probes/pdl.py does."""
    cfg = S.config_for(*shape)
    if cfg.use_2cta:
        cfg = dataclasses.replace(cfg, mma_tile_mn=(128, cfg.mma_tile_mn[1]))
    return dataclasses.replace(cfg, pdl=pdl, profile=True, a_collector=False)


# ----------------------------------------------------------------------------- analysis (CPU; the GPU run and tests)
def analyse(words: np.ndarray, layout: pb.Layout, tiles: int, spin_cycles: int, pdl: bool,
            events_us_per_call: float | None = None, label: str = "measured") -> dict:
    """Checks and figures of a (calls, CTAs, words) buffer the stub wrote (module doc); ok: every check passed."""
    from tools.profile import Run, statistics

    run = Run(label, SHAPE, "stub", pdl, layout, words, events_us_per_call or 0.0,
              period_ns=None if words.shape[0] > 1 else 0.0)
    problems = []
    for p in run.profiles:
        where = f"call {p.call} CTA {p.cta}"
        problems += [f"{where}: missing {m}" for m in pb.missing(p, layout)]
        problems += [f"{where}: {d}" for d in pb.disorder(p)]
        if p.tiles != tiles:
            problems.append(f"{where}: {p.tiles} tiles, the stub ran {tiles}")
    tb = run.timebase
    out = {"label": label, "calls": int(words.shape[0]), "ctas": len(run.profiles), "globaltimer_tick_ns": tb.tick_ns,
           "clock_ghz": tb.ghz or None, "timebase_residual_ns": tb.residual_ns}
    # A spin of spin_cycles between got and released: on the time base it lasts spin_cycles at the SM's clock, plus
    # the loop's last iteration and the stamp (a few tens of cycles).
    spins = [tb.ns(p, rel) - tb.ns(p, got) for p in run.profiles for _, got, rel in p.handoffs if rel is not None]
    if spins and tb.ghz:
        spin_ns = float(np.median(spins))
        out["spin_ns_median"] = spin_ns
        out["spin_ns_expected"] = spin_cycles / tb.ghz
        if not spin_cycles / tb.ghz <= spin_ns <= spin_cycles / tb.ghz * 1.1 + 100:
            problems.append(f"spins of {spin_cycles} cycles last {spin_ns:.0f} ns on the time base at "
                            f"{tb.ghz:.3f} GHz: expected {spin_cycles / tb.ghz:.0f} ns")
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
                problems.append(f"decoded span {out['decoded_span_us_per_call']:.3f} us per call, events "
                                f"{events_us_per_call:.3f} us")
    out["problems"] = problems[:40]
    out["ok"] = not problems
    return out


# ----------------------------------------------------------------------------- the emulator (no GPU)
def compile_artifacts(fields: dict, tiles: int, spin_cycles: int) -> Path:
    from emu.launch import EXPORT_NAME, cached_compile, installed_dsl

    sources = [Path(__file__), REPO / "probes" / "device_stub.py", REPO / "submission.py"]
    key = {"sources": [hashlib.sha256(p.read_bytes()).hexdigest() for p in sources], "dsl": installed_dsl(),
           "config": sorted((k, repr(v)) for k, v in fields.items()), "tiles": tiles, "spin": spin_cycles}
    job = {"config": fields, "tiles": tiles, "spin_cycles": spin_cycles, "export": EXPORT_NAME}
    return cached_compile("probes", key, job, Path(__file__), "--compile-worker")


def _compile_worker(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out"])
    cfg = S.KernelConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["config"].items()})
    compiled = cute.compile(ProfileStub(cfg, job["tiles"], job["spin_cycles"]).profiled, *S._fake_operands(),
                            S._fake_profile_buffer(), options="--enable-tvm-ffi")
    ptxs = sorted((out / "dump").glob("*.ptx"))
    if len(ptxs) != 1:
        raise RuntimeError(f"expected one PTX file in the dump, found {[p.name for p in ptxs]}")
    shutil.copy(ptxs[0], out / "kernel.ptx")
    compiled.export_to_c(str(out / "kernel.o"), job["export"])
    (out / "meta.json").write_text(json.dumps({"dsl_version": str(getattr(cutlass, "__version__", "")),
                                               "config": cfg.name}))


def emulate(fields: dict, tiles: int = 3, spin_cycles: int = 2000, timed: bool = False, shape=EMULATED_SHAPE,
            sched_seed: int = 0) -> tuple:
    """The stub in the SM100 emulator (functional: %globaltimer and %clock64 count instructions; timed: simulated
    time): (the (1, CTAs, words) buffer it wrote, the run's status and message)."""
    import reference
    from emu.calibration.gpu_probes import capture
    from emu.launch import DT_I64
    from emu.run import execute, place_inputs
    from emu.state import GlobalMemory

    art = compile_artifacts(fields, tiles, spin_cycles)
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
        run = execute(cap, gmem, sched_seed)
    words = gmem.read(addresses["profile"], rows[0] * rows[1] * 8).view(np.int64).reshape(rows).copy()
    return words[None], run.status, run.message


# ----------------------------------------------------------------------------- the GPU run
def measure(shape, pdl: bool, tiles: int, spin_cycles: int, reps: int) -> dict:
    import torch

    from probes.device_stub import admit_this_gpu_for_host_side
    from probes.dispatch import leaderboard_tensors

    cfg = stand_in_config(shape, pdl)
    admit_this_gpu_for_host_side()
    launch = cute.compile(ProfileStub(cfg, tiles, spin_cycles).profiled, *S._fake_operands(), S._fake_profile_buffer(),
                          options="--enable-tvm-ffi")
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
    out = analyse(buf.cpu().numpy(), pb.read_layout(REPO / "submission.py"), tiles, spin_cycles, pdl,
                  per_call[-1], f"measured ({torch.cuda.get_device_name()})")
    out.update({"config": cfg.name, "shape": list(shape), "pdl": pdl, "events_us_per_call_all_reps": per_call})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default=",".join(map(str, SHAPE)), help="M,N,K,L (its config's 1-CTA stand-in)")
    ap.add_argument("--tiles", type=int, default=3, help="hand-offs per CTA")
    ap.add_argument("--spin-cycles", type=int, default=2000, help="SM cycles per stand-in stage / tile")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument("--emulate", action="store_true", help="no GPU: run the stub in the SM100 emulator")
    ap.add_argument("--timed", action="store_true", help="with --emulate: the timed emulator")
    args = ap.parse_args(argv)
    layout = pb.read_layout(REPO / "submission.py")
    results = []
    if args.emulate:
        cfg = stand_in_config(EMULATED_SHAPE)
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        words, status, message = emulate(fields, args.tiles, args.spin_cycles, args.timed)
        label = "timed" if args.timed else "emulated"
        res = analyse(words, layout, args.tiles, args.spin_cycles, cfg.pdl, label=label) if status == "completed" \
            else {"ok": False, "problems": [f"{status}: {message[:2000]}"]}
        res.update({"config": cfg.name, "shape": list(EMULATED_SHAPE), "status": status})
        results.append(res)
    else:
        from probes.device_stub import exit_unless_cuda_gpu

        exit_unless_cuda_gpu("probes/profile_stamps.py", "a CUDA GPU with griddepcontrol (sm_90 or newer)", min_major=9)
        shape = tuple(int(x) for x in args.shape.split(","))
        for pdl in (True, False):
            results.append(measure(shape, pdl, args.tiles, args.spin_cycles, args.reps))
    for r in results:
        head = f"{r['label']} {r['config']} {tuple(r['shape'])}: {'OK' if r['ok'] else 'FAILED'}"
        figures = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                   if k not in ("problems", "ok", "label", "config", "shape", "events_us_per_call_all_reps")}
        print(head, json.dumps(figures), flush=True)
        for p in r["problems"]:
            print("  " + p)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "results": results},
                                              indent=1, default=str))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        _compile_worker(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
