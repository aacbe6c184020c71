#!/usr/bin/env bash
# Where a verl case's set-up time goes, and what vLLM's compile cache across cases saves, on a GPU
# runner with the verl-vllm environment (scripts/offline-verl-stack.sh --unpack): two PPO cases of
# the 0.5B micro-batch sweep run one after the other, the first with an empty vLLM cache folder (it
# compiles, as every verl case does with verl's own setting, and writes the cache), the second with
# the cache the first wrote (a different case of the same engine configuration, as in a nightly).
# Prints one table: case, cache, wall, set-up total and its phases, vLLM's compile and CUDA graph
# capture, first step's extra time, steps.
#   usage: bash benchmarks/verl_setup_gpu.sh
# Variables: CASES (default "mb8 mb16", the micro-batch sizes run in turn), PERF_WALL_S per run (720),
# ARGS (more pytest arguments, e.g. --perf-confirm 0 to measure set-up without confirmation runs),
# BASE (the run folders' parent, default reports/verl-setup), FRESH_CACHE=0 (keep the vLLM cache
# folder an earlier invocation filled).
# Run folders under reports/verl-setup/<case>/; the vLLM cache under $TRAINPERF_CACHE_DIR/vllm
# (default ~/.cache/trainperf/vllm), emptied first.
set -uo pipefail
cd "$(dirname "$0")/.."
base=${BASE:-reports/verl-setup}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
cache=${TRAINPERF_CACHE_DIR:-$HOME/.cache/trainperf}/vllm
mkdir -p "$base" "$bundle"
[ "${FRESH_CACHE:-1}" = 0 ] || rm -rf "$cache"
started=$(date +%s)
for mb in ${CASES:-mb8 mb16}; do
  TRAINPERF_OUT="$base/$mb" LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-720} bash scripts/offline-run.sh \
    perf_tests/test_rl_verl.py -k "qwen2_5_0_5b and algppo and engvllm and $mb-" --perf-store off \
    --perf-output "$base/$mb/runs" --perf-timeout 680 ${ARGS:-} > /dev/null 2>&1
  echo "$mb rc=$? ($(( $(date +%s) - started )) s so far; vLLM cache $(du -sh "$cache" 2>/dev/null | cut -f1))"
  rm -f "$base/$mb/results.tgz"
done
python3 - "$base" <<'PY'
import json, pathlib, sys
base = pathlib.Path(sys.argv[1])
print(f"{'case':<10} {'cache':<8} {'wall s':>7} {'set-up s':>9}  phases (s)                                   "
      f"{'compile':>8} {'graphs':>7} {'step1+':>7} steps")
for case_dir in sorted(base.iterdir(), key=lambda p: p.stat().st_mtime):
    for path in sorted(case_dir.glob("runs/*/results/*.json")):
        r = json.loads(path.read_text())
        for run in r.get("runs", []):
            setup = run.get("setup") or {}
            vllm = setup.get("vllm", {})
            phases = " ".join(f"{k.removesuffix('_s')} {v:.0f}" for k, v in setup.get("phases", {}).items())
            compile_s = vllm.get("compile_s", vllm.get("compile_from_cache_s"))
            print(f"{case_dir.name:<10} {vllm.get('compile_cache', '?'):<8} {run.get('wall_s', 0):>7.0f} "
                  f"{setup.get('total_s', float('nan')):>9.0f}  {phases:<44} "
                  f"{compile_s if compile_s is not None else '-':>8} {vllm.get('graph_capture_s', '-'):>7} "
                  f"{setup.get('first_step_extra_s', '-'):>7} {run.get('steps', '?')}")
PY
tar czf "$bundle/verl-setup.tgz" --exclude='*.safetensors' --exclude='*.parquet' "$base"
