#!/usr/bin/env bash
# The fault matrix on this machine: runs tests/test_fault_matrix*.py (real runs of the tiny CPU
# cases, each row a fault; the store row starts a PostgreSQL server of its own), then writes each
# row's figures as a Markdown table.
#   usage: bash benchmarks/fault_matrix.sh [OUTPUT.md [PYTEST ARGS...]]
#   (default: reports/fault-matrix.md; e.g. -k handoff runs the rows of one file)
# Rows that need root and mount(8) (disk full, read-only folder) are skipped without them.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/fault-matrix.md}
mkdir -p "$(dirname "$out")"
figures=$(mktemp)
TRAINPERF_FAULT_MATRIX="$figures" "${PYTHON:-.venv/bin/python}" -m pytest tests/test_fault_matrix*.py \
  -q -p no:cacheprovider "${@:2}"
rc=$?
"${PYTHON:-.venv/bin/python}" - "$figures" "$out" <<'PY'
import json, platform, re, subprocess, sys, datetime, tempfile
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
# A row's message names the test's own temporary folder: shown as <tmp>, the table describes the
# fault, not this machine's layout.
TMP = re.compile(re.escape(tempfile.gettempdir()) + r"/pytest-of-[^/]+/pytest-\d+/[^/\s]+")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    f"Measured {datetime.date.today()} on an {cpu} host with {len(open('/proc/cpuinfo').read().split('processor')) - 1} CPUs, "
    f"Python {platform.python_version()}, by `bash benchmarks/fault_matrix.sh`.",
    "",
    "| fault | row | exit status | verdicts | processes left | results | completed by | figure | what the user sees |",
    "|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    # Every word below is the row's own measurement; a figure the row did not take shows as "not measured".
    figure = ", ".join(f"{k} {r[k]}" for k in ("tree_gone_s", "run_s", "overlap_s") if k in r)
    if "stored_after_ingest" in r:
        before, after = r["stored_before_ingest"], r["stored_after_ingest"]
        figure = "stored: " + ", ".join(f"{c.rsplit('-', 1)[-1]} {before.get(c)} -> {n}" for c, n in sorted(after.items()))
    if "history_after_resume" in r:  # the case's outcomes in the results history, after the fault -> after resume
        fault, resumed_history = r["history_after_fault"], r["history_after_resume"]
        said = lambda outcomes: "+".join(outcomes) or "none"
        figure = "history: " + ", ".join(
            f"{c.rsplit('-', 1)[-1]} {said(fault.get(c, []))} -> {said(h)}" for c, h in sorted(resumed_history.items())
        )
    figure = figure or "-"
    resumed = f"--perf-resume (exit {r['resumed_exit']})" if "resumed_exit" in r else "the run itself"
    resumed = f"trainperf ingest (exit {r['ingest_exit']})" if "ingest_exit" in r else resumed
    verdicts = ", ".join(f"{case.rsplit('-', 1)[-1]} {v}" for case, v in sorted(r.get("verdicts", {}).items())) or "none"
    seen = TMP.sub("<tmp>", str(r.get("user_sees", ""))).replace("|", "\\|")[:160]
    cells = [r.get("fault", r["row"]), "passed" if r.get("row_passed") else "FAILED", r.get("exit_status", "not measured"),
             verdicts, r.get("processes_left", "not measured"), str(r.get("results", "not measured")).replace("|", "\\|"),
             resumed, figure, seen]
    lines.append("| " + " | ".join(map(str, cells)) + " |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
rm -f "$figures"
exit $rc
