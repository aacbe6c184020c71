#!/usr/bin/env bash
# The self-tests, N times in a row, beside a CPU-heavy job that is not the suite's: one busy loop
# per LOAD_CORES (default 1: half of a 2-core host), started detached before the first run and
# ended after the last. Each run is the README's test command (`make test`); its exit status,
# wall time and pytest's last line (passed, skipped, failed) go to a table, its skip reasons to a
# file of their own.
#   usage: bash benchmarks/suite_under_load.sh [RUNS] [OUTPUT_DIR]
# Variables:
#   LOAD_CORES  busy loops beside the suite (default 1)
#   TEST        the test command (default: make test)
# Under CI=true a test that needs a baseline fails where the host CPU watch finds the host crowded
# (tests/crowded.py): on a host shared on purpose, run without CI=true, where it skips and says why.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
out=${2:-reports/suite-under-load}
mkdir -p "$out"
loop_python=$(command -v python3)
# Each loop ends by itself after LOOP_S seconds (default 6 hours) if this script is killed first.
loop="import time
end = time.monotonic() + float(${LOOP_S:-21600})
while time.monotonic() < end:
    sum(i * i for i in range(10000))"
pids=()
for _ in $(seq "${LOAD_CORES:-1}"); do
  setsid "$loop_python" -c "$loop" >/dev/null 2>&1 &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
{
  echo "| run | exit | wall s | load average at the end | pytest's last line |"
  echo "|---|---|---|---|---|"
} >"$out/table.md"
for run in $(seq "$runs"); do
  start=$(date +%s)
  # shellcheck disable=SC2086
  ${TEST:-make test} >"$out/run$run.log" 2>&1
  status=$?
  wall=$(($(date +%s) - start))
  last=$(grep -E '(passed|failed|error)' "$out/run$run.log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
  grep '^SKIPPED' "$out/run$run.log" >"$out/run$run-skips.txt"
  echo "| $run | $status | $wall | $(cut -d' ' -f1-3 /proc/loadavg) | $last |" | tee -a "$out/table.md"
done
cat "$out/table.md"
