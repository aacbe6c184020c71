#!/usr/bin/env bash
# The history gate on a GPU runner, end to end: build this runner's history of one case from
# fresh runs, then judge fresh A/A runs and runs with a planted regression against it, and print
# one line per run (benchmarks/history_gate_table.py).
#   usage: bash benchmarks/history_gate_gpu.sh ['-k selection']      (default: the maxlen case)
# Variables: HISTORY_RUNS (10), AA_RUNS (3), PLANTED_RUNS (3); after the history, planted and A/A runs
#   alternate (a planted run first), so that a job cut short still has both kinds.
#   PLANT_ARGS (default --perf-plant-slowdown $PLANT, PLANT 0.02: +2% per step; e.g.
#   '--perf-plant python:50' for +50 ms of Python a step, a host-side regression),
#   PLANTED_ARGS (more arguments for the planted runs only, e.g. '--perf-confirm 0' to count the
#   first run's verdict), HISTORY_BASELINE (the history runs' --perf-baseline: auto by default, so
#   they are judged against the class's file until the history is long enough; 'history' judges each
#   against the runs before it), STEPS (steps per child; default: the case's own),
#   TRAINPERF_STORE (default: a SQLite file under reports/), TRAINPERF_RUNNER (default:
#   history-gate). Runs through scripts/offline-run.sh (wheels from .whl/ or .whl-hf-*/).
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:-qwen3_8b and maxlen}
export TRAINPERF_STORE=${TRAINPERF_STORE:-sqlite:///$PWD/reports/history-gate.sqlite}
export TRAINPERF_RUNNER=${TRAINPERF_RUNNER:-history-gate}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
steps=()
[ -n "${STEPS:-}" ] && steps=(--perf-steps "$STEPS")
read -r -a plant <<< "${PLANT_ARGS:---perf-plant-slowdown ${PLANT:-0.02}}"
read -r -a planted_extra <<< "${PLANTED_ARGS:-}"
one_run() {  # LABEL [pytest args...]: its log under reports/gate/LABEL/, the run folder under reports/
  TRAINPERF_OUT="reports/gate/$1" LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-900} bash scripts/offline-run.sh \
    perf_tests -k "$selection" "${steps[@]}" --perf-output "reports/runs/$1" "${@:2}" > /dev/null 2>&1
  echo "$(date -u +%H:%M:%S) $1 rc=$? $(grep -a -E '^sft_|^rl_' "reports/gate/$1/pytest.log" | head -n 1)"
  rm -f "reports/gate/$1/results.tgz"  # the final bundle holds every run folder once
}
for i in $(seq 1 "${HISTORY_RUNS:-10}"); do one_run "history-$(printf %02d "$i")" --perf-baseline "${HISTORY_BASELINE:-auto}"; done
aa=${AA_RUNS:-3}; planted=${PLANTED_RUNS:-3}
for i in $(seq 1 $(( aa > planted ? aa : planted ))); do
  [ "$i" -le "$planted" ] && one_run "planted-$(printf %02d "$i")" --perf-baseline history "${plant[@]}" "${planted_extra[@]}"
  [ "$i" -le "$aa" ] && one_run "aa-$(printf %02d "$i")" --perf-baseline history
done
PYTHONPATH=src python3 benchmarks/history_gate_table.py reports/runs | tee reports/history-gate.txt
mkdir -p "$bundle"
tar czf "$bundle/history-gate.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude=reports/out \
  --exclude='*.pt.trace.json*' reports
