"""What the first call's check of C costs (submission.check_sample: whole rows and columns of C against a float64
computation from the plain scales), on any CUDA GPU: the check is torch alone, so it runs where the kernel cannot.

The leaderboard never times a shape's first call (its check of the 50 outputs comes before the timed runs), so this
cost is paid once per shape, untimed; the figure says how long the first call of each benchmark shape waits for it.
Per benchmark shape of both problems: the leaderboard's inputs on the GPU, C filled with the reference's answer (the
check passes, so it runs whole) and once with NaN (it fails, so it reports); median and first of several runs, events
around each call.

    python probes/first_call.py [--repeats 5] [--json out.json]

Needs a CUDA GPU and the CuTe DSL (submission.py imports it; nothing is compiled); exits 2 without a GPU.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("first_call: no CUDA GPU here: nothing measured", file=sys.stderr)
        return 2
    import submission as S
    from problem_files import load_reference, task_path
    from utils import load_task

    rows = []
    print(f"first_call: {torch.cuda.get_device_name()} (measured), torch {torch.__version__}", flush=True)
    for problem in (S.DUAL_GEMM_PROBLEM, S.GEMM_PROBLEM):
        ref = load_reference(problem)
        for case in load_task(task_path(problem))["benchmarks"]:
            shape = (case["m"], case["n"], case["k"], case["l"])
            data = ref.generate_input(*shape, seed=case.get("seed", 1111))
            data[-1].copy_(ref.ref_kernel(data))
            times, verdicts = [], []
            for _ in range(args.repeats):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                verdicts.append(S.check_sample(data))
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3)
            data[-1].fill_(float("nan"))
            failing = S.check_sample(data)
            row = {"problem": problem, "shape": shape, "first_ms": round(times[0], 2),
                   "median_ms": round(statistics.median(times[1:] or times), 2), "passes": not any(verdicts),
                   "nan_c_reported": failing[:120]}
            rows.append(row)
            print(f"first_call: {problem} {'x'.join(map(str, shape))}: check_sample {row['median_ms']} ms median "
                  f"(first {row['first_ms']} ms), reference's C {'passes' if row['passes'] else 'FAILS'}; "
                  f"NaN C: {failing[:80]}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"label": "measured", "gpu": torch.cuda.get_device_name(),
                                               "rows": rows}, indent=1))
    return 0 if all(r["passes"] and r["nan_c_reported"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
