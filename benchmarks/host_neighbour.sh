#!/usr/bin/env bash
# Cases judged against their class's baseline files twice: on a quiet host, then beside one busy
# loop per core that is not the suite's (detached, untagged). The second run should read
# `contaminated` (timing shown, not judged), the first not; each run's `host_cpu` figures (busy
# share, steal, cores used by other processes) are printed from the results.
#   usage: bash benchmarks/host_neighbour.sh [SELECTION] [OUTPUT_DIR]
# Variables:
#   PYTEST   the pytest command (default: .venv/bin/python -m pytest perf_tests -m cpu; on an
#            air-gapped GPU runner: bash scripts/offline-run.sh, which adds -m <class>)
#   ARGS     more pytest arguments (default: --perf-confirm 0)
# The results history is a throwaway file.
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:-"qwen3_tiny and full-short"}
out=${2:-reports/host-neighbour}
pytest_command=${PYTEST:-.venv/bin/python -m pytest perf_tests -m cpu}
loop_python=$(command -v python3)
mkdir -p "$out"
export TRAINPERF_STORE="sqlite:///$(mktemp -d)/history.sqlite"
run() {  # label
  # shellcheck disable=SC2086
  $pytest_command -k "$selection" -q -p no:cacheprovider --perf-baseline file ${ARGS:---perf-confirm 0} \
    --perf-output "$out/$1" >"$out/$1.log" 2>&1
  echo "$1: exit $?"
}
figures() {  # label
  python3 - "$out/$1" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*/results/*.json")):
    result = json.loads(path.read_text())
    for run in result.get("runs", []):
        print(f"  {result['case_id']}: {result.get('verdict', {}).get('verdict')}, "
              f"step {result.get('metrics', {}).get('step_time_s', {}).get('value', '-')}, "
              f"host_cpu {run.get('host_cpu')}")
PY
}
run quiet
figures quiet
# Each loop ends by itself after LOOP_S seconds (default 900) if this script is killed first.
loop="import time
end = time.monotonic() + ${LOOP_S:-900}
while time.monotonic() < end: pass"
pids=$(for _ in $(seq "$(nproc)"); do env -u TRAINPERF_OWNER "$loop_python" -c "$loop" >/dev/null 2>&1 & echo $!; done)
run neighbours
# shellcheck disable=SC2086
kill -9 $pids 2>/dev/null
figures neighbours
grep -h "host CPU" "$out"/neighbours.log | sort -u | head -4
