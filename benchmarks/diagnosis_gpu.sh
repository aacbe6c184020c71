#!/usr/bin/env bash
# The diagnosis of planted regressions on a GPU runner (docs/diagnosis.md): write the baselines,
# with their profile summaries, of the GPU-bound maxlen case and a host-bound short case, then run
# each planted nature (--perf-plant attention, composite, host, memory) against them at the default
# diagnosis settings, and print one table: case, planted nature, verdict, diagnosis line; and the
# added cost of the profile summary per baseline.
#   usage: bash benchmarks/diagnosis_gpu.sh ['-k selection']
#          (default: sft_hf-qwen3_8b-lora-maxlen-b4 and sft_hf-qwen3_8b-lora-short-b4, both per run)
# Runs: one baseline run per case, then per planted nature two on the case it shows in (the run and
# its confirmation, which is profiled and diagnosed; memory: the run and one profiled run): 12
# children, about 8 minutes on an H100 at the figures in docs/measurements/2026-11-24-h100-diagnosis.
# A verl case (its update phases profiled by verl's own per-role profiler; attention and composite
# planted in verl's processes), one profiled run each, no confirmation:
#   TESTS=perf_tests/test_rl_verl.py PLANTS=composite@mb8- CONFIRM=0 PERF_WALL_S=1000 \
#   EXTRA="--perf-trace --perf-timeout 900" bash benchmarks/diagnosis_gpu.sh \
#   'qwen2_5_0_5b and algppo and engvllm and mb8-'
# Variables: TESTS (perf_tests/test_sft_hf.py), EXTRA (pytest arguments added to every run),
#   BASELINES (a folder of baselines with profile summaries, <class>/<case>.json, used instead of
#   writing them first: a planted run judged against a baseline taken earlier),
#   STEPS (10 steps per child where a case does not fix its own), CONFIRM (1 confirmation run), PLANTS (NATURE[:AMOUNT]@CASE,
#   default "attention@maxlen-b4 composite@maxlen-b4 memory@maxlen-b4 host@maxlen-b4 host@short-b4":
#   every nature on the GPU-bound maxlen case, and the host-side delay on the host-bound short case
#   too), PERF_WALL_S per pytest run (400).
# Runs through scripts/offline-run.sh (wheels from .whl/). Baselines go to reports/diagnosis/baselines,
# never the repository's baselines/.
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:-qwen3_8b and lora and not qlora and not gpus2 and (maxlen-b4 or short-b4)}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
base=reports/diagnosis
mkdir -p "$base" "$bundle"
started=$(date +%s)
# shellcheck disable=SC2086  # EXTRA is a list of arguments
one_run() {  # LABEL SELECTION [pytest args...]: its log under reports/diagnosis/LABEL/, run folders under .../runs
  TRAINPERF_OUT="$base/$1" LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-400} bash scripts/offline-run.sh \
    "${TESTS:-perf_tests/test_sft_hf.py}" -k "$2" --perf-steps "${STEPS:-10}" --perf-baselines "$base/baselines" \
    --perf-output "$base/$1/runs" --perf-store off ${EXTRA:-} "${@:3}" > /dev/null 2>&1
  echo "$1 rc=$? ($(( $(date +%s) - started )) s so far)"
  rm -f "$base/$1/results.tgz"  # the final bundle holds every run folder once
}
if [ -n "${BASELINES:-}" ]; then
  mkdir -p "$base/baselines" && cp -r "$BASELINES/." "$base/baselines/" || exit 1
else
  one_run baseline "$selection" --perf-update-baselines --perf-baseline-repeats 1
fi
for planted in ${PLANTS:-attention@maxlen-b4 composite@maxlen-b4 memory@maxlen-b4 host@maxlen-b4 host@short-b4}; do
  plant=${planted%%@*}; only=${planted#*@}
  one_run "plant-${plant%%:*}-${only%%-*}" "$selection and $only" --perf-plant "$plant" --perf-confirm "${CONFIRM:-1}"
done
python3 - "$base" "$started" <<'PY'
import json, pathlib, statistics, sys, time
base, started = pathlib.Path(sys.argv[1]), float(sys.argv[2])
print(f"{'case':<34} {'planted':<12} {'verdict':<10} {'step':>8}  diagnosis (or why none)")
for label in sorted(p.name for p in base.iterdir() if p.name.startswith("plant-")):
    for path in sorted((base / label).glob("runs/*/results/*.json")):
        r = json.loads(path.read_text())
        v = r.get("verdict", {})
        ratio = next((m.get("ratio") for m in v.get("metrics", []) if m["metric"] == "step_time_s"), None)
        step = f"{(ratio - 1) * 100:+.1f}%" if ratio else "-"
        diagnosis = (v.get("diagnosis") or {}).get("line") or next(
            (n for n in v.get("notes", []) if n.startswith("no diagnosis")), v.get("reason", "")
        )
        print(f"{r['case_id']:<34} {r.get('planted') or '-':<12} {v.get('verdict', '?'):<10} {step:>8}  {diagnosis}")
print()
print("added cost of the profile summary per baseline (its one run profiles its last steps):")
for path in sorted(base.glob("baseline/runs/*/results/*.json")):
    r = json.loads(path.read_text())
    run_dir = path.parents[1] / r["runs"][-1]["dir"]
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    timed = [s["duration_s"] for s in steps[1:] if not s.get("profiled")]
    profiled = [s["duration_s"] for s in steps if s.get("profiled")]
    extra = sum(profiled) - len(profiled) * statistics.median(timed) if timed and profiled else float("nan")
    trace = r.get("trace") or {}
    print(
        f"  {r['case_id']}: {len(profiled)} profiled steps took {extra:+.2f} s over as many timed steps; "
        f"trace {trace.get('bytes', 0) / 2**20:.1f} MB compressed; the run {r['runs'][-1]['wall_s']:.0f} s "
        f"wall; profile summary stored: {'yes' if r.get('profile') else 'no'}"
    )
print(f"total wall time {time.time() - started:.0f} s")
PY
tar czf "$bundle/diagnosis-gpu.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude='*.pt.trace.json*' --exclude='verl/profile' "$base"
