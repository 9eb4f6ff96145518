"""Performance model of the NVFP4 dual GEMM on a B200: a modeled time per (shape, config).

Every number this module produces is "modeled": arithmetic on the constants below, never a
measurement. It ranks the tuner's candidates where no B200 is available and, given a tuner JSON
with B200 measurements, prints prediction beside measurement so the assumptions can be corrected.

    python tools/model.py                       # benchmark shapes x candidate configs, ranked
    python tools/model.py --compare build/tune.json

Time of one custom_kernel call, as the leaderboard times it (50 calls back to back, FACTS §2):
  t_call   = max(t_kernel + LAUNCH_GAP_US, DISPATCH_US)        host cost hides behind a longer kernel
  t_kernel = PROLOGUE_US + t_fill + max(t_dram, waves * t_tile) + t_epilogue_exposed
  t_tile   = max(bytes landing in one SM's smem / per-SM L2->SM bandwidth, MMA time on one SM)
By construction t_kernel >= the problem's speed of light (same FP4 rate and DRAM bandwidth as its table).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make `tools` importable
    sys.path.insert(0, str(REPO))
from tools import preflight  # noqa: E402

# ---------------------------------------------------------------- constants and where they come from
SM_COUNT = 148            # FACTS §1: B200 has 148 SMs.
CLOCK_HZ = 1.5e9          # FACTS §1: the problem's SOL is computed "under 1.5 GHz clock". ASSUMPTION that the
                          # scored card runs at it; B200 boost clocks are higher, which would make the
                          # compute-bound parts faster than modeled.
# FACTS §1 SOL table: its compute-bound rows (512x4096x7168 -> 8.714 us, 512x3072x7168 -> 6.535 us) both give
# 2*M*N*K / SOL = 3.450e15 FP4 MAC/s, i.e. 15541 MAC/clk/SM at 148 SMs x 1.5 GHz. The architectural
# 16384 MAC/clk/SM would put those rows at 8.27 / 6.20 us, below the table; the model uses the
# table's rate so that it never predicts below the problem's own SOL.
FP4_MACS_PER_S = 2 * 512 * 4096 * 7168 / 8.714e-6
FP4_MACS_PER_CLK_SM = FP4_MACS_PER_S / (SM_COUNT * CLOCK_HZ)
# FACTS §1 SOL table: its DRAM-bound rows (256x4096x7168 -> 4.708 us for 36.16 MB, 256x3072x4096 ->
# 2.125 us for 16.32 MB) both give 7.68e12 B/s (the public B200 HBM3e figure is 8 TB/s).
DRAM_BW_SOL = 36159488 / 4.708e-6
DRAM_EFFICIENCY = 0.85    # ASSUMPTION: fraction of peak HBM bandwidth a streaming TMA kernel sustains
                          # (typical of measured copy kernels on H100/B200); calibrate with --compare.
L2_SM_BYTES_PER_CLK = 64  # ASSUMPTION: sustained L2->SM (TMA into smem) bytes per clock per SM. No public
                          # B200 figure found; 64 B/clk is the Hopper-class per-SM fill rate. The public
                          # entries' times (FACTS §4) are consistent with it; calibrate with --compare.
DRAM_LATENCY_US = 0.8     # ASSUMPTION: first-byte latency of a TMA load from HBM (public pointer-chase
                          # measurements of H100/B200 HBM are ~0.6-0.9 us under load).
PROLOGUE_US = 0.5         # ASSUMPTION: CTA launch, barrier init, TMEM alloc, descriptor prefetch.
LAUNCH_GAP_US = 1.0       # ASSUMPTION: GPU-side gap between two back-to-back kernels (no PDL).
DISPATCH_US = 6.3         # MEMORY.md "Dispatch" (measured, H200, DSL 4.3.5): median host cost of one
                          # submission.custom_kernel call through TVM-FFI (tools/dispatch_probe.py, stub body).
                          # The leaderboard's long L2 flush hides it (also there); the model keeps it as a floor.
MUFU_PER_CLK_SM = 16      # CUDA C++ Programming Guide, arithmetic instruction throughput table: 16 results
                          # per clock per SM for exp2/rcp on cc 5.x-9.0 (ASSUMPTION: the same on cc 10.0).
MUFU_PER_ELEMENT = 2      # ASSUMPTION about the epilogue: silu(x) = x * rcp(1 + ex2(-x*log2e)) = 2 MUFU ops.
K_TILE = 256              # elements of K per pipeline stage (FACTS §1: K % 256 == 0; template mma tiler K).
SMEM_CAPACITY = 232448    # CONTRACT / FACTS: B200 shared memory per block.

# FACTS §1 and §4 (per shape, microseconds): speed of light and the best public entry (gau-nernst v2).
SOL_US = {(256, 4096, 7168, 1): 4.708, (512, 4096, 7168, 1): 8.714, (256, 3072, 4096, 1): 2.125, (512, 3072, 7168, 1): 6.535}
PUBLIC_BEST_US = {(256, 4096, 7168, 1): 12.4, (512, 4096, 7168, 1): 16.4, (256, 3072, 4096, 1): 9.43, (512, 3072, 7168, 1): 16.3}
SOL_GEOMEAN_US = 4.886
PUBLIC_BEST_GEOMEAN_US = 13.30


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def unique_bytes(m, n, k, l=1) -> int:
    """DRAM bytes if every input byte is read once and C written once (FACTS §1 'bytes moved')."""
    return l * (m * k // 2 + 2 * n * k // 2 + (m + 2 * n) * (k // 16) + m * n * 2)


def sol_us(m, n, k, l=1) -> float:
    """The problem's speed of light: max(FP4 math, DRAM) with the table's own rates (reproduces FACTS §1)."""
    return max(2 * m * n * k * l / FP4_MACS_PER_S, unique_bytes(m, n, k, l) / DRAM_BW_SOL) * 1e6


@dataclass(frozen=True)
class Geometry:
    """What the model needs of a config: MMA tile, 2-CTA, cluster, split-K and the plan's stages."""
    mma_m: int = 128
    mma_n: int = 128
    use_2cta: bool = False
    cluster: tuple = (1, 1)
    split_k: int = 1
    ab_stages: int | None = None
    acc_stages: int | None = None


