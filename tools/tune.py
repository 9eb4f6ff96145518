"""Autotuner for submission.py's per-shape config table.

On a B200 (SM100): for every benchmark shape of task.yml and every candidate config
(submission.candidate_configs), in its own subprocess (a deadlock or a poisoned CUDA context costs
one candidate, not the run): compile, check correctness on both generators ("leaderboard" and
"strict", output poisoned with NaN first), time with the leaderboard's method
(test_benchmark.benchmark_callable), keep the fastest correct one. A candidate that fails any step is
dropped and reported, never chosen.

    python tools/tune.py [--write] [--json build/tune.json]
    python tools/tune.py --dry-run [--jobs N] [--costs FILE] [--configs NAME,...]
                                          # anywhere: compile every candidate (preflight), rank by the timed emulator

--dry-run needs no GPU: every candidate is compiled with preflight's machinery, then each one that passes is run in
the timed emulator (emu/timing: one leaderboard call of the compiled kernel, C checked on the clusters it simulates)
at every benchmark shape, `--jobs` at a time, a line per (shape, config) on stderr as each finishes with the time
left. A full sweep (every TUNE_SPACE candidate at the 4 benchmark shapes: about 160 timed runs of 0.3-1 min each on
one CPU, plus the compiles) takes about 0.5-1.5 hours on a 2-CPU machine with --jobs 2; --configs NAME,... times
only those. The cost table is
emu/timing/b200.yaml with the constants fitted by its calibration on public B200 points (docs/timing_calibration.json
`fitted_overrides`: the table's values), then FILE's rows with --costs. Beside the figures: the calibration's error band (the held-out
dual-GEMM consecutive-version delta RMS, what a difference between two configs must exceed to mean anything, and the
held-out absolute error). Every figure is "timed": the timed emulator's, not a measurement.

--write rewrites only the entry lines of the CONFIG_TABLE block of submission.py (between the
contract's marker lines); the rest of the file is left byte for byte.

--problem nvfp4_gemm does the same for the single GEMM: its benchmark shapes (nvfp4_gemm/task.yml), its candidates
(GEMM_TUNE_SPACE), its reference (nvfp4_gemm/reference.py) and its table (the GEMM_CONFIG_TABLE block); after --write,
python tools/gemm_submission.py regenerates nvfp4_gemm/submission.py. Its timed figures carry the caveat that the timed
emulator's fitted constants were fitted on gau-nernst's nvfp4_gemm v0, v3b and v4.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import itertools
import json
import os
import pickle
import platform
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# One timed run of one (shape, config) on one CPU of a 2-CPU machine, in minutes (measured: 256x3072x4096 and
# 512x4096x7168 with m256n64/m256n128 configs took 0.3-0.6 min each, compile included; larger tiles and K splits more).
TIMED_RUN_MIN = (0.3, 1.0)
if str(REPO) not in sys.path:  # run as a script: make `tools` importable
    sys.path.insert(0, str(REPO))
from tools import preflight, sol  # noqa: E402

BEGIN = "# >>> config table (tools/tune.py --write rewrites this block)"
END = "# <<< config table"
# nvfp4_gemm's table (GEMM_CONFIG_TABLE) sits between its own marker lines
GEMM_BEGIN = "# >>> gemm config table (tools/tune.py --problem nvfp4_gemm --write rewrites this block)"
GEMM_END = "# <<< gemm config table"
MARKERS = {"nvfp4_dual_gemm": (BEGIN, END), "nvfp4_gemm": (GEMM_BEGIN, GEMM_END)}
GEMM_TIMED_CAVEAT = ("nvfp4_gemm: the timed emulator's fitted constants were fitted on gau-nernst's nvfp4_gemm v0, v3b "
                     "and v4 (public B200 points), so these figures are not independent of that kernel family")
ENTRY = re.compile(r"^\s*\((\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)\s*:\s*(.+?),\s*$")


# ----------------------------------------------------------------------------- config table rewrite
def rewrite_table(text: str, chosen: dict, problem: str = "nvfp4_dual_gemm") -> str:
    """Return text with the CONFIG_TABLE entries (GEMM_CONFIG_TABLE's for nvfp4_gemm) for the shapes in `chosen`
    ({(m,n,k,l): "KernelConfig(...)"}) set; other entries, other lines of the block and everything outside the block
    are kept."""
    begin, end = MARKERS[problem]
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.strip() == begin]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == end]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"expected exactly one '{begin}' ... '{end}' block in submission.py")
    b, e = starts[0], ends[0]
    block = lines[b + 1:e]
    pending = {tuple(s): v for s, v in chosen.items()}
    last_entry = next((i for i in range(len(block) - 1, -1, -1) if ENTRY.match(block[i])), None)
    indent = "    "
    for i, ln in enumerate(block):
        m = ENTRY.match(ln)
        if m:
            indent = ln[:len(ln) - len(ln.lstrip())]
            shape = tuple(int(x) for x in m.groups()[:4])
            if shape in pending:
                block[i] = f"{indent}{shape}: {pending.pop(shape)},\n"
    new = [f"{indent}{s}: {v},\n" for s, v in pending.items()]
    if last_entry is None:  # empty table: put entries after the line that opens the dict
        opener = next((i for i, ln in enumerate(block) if ln.rstrip().endswith("{")), None)
        if opener is None:
            raise ValueError("the config table block has no entries and no line ending in '{'")
        last_entry = opener
    block[last_entry + 1:last_entry + 1] = new
    out = "".join(lines[:b + 1] + block + lines[e:])
    # what lies outside the block must be unchanged, and the result must still parse
    assert out.startswith("".join(lines[:b + 1])) and out.endswith("".join(lines[e:]))
    ast.parse(out)
    return out


def table_entries(text: str, problem: str = "nvfp4_dual_gemm") -> dict:
    """{(m,n,k,l): 'KernelConfig(...)'} as written in the block (what --write produced)."""
    begin, end = MARKERS[problem]
    b = text.index(begin)
    e = text.index(end, b)
    return {tuple(int(x) for x in m.groups()[:4]): m.group(5)
            for m in map(ENTRY.match, text[b:e].splitlines()) if m}


def config_source(sub, cfg) -> str:
    """One-line source of a config in the table's style: mma_tile_mn and cluster_mn always, other fields
    only where they differ from their defaults. It must evaluate back to the same config."""
    if dataclasses.is_dataclass(cfg):
        args = [f"{f.name}={getattr(cfg, f.name)!r}" for f in dataclasses.fields(cfg)
                if f.name in ("mma_tile_mn", "cluster_mn") or f.default is dataclasses.MISSING
                or getattr(cfg, f.name) != f.default]
        src = f"{type(cfg).__name__}({', '.join(args)})"
    else:
        src = repr(cfg)
    if eval(src, vars(sub)) != cfg:  # noqa: S307 (source built from our own dataclass)
        raise ValueError(f"repr of {cfg.name} does not round-trip: {src}")
    return src


# ----------------------------------------------------------------------------- B200 path
def device_info() -> dict:
    import torch
    info = {"torch": torch.__version__, "dsl": preflight.dsl_version(), "python": platform.python_version()}
    if torch.cuda.is_available():
        info.update(device=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
                    cuda=torch.version.cuda, driver=_driver())
    return info


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def worker(submission: Path, job_file: Path, result_file: Path) -> None:
    """One (shape, config): compile, correctness on both generators, leaderboard timing."""
    import torch
    job = pickle.loads(job_file.read_bytes())
    shape, seed = job["shape"], job["seed"]
    res = {"status": "error"}

    def save():
        result_file.write_text(json.dumps(res))

    try:
        sub = preflight.load_submission(submission)
        cfg = pickle.loads(job["config"])
        problem = job.get("problem", "nvfp4_dual_gemm")
        import test_benchmark
        from problem_files import load_reference

        reference = load_reference(problem)
        # custom_kernel resolves its config through config_for -> CONFIG_TABLE (GEMM_CONFIG_TABLE) on every call
        if problem == "nvfp4_gemm":
            sub.GEMM_CONFIG_TABLE[tuple(shape)] = cfg
            assert sub.config_for(*shape, problem) == cfg
        else:
            sub.CONFIG_TABLE[tuple(shape)] = cfg
            assert sub.config_for(*shape) == cfg
        t0 = time.time()
        sub.compile_config(cfg)
        res["compile_s"] = round(time.time() - t0, 2)
        res["status"] = "compiled"
        save()
        for mode in ("leaderboard", "strict"):
            data = reference.generate_input(*shape, seed=seed, mode=mode)
            data[-1].fill_(float("nan"))  # an element the kernel does not write must fail the check (c is last)
            # the shape's first call: this candidate alone, no fallback to another config (a submission without the
            # first-call chain, older than submission.prepare, compiles on its first custom_kernel call instead)
            if mode == "leaderboard" and hasattr(sub, "prepare"):
                sub.prepare(data, chain=[cfg])
            out = sub.custom_kernel(data)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            ok, msg = reference.check_implementation(data, out)
            res[f"check_{mode}"] = "ok" if ok else str(msg)[:500]
            if not ok:
                res["status"] = f"wrong on '{mode}' data"
                return save()
        res["status"] = "correct"
        save()
        stats = test_benchmark.benchmark_callable(sub.custom_kernel, *shape, seed, reference=reference)
        res.update({k: stats[k] for k in ("mean_us", "std_us", "err_us", "best_us", "worst_us", "runs") if k in stats})
        res["status"] = "ok"
    except Exception as e:
        res["status"] = res["status"] if res["status"] not in ("compiled", "correct") else f"failed after {res['status']}"
        res["error"] = f"{type(e).__name__}: {str(e)[:800]}"
    save()


def tune(args) -> dict:
    import torch
    info = device_info()
    if not args.any_device and (not torch.cuda.is_available() or tuple(torch.cuda.get_device_capability()) != (10, 0)):
        raise SystemExit(f"tune.py needs an SM100 GPU (B200); this machine has {info.get('device', 'no GPU')}. "
                         "Use --dry-run here.")
    os.environ.pop("CUTE_DSL_ARCH", None)  # compile for the GPU that is present (workers inherit this env)
    sub = preflight.load_submission(args.submission)
    task = sol.benchmark_shapes(Path(args.task))
    seeds = {tuple(s): 1111 for s in task}
    problem = args.problem
    import yaml
    for b in yaml.safe_load(Path(args.task).read_text())["benchmarks"]:
        seeds[(b["m"], b["n"], b["k"], b.get("l", 1))] = int(b.get("seed", 1111))
    label = f"measured ({info.get('device', 'cpu')})"
    out = {"device": info.get("device", "cpu"), "info": info, "time": time.strftime("%Y-%m-%d %H:%M:%S"), "label": label,
           "results": [], "chosen": {}, "problem": problem}
    with tempfile.TemporaryDirectory(prefix="tune_") as tmp:
        for shape in task:
            for i, cfg in enumerate(candidates(sub, shape, problem)):
                d = Path(tmp) / f"{'x'.join(map(str, shape))}_{i}"
                d.mkdir()
                (d / "job.pkl").write_bytes(pickle.dumps({"shape": shape, "seed": seeds[shape], "config": pickle.dumps(cfg),
                                                          "problem": problem}))
                t0 = time.time()
                try:
                    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(args.submission),
                                        str(d / "job.pkl"), str(d / "result.json")], capture_output=True, text=True,
                                       timeout=args.timeout, cwd=str(REPO))
                    log = (p.stdout + p.stderr)[-800:]
                except subprocess.TimeoutExpired:
                    log = f"timed out after {args.timeout}s (deadlock?)"
                r = json.loads((d / "result.json").read_text()) if (d / "result.json").exists() else {"status": "error"}
                if r["status"] != "ok":
                    r.setdefault("error", log)
                    if "timed out" in log:
                        r["status"] = f"timeout ({r['status']})"
                r.update(shape=list(shape), config=cfg.name, config_src=config_source(sub, cfg), wall_s=round(time.time() - t0, 1),
                         label=label if r.get("mean_us") is not None else None)
                out["results"].append(r)
                print(f"{str(shape[:3]):20} {cfg.name:22} {r['status']:28} "
                      + (f"{r['mean_us']:.2f} us ({label})" if r.get("mean_us") else r.get("error", "")[:100]),
                      flush=True)
            good = [r for r in out["results"] if r["shape"] == list(shape) and r["status"] == "ok"]
            if good:
                best = min(good, key=lambda r: r["mean_us"])
                out["chosen"][str(shape)] = {"config": best["config"], "config_src": best["config_src"], "mean_us": best["mean_us"]}
    return out


def candidates(sub, shape, problem: str = "nvfp4_dual_gemm") -> list:
    """The submission's tuning candidates for a benchmark shape of the problem (candidate_configs)."""
    if problem == "nvfp4_gemm":
        return sub.candidate_configs(*shape, problem)
    return sub.candidate_configs(*shape)


def print_tune(out: dict) -> None:
    print(f"\nchosen configs ({out['label']}):")
    for shape, c in out["chosen"].items():
        print(f"  {shape:24} {c['config']:22} {c['mean_us']:.2f} us")
    dropped = [r for r in out["results"] if r["status"] != "ok"]
    for r in dropped:
        print(f"  dropped {tuple(r['shape'][:3])} {r['config']}: {r['status']} {r.get('error', '')[:160]}")
    if out["chosen"]:
        g = sol.geomean(c["mean_us"] for c in out["chosen"].values())
        problem = out.get("problem", "nvfp4_dual_gemm")
        sol_geo = sol.GEMM_SOL_GEOMEAN_US if problem == "nvfp4_gemm" else sol.SOL_GEOMEAN_US
        print(f"geomean of chosen: {g:.2f} us ({out['label']}); speed of light {sol_geo} us; "
              f"best public {sol.public_best(problem)[1]} us")


# ----------------------------------------------------------------------------- dry run (no GPU)
def time_candidate(submission: str, shape: tuple, config_name: str, overrides: dict,
                   problem: str = "nvfp4_dual_gemm", variants: tuple = ()) -> dict:
    """One (shape, config) in the timed emulator (run in a worker process): the per-call time, what binds, and the
    emulated check of C on the clusters it simulated; under each engine variant of `variants` ([{name, overrides}],
    calibration.timing.variants, the adopted one first) its time in row["variants"]."""
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from emu.timing import costs as cost_table
    from harness.timed import timed_emulate

    t0 = time.time()
    row = {"shape": list(shape), "config": config_name}
    try:
        for variant in variants or ({"name": "", "overrides": {}},):
            res, timed = timed_emulate(*shape, config_name=config_name, submission=submission, problem=problem,
                                       costs=cost_table.load(overrides={**variant["overrides"], **overrides}))
            if "status" not in row:  # the adopted engine's run gives the verdict, the figure and what binds
                row["status"] = res.status
                row["message"] = (res.message or "")[:300]
                if timed is not None and timed.status == "completed":
                    row.update(timed_us=round(timed.per_call_us, 3), kernel_us=round(timed.kernel_us, 3),
                               binds=timed.binds, clusters=f"{timed.clusters_simulated}/{timed.clusters_total}")
            if variants and timed is not None and timed.status == "completed":
                row.setdefault("variants", {})[variant["name"]] = round(timed.per_call_us, 3)
    except Exception as e:  # a candidate that cannot be timed is reported, never chosen
        row.update(status="error", message=f"{type(e).__name__}: {str(e)[:300]}")
    row["seconds"] = round(time.time() - t0, 1)
    return row


def time_candidates(submission: Path, todo: list, overrides: dict, jobs: int, problem: str = "nvfp4_dual_gemm",
                    variants: tuple = ()) -> dict:
    """{(shape, config name): time_candidate row} for every (shape, config) of todo, `jobs` processes at a time, a
    line on stderr as each finishes. Fresh (spawned) processes: the parent has the DSL loaded, a fork would copy it."""
    out = {}
    t0 = time.time()
    with ProcessPoolExecutor(max(1, jobs), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(time_candidate, str(submission), shape, name, overrides, problem, variants): (shape, name)
                   for shape, name in todo}
        for i, fut in enumerate(as_completed(futures), 1):
            shape, name = futures[fut]
            row = out[(shape, name)] = fut.result()
            figure = f"{row['timed_us']:.2f} us (timed)" if "timed_us" in row else "no time"
            left = (time.time() - t0) / i * (len(todo) - i)  # the mean so far, for the runs still to come
            print(f"tune --dry-run: timed {i}/{len(todo)} {str(shape[:3])} {name}: {figure}, {row['status']} "
                  f"({row['seconds']:.0f} s; about {left / 60:.0f} min left)", file=sys.stderr, flush=True)
    return out


def rank(rows: list[dict]) -> list[dict]:
    """A shape's rows, best first: the candidates that passed preflight and whose C matched in the timed run, by their
    worst case over the engine variants (row["variants"]: {name: us}; the adopted engine alone where a row has none):
    the largest, over the variants, of their time over that variant's best - 1 (then the adopted time, then the name);
    after them every other row, by name. Each ranked row gets vs_best (that worst case), and, with variants,
    beyond_band_everywhere: whether the best beats it by more than the band under every variant (set by mark_band)."""
    eligible = [r for r in rows if r["preflight"] == "ok" and r.get("status") == "match" and "timed_us" in r]
    figures = {id(r): r.get("variants") or {"": r["timed_us"]} for r in eligible}
    names = set.intersection(*(set(f) for f in figures.values())) if eligible else set()
    best = {v: min(f[v] for f in figures.values()) for v in names}
    for r in eligible:
        r["vs_best"] = round(max(figures[id(r)][v] / best[v] - 1 for v in names), 4)
    eligible.sort(key=lambda r: (r["vs_best"], r["timed_us"], r["config"]))
    rest = sorted((r for r in rows if r not in eligible), key=lambda r: r["config"])
    return eligible + rest


def beyond_band_everywhere(better: dict, worse: dict, band: float) -> bool:
    """Whether `better` is faster than `worse` by more than `band` (a fraction) under every engine variant both were
    timed under (the adopted engine alone where they have no variants): the rule for a design change to count."""
    a, b = better.get("variants") or {"": better["timed_us"]}, worse.get("variants") or {"": worse["timed_us"]}
    return all(a[v] < b[v] * (1 - band) for v in set(a) & set(b))


def _vs_best(row: dict, band: dict) -> str:
    if "vs_best" not in row:
        return ""
    if row["vs_best"] == 0:
        return "best"
    return f"{row['vs_best']:+.1%}" + ("~" if row["vs_best"] < band["delta_rms"] else "")


def dry_run(args) -> dict:
    """Compile every candidate of every benchmark shape with preflight's machinery; rank by the timed emulator."""
    os.environ["CUTE_DSL_ARCH"] = "sm_100a"
    t0 = time.time()
    sub = preflight.load_submission(args.submission)
    shapes = sol.benchmark_shapes(Path(args.task))
    if getattr(args, "shapes", None):
        asked = [tuple(int(x) for x in item.split(",")) for item in args.shapes.split(";") if item]
        unknown = [a for a in asked if not any(s[:3] == a[:3] for s in shapes)]
        if unknown:
            raise SystemExit(f"tune --dry-run: {unknown} not among the benchmark shapes {[s[:3] for s in shapes]}")
        shapes = [s for s in shapes if any(s[:3] == a[:3] for a in asked)]
    wanted = [n for n in (args.configs or "").split(",") if n]
    problem = args.problem
    cands = {s: [c for c in candidates(sub, s, problem) if not wanted or c.name in wanted] for s in shapes}
    unique = list(dict.fromkeys(c for lst in cands.values() for c in lst))
    if not unique:
        raise SystemExit(f"tune --dry-run: no candidate config{' named ' + args.configs if wanted else ''} for the "
                         "benchmark shapes")
    from calibration.timing import error_band
    from emu.timing import costs as cost_table

    band = error_band()
    file_rows = cost_table.read_overrides(args.costs) if args.costs else {}
    overrides = file_rows  # after the table's own values, the fitted constants included
    tools = {n: preflight.find_tool(n) for n in ("ptxas", "cuobjdump")}
    pf_args = argparse.Namespace(submission=args.submission, timeout=args.timeout, keep=None,
                                 progress=("tune --dry-run", itertools.count(1), len(unique)))
    runs = sum(len(v) for v in cands.values())
    print(f"tune --dry-run: compiling {len(unique)} candidate configs for sm_100a, {args.jobs} at a time, then timing "
          f"each that compiles cleanly at every benchmark shape in the timed emulator: up to {runs} timed runs of "
          f"about {TIMED_RUN_MIN[0]}-{TIMED_RUN_MIN[1]} min each on one CPU, so about "
          f"{runs * TIMED_RUN_MIN[0] / max(1, args.jobs):.0f}-{runs * TIMED_RUN_MIN[1] / max(1, args.jobs):.0f} min "
          f"with --jobs {args.jobs} (a line per config and per (shape, config) as it finishes, with the time left; "
          "the ranking comes at the end)", file=sys.stderr, flush=True)
    capacity = getattr(sub, "SMEM_CAPACITY", preflight.SMEM_CAPACITY)
    compiled = {}
    with tempfile.TemporaryDirectory(prefix="tune_dry_") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        for cfg, rec in zip(unique, pool.map(lambda ic: preflight.run_config(ic[0], ic[1], pf_args, Path(tmp), tools), enumerate(unique))):
            compiled[cfg] = preflight.judge(rec, capacity)
    todo = [(s, c.name) for s in shapes for c in cands[s] if not compiled[c]]  # shape-major: one compile per config
    from calibration.timing import variants as engine_variants

    kept = [] if args.variants == "none" else engine_variants(None if args.variants == "all" else args.variants.split(","))
    timed = time_candidates(args.submission, todo, overrides, args.jobs, problem, tuple(kept))
    costs_said = (f"emu/timing/b200.yaml with the calibration's fitted constants {band['fitted_overrides']} "
                  f"({band['source']}, engine {band['engine']})")
    if args.costs:
        costs_said += f", then {args.costs}'s rows {file_rows}"
    band_said = (f"error band ({band['source']}, fitted constants): a difference between two configs below "
                 f"{band['delta_rms']:.1%} (the held-out dual-GEMM consecutive-version delta RMS, n={band['delta_n']}) is "
                 f"not a result; absolute error on held-out points median {band['abs_median']:.1%}, max "
                 f"{band['abs_max']:.1%} (n={band['abs_n']})"
                 + (f"; measured with the calibration's constants, not with {args.costs}'s" if args.costs else ""))
    out = {"label": "compiled + timed (the timed emulator; no GPU, not measured)", "dsl": preflight.dsl_version(),
           "problem": problem, "variants": kept,
           "costs": {"table": "emu/timing/b200.yaml", "overrides": overrides, "said": costs_said},
           "error_band": band, "shapes": [], "chosen": {}}
    print(f"tune --dry-run ({preflight.dsl_version()}): {len(unique)} candidate configs compiled for sm_100a; "
          "times are timed (the timed emulator, emu/timing), not measured")
    print(f"cost table: {costs_said}")
    print(band_said)
    if kept:
        print(f"ranked by the worst case over the engine variants {', '.join(v['name'] for v in kept)} "
              "(calibration/engine_variants.json): vs best = the largest, over them, of a config's time over that "
              "variant's best; 'timed us' is the adopted engine's")
    if problem == "nvfp4_gemm":
        print(GEMM_TIMED_CAVEAT)
        out["caveat"] = GEMM_TIMED_CAVEAT
    w = max(len(c.name) for c in unique) + 1
    print("load = the persistent scheduler's rounds of tiles : k-tiles of the busiest CTA (DualGemmKernel.schedule_for; "
          "configs of one tile width compare by it before any timing, docs/levers.md section 6)")
    print(f"{'shape':20} {'config':{w}} {'preflight':10} {'load':6} {'timed us':9} {'vs best':8} {'status':10} binds")
    for shape in shapes:
        rows = []
        for c in cands[shape]:
            r = {"config": c.name, "config_src": config_source(sub, c), "preflight": "ok" if not compiled[c] else "FAIL",
                 "problems": compiled[c], "schedule": sub.DualGemmKernel.schedule_for(c, *shape)}
            r.update({k: v for k, v in timed.get((shape, c.name), {"status": "not timed"}).items()
                      if k not in ("shape", "config")})
            rows.append(r)
        rows = rank(rows)
        for r in rows:
            t = f"{r['timed_us']:.2f}" if "timed_us" in r else "-"
            why = r["problems"][0][:80] if r["problems"] else (r.get("message", "")[:80] if r["status"] != "match" else "")
            per = " ".join(f"{n} {x:.2f}" for n, x in r.get("variants", {}).items() if n != kept[0]["name"]) if kept else ""
            load = f"{r['schedule']['rounds']}:{r['schedule']['busiest_k_tiles']}"
            print(f"{str(shape[:3]):20} {r['config']:{w}} {r['preflight']:10} {load:6} {t:9} {_vs_best(r, band):8} {r['status']:10} "
                  f"{r.get('binds', '')}" + (f"  [{per}]" if per else "") + (f"  ({why})" if why else ""))
        table_now = sub.config_for(*shape, problem) if problem == "nvfp4_gemm" else sub.config_for(*shape)
        incumbent = next((r for r in rows if r["config"] == table_now.name and "vs_best" in r), None)
        if rows and "vs_best" in rows[0] and incumbent is not None and incumbent is not rows[0]:
            gain = beyond_band_everywhere(rows[0], incumbent, band["delta_rms"])
            print(f"{str(shape[:3]):20} {rows[0]['config']} against the table's {incumbent['config']}: "
                  f"{'beyond' if gain else 'not beyond'} the {band['delta_rms']:.1%} band under every variant"
                  + ("" if gain else " (the table stays: not a result)"))
        if rows and "vs_best" in rows[0]:
            out["chosen"][str(shape)] = {"config": rows[0]["config"], "config_src": rows[0]["config_src"],
                                         "timed_us": rows[0]["timed_us"]}
        out["shapes"].append({"shape": list(shape), "ranking": rows})
    print("(~ = within the error band of the best: not a result, the B200 tuner decides between those)")
    if out["chosen"]:
        g = sol.geomean(c["timed_us"] for c in out["chosen"].values())
        line = f"timed geomean of the best candidates: {g:.2f} us (timed)"
        sols = sol.sol_table(Path(args.task))
        if len(out["chosen"]) == len(shapes) and all(s in sols for s in shapes):
            line += f"; speed of light {sol.geomean(sols[s] for s in shapes):.3f} us"
        best, _, whose = sol.public_best(problem)
        if len(out["chosen"]) == len(shapes) and all(s in best for s in shapes):
            line += (f"; best public {sol.geomean(best[s] for s in shapes):.2f} us ({whose}, measured, B200, "
                     f"docs/leaderboard.md {'§9' if problem == 'nvfp4_gemm' else '§7'})")
        print(line)
    out["wall_s"] = round(time.time() - t0, 1)
    print(f"dry run took {out['wall_s']} s")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(*map(Path, argv[1:4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submission", default=str(REPO / "submission.py"))
    ap.add_argument("--problem", choices=("nvfp4_dual_gemm", "nvfp4_gemm"), default="nvfp4_dual_gemm",
                    help="the leaderboard problem (default nvfp4_dual_gemm); nvfp4_gemm: nvfp4_gemm/task.yml's shapes, "
                         "GEMM_TUNE_SPACE, the GEMM_CONFIG_TABLE block")
    ap.add_argument("--task", default=None, help="task file (default: the problem's task.yml)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: compile all candidates, rank them by the timed emulator (timed, not measured); a "
                         "full sweep (about 160 timed runs) takes about 0.5-1.5 h on a 2-CPU machine with --jobs 2, "
                         "a line per run with the time left; --configs narrows it")
    ap.add_argument("--write", action="store_true", help="rewrite submission.py's CONFIG_TABLE block with the choices")
    ap.add_argument("--json", default=None, help="default build/tune.json (build/tune_dryrun.json with --dry-run)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel compiles and timed runs in --dry-run")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per candidate")
    ap.add_argument("--costs", default=None, metavar="FILE",
                    help="with --dry-run: cost-table overrides ('overrides: {row: value}', e.g. tools/profile.py's fit) "
                         "applied after the calibration's fitted constants")
    ap.add_argument("--variants", default="all",
                    help="with --dry-run: the engine variants to rank under (calibration/engine_variants.json): all "
                         "(default: the worst case over them), none (the adopted engine alone), or names")
    ap.add_argument("--configs", default=None, metavar="NAME,...",
                    help="with --dry-run: only these candidate configs")
    ap.add_argument("--shapes", default=None, metavar="M,N,K;...",
                    help="with --dry-run: only these benchmark shapes (e.g. '512,4096,7168;512,3072,7168')")
    ap.add_argument("--any-device", action="store_true",
                    help="skip the SM100 check (tests the orchestration with a stand-in; its numbers say nothing of a B200)")
    args = ap.parse_args(argv)
    args.submission = Path(args.submission).resolve()
    if args.task is None:
        args.task = str(REPO / ("nvfp4_gemm/task.yml" if args.problem == "nvfp4_gemm" else "task.yml"))
    out = dry_run(args) if args.dry_run else tune(args)
    if not args.dry_run:
        print_tune(out)
    stem = ("tune_dryrun" if args.dry_run else "tune") + ("_gemm" if args.problem == "nvfp4_gemm" else "")
    path = Path(args.json or REPO / "build" / f"{stem}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")
    if args.write:
        if not out["chosen"]:
            print("nothing to write: no candidate passed")
            return 1
        chosen = {tuple(ast.literal_eval(s)): c["config_src"] for s, c in out["chosen"].items()}
        text = args.submission.read_text()
        args.submission.write_text(rewrite_table(text, chosen, args.problem))
        print(f"rewrote the config table of {args.submission} for {len(chosen)} shape(s)"
              + (" (from the timed emulator's ranking: timed, not measured)" if args.dry_run else ""))
        if args.problem == "nvfp4_gemm":
            print("now regenerate the submittable file: python tools/gemm_submission.py")
    return 0 if out["chosen"] else 1


if __name__ == "__main__":
    sys.exit(main())
