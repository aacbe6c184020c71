#!/usr/bin/env bash
# The two kernel-record readers on a GPU runner: the direct check (benchmarks/kernel_clock_check.py:
# the same work recorded through each, kernel names, counts and kernel time compared, read-back timed),
# then the given cases judged against the class's baselines with the records read by CUPTI directly,
# and READER_COST cases again through the profiler, for the read-back each costs on this machine.
#   usage: bash benchmarks/kernel_clock_gpu.sh 'SELECTION' ['COST_SELECTION'] [pytest args...]
# Variables: RUN_WALL_S (each session's limit, default 300), OUT (where the archive goes), CLASS (the
# baselines' class the table compares with, default h100).
# Output: reports/kernel-time/reader-{cupti,profiler}/, $OUT/check.txt, $OUT/kernel-time-reader-*.tgz
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:?usage: kernel_clock_gpu.sh SELECTION [COST_SELECTION] [pytest args...]}
cost=${2:-}
shift $(( $# > 1 ? 2 : 1 ))
out=${OUT:-reports/out}
mkdir -p "$out"
bash scripts/offline-run.sh --install-only > "$out/install.log" 2>&1 || { tail -5 "$out/install.log"; exit 1; }
PYTHONPATH="$PWD/src:${TRAINPERF_SITE_ROOT:-/tmp}/site" python3 benchmarks/kernel_clock_check.py \
  --json "$out/check.json" 2>&1 | tee "$out/check.txt"
NAME=reader-cupti ROUNDS=1 RUN_WALL_S=${RUN_WALL_S:-300} bash benchmarks/kernel_time_gpu.sh "$selection" \
  --perf-confirm 0 --perf-kernel-clock cupti "$@"
if [ -n "$cost" ]; then
  NAME=reader-profiler ROUNDS=1 RUN_WALL_S=${RUN_WALL_S:-300} bash benchmarks/kernel_time_gpu.sh "$cost" \
    --perf-confirm 0 --perf-kernel-clock profiler "$@"
fi
PYTHONPATH=src python3 benchmarks/kernel_spread.py reports/kernel-time/reader-*/*/run \
  --baselines "baselines/${CLASS:-h100}" | tee "$out/readers.txt"