def geometry(cfg, plan: dict | None = None) -> Geometry:
    """Duck-typed from submission.KernelConfig (contract fields; split_k if the kernel adds it)."""
    plan = plan or {}
    return Geometry(mma_m=cfg.mma_tile_mn[0], mma_n=cfg.mma_tile_mn[1], use_2cta=bool(cfg.use_2cta),
                    cluster=tuple(getattr(cfg, "cluster_mn", (1, 1))), split_k=int(getattr(cfg, "split_k", 1) or 1),
                    ab_stages=plan.get("ab_stages"), acc_stages=plan.get("acc_stages"))


def predict(m, n, k, l, g: Geometry, dispatch_us: float = DISPATCH_US) -> dict:
    """Modeled B200 time of one call for shape (m, n, k, l) with geometry g; all parts in microseconds."""
    bw_sm = L2_SM_BYTES_PER_CLK * CLOCK_HZ                        # bytes/s into one SM
    ctas_per_unit = 2 if g.use_2cta else 1
    cta_m = g.mma_m // ctas_per_unit                              # A rows (and C rows) each CTA owns
    b_rows = g.mma_n // ctas_per_unit                             # 2-CTA: each CTA holds half of each B tile
    k_unit = k // g.split_k
    units = (m // g.mma_m) * (n // g.mma_n) * l * g.split_k       # work units (one per CTA or CTA pair)
    csize = max(ctas_per_unit, g.cluster[0] * g.cluster[1])     # a 2-CTA pair is at least a 2-CTA cluster
    slots = (SM_COUNT // csize) * (csize // ctas_per_unit)       # units in flight at once
    waves = math.ceil(units / slots)
    sms_used = min(units, slots) * ctas_per_unit
    stage_bytes = cta_m * K_TILE // 2 + 2 * b_rows * K_TILE // 2 + (cta_m + 2 * b_rows) * K_TILE // 16
    ab_stages = g.ab_stages or max(1, min(8, (SMEM_CAPACITY - 8192) // stage_bytes))
    acc_stages = g.acc_stages or 1
    # Little's law: with too few stages in flight the SM cannot cover the memory latency.
    bw_eff = min(bw_sm, ab_stages * stage_bytes / (DRAM_LATENCY_US * 1e-6))
    cta_bytes = stage_bytes * (k_unit // K_TILE)
    t_load = cta_bytes / bw_eff
    t_mma = 2 * cta_m * g.mma_n * k_unit / (FP4_MACS_PER_CLK_SM * CLOCK_HZ)
    t_reduce = 0.0
    if g.split_k > 1:  # partial fp32 accumulators (two of them) shipped to the reducing CTA
        t_reduce = 2 * cta_m * g.mma_n * 4 / bw_sm
    t_tile = max(t_load, t_mma) + t_reduce
    t_dram = unique_bytes(m, n, k, l) / (DRAM_BW_SOL * DRAM_EFFICIENCY)
    t_main = max(t_dram, waves * t_tile)
    t_fill = DRAM_LATENCY_US * 1e-6 + stage_bytes / bw_sm
    elems = cta_m * g.mma_n
    t_epi = max(elems * MUFU_PER_ELEMENT / (MUFU_PER_CLK_SM * CLOCK_HZ), elems * 2 / bw_sm)
    # With >= 2 accumulator stages the next tile's mainloop overlaps this tile's epilogue.
    tiles_per_cta = waves if g.split_k == 1 else math.ceil(waves / g.split_k)
    t_epi_exposed = t_epi * (1 if acc_stages >= 2 else tiles_per_cta)
    t_kernel = PROLOGUE_US * 1e-6 + t_fill + t_main + t_epi_exposed
    t_call = max(t_kernel + LAUNCH_GAP_US * 1e-6, dispatch_us * 1e-6)
    us = lambda x: round(x * 1e6, 3)
    bound = max((("dram", t_dram), ("l2->sm", waves * t_load), ("mma", waves * t_mma)), key=lambda p: p[1])[0]
    if t_call == dispatch_us * 1e-6:
        bound = "dispatch"
    return {"label": "modeled", "units": units, "waves": waves, "sms_used": sms_used, "ab_stages": ab_stages,
            "acc_stages": acc_stages, "bytes_per_sm": cta_bytes * waves, "dram_us": us(t_dram),
            "l2sm_us": us(waves * t_load), "mma_us": us(waves * t_mma), "fill_us": us(t_fill + PROLOGUE_US * 1e-6),
            "epilogue_us": us(t_epi_exposed), "kernel_us": us(t_kernel), "call_us": us(t_call),
            "sol_us": round(sol_us(m, n, k, l), 3), "bound": bound}


# ---------------------------------------------------------------- using the submission
def load_submission(path: Path):
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")  # plan() and the DSL import need no GPU with this set
    return preflight.load_submission(path)


def plan_of(sub, cfg) -> dict | None:
    try:
        return dict(sub.DualGemmKernel(cfg).plan())
    except Exception:
        return None


def rank(sub, shape, dispatch_us=DISPATCH_US) -> list[tuple]:
    """[(modeled call us, config, prediction)] for every candidate config of a shape, fastest first."""
    rows = []
    for cfg in sub.candidate_configs(*shape):
        p = predict(*shape, geometry(cfg, plan_of(sub, cfg)), dispatch_us)
        rows.append((p["call_us"], cfg, p))
    return sorted(rows, key=lambda r: (r[0], r[1].name))


def benchmark_shapes(task: Path) -> list[tuple]:
    import yaml
    return [(int(b["m"]), int(b["n"]), int(b["k"]), int(b.get("l", 1))) for b in yaml.safe_load(task.read_text())["benchmarks"]]


def report(sub, shapes, dispatch_us=DISPATCH_US, out=print) -> dict:
    cols = ["shape", "config", "units", "waves", "SMs", "dram", "l2->sm", "mma", "fill", "epi", "kernel", "call", "bound"]
    names = [c.name for s in shapes for c in sub.candidate_configs(*s)] + [sub.config_for(*s).name for s in shapes]
    widths = (20, max(map(len, names)) + 2, 5, 5, 4, 6, 7, 6, 5, 5, 7, 6, 8)
    out("modeled B200 times (us; constants and their sources in tools/model.py; * = submission's config_for)")
    out(" ".join(c.ljust(w) for c, w in zip(cols, widths)))
    res = {"label": "modeled", "dispatch_us": dispatch_us, "shapes": []}
    for shape in shapes:
        chosen = sub.config_for(*shape)
        ranked = rank(sub, shape, dispatch_us)
        if chosen not in [c for _, c, _ in ranked]:
            ranked.append((None, chosen, predict(*shape, geometry(chosen, plan_of(sub, chosen)), dispatch_us)))
        for _, cfg, p in ranked:
            mark = "*" if cfg == chosen else " "
            vals = [str(shape[:3]), mark + cfg.name, p["units"], p["waves"], p["sms_used"], p["dram_us"], p["l2sm_us"],
                    p["mma_us"], p["fill_us"], p["epilogue_us"], p["kernel_us"], p["call_us"], p["bound"]]
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
        f"speed of light {g_sol:.3f} us (FACTS §1: {SOL_GEOMEAN_US}); best public entry {PUBLIC_BEST_GEOMEAN_US} us (measured, B200, FACTS §4)")
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
        p = predict(*shape, geometry(cfg, plan_of(sub, cfg)), dispatch_us)
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
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
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
