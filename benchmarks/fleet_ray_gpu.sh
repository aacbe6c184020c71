#!/usr/bin/env bash
# A nightly's shards as Ray tasks on a GPU host: a one-node Ray cluster with this host's GPUs is
# started (as a team starts its head node), `trainperf ray submit` runs the selection in SHARDS
# shards of one GPU each and merges them, and the head is stopped. Prints the driver's lines,
# what each shard's session saw (GPU class, CUDA_VISIBLE_DEVICES) and the merged summary.
#   usage: bash benchmarks/fleet_ray_gpu.sh '-k EXPR'
# Variables: SHARDS (default 2), DIRECT=1 (then run the same selection directly, without Ray, on
# the same GPUs, into reports/ray-direct/: the two step times side by side), RAY_SITE (a folder holding Ray, put on PYTHONPATH; default none:
# Ray installed), PERF_ARGS (extra pytest arguments), TRAINPERF_OUT or OUT (where ray-nightly.tgz
# goes; default reports/out). The nightly's folder: reports/ray-nightly/.
set -uo pipefail
cd "$(dirname "$0")/.."
selection=${1:?give the selection, e.g. '-k "qwen3_8b and short"'}
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
runs=reports/ray-nightly
export PYTHONPATH="$PWD/src${RAY_SITE:+:$RAY_SITE}${PYTHONPATH:+:$PYTHONPATH}"
ray_cli=(python3 -m ray.scripts.scripts)
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
gpu_class=$(python3 -m trainperf.cli env --class-only)
port=6390
rm -rf "$runs" && mkdir -p "$runs" "$bundle"
"${ray_cli[@]}" start --head --port "$port" --num-gpus "$gpus" --include-dashboard=false \
  --disable-usage-stats --temp-dir /tmp/tp-ray > "$runs/ray-start.log" 2>&1 || { tail -20 "$runs/ray-start.log"; exit 1; }
trap '"${ray_cli[@]}" stop --force > /dev/null 2>&1' EXIT
started=$(date +%s)
# shellcheck disable=SC2086
eval "python3 -m trainperf.cli ray submit --class $gpu_class --shards ${SHARDS:-2} --runs $runs \
  --address 127.0.0.1:$port -- $selection ${PERF_ARGS:-}" 2>&1 | tee "$runs/driver.log"
status=${PIPESTATUS[0]}
echo "driver exit $status after $(( $(date +%s) - started )) s on $gpus GPU(s) of class $gpu_class"
for log in "$runs"/logs/shard-*.log; do
  echo "== $(basename "$log"): $(grep -m1 '^trainperf: shard' "$log")"
  grep -m4 -E "started \(|trainperf: shard [0-9]+/[0-9]+: " "$log"
done
sed -n 1,30p "$runs/merged/summary.md" 2>/dev/null
"${ray_cli[@]}" stop --force > /dev/null 2>&1
folders=("$runs")
if [ "${DIRECT:-0}" = 1 ]; then
  rm -rf reports/ray-direct
  # shellcheck disable=SC2086
  eval "python3 -m pytest perf_tests -m $gpu_class -rA $selection ${PERF_ARGS:-} \
    --perf-output reports/ray-direct" > "$runs/direct.log" 2>&1
  echo "direct exit $? after $(( $(date +%s) - started )) s in all"
  grep -E '^\| sft|^\| rl' "$runs/direct.log" | head -20
  folders+=(reports/ray-direct)
fi
tar czf "$bundle/ray-nightly.tgz" --exclude='*.safetensors' --exclude='*.pt.trace*' --exclude='*.json.gz' "${folders[@]}"
exit "$status"
