#!/usr/bin/env python3
"""Run the GPU probes probes/tma_loads.py and probes/epilogue.py in the SM100 emulator (emu/), no GPU.

    python -m calibration.gpu_probes [--probes tma,epilogue] [--negatives] [--sched-seed S] [--json OUT]

The probes' own stub kernels (probes/device_stub.DeviceStub subclasses: the kernel's real host side, the kernel's
own `_ring_and_loads` / `_load_rows` / epilogue views and stores in the device body) run here, for sm_100a:
1. compile (worker subprocess; CUTE_DSL_ARCH=sm_100a is set before cutlass is imported) exactly as the probe's
   `check()` does: `cute.compile(<probe kernel>, *submission._fake_operands(), options="--enable-tvm-ffi")`, the
   kernel object built by the probe module (tma_loads.probe_kernel / epilogue.EpilogueProbe). The compiled
   TVM-FFI function is written out with `export_to_c`; the PTX is kept.
2. capture the launch the probe makes: the probe calls the compiled function with its 7 torch tensors through
   TVM-FFI, so the exported object is linked with harness/launch_stubs.c and called the same way
   (harness.capture.call_host: seven DLTensors, the leaderboard's shapes/strides, data pointers = emulated global
   addresses of the probe's own inputs, `probe_inputs("cpu")` = reference.generate_input on CPU).
3. run every warp of every cluster in emu.machine.Machine, read C (the probe's output buffer) back into the probe's
   C tensor, and apply the probe's own check (`compare` of the probe module): no check logic lives here.

On SM100 the TMA probe checks all six loads (A, B1, B2 with their FP4 tensor maps, SFA, SFB1, SFB2); the H200 run
could check only the three scale loads. Configs: the probes' own 1-CTA list (the probes do not support 2-CTA:
the dumping CTA is chosen by MMA tile, which both CTAs of a pair share, and the expected bytes assume each CTA
holds all cta_n B rows).

PDL: the probes run with their configs as launched (KernelConfig's default pdl=True: the launch carries the
programmatic-dependent-launch attribute). Their stub body waits (griddepcontrol.wait in
probes/device_stub.DeviceStub.ring_and_loads) before touching global memory, as the kernel does; without that
wait the emulator reports a hazard (a formal race with the previous kernel in the queue).

Negative controls (--negatives): the TMA probe compiled with K_TILE_INDEX = 0 (the kernel loads the previous
k-tile) and with TILE = (1, 1) (the CTA of another N tile dumps its stage) — module globals of the probe, set in the
worker before tracing; the check, unchanged, must reject every affected operand (and only those).

Every result is "emulated": what the PTX does under the PTX ISA semantics as emu/ implements them.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE_FILES = {"tma": REPO / "probes" / "tma_loads.py", "epilogue": REPO / "probes" / "epilogue.py"}
ALL_LOADS = (0, 1, 2, 3, 4, 5)  # A, B1, B2, SFA, SFB1, SFB2: the probe's SM100 path
# (probe, config fields, variant): the probes' own config lists (main()), 1-CTA only
TMA_CONFIGS = ({"mma_tile_mn": (128, 64)}, {"mma_tile_mn": (128, 128)})
EPILOGUE_CONFIGS = ({"mma_tile_mn": (128, 64)}, {"mma_tile_mn": (128, 128)}, {"mma_tile_mn": (128, 64), "epi_tile_n": 16})
# negative controls: module globals of probes/tma_loads.py overridden before tracing (the kernel changes, the check does not)
NEGATIVES = {
    "wrong_k_tile": {"K_TILE_INDEX": 0},  # the kernel loads k-tile 0; the check expects k-tile 1
    "wrong_n_tile": {"TILE": (1, 1)},     # the CTA on N tile 1 dumps; the check expects N tile 3
}
# operands each negative must make the check reject; the others must still pass
NEGATIVE_REJECTS = {"wrong_k_tile": ("A", "B1", "B2", "SFA", "SFB1", "SFB2"), "wrong_n_tile": ("B1", "B2", "SFB1", "SFB2")}


# ============================================================================ the probe modules
def _prepare_import() -> None:
    """The DSL reads its environment at import: sm_100a here, as in the compile worker."""
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def probe_module(probe: str):
    """The probe file imported as a module (its check functions; nothing runs: main() is under __main__)."""
    _prepare_import()
    name = f"{probe}_probe"
    mod = sys.modules.get(name)
    if mod is not None and Path(getattr(mod, "__file__", "")).resolve() == PROBE_FILES[probe].resolve():
        return mod
    spec = importlib.util.spec_from_file_location(name, PROBE_FILES[probe])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# ============================================================================ compile (worker subprocess)
def compile_artifacts(probe: str, config_fields: dict, checked=ALL_LOADS, overrides: dict | None = None) -> Path:
    """Directory with kernel.ptx, kernel.o (export_to_c of the probe's TVM-FFI function) and meta.json; cached
    per (probe file, device_stub, submission, this file, DSL, config, checked loads, overrides)."""
    _prepare_import()
    from harness.capture import cached_compile
    from harness.dsl import installed_version
    from harness.compile_worker import EXPORT_NAME  # call_host calls __tvm_ffi_<EXPORT_NAME>

    overrides = overrides or {}
    sources = [PROBE_FILES[probe], REPO / "probes" / "device_stub.py", REPO / "submission.py", Path(__file__)]
    key = {"sources": [hashlib.sha256(p.read_bytes()).hexdigest() for p in sources], "dsl": installed_version(),
           "probe": probe, "config": sorted((k, repr(v)) for k, v in config_fields.items()),
           "checked": list(checked), "overrides": sorted((k, repr(v)) for k, v in overrides.items())}
    job = {"probe": probe, "config": config_fields, "checked": list(checked), "overrides": overrides,
           "export": EXPORT_NAME}
    return cached_compile("probes", key, job, Path(__file__), "--compile-worker")


def _compile_worker(job_path: str) -> None:
    # run as a script, sys.path[0] is this folder: nothing there may shadow a package the DSL imports
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != here]
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out"])
    t0 = time.time()
    mod = probe_module(job["probe"])
    for name, value in job["overrides"].items():
        if not hasattr(mod, name):
            raise SystemExit(f"{PROBE_FILES[job['probe']].name} has no global {name}")
        setattr(mod, name, tuple(value) if isinstance(value, list) else value)
    import cutlass
    import cutlass.cute as cute

    S = mod.S  # the probe's `import submission as S`
    config = S.KernelConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in job["config"].items()})
    kernel = mod.probe_kernel(config, tuple(job["checked"])) if job["probe"] == "tma" else mod.EpilogueProbe(config)
    t1 = time.time()
    # the probe's compile call (check()): the same kernel object, the same fake operands, the same option
    compiled = cute.compile(kernel, *S._fake_operands(), options="--enable-tvm-ffi")
    t2 = time.time()
    ptxs = sorted((out / "dump").glob("*.ptx"))
    if len(ptxs) != 1:
        raise RuntimeError(f"expected one PTX file in the dump, found {[p.name for p in ptxs]}")
    shutil.copy(ptxs[0], out / "kernel.ptx")
    compiled.export_to_c(str(out / "kernel.o"), job["export"])
    (out / "meta.json").write_text(json.dumps({
        "dsl_version": str(getattr(cutlass, "__version__", "") or importlib.metadata.version("nvidia-cutlass-dsl")), "config": config.name,
        "import_s": round(t1 - t0, 2), "compile_s": round(t2 - t1, 2)}))


# ============================================================================ capture, emulate, check
@dataclass
class ProbeResult:
    probe: str
    config: str
    status: str  # "ok", "rejected" (the probe's check reported problems), "deadlock", "hazard", "unsupported"
    problems: list = field(default_factory=list)
    message: str = ""
    loads: tuple = ()
    variant: str = ""
    seconds: float = 0.0
    launch: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    def line(self) -> str:
        what = f"{self.probe}_probe {self.config}" + (f" [{self.variant}]" if self.variant else "")
        loads = f" loads {','.join(self.loads)}" if self.loads else ""
        lc = self.launch
        extra = f" grid {lc.get('grid')} cluster {lc.get('cluster')} smem {lc.get('dynamic_smem')}" if lc else ""
        return (f"emulated {self.status.upper()}: {what}{loads}{extra}, {self.stats.get('warp_instructions', 0)} "
                f"warp-instructions, {self.stats.get('tma_bytes', 0)} TMA bytes, {self.seconds:.1f} s")


def capture(art: Path, shape: tuple, addresses: dict, extra=()):
    """The probe's TVM-FFI call (7 tensors at `addresses`, then `extra` as harness.capture.call_host takes it) through the
    runtime stand-ins: an emu.launch.CapturedLaunch."""
    from emu.launch import CapturedLaunch
    from harness.capture import call_host

    ptx = (art / "kernel.ptx").read_text()
    meta = json.loads((art / "meta.json").read_text())
    rec = call_host(art, ptx, *shape, addresses, extra)
    return CapturedLaunch(
        ptx=ptx, kernel_name=rec["kernel_name"], grid=rec["grid"], block=rec["block"], cluster=rec["cluster"],
        dynamic_smem=rec["dynamic_smem"], params=rec["blobs"], dsl_version=meta["dsl_version"],
        param_names=[p[0] for p in rec["params"]], param_decls=[p[3] for p in rec["params"]], cubin=rec["cubin"],
        launch_attrs=rec["attrs"], runtime_log=rec["log"], artifact_dir=str(art), timings={"worker": meta})


def run_probe(probe: str, config_fields: dict, checked=ALL_LOADS, variant: str = "", sched_seed: int = 0,
              clusters="all") -> ProbeResult:
    """Compile (cached), capture and emulate one probe config; apply the probe's own check to what C holds."""
    _prepare_import()
    import numpy as np
    import torch

    from emu import run_kernel
    from harness.problems import place_inputs
    from emu.state import GlobalMemory

    t0 = time.time()
    mod = probe_module(probe)
    config = mod.S.KernelConfig(**config_fields)
    checked = tuple(checked) if probe == "tma" else ()
    res = ProbeResult(probe, config.name, "unsupported", variant=variant,
                      loads=tuple(mod.NAMES[i] for i in checked) if probe == "tma" else ())
    art = compile_artifacts(probe, config_fields, checked, NEGATIVES.get(variant, {}))
    t1 = time.time()
    shape = (mod.M, mod.N, mod.K, mod.L)
    data = mod.probe_inputs("cpu")
    gmem = GlobalMemory()
    addresses = place_inputs(gmem, data, *shape)  # the 7 tensors' bytes (C as the probe prepared it)
    cap = capture(art, shape, addresses)
    t2 = time.time()
    res.launch = {"grid": cap.grid, "block": cap.block, "cluster": cap.cluster, "dynamic_smem": cap.dynamic_smem}
    run = run_kernel(cap, gmem, sched_seed, clusters)
    res.status, res.message = run.status, run.message
    if run.machine is not None:
        res.stats = dict(run.machine.stats)
    if run.status == "completed":
        m, n, _, l = shape
        c = data[9]
        raw = gmem.read(addresses["c"], c.numel() * c.element_size())
        emulated = torch.from_numpy(raw.view(np.float16).copy()).reshape(l, m, n).permute(1, 2, 0)
        c.copy_(emulated)  # the probe's C tensor now holds what the emulated kernel left in its memory
        res.problems = mod.compare(config, checked, data) if probe == "tma" else mod.compare(config, data)
        res.status = "rejected" if res.problems else "ok"
        res.message = "\n".join(res.problems) if res.problems else "the probe's check passed"
    res.seconds = time.time() - t0
    res.timings = {"compile_or_cache_s": round(t1 - t0, 2), "capture_s": round(t2 - t1, 2),
                   "emulate_and_check_s": round(time.time() - t2, 2),
                   "worker": json.loads((art / "meta.json").read_text())}
    return res


def negative_verdict(res: ProbeResult, variant: str) -> tuple[bool, str]:
    """A negative control passes when the probe's check rejected exactly the operands the wrong tile affects."""
    if res.status != "rejected":
        return False, f"{variant}: the probe's check did not reject it ({res.status}: {res.message[:300]})"
    rejected = {name for name in res.loads if any(p.startswith(f"{res.config}: {name} stage-0") for p in res.problems)}
    want = set(NEGATIVE_REJECTS[variant]) & set(res.loads)
    if rejected != want:
        return False, f"{variant}: rejected {sorted(rejected)}, expected exactly {sorted(want)}"
    passed = [n for n in res.loads if n not in rejected]
    return True, (f"{variant}: rejected {', '.join(n for n in res.loads if n in rejected)}"
                  + (f"; {', '.join(passed)} passed" if passed else ""))


# ============================================================================ CLI
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", default="tma,epilogue", help="comma-separated: tma, epilogue")
    ap.add_argument("--negatives", action="store_true", help="also run the TMA probe's negative controls")
    ap.add_argument("--sched-seed", type=int, default=0, help="emulator scheduler seed")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    probes = [p.strip() for p in args.probes.split(",") if p.strip()]
    unknown = [p for p in probes if p not in PROBE_FILES]
    if unknown:
        ap.error(f"unknown probes {unknown}; known: {list(PROBE_FILES)}")
    results, ok = [], True
    for probe in probes:
        for fields in (TMA_CONFIGS if probe == "tma" else EPILOGUE_CONFIGS):
            res = run_probe(probe, fields, sched_seed=args.sched_seed)
            results.append(res)
            print(res.line(), flush=True)
            if res.status != "ok":
                ok = False
                print("  " + res.message.replace("\n", "\n  "), flush=True)
        if probe == "tma" and args.negatives:
            for variant in NEGATIVES:
                res = run_probe("tma", TMA_CONFIGS[0], variant=variant, sched_seed=args.sched_seed)
                results.append(res)
                good, why = negative_verdict(res, variant)
                ok &= good
                print(res.line() + f" -> negative control {'OK' if good else 'FAILED'}: {why}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([dict(dataclasses.asdict(r), label="emulated") for r in results],
                                              indent=2, default=list))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-worker":
        _compile_worker(sys.argv[2])
    else:
        sys.exit(main())
