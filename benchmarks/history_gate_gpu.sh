#!/usr/bin/env bash
# The history gate on a GPU runner, end to end: build this runner's history of one case from
# fresh runs, then judge fresh A/A runs and runs with a planted slowdown against it
# (--perf-baseline history, every other setting at its default), and print one line per run.
#   usage: bash benchmarks/history_gate_gpu.sh ['-k selection']      (default: the maxlen case)
# Variables: HISTORY_RUNS (10), AA_RUNS (3), PLANTED_RUNS (3), PLANT (0.02: +2% per step),
#   STEPS (16 steps per child), TRAINPERF_STORE (default: a SQLite file under reports/),
#   TRAINPERF_RUNNER (default: history-gate). Runs through scripts/offline-run.sh (wheels from .whl/).
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:-qwen3_8b and maxlen}
export TRAINPERF_STORE=${TRAINPERF_STORE:-sqlite:///$PWD/reports/history-gate.sqlite}
export TRAINPERF_RUNNER=${TRAINPERF_RUNNER:-history-gate}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
one_run() {  # LABEL [pytest args...]: its log under reports/gate/LABEL/, the run folder under reports/
  TRAINPERF_OUT="reports/gate/$1" LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-900} bash scripts/offline-run.sh \
    perf_tests -k "$selection" --perf-steps "${STEPS:-16}" "${@:2}" > /dev/null 2>&1
  echo "$1 rc=$? $(grep -a -E '^sft_|^rl_' "reports/gate/$1/pytest.log" | head -n 1)"
  rm -f "reports/gate/$1/results.tgz"  # the final bundle holds every run folder once
}
for i in $(seq 1 "${HISTORY_RUNS:-10}"); do one_run "history-$i"; done
for i in $(seq 1 "${AA_RUNS:-3}"); do one_run "aa-$i" --perf-baseline history; done
for i in $(seq 1 "${PLANTED_RUNS:-3}"); do one_run "planted-$i" --perf-baseline history --perf-plant-slowdown "${PLANT:-0.02}"; done
python3 - <<'PY'
import json, pathlib
print(f"{'run folder':<28} {'planted':>7} {'verdict':<10} {'step s':>7} {'vs base':>8}  judged against")
for path in sorted(pathlib.Path("reports").glob("*/results/*.json")):
    r = json.loads(path.read_text())
    step = (r.get("metrics") or {}).get("step_time_s") or {}
    ratio = next((m.get("ratio") for m in r.get("verdict", {}).get("metrics", []) if m["metric"] == "step_time_s"), None)
    shown = f"{(ratio - 1) * 100:+.2f}%" if ratio else "-"
    against = r.get("verdict", {}).get("judged_against", "")
    print(f"{path.parts[1]:<28} {r.get('planted_slowdown') or 0:>7} {r.get('verdict', {}).get('verdict', '?'):<10} "
          f"{step.get('value', 0):>7.4f} {shown:>8}  {against[:150]}")
PY
mkdir -p "$bundle"
tar czf "$bundle/history-gate.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude=reports/out reports
