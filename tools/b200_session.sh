#!/usr/bin/env bash
# The first B200 hour in one command: everything this package can learn on a B200, in one bundle to share.
#
#   bash tools/b200_session.sh [OUT]        # OUT defaults to build/b200_session-<UTC time>
#
# Steps (each logged to OUT/<step>.log; a failing step is recorded and the next one still runs):
#   setup        bash tools/setup.sh (idempotent)
#   correctness  test_correctness.py: every test shape, both generators, the 50-input-set check per benchmark shape
#   benchmark    test_benchmark.py: the leaderboard's timing of the current CONFIG_TABLE (OUT/benchmark.json)
#   profile      tools/profile.py --no-timed: the leaderboard loop with KernelConfig.profile on, every benchmark shape;
#                the raw per-CTA phase stamps of 50 calls (OUT/profile/)
#   pdl          probes/pdl.py: the launch gap and the PDL release with the kernel's launch and a stub body, as
#                emu/timing/b200.yaml's rows were measured on an H200 (OUT/pdl.json)
#   stamps       probes/profile_stamps.py: %globaltimer tick, clock, the buffer's decode on this card (OUT/profile_stamps.json)
#   clusters     probes/cluster_occupancy.py: how many clusters of 1-16 CTAs of a whole SM this card holds at once
#                (the grid's count, submission.max_active_clusters; OUT/cluster_occupancy.json)
#   tune         tools/tune.py: every candidate config checked and timed per benchmark shape (OUT/tune.json); it does
#                not rewrite submission.py (a person reads the bundle and decides)
#   analyse      tools/profile.py --from-bundle: the timed emulator's prediction beside the measurement, the report,
#                the traces (JSON + PNG) and the fitted cost rows (OUT/profile/costs_fitted.yaml); CPU only, last
# Then OUT/session.json (device, driver, versions, commit, every step's exit code and wall time) and OUT.tar.gz.
# GPU steps come first: if the session is cut short, the measurements are already on disk (tools/profile.py
# --from-bundle OUT/profile re-runs the analysis anywhere).
# Without an SM100 GPU it says so in one line on stderr and exits 2, writing nothing. Exit 0 when every step passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

gpu="$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)"
if [ -z "${gpu}" ]; then
    echo "tools/b200_session.sh: no NVIDIA GPU visible (nvidia-smi lists none); the session needs a B200 (SM100)" >&2
    exit 2
fi
if [ "${gpu##*, }" != "10.0" ]; then
    echo "tools/b200_session.sh: the GPU is ${gpu%, *} (compute capability ${gpu##*, }); the session needs a B200 (SM100, 10.0)" >&2
    exit 2
fi

OUT="${1:-build/b200_session-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "${OUT}"
STEPS="${OUT}/steps.tsv"
: > "${STEPS}"
PY=.venv/bin/python

step() {  # step NAME TIMEOUT_S COMMAND...: run, log, record exit code and wall time
    local name="$1" limit="$2"
    shift 2
    echo "== ${name}: $*" | tee -a "${OUT}/session.log"
    local t0 rc
    t0=$(date +%s)
    timeout --signal=INT "${limit}" "$@" > "${OUT}/${name}.log" 2>&1
    rc=$?
    printf '%s\t%s\t%s\t%s\n' "${name}" "${rc}" "$(( $(date +%s) - t0 ))" "$*" >> "${STEPS}"
    echo "   exit ${rc} after $(( $(date +%s) - t0 )) s; last lines of ${OUT}/${name}.log:" | tee -a "${OUT}/session.log"
    tail -n 5 "${OUT}/${name}.log" | sed 's/^/   | /' | tee -a "${OUT}/session.log"
}

step setup 1800 bash tools/setup.sh
step correctness 1800 "${PY}" test_correctness.py
step benchmark 1800 "${PY}" test_benchmark.py --json "${OUT}/benchmark.json"
step profile 1800 "${PY}" tools/profile.py --no-timed --out "${OUT}/profile"
step pdl 900 "${PY}" probes/pdl.py --json "${OUT}/pdl.json"
step stamps 900 "${PY}" probes/profile_stamps.py --json "${OUT}/profile_stamps.json"
step clusters 300 "${PY}" probes/cluster_occupancy.py --json "${OUT}/cluster_occupancy.json"
step tune 5400 "${PY}" tools/tune.py --json "${OUT}/tune.json"
step analyse 5400 "${PY}" tools/profile.py --from-bundle "${OUT}/profile" --out "${OUT}/profile"

"${PY}" - "${OUT}" <<'EOF' 2>&1 | tee -a "${OUT}/session.log"
import json, subprocess, sys, time
from pathlib import Path

out = Path(sys.argv[1])
def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({type(e).__name__})"
steps = []
for line in (out / "steps.tsv").read_text().splitlines():
    name, rc, seconds, cmd = line.split("\t", 3)
    steps.append({"step": name, "exit_code": int(rc), "seconds": int(seconds), "command": cmd, "log": f"{name}.log"})
try:
    from test_benchmark import environment_info
    env = environment_info()
except Exception as e:  # noqa: BLE001
    env = {"environment_info": f"unavailable ({type(e).__name__}: {e})"}
doc = {"what": "tools/b200_session.sh bundle: measured on the card named below; profile/profile.json puts the timed "
               "emulator's prediction beside the measurement (labelled there)",
       "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **env,
       "nvidia_smi": run("nvidia-smi", "--query-gpu=name,compute_cap,driver_version,clocks.max.sm,power.limit",
                         "--format=csv,noheader"),
       "commit": run("git", "rev-parse", "HEAD"), "dirty": bool(run("git", "status", "--porcelain")),
       "steps": steps, "all_passed": all(s["exit_code"] == 0 for s in steps)}
(out / "session.json").write_text(json.dumps(doc, indent=1))
print(f"wrote {out / 'session.json'}: " + ", ".join(f"{s['step']} {s['exit_code']}" for s in steps))
EOF

tar czf "${OUT}.tar.gz" -C "$(dirname "${OUT}")" "$(basename "${OUT}")"
echo "bundle: ${OUT}.tar.gz (share this file)" | tee -a "${OUT}/session.log"
awk -F'\t' '$2 != 0 {bad = 1} END {exit bad}' "${STEPS}"
