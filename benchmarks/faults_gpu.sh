#!/usr/bin/env bash
# The fault matrix's GPU rows, on a GPU runner (docs/faults.md):
#   kill9       kill -9 of pytest mid-case: seconds until no process holds the GPU (nvidia-smi), then
#               --perf-resume finishes the run;
#   neighbour   the case beside a foreign process (a bf16 matmul loop holding GPU memory): the run is
#               'contaminated', never 'regressed';
#   waited      a foreign process that leaves after 20 s: the run waits for it (--perf-gpu-wait) and
#               is judged as usual.
#   usage: bash benchmarks/faults_gpu.sh ['-k selection']   (default: Qwen3-8B LoRA short, batch 4 alone)
# Runs through scripts/offline-run.sh (wheels from .whl/); prints one table last.
set -uo pipefail
cd "$(dirname "$0")/.."
case=sft_hf-qwen3_8b-lora-short-b4
selection=${1:-$case and not gpus2}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
mkdir -p reports/faults "$bundle"
gpu_apps() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c . ; }
run_case() {  # LABEL [pytest args...]
  TRAINPERF_OUT="reports/faults/$1" LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-400} bash scripts/offline-run.sh \
    perf_tests -k "$selection" --perf-output "reports/faults/$1/runs" "${@:2}" > /dev/null 2>&1
  echo $?
}
neighbour() {  # SECONDS: a foreign training-like load on GPU 0 for that long
  # Its output to a file: a background job holding this function's stdout would keep the caller's
  # $(...) waiting until the load ends.
  python3 - "$1" > "reports/faults/neighbour-load.log" 2>&1 <<'PY' &
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda")
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
PY
  echo $!
}

# Row kill9: the run's own tree must be off the GPU within seconds of a kill -9 of pytest.
( TRAINPERF_OUT=reports/faults/kill9 LOG_NAME=pytest PERF_WALL_S=300 bash scripts/offline-run.sh \
    perf_tests -k "$selection" --perf-steps 400 --perf-output reports/faults/kill9/runs > /dev/null 2>&1 ) &
for _ in $(seq 1 600); do grep -q "step [0-9]*/400" reports/faults/kill9/pytest.log 2>/dev/null && break; sleep 0.5; done
held=$(gpu_apps)
pytest_pid=$(pgrep -f "^python3 -m pytest.*--perf-steps 400" | head -n 1)  # not timeout(1) around it
kill -9 "$pytest_pid"; killed=$(date +%s.%N)
for _ in $(seq 1 300); do [ "$(gpu_apps)" = 0 ] && break; sleep 0.1; done
free_s=$(python3 -c "import time; print(f'{time.time() - $killed:.2f}')")
left=$(gpu_apps)
wait
kill9_dir=$(ls -d reports/faults/kill9/runs/*/ | head -n 1)
resume_rc=$(run_case kill9-resume --perf-steps 20 --perf-output reports/faults/kill9/runs --perf-resume "$kill9_dir")

# Row neighbour: a foreign load through the whole run, a short wait that it outlasts.
load=$(neighbour 240); sleep 15
neighbour_rc=$(run_case neighbour --perf-steps 20 --perf-gpu-wait 10)
kill "$load" 2>/dev/null; wait "$load" 2>/dev/null

# Row waited: a foreign load that leaves after 20 s; the default wait outlasts it.
load=$(neighbour 20); sleep 5
waited_rc=$(run_case waited --perf-steps 20)
wait "$load" 2>/dev/null

python3 - "$held" "$free_s" "$left" "$resume_rc" "$neighbour_rc" "$waited_rc" <<'PY'
import json, pathlib, sys
held, free_s, left, resume_rc, neighbour_rc, waited_rc = sys.argv[1:]
def verdict(label):
    found = sorted(pathlib.Path("reports/faults", label).glob("runs/*/results/sft_hf-qwen3_8b-lora-short-b4.json"))
    if not found:
        return "-", "-", "no result"
    r = json.loads(found[-1].read_text())
    v = r.get("verdict", {})
    ratio = next((m.get("ratio") for m in v.get("metrics", []) if m["metric"] == "step_time_s"), None)
    return v.get("verdict", "?"), f"{(ratio - 1) * 100:+.1f}%" if ratio else "-", v.get("reason", "")[:160]
rows = [
    ("kill -9 of pytest mid-case", f"GPU apps {held} -> {left}, free after {free_s} s", f"resume rc={resume_rc}", *verdict("kill9")),
    ("foreign load through the run", f"rc={neighbour_rc}", "", *verdict("neighbour")),
    ("foreign load leaving after 20 s", f"rc={waited_rc}", "", *verdict("waited")),
]
print(f"{'row':<34} {'figure':<40} {'':<12} {'verdict':<13} {'step':>7}  reason")
for row in rows:
    print(f"{row[0]:<34} {row[1]:<40} {row[2]:<12} {row[3]:<13} {row[4]:>7}  {row[5]}")
PY
tar czf "$bundle/faults-gpu.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude='*.pt.trace.json*' reports/faults
