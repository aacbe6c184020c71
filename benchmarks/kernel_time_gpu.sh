#!/usr/bin/env bash
# Kernel time on a GPU runner: what recording it costs, how far it moves from run to run and GPU to
# GPU, and whether a planted change of the GPU's or the host's work is caught. Every child is a fresh
# pytest session through scripts/offline-run.sh (wheels from .whl*/), judged against the class's
# baselines; the table at the end reads the run folders (benchmarks/kernel_spread.py).
#   usage: bash benchmarks/kernel_time_gpu.sh 'SELECTION' [pytest args...]
#     SELECTION: a -k expression, e.g. 'qwen3_8b and qlora and short'
# Variables:
#   ROUNDS       rounds of the selection with the kernel clock on (default 2)
#   COST_ROUNDS  rounds that also run it with the clock off, the order turning each round, to
#                measure what the clock costs (default 0)
#   PLANTS       space-separated --perf-plant values, one run each after the rounds (e.g. 'gpu:2.1 python:50')
#   STEPS        --perf-steps (default: each case's own)
#   RUN_WALL_S   wall-clock limit of each pytest session (default 900)
#   GPU          the GPU this script's children use (CUDA_VISIBLE_DEVICES; default: all visible)
#   NAME         the study's folder name (default gpu-<GPU>)
# Output: reports/kernel-time/<NAME>/<label>/ per session, and $OUT/kernel-time-<NAME>.tgz with the result files.
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:?usage: kernel_time_gpu.sh SELECTION [pytest args...]}
shift
[ -n "${GPU:-}" ] && export CUDA_VISIBLE_DEVICES=$GPU
tag=${NAME:-gpu-${GPU:-all}}
root=reports/kernel-time/$tag
mkdir -p "$root"
steps=(); [ -n "${STEPS:-}" ] && steps=(--perf-steps "$STEPS")
session() {  # LABEL [pytest args...]
  local label=$1; shift
  TRAINPERF_OUT="$root/$label" LOG_NAME=pytest PERF_WALL_S=${RUN_WALL_S:-900} bash scripts/offline-run.sh \
    perf_tests -k "$selection" --perf-output "$root/$label/run" "${steps[@]}" "$@" > /dev/null 2>&1
  echo "[kernel-time] $tag $label: rc=$? $(grep -a -c ' ok after ' "$root/$label/pytest.log") run(s)"
  rm -f "$root/$label/results.tgz"
}
for round in $(seq 1 "${ROUNDS:-2}"); do
  if [ "$round" -le "${COST_ROUNDS:-0}" ] && [ $((round % 2)) -eq 0 ]; then
    session "r$round-off" --perf-kernel-steps 0 "$@"
  fi
  session "r$round-on" "$@"
  if [ "$round" -le "${COST_ROUNDS:-0}" ] && [ $((round % 2)) -eq 1 ]; then
    session "r$round-off" --perf-kernel-steps 0 "$@"
  fi
done
for plant in ${PLANTS:-}; do
  session "plant-${plant//[:.]/_}" --perf-plant "$plant" "$@"
done
PYTHONPATH=src python3 benchmarks/kernel_spread.py "$root"/*/run | tee "$root/table.txt"
out=${OUT:-reports/out}
mkdir -p "$out"
tar czf "$out/kernel-time-$tag.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude='*.pt.trace.json*' \
  --exclude='trainer' "$root"
