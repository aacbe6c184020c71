#!/usr/bin/env bash
# Planned step counts (--perf-plan-steps) on a GPU runner, end to end: take fresh baselines of a few
# cases at full length (3 runs each, which record where memory peaks), then judge, at the planned
# lengths, an A/A run, a run with a planted slowdown and a run with planted memory, and print one
# line per case and run: its steps, wall time and verdict.
#   usage: bash benchmarks/step_plan_gpu.sh
# Variables: CASES (a -k expression of the planned cases; default three Qwen3-8B cases),
#   NOISY (a -k expression of cases expected too noisy to plan, run at baseline and A/A only),
#   PLANT (0.05: +5% per step), PLANT_MEMORY (memory:1024), PERF_WALL_S (per pytest, 1500),
#   PLAN_BASELINES (where the baselines go, default plan-baselines: not the committed ones, and not
#   under reports/, which scripts/offline-job.sh leaves behind), SKIP_BASELINE=1 (judge against the
#   baselines already there). The results store is off.
set -uo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-qwen3_8b-lora-long-b4 or qwen3_8b-full-long-b4 or qwen3_8b-lora-maxlen-b4}
noisy=${NOISY-qwen3_8b-lora-short-b4}
all="$cases${noisy:+ or $noisy}"
baselines=${PLAN_BASELINES:-plan-baselines}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
one_run() {  # LABEL SELECTION [pytest args...]: its log under reports/plan/LABEL/
  TRAINPERF_OUT="reports/plan/$1" LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-1500} bash scripts/offline-run.sh \
    perf_tests -k "$2" --perf-baselines "$baselines" --perf-store off "${@:3}" > /dev/null 2>&1
  echo "$1 rc=$?"
  rm -f "reports/plan/$1/results.tgz"  # the final bundle holds every run folder once
}
[ -n "${SKIP_BASELINE:-}" ] || one_run baseline "$all" --perf-update-baselines
one_run aa "$all" --perf-plan-steps
one_run planted-slowdown "$cases" --perf-plan-steps --perf-plant-slowdown "${PLANT:-0.05}"
one_run planted-memory "$cases" --perf-plan-steps --perf-plant "${PLANT_MEMORY:-memory:1024}"
python3 - <<'PY'
import json, pathlib
print(f"{'run':<17} {'case':<30} {'verdict':<10} {'runs':>4} {'steps':>5} {'wall s':>7} {'step s':>7} {'step vs base':>12} {'alloc GiB':>9}  plan")
for label in ("baseline", "aa", "planted-slowdown", "planted-memory"):
    log = pathlib.Path("reports/plan") / label / "pytest.log"
    folder = next((line.split("results in ", 1)[1].split(" ", 1)[0] for line in log.read_text(errors="replace").splitlines()
                   if "trainperf: results in " in line), None) if log.exists() else None
    if folder is None:
        print(f"{label:<17} (no run folder; see reports/plan/{label}/pytest.log)")
        continue
    for path in sorted(pathlib.Path(folder, "results").glob("*.json")):
        r = json.loads(path.read_text())
        verdict = r.get("verdict", {})
        metrics = r.get("metrics") or {}
        ratio = next((m.get("ratio") for m in verdict.get("metrics", []) if m["metric"] == "step_time_s"), None)
        notes = [n for n in verdict.get("notes", []) if n.startswith("steps ")]
        runs = r.get("runs") or []
        print(f"{label:<17} {r['case_id'].replace('sft_hf-', ''):<30} {verdict.get('verdict', '?'):<10} {len(runs):>4} "
              f"{runs[0].get('steps_requested', 0) if runs else 0:>5} {sum(x.get('wall_s', 0) for x in runs):>7.1f} "
              f"{(metrics.get('step_time_s') or {}).get('value', 0):>7.4f} "
              f"{f'{(ratio - 1) * 100:+.2f}%' if ratio else '-':>12} "
              f"{(metrics.get('peak_allocated_gib') or {}).get('value', 0):>9.2f}  {notes[0][:60] if notes else ''}")
PY
mkdir -p "$bundle"
tar czf "$bundle/step-plan.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude=reports/out reports "$baselines"
