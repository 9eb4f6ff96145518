"""Programmatic dependent launch (PDL): time per call over back-to-back calls, with and without it.

The real kernel needs an SM100 GPU. This probe runs submission.custom_kernel with the real host path and
launch (TVM-FFI launcher, six TMA descriptors, the scheduler's grid, cluster dims, the full shared-memory
request, and `use_pdl` from KernelConfig.pdl) around a device body that runs about as long as the real
kernel is modeled to (probes/device_stub.SpinStub: claim the shared storage, griddepcontrol as the real
kernel does when pdl is on, then spin on %globaltimer).

Timing is the leaderboard's: flush L2 (a 1 GiB write), then events around 50 back-to-back calls, each
with its own C tensor; per call = elapsed / 50. The two variants alternate within every repeat so that
clock drift hits both. Each kernel also writes %globaltimer stamps (entry, after the wait, end) of CTA 0
into its C, which give the gap between the end of call i and the start of call i+1 directly.

    python probes/pdl.py [--spin-us 10] [--reps 40] [--shape 256,4096,7168,1 ...] [--json out.json]
"""

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402

import submission as S  # noqa: E402
from probes.device_stub import SpinStub, admit_this_gpu_for_host_side, exit_unless_cuda_gpu  # noqa: E402
from probes.dispatch import leaderboard_tensors  # noqa: E402

CALLS = 50


def stand_in_config(m, n, k, l, pdl):
    """The shape's config with the PDL knob set; a 2-CTA config becomes its 1-CTA twin with the same cluster
    (the 2-CTA TMA op refuses a non-SM100 arch; grid, cluster dims and descriptors are the same)."""
    cfg = S.config_for(m, n, k, l)
    if cfg.use_2cta:
        cfg = dataclasses.replace(cfg, mma_tile_mn=(128, cfg.mma_tile_mn[1]))
    return dataclasses.replace(cfg, pdl=pdl)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", action="append", default=None, help="M,N,K,L (repeatable)")
    ap.add_argument("--spin-us", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    exit_unless_cuda_gpu("probes/pdl.py", "a CUDA GPU with griddepcontrol (sm_90 or newer)", min_major=9)
    shapes = [tuple(int(x) for x in s.split(",")) for s in (args.shape or ["256,4096,7168,1", "256,3072,4096,1"])]
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cutlass_dsl": getattr(cutlass, "__version__", "?"), "spin_us": args.spin_us, "calls": CALLS, "reps": args.reps}
    print(info, flush=True)
    print("host-side arch admitted: %s (%d op families)" % admit_this_gpu_for_host_side(), flush=True)
    flush_buf = torch.empty(1 << 28, dtype=torch.int32, device="cuda")  # 1 GiB
    out = {"info": info, "shapes": []}
    for m, n, k, l in shapes:
        data = leaderboard_tensors(m, n, k, l)
        a, b1, b2, _, _, _, sfa, sfb1, sfb2, c = data
        cs = [torch.zeros_like(c) for _ in range(CALLS)]
        launchers, names = {}, {}
        for pdl in (False, True):
            cfg = stand_in_config(m, n, k, l, pdl)
            t0 = time.perf_counter()
            launchers[pdl] = cute.compile(SpinStub(cfg, int(args.spin_us * 1000)), *S._fake_operands(), options="--enable-tvm-ffi")
            names[pdl] = cfg.name
            print(f"{(m, n, k)} compiled {cfg.name} in {time.perf_counter() - t0:.1f} s", flush=True)

        def run_once(pdl):
            S._launchers.clear()
            S._launchers[S.launcher_key(data)] = launchers[pdl]  # the stub, not the first call's chain
            datas = [data[:9] + (ci,) for ci in cs]
            for _ in range(3):  # warm-up
                for d in datas:
                    S.custom_kernel(d)
            torch.cuda.synchronize()
            flush_buf.fill_(1)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for d in datas:
                S.custom_kernel(d)
            end.record()
            torch.cuda.synchronize()
            stamps = torch.stack([ci.view(-1)[:12].view(torch.int64) for ci in cs]).cpu().tolist()  # entry, wait, end
            gaps = [stamps[i][0] - stamps[i - 1][2] for i in range(1, CALLS)]
            release = [stamps[i][1] - stamps[i - 1][2] for i in range(1, CALLS)]
            body = [s[2] - s[1] for s in stamps]
            return start.elapsed_time(end) * 1000 / CALLS, statistics.median(gaps) / 1000, statistics.median(release) / 1000, statistics.median(body) / 1000

        res = {False: [], True: []}
        for _ in range(args.reps):
            for pdl in (False, True):
                res[pdl].append(run_once(pdl))
        row = {"shape": [m, n, k, l]}
        for pdl in (False, True):
            per_call = [r[0] for r in res[pdl]]
            row["pdl" if pdl else "no_pdl"] = {
                "config": names[pdl], "per_call_us_median": round(statistics.median(per_call), 3),
                "per_call_us_mean": round(statistics.mean(per_call), 3), "per_call_us_min": round(min(per_call), 3),
                "per_call_us_max": round(max(per_call), 3),
                "entry_minus_prev_end_us_median": round(statistics.median(r[1] for r in res[pdl]), 3),
                "wait_release_minus_prev_end_us_median": round(statistics.median(r[2] for r in res[pdl]), 3),
                "body_us_median": round(statistics.median(r[3] for r in res[pdl]), 3)}
            d = row["pdl" if pdl else "no_pdl"]
            print(f"{(m, n, k)} {'PDL   ' if pdl else 'no PDL'} {names[pdl]:26} per call {d['per_call_us_median']:.3f} us "
                  f"(mean {d['per_call_us_mean']:.3f}, {d['per_call_us_min']:.3f}-{d['per_call_us_max']:.3f}); body "
                  f"{d['body_us_median']:.3f} us; CTA0 entry - previous end {d['entry_minus_prev_end_us_median']:.3f} us; "
                  f"after wait - previous end {d['wait_release_minus_prev_end_us_median']:.3f} us", flush=True)
        row["gain_us_median"] = round(row["no_pdl"]["per_call_us_median"] - row["pdl"]["per_call_us_median"], 3)
        row["gap_no_pdl_us"] = round(row["no_pdl"]["per_call_us_median"] - row["no_pdl"]["body_us_median"], 3)
        row["gap_pdl_us"] = round(row["pdl"]["per_call_us_median"] - row["pdl"]["body_us_median"], 3)
        print(f"{(m, n, k)} PDL saves {row['gain_us_median']:.3f} us per call; per call minus kernel body: "
              f"{row['gap_no_pdl_us']:.3f} us without, {row['gap_pdl_us']:.3f} us with", flush=True)
        out["shapes"].append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
