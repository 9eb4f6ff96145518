"""Performance model of the NVFP4 dual GEMM on a B200: a modeled time per (shape, config).

Every number this module produces is "modeled": arithmetic on the constants below, never a
measurement. It ranks the tuner's candidates where no B200 is available and, given a tuner JSON
with B200 measurements, prints prediction beside measurement so the assumptions can be corrected.

    python tools/model.py                       # benchmark shapes x candidate configs, ranked
    python tools/model.py --calibration         # public B200 measurements: measured, predicted, error
    python tools/model.py --calibration --refit # fit the FITTED constants again on the 'fit' points
    python tools/model.py --compare build/tune.json

Time of one call, as the leaderboard times it (L2 flush, then 50 calls back to back between two events):
  t_call   = max(t_kernel + LAUNCH_GAP_US, dispatch)         host cost hides behind the flush and a longer kernel
  t_kernel = max(SOL, PROLOGUE_US + t_fill + max(t_dram, waves * k_tiles * t_ktile) + t_epilogue_exposed)
  t_ktile  = max(L2->SM bytes / L2_SM_BYTES_PER_CLK, FP4 MMA math, shared-memory traffic / SMEM_BYTES_PER_CLK)
             + KTILE_OVERHEAD_CLK                             per k-tile of 256, on one SM
Shared-memory traffic per k-tile = the bytes TMA writes (the stage) + the bytes the MMAs read (A once per
k-block with the A collector, else once per product; each product's B rows on this SM) + the scales that
tcgen05.cp reads. With N < 128 on one SM this exceeds the MMA's math time (public microbenchmarks: ~128 B/clk).
The FITTED constants come from `--calibration --refit` on tools/calibration_points.json (public B200 results);
the others are assumptions or measurements, each with its source.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make `tools` importable
    sys.path.insert(0, str(REPO))
from tools import preflight  # noqa: E402

CALIBRATION_POINTS = Path(__file__).resolve().parent / "calibration_points.json"

# ---------------------------------------------------------------- the problem's own speed of light
SM_COUNT = 148            # B200 has 148 SMs.
SOL_CLOCK_HZ = 1.5e9      # The problem's SOL table is computed "under 1.5 GHz clock".
# SOL table, compute-bound rows (512x4096x7168 -> 8.714 us, 512x3072x7168 -> 6.535 us): both give
# 2*M*N*K / SOL = 3.450e15 FP4 MAC/s (dual GEMM: two products).
FP4_MACS_PER_S = 2 * 512 * 4096 * 7168 / 8.714e-6
# SOL table, DRAM-bound rows (256x4096x7168 -> 4.708 us for 36.16 MB, 256x3072x4096 -> 2.125 us for 16.32 MB):
# both give 7.68e12 B/s (the public B200 HBM3e figure is 8 TB/s).
DRAM_BW_SOL = 36159488 / 4.708e-6

# ---------------------------------------------------------------- hardware constants (not fitted)
CLOCK_HZ = 1.855e9        # ASSUMPTION: sustained SM clock. NVIDIA's dense FP4 figure for B200 (9 PFLOP/s) is
                          # 16384 FP4 MAC/clk/SM x 148 SMs at 1.855 GHz; its max boost is 1.965 GHz.
MMA_MACS_PER_CLK_SM = 16384  # tcgen05 kind::mxf4nvf4, dense: a 128x256x64 MMA in 128 clocks (see CLOCK_HZ).
SMEM_BYTES_PER_CLK = 128  # Public microbenchmark (SemiAnalysis, "Dissecting Nvidia Blackwell", 2026-03-31):
                          # tcgen05 MMA with both operands in shared memory and N < 128 is bound by shared-
                          # memory bandwidth at ~128 B/clk/SM. Here every smem byte counts against it: TMA
                          # writes, MMA operand reads and tcgen05.cp scale reads.
SMEM_COUNTS_TMA_WRITES = True  # the calibration's choice (MEMORY.md "Model calibration": leave-one-out median
                               # 2.1% / max 13.9% with it, 4.2% / 24.4% with MMA reads alone)
DRAM_EFFICIENCY = 0.85    # ASSUMPTION: fraction of peak HBM bandwidth a streaming TMA kernel sustains.
DRAM_LATENCY_US = 0.8     # ASSUMPTION: first-byte latency of a TMA load from HBM (public pointer-chase
                          # measurements of H100/B200 HBM are ~0.6-0.9 us under load); also Little's law below.
MUFU_PER_CLK_SM = 16      # CUDA C++ Programming Guide throughput table: 16 ex2/rcp results per clock per SM.
MUFU_PER_ELEMENT = 2      # the dual GEMM's epilogue: silu(x)*y = x*y*rcp(1 + ex2(-x*log2e)) = 2 MUFU ops.
TMEM_LD_BYTES_PER_CLK = 512  # ASSUMPTION: tcgen05.ld, 4 sub-partitions x 128 B/clk.
K_TILE = 256              # elements of K per pipeline stage.
SMEM_CAPACITY = 232448    # B200 shared memory per block.
LAUNCH_GAP_US = 1.82      # measured (H200; MEMORY.md "PDL"): per-call time over 50 back-to-back calls minus the
                          # kernel body, probes/pdl.py stand-in with the real host path, grid, cluster and
                          # smem request, no PDL: 1.821 / 1.807 us (128 / 96 CTAs). A B200's may differ.
LAUNCH_GAP_PDL_US = 0.78  # measured (H200, same run) with programmatic dependent launch: 0.781 / 0.739 us.
DISPATCH_US = 6.3         # MEMORY.md "Dispatch" (measured, H200, DSL 4.3.5): median host cost of one
                          # submission.custom_kernel call through TVM-FFI (probes/dispatch.py, stub body).
                          # The leaderboard's long L2 flush hides it; the model keeps it as a floor.


@dataclass(frozen=True)
class Fitted:
    """The constants no public figure pins down, fitted on tools/calibration_points.json ('fit' points only,
    `python tools/model.py --calibration --refit`); FIT_BOUNDS holds their physical ranges."""
    l2_sm_bytes_per_clk: float = 64.0   # sustained L2->SM (TMA into smem) bytes per clock per SM
    prologue_us: float = 0.5            # CTA launch, barrier init, TMEM alloc, descriptor prefetch, last MMA drain
    store_bytes_per_clk: float = 32.0   # epilogue's register->global fp16 stores, bytes per clock per SM
    ktile_overhead_clk: float = 0.0     # per k-tile cost not hidden by the pipeline (barrier round trip, issue)


FIT_BOUNDS = {"l2_sm_bytes_per_clk": (16.0, 256.0), "prologue_us": (0.0, 5.0),
              "store_bytes_per_clk": (4.0, 256.0), "ktile_overhead_clk": (0.0, 1000.0)}
# `--calibration --refit` (13 'fit' points, gap LAUNCH_GAP_US): prologue 1.66 us, k-tile overhead 0, and the L2->SM
# and store rates at their upper bounds: no point is bound by them, so the data only bound them from below. The
# values kept are the lowest that leave the fit's loss within 1% of its minimum (L2 >= 202, stores >= 78 B/clk;
# L2 = 64 B/clk raises the loss by 11%), with the prologue refit for them. MEMORY.md "Model calibration".
FITTED = Fitted(l2_sm_bytes_per_clk=202.0, prologue_us=1.59, store_bytes_per_clk=78.0, ktile_overhead_clk=0.0)

# SOL and the best public entry per benchmark shape (microseconds).
SOL_US = {(256, 4096, 7168, 1): 4.708, (512, 4096, 7168, 1): 8.714, (256, 3072, 4096, 1): 2.125, (512, 3072, 7168, 1): 6.535}
PUBLIC_BEST_US = {(256, 4096, 7168, 1): 12.4, (512, 4096, 7168, 1): 16.4, (256, 3072, 4096, 1): 9.43, (512, 3072, 7168, 1): 16.3}
SOL_GEOMEAN_US = 4.886
PUBLIC_BEST_GEOMEAN_US = 13.30


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def unique_bytes(m, n, k, l=1, n_products=2) -> int:
    """DRAM bytes if every input byte is read once and C written once (the SOL table's 'bytes moved')."""
    return l * (m * k // 2 + n_products * n * k // 2 + (m + n_products * n) * (k // 16) + m * n * 2)


def sol_us(m, n, k, l=1, n_products=2) -> float:
    """The problem's speed of light: max(FP4 math, DRAM) with the SOL table's own rates."""
    return max(n_products * m * n * k * l / FP4_MACS_PER_S, unique_bytes(m, n, k, l, n_products) / DRAM_BW_SOL) * 1e6


@dataclass(frozen=True)
class Geometry:
    """A design in the model's terms.

    mma_m/mma_n: one MMA (M 256 = a 2-CTA pair); cluster; split_k; ab_stages/acc_stages from the plan;
    n_products: 2 for the dual GEMM (B1 and B2), 1 for a single GEMM; a_reuse: A stays in the MMA's A collector
    between the products (collector::a::fill/lastuse) instead of being re-read from smem; epi_pipelined: the
    epilogue moves narrow column steps so tcgen05.ld, math and stores overlap (else they add up);
    persistent: CTAs loop over tiles (else one tile per CTA, grid = tiles).
    """
    mma_m: int = 128
    mma_n: int = 128
    use_2cta: bool = False
    cluster: tuple = (1, 1)
    split_k: int = 1
    ab_stages: int | None = None
    acc_stages: int | None = None
    n_products: int = 2
    a_reuse: bool = False
    epi_pipelined: bool = True
    persistent: bool = True


def geometry(cfg, plan: dict | None = None) -> Geometry:
    """Duck-typed from submission.KernelConfig (contract fields; optional knobs where the kernel has them)."""
    plan = plan or {}
    return Geometry(mma_m=cfg.mma_tile_mn[0], mma_n=cfg.mma_tile_mn[1], use_2cta=bool(cfg.use_2cta),
                    cluster=tuple(getattr(cfg, "cluster_mn", (1, 1))), split_k=int(getattr(cfg, "split_k", 1) or 1),
                    ab_stages=plan.get("ab_stages"), acc_stages=plan.get("acc_stages"),
                    # submission.KernelConfig.a_collector: B1's MMA fills the A collector, B2's takes A from it
                    a_reuse=bool(getattr(cfg, "a_collector", getattr(cfg, "a_reuse", False))))


def launch_gap_us(cfg=None) -> float:
    """The GPU-side gap charged per call: with PDL where the config enables it (MEMORY.md "PDL")."""
    return LAUNCH_GAP_PDL_US if getattr(cfg, "pdl", False) else LAUNCH_GAP_US


def predict(m, n, k, l, g: Geometry, dispatch_us: float = DISPATCH_US, fitted: Fitted | None = None,
            gap_us: float | None = None) -> dict:
    """Modeled B200 time of one call for shape (m, n, k, l) with design g; all parts in microseconds."""
    f = fitted or FITTED
    gap_us = LAUNCH_GAP_US if gap_us is None else gap_us
    clk = 1.0 / CLOCK_HZ
    ctas_per_unit = 2 if g.use_2cta else 1
    cta_m = g.mma_m // ctas_per_unit                              # A rows (and C rows) each CTA owns
    b_rows = g.mma_n // ctas_per_unit                             # 2-CTA: each CTA holds half of each B tile
    sfb_rows = -(-g.mma_n // 128) * 128                           # scales of B move in whole 128-row atoms
    p = g.n_products
    k_unit = k // g.split_k
    k_tiles = k_unit // K_TILE
    units = (m // g.mma_m) * (n // g.mma_n) * l * g.split_k       # work units (one per CTA or CTA pair)
    csize = max(ctas_per_unit, g.cluster[0] * g.cluster[1])     # a 2-CTA pair is at least a 2-CTA cluster
    slots = (SM_COUNT // csize) * (csize // ctas_per_unit)       # units in flight at once
    waves = math.ceil(units / slots)
    sms_used = min(units, slots) * ctas_per_unit
    sf_bytes = (cta_m + p * sfb_rows) * K_TILE // 16
    stage_bytes = cta_m * K_TILE // 2 + p * b_rows * K_TILE // 2 + sf_bytes
    ab_stages = g.ab_stages or max(1, min(8, (SMEM_CAPACITY - 8192) // stage_bytes))
    acc_stages = g.acc_stages or 1
    # ---- one k-tile on one SM, in clocks
    # L2 -> SM, with Little's law: too few stages in flight cannot cover the load latency.
    l2_clk = max(stage_bytes / f.l2_sm_bytes_per_clk, DRAM_LATENCY_US * 1e-6 * CLOCK_HZ / ab_stages)
    mma_clk = p * cta_m * g.mma_n * K_TILE / MMA_MACS_PER_CLK_SM
    kblocks = K_TILE // 64
    a_reads = 1 if g.a_reuse else p
    mma_smem_reads = kblocks * 32 * (a_reads * cta_m + p * b_rows)  # 32 bytes of K per row per k-block
    smem_clk = ((stage_bytes if SMEM_COUNTS_TMA_WRITES else 0) + mma_smem_reads + sf_bytes) / SMEM_BYTES_PER_CLK
    ktile_clk = max(l2_clk, mma_clk, smem_clk) + f.ktile_overhead_clk
    t_reduce = 0.0
    if g.split_k > 1:  # partial fp32 accumulators shipped to the reducing CTA
        t_reduce = p * cta_m * g.mma_n * 4 / f.l2_sm_bytes_per_clk * clk
    t_tile = k_tiles * ktile_clk * clk + t_reduce
    t_dram = unique_bytes(m, n, k, l, p) / (DRAM_BW_SOL * DRAM_EFFICIENCY)
    t_main = max(t_dram, waves * t_tile)
    t_fill = DRAM_LATENCY_US * 1e-6 + stage_bytes / f.l2_sm_bytes_per_clk * clk
    # ---- epilogue of one tile: TMEM loads, MUFU math (dual GEMM only), fp16 stores
    elems = cta_m * g.mma_n
    parts = (elems * 4 * p / TMEM_LD_BYTES_PER_CLK, elems * MUFU_PER_ELEMENT / MUFU_PER_CLK_SM if p == 2 else 0.0,
             elems * 2 / f.store_bytes_per_clk)
    t_epi = (max(parts) if g.epi_pipelined else sum(parts)) * clk
    # With >= 2 accumulator stages in a persistent kernel the next tile's mainloop overlaps this epilogue.
    tiles_per_cta = waves if g.split_k == 1 else math.ceil(waves / g.split_k)
    t_epi_exposed = t_epi * (1 if (acc_stages >= 2 and g.persistent) else tiles_per_cta)
    t_body = f.prologue_us * 1e-6 + t_fill + t_main + t_epi_exposed
    t_sol = sol_us(m, n, k, l, p) * 1e-6
    t_kernel = max(t_body, t_sol)                                # the problem's own floor
    t_call = max(t_kernel + gap_us * 1e-6, dispatch_us * 1e-6)
    us = lambda x: round(x * 1e6, 3)  # noqa: E731
    parts_main = (("dram", t_dram), ("l2->sm", waves * k_tiles * l2_clk * clk), ("mma", waves * k_tiles * mma_clk * clk),
                  ("smem", waves * k_tiles * smem_clk * clk))
    bound = max(parts_main, key=lambda q: q[1])[0]
    if t_body < t_sol:
        bound = "sol"
    if t_call == dispatch_us * 1e-6:
        bound = "dispatch"
    return {"label": "modeled", "units": units, "waves": waves, "sms_used": sms_used, "ab_stages": ab_stages,
            "acc_stages": acc_stages, "bytes_per_sm": stage_bytes * k_tiles * waves, "dram_us": us(t_dram),
            "l2sm_us": us(parts_main[1][1]), "mma_us": us(parts_main[2][1]), "smem_us": us(parts_main[3][1]),
            "fill_us": us(t_fill + f.prologue_us * 1e-6), "epilogue_us": us(t_epi_exposed), "kernel_us": us(t_kernel),
            "call_us": us(t_call), "sol_us": round(t_sol * 1e6, 3), "bound": bound}


# ---------------------------------------------------------------- calibration on public B200 measurements
def load_points(path: Path = CALIBRATION_POINTS) -> list[dict]:
    return json.loads(Path(path).read_text())["points"]


def point_geometry(pt: dict) -> Geometry:
    d = dict(pt["design"])
    d["cluster"] = tuple(d.get("cluster", (1, 1)))
    names = {f.name for f in fields(Geometry)}
    return Geometry(**{key: v for key, v in d.items() if key in names})


def predict_point(pt: dict, fitted: Fitted | None = None) -> float:
    """Modeled time of a calibration point, timed as the leaderboard does (the flush hides host cost)."""
    return predict(*pt["shape"], point_geometry(pt), dispatch_us=0.0, fitted=fitted)["call_us"]


def _loss(fitted: Fitted, pts) -> float:
    return sum(math.log(predict_point(pt, fitted) / pt["measured_us"]) ** 2 for pt in pts)


def fit(pts, start: Fitted | None = None, iters: int = 600) -> Fitted:
    """Least squares on log(predicted / measured) over pts; Nelder-Mead in the unit box of FIT_BOUNDS."""
    names = list(FIT_BOUNDS)
    lo = [FIT_BOUNDS[n][0] for n in names]
    hi = [FIT_BOUNDS[n][1] for n in names]
    start = start or Fitted()

    def unpack(x):
        return Fitted(**{n: lo[i] + (hi[i] - lo[i]) * min(1.0, max(0.0, x[i])) for i, n in enumerate(names)})

    def cost(x):
        return _loss(unpack(x), pts)

    x_start = [(getattr(start, n) - lo[i]) / (hi[i] - lo[i]) for i, n in enumerate(names)]
    best = None
    # several starts (the given constants, then the box's middle and quarter points): the loss has flat
    # directions where a constant never binds, and Nelder-Mead can stall on them
    for x0 in (x_start, [0.5] * len(names), [0.25] * len(names), [0.75] * len(names)):
        simplex = [x0] + [[x0[j] + (0.15 if j == i else 0.0) for j in range(len(x0))] for i in range(len(x0))]
        vals = [cost(x) for x in simplex]
        for _ in range(iters):
            order = sorted(range(len(simplex)), key=vals.__getitem__)
            simplex, vals = [simplex[i] for i in order], [vals[i] for i in order]
            centroid = [sum(x[j] for x in simplex[:-1]) / (len(simplex) - 1) for j in range(len(x0))]
            refl = [c + (c - w) for c, w in zip(centroid, simplex[-1])]
            fr = cost(refl)
            if fr < vals[0]:
                exp = [c + 2 * (c - w) for c, w in zip(centroid, simplex[-1])]
                fe = cost(exp)
                simplex[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
            elif fr < vals[-2]:
                simplex[-1], vals[-1] = refl, fr
            else:
                con = [c + 0.5 * (w - c) for c, w in zip(centroid, simplex[-1])]
                fc = cost(con)
                if fc < vals[-1]:
                    simplex[-1], vals[-1] = con, fc
                else:
                    simplex = [simplex[0]] + [[b + 0.5 * (x - b) for b, x in zip(simplex[0], s)] for s in simplex[1:]]
                    vals = [vals[0]] + [cost(s) for s in simplex[1:]]
        i = min(range(len(vals)), key=vals.__getitem__)
        if best is None or vals[i] < best[1]:
            best = (simplex[i], vals[i])
    return unpack(best[0])


def _errors(rows):
    errs = [abs(r["error"]) for r in rows]
    return {"n": len(errs), "median_abs_error": round(statistics.median(errs), 4) if errs else None,
            "max_abs_error": round(max(errs), 4) if errs else None}


def calibration(refit: bool = False, loo: bool = True, path: Path = CALIBRATION_POINTS) -> dict:
    """Measured vs predicted on every calibration point: fit and held-out errors, leave-one-out errors."""
    pts = load_points(path)
    fit_pts = [p for p in pts if p["split"] == "fit"]
    fitted = fit(fit_pts, FITTED) if refit else FITTED
    rows = []
    for pt in pts:
        pred = predict_point(pt, fitted)
        rows.append({"id": pt["id"], "split": pt["split"], "measured_us": pt["measured_us"], "predicted_us": pred,
                     "error": round(pred / pt["measured_us"] - 1, 4), "bound": predict(*pt["shape"], point_geometry(pt), 0.0, fitted)["bound"]})
    res = {"label": "measured (B200, public) vs modeled", "fitted": fitted.__dict__, "refit": refit, "rows": rows,
           "fit": _errors([r for r in rows if r["split"] == "fit"]),
           "holdout": _errors([r for r in rows if r["split"] == "holdout"])}
    if loo:  # leave one out: refit on all other points, predict the one left out
        loo_rows = []
        for i, pt in enumerate(pts):
            f_i = fit(pts[:i] + pts[i + 1:], fitted, iters=200)
            loo_rows.append({"id": pt["id"], "error": round(predict_point(pt, f_i) / pt["measured_us"] - 1, 4)})
        res["leave_one_out"] = {**_errors(loo_rows), "rows": loo_rows}
    return res


def print_calibration(res: dict, out=print) -> None:
    out(f"calibration: {res['label']} (points: tools/calibration_points.json)")
    out("fitted constants" + (" (refit on the 'fit' points now)" if res["refit"] else " (tools/model.py FITTED)") + ": "
        + ", ".join(f"{k}={v:.4g}" for k, v in res["fitted"].items()))
    out(f"{'point':34} {'split':8} {'measured':>9} {'predicted':>9} {'error':>7}  bound")
    loo = {r["id"]: r["error"] for r in res.get("leave_one_out", {}).get("rows", [])}
    for r in res["rows"]:
        extra = f"  (leave-one-out {loo[r['id']]:+.1%})" if r["id"] in loo else ""
        out(f"{r['id']:34} {r['split']:8} {r['measured_us']:9.2f} {r['predicted_us']:9.2f} {r['error']:+7.1%}  {r['bound']}{extra}")
    for name in ("fit", "holdout", "leave_one_out"):
        e = res.get(name)
        if e:
            out(f"{name:14} n={e['n']:2d}  median |error| {e['median_abs_error']:.1%}  max |error| {e['max_abs_error']:.1%}")


# ---------------------------------------------------------------- using the submission
def load_submission(path: Path):
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")  # plan() and the DSL import need no GPU with this set
    return preflight.load_submission(path)


def plan_of(sub, cfg) -> dict | None:
    try:
        return dict(sub.DualGemmKernel(cfg).plan())
    except Exception:
        return None


def predict_config(sub, shape, cfg, dispatch_us=DISPATCH_US) -> dict:
    """The tuner's prediction for one config of the submission (its plan's stages, its PDL setting)."""
    return predict(*shape, geometry(cfg, plan_of(sub, cfg)), dispatch_us, gap_us=launch_gap_us(cfg))


def rank(sub, shape, dispatch_us=DISPATCH_US) -> list[tuple]:
    """[(modeled call us, config, prediction)] for every candidate config of a shape, fastest first."""
    rows = []
    for cfg in sub.candidate_configs(*shape):
        p = predict_config(sub, shape, cfg, dispatch_us)
        rows.append((p["call_us"], cfg, p))
    return sorted(rows, key=lambda r: (r[0], r[1].name))


def benchmark_shapes(task: Path) -> list[tuple]:
    import yaml
    return [(int(b["m"]), int(b["n"]), int(b["k"]), int(b.get("l", 1))) for b in yaml.safe_load(task.read_text())["benchmarks"]]


def report(sub, shapes, dispatch_us=DISPATCH_US, out=print) -> dict:
    cols = ["shape", "config", "units", "waves", "SMs", "dram", "l2->sm", "mma", "smem", "fill", "epi", "kernel", "call", "bound"]
    names = [c.name for s in shapes for c in sub.candidate_configs(*s)] + [sub.config_for(*s).name for s in shapes]
    widths = (20, max(map(len, names)) + 2, 5, 5, 4, 6, 7, 6, 6, 5, 5, 7, 6, 8)
    out("modeled B200 times (us; constants and their sources in tools/model.py; * = submission's config_for)")
    out(" ".join(c.ljust(w) for c, w in zip(cols, widths)))
    res = {"label": "modeled", "dispatch_us": dispatch_us, "shapes": []}
    for shape in shapes:
        chosen = sub.config_for(*shape)
        ranked = rank(sub, shape, dispatch_us)
        if chosen not in [c for _, c, _ in ranked]:
            ranked.append((None, chosen, predict_config(sub, shape, chosen, dispatch_us)))
        for _, cfg, p in ranked:
            mark = "*" if cfg == chosen else " "
            vals = [str(shape[:3]), mark + cfg.name, p["units"], p["waves"], p["sms_used"], p["dram_us"], p["l2sm_us"],
                    p["mma_us"], p["smem_us"], p["fill_us"], p["epilogue_us"], p["kernel_us"], p["call_us"], p["bound"]]
            out(" ".join(str(v).ljust(w) for v, w in zip(vals, widths)))
        best = ranked[0]
        chosen_p = next(p for _, c, p in ranked if c == chosen)
        res["shapes"].append({"shape": list(shape), "chosen": chosen.name, "chosen_us": chosen_p["call_us"],
                              "best": best[1].name, "best_us": best[2]["call_us"], "sol_us": chosen_p["sol_us"],
                              "public_best_us": PUBLIC_BEST_US.get(tuple(shape)),
                              "ranking": [{"config": c.name, **p} for _, c, p in ranked]})
    g_chosen = geomean(s["chosen_us"] for s in res["shapes"])
    g_best = geomean(s["best_us"] for s in res["shapes"])
    g_sol = geomean(s["sol_us"] for s in res["shapes"])
    res.update(geomean_chosen_us=round(g_chosen, 3), geomean_best_us=round(g_best, 3), geomean_sol_us=round(g_sol, 3))
    out(f"geomean: modeled {g_chosen:.2f} us with the submission's configs, {g_best:.2f} us with the model's best; "
        f"speed of light {g_sol:.3f} us (SOL table: {SOL_GEOMEAN_US}); best public entry {PUBLIC_BEST_GEOMEAN_US} us "
        "(measured, B200, gau-nernst v2); model error on public B200 points: python tools/model.py --calibration")
    return res


def compare(sub, tune_json: Path, dispatch_us=DISPATCH_US, out=print) -> list[dict]:
    """Prediction beside the tuner's B200 measurement for every timed (shape, config)."""
    data = json.loads(tune_json.read_text())
    by_name = {c.name: c for c in sub.TUNE_SPACE}
    rows = []
    out(f"modeled vs measured ({data.get('device', '?')}; tuner run {data.get('time', '?')})")
    out(f"{'shape':20} {'config':22} modeled  measured  measured/modeled")
    for r in data.get("results", []):
        if r.get("mean_us") is None or r["config"] not in by_name:
            continue
        shape = tuple(r["shape"])
        cfg = by_name[r["config"]]
        p = predict_config(sub, shape, cfg, dispatch_us)
        rows.append({"shape": list(shape), "config": r["config"], "modeled_us": p["call_us"], "measured_us": r["mean_us"],
                     "ratio": round(r["mean_us"] / p["call_us"], 3)})
        out(f"{str(shape[:3]):20} {r['config']:22} {p['call_us']:7.2f}  {r['mean_us']:8.2f}  {rows[-1]['ratio']:.2f}")
    if rows:
        out(f"geomean measured/modeled: {geomean(x['ratio'] for x in rows):.2f} (1.0 = the model's constants are right)")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Modeled B200 times per benchmark shape and config")
    ap.add_argument("--submission", default=str(REPO / "submission.py"))
    ap.add_argument("--task", default=str(REPO / "task.yml"))
    ap.add_argument("--dispatch-us", type=float, default=DISPATCH_US, help="measured per-call host cost (MEMORY.md)")
    ap.add_argument("--compare", default=None, help="tuner JSON with B200 measurements")
    ap.add_argument("--calibration", action="store_true", help="measured vs predicted on public B200 results")
    ap.add_argument("--refit", action="store_true", help="with --calibration: fit the constants again on the 'fit' points")
    ap.add_argument("--no-loo", action="store_true", help="with --calibration: skip the leave-one-out refits")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.calibration:
        res = calibration(refit=args.refit, loo=not args.no_loo)
        print_calibration(res)
    else:
        sub = load_submission(Path(args.submission).resolve())
        res = report(sub, benchmark_shapes(Path(args.task)), args.dispatch_us)
        if args.compare:
            res["compare"] = compare(sub, Path(args.compare), args.dispatch_us)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
