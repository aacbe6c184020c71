#!/usr/bin/env bash
# One tiny cpu case judged against baselines/cpu/ twice: on a quiet host, then beside one busy loop
# per core that is not the suite's (detached, untagged). The second run should read `contaminated`
# (timing shown, not judged), the first not. The results history is a throwaway file.
#   usage: bash benchmarks/host_neighbour_cpu.sh [CASE_SELECTION] [OUTPUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:-"qwen3_tiny and full-short"}
out=${2:-reports/host-neighbour}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
export TRAINPERF_STORE="sqlite:///$(mktemp -d)/history.sqlite"
run() {  # label
  "$py" -m pytest perf_tests -m cpu -k "$selection" -q -p no:cacheprovider --perf-baseline file \
    --perf-output "$out/$1" >"$out/$1.log" 2>&1
  echo "$1: exit $?"
  grep -E "^sft_|^rl_" "$out/$1.log" | grep -v "^\S* *ok " | head -4
}
run quiet
pids=$(for _ in $(seq "$(nproc)"); do env -u TRAINPERF_OWNER "$py" -c 'while True: pass' >/dev/null 2>&1 & echo $!; done)
run neighbours
kill -9 $pids 2>/dev/null
grep -h "host CPU" "$out"/neighbours.log | head -2
