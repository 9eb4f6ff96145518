"""The problem's speed of light per shape, the benchmark shapes, and the best public results.

The speed of light is the leaderboard's own (task.yml's `sol_us`, "max(FP4 Tensor Core math throughput, DRAM memory
throughput) of B200 ... under 1.5Ghz clock", docs/leaderboard.md §2), recomputed here from first principles: FP4 MACs
over the math rate, unique bytes (every input byte read once, C written once) over the DRAM rate, with the two rates
the table itself implies. Nothing here predicts a kernel's time: the timed emulator does that
(`tools/emulate.py --timing`, `tools/tune.py --dry-run`).
"""
from __future__ import annotations

import math
from pathlib import Path

# The SOL table's compute-bound rows (512x4096x7168 -> 8.714 us, 512x3072x7168 -> 6.535 us) both give
# 2*M*N*K / SOL = 3.450e15 FP4 MAC/s (dual GEMM: two products), i.e. about 15.5k MAC/clk/SM on 148 SMs at 1.5 GHz.
FP4_MACS_PER_S = 2 * 512 * 4096 * 7168 / 8.714e-6
# Its DRAM-bound rows (256x4096x7168 -> 4.708 us for 36.16 MB, 256x3072x4096 -> 2.125 us for 16.32 MB) both give
# 7.68e12 B/s (the public B200 HBM3e figure is 8 TB/s).
DRAM_BW_SOL = 36159488 / 4.708e-6

SOL_GEOMEAN_US = 4.886  # geometric mean of task.yml's four benchmark sol_us (docs/leaderboard.md §2)
# The best public entry per benchmark shape: gau-nernst v2 (2-SM MMA), measured (B200, GPU MODE leaderboard),
# docs/leaderboard.md §7.
PUBLIC_BEST_US = {(256, 4096, 7168, 1): 12.4, (512, 4096, 7168, 1): 16.4, (256, 3072, 4096, 1): 9.43,
                  (512, 3072, 7168, 1): 16.3}
PUBLIC_BEST_GEOMEAN_US = 13.30

# nvfp4_gemm (one product, docs/leaderboard.md §9): its speed of light (nvfp4_gemm/task.yml, from the leaderboard's
# task.yml description: 8.994 / 2.354 / 1.333 us, geomean 3.04; each DRAM-bound at the rate above) and the public B200
# times per benchmark shape of gau-nernst's "mix (4+3b)", the best published (measured, B200, gau-nernst/gpu-mode-kernels
# @aee9cda nvidia/nvfp4_gemm/README.md).
GEMM_SOL_GEOMEAN_US = 3.04
GEMM_PUBLIC_BEST_US = {(128, 7168, 16384, 1): 18.3, (128, 4096, 7168, 1): 8.29, (128, 7168, 2048, 1): 6.54}
GEMM_PUBLIC_BEST_GEOMEAN_US = 9.97
GEMM_PUBLIC_BEST_NAME = "gau-nernst mix (4+3b)"


def public_best(problem: str = "nvfp4_dual_gemm") -> tuple[dict, float, str]:
    """(best public time per benchmark shape, its geomean, whose) of the problem: measured, B200."""
    if problem == "nvfp4_gemm":
        return GEMM_PUBLIC_BEST_US, GEMM_PUBLIC_BEST_GEOMEAN_US, GEMM_PUBLIC_BEST_NAME
    return PUBLIC_BEST_US, PUBLIC_BEST_GEOMEAN_US, "gau-nernst v2"


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def unique_bytes(m, n, k, l=1, n_products=2) -> int:
    """DRAM bytes if every input byte is read once and C written once (the SOL table's 'bytes moved'): FP4 A and B
    operands, one e4m3 scale per 16 K elements of each row, fp16 C."""
    return l * (m * k // 2 + n_products * n * k // 2 + (m + n_products * n) * (k // 16) + m * n * 2)


def sol_us(m, n, k, l=1, n_products=2) -> float:
    """The problem's speed of light: max(FP4 math, DRAM) at the SOL table's own rates, in microseconds."""
    return max(n_products * m * n * k * l / FP4_MACS_PER_S, unique_bytes(m, n, k, l, n_products) / DRAM_BW_SOL) * 1e6


def _benchmarks(task: Path) -> list[dict]:
    import yaml

    return yaml.safe_load(Path(task).read_text())["benchmarks"]


def benchmark_shapes(task: Path) -> list[tuple]:
    """task.yml's benchmark shapes as (m, n, k, l)."""
    return [(int(b["m"]), int(b["n"]), int(b["k"]), int(b.get("l", 1))) for b in _benchmarks(task)]


def sol_table(task: Path) -> dict:
    """{(m, n, k, l): sol_us} for the benchmarks of task.yml that carry the leaderboard's speed of light."""
    return {(int(b["m"]), int(b["n"]), int(b["k"]), int(b.get("l", 1))): float(b["sol_us"])
            for b in _benchmarks(task) if "sol_us" in b}


def main(argv=None) -> int:
    """python tools/sol.py [--problem nvfp4_gemm]: each benchmark shape's speed of light (task.yml's and recomputed)
    and a public time (dual GEMM: gau-nernst v2, the final leaderboard's top score was 13.12, docs/leaderboard.md §7;
    nvfp4_gemm: gau-nernst's mix, §9), geomeans."""
    import argparse

    ap = argparse.ArgumentParser(description="speed of light per benchmark shape")
    ap.add_argument("--problem", choices=("nvfp4_dual_gemm", "nvfp4_gemm"), default="nvfp4_dual_gemm")
    args = ap.parse_args([] if argv is None else argv)
    root = Path(__file__).resolve().parents[1]
    task = root / ("nvfp4_gemm/task.yml" if args.problem == "nvfp4_gemm" else "task.yml")
    products = 1 if args.problem == "nvfp4_gemm" else 2
    best, best_geo, whose = public_best(args.problem)
    table = sol_table(task)
    head = f"{whose} (measured, B200)"
    print(f"{'shape':>22}  {'sol_us (task.yml)':>17}  {'recomputed':>10}  {head:>30}")
    for shape in benchmark_shapes(task):
        print(f"{str(shape[:3]):>22}  {table.get(shape, float('nan')):17.3f}  {sol_us(*shape, products):10.3f}  "
              f"{best.get(shape, float('nan')):30.2f}")
    print(f"{'geomean':>22}  {geomean(table.values()):17.3f}  {geomean(sol_us(*s, products) for s in table):10.3f}  "
          f"{best_geo:30.2f}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
