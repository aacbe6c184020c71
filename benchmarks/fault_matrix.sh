#!/usr/bin/env bash
# The fault matrix on this machine: runs tests/test_fault_matrix.py (real runs of the tiny CPU
# cases, each row a fault), then writes each row's figures as a Markdown table.
#   usage: bash benchmarks/fault_matrix.sh [OUTPUT.md]    (default: reports/fault-matrix.md)
# Rows that need root and mount(8) (disk full, read-only folder) are skipped without them.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/fault-matrix.md}
mkdir -p "$(dirname "$out")"
figures=$(mktemp)
TRAINPERF_FAULT_MATRIX="$figures" "${PYTHON:-.venv/bin/python}" -m pytest tests/test_fault_matrix.py -q -p no:cacheprovider
rc=$?
"${PYTHON:-.venv/bin/python}" - "$figures" "$out" <<'PY'
import json, platform, subprocess, sys, datetime
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    f"Measured {datetime.date.today()} on {platform.node() or 'this host'} ({cpu}, {len(open('/proc/cpuinfo').read().split('processor')) - 1} CPUs), "
    f"Python {platform.python_version()}, by `bash benchmarks/fault_matrix.sh`.",
    "",
    "| fault | exit status | processes left | finished results | completed by | figure | what the user sees |",
    "|---|---|---|---|---|---|---|",
]
for r in rows:
    figure = ", ".join(f"{k} {r[k]}" for k in ("tree_gone_s", "run_s", "overlap_s") if k in r) or "-"
    resumed = f"--perf-resume (exit {r['resumed_exit']})" if "resumed_exit" in r else "the run itself"
    seen = str(r.get("user_sees", "")).replace("|", "\\|")[:160]
    lines.append(f"| {r['fault']} | {r['exit_status']} | {r['processes_left']} | intact | {resumed} | {figure} | {seen} |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
rm -f "$figures"
exit $rc
