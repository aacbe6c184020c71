#!/usr/bin/env bash
# The kernel-time study on one host of four GPUs, every GPU busy at once (one pytest session after
# another per GPU, each through scripts/offline-run.sh with its own CUDA_VISIBLE_DEVICES):
#   GPU 0  the class's baselines of the core SFT cases with kernel time (BASE_REPEATS runs each),
#          then a host-side plant (python:50, +50 ms of Python a step) on the GPU-bound maxlen case
#          judged against them: the same runner, so host time gates
#   GPU 1  one A/A run of each core case, GPU-side plants of 1% of each case's kernel time, and runs
#          with the kernel clock off (what it costs)
#   GPU 2  two A/A runs of each core case, and TRL GRPO's core case
#   GPU 3  the trl 1.6.0 -> 1.7.0 upgrade on the maxlen case through the nightly path (baselines
#          under 1.6.0 in a folder of their own, then a run under 1.7.0), TRL GRPO full fine-tuning,
#          one A/A run of each core case
# The A/A and planted runs of GPUs 1-3 are judged against the committed baselines while they run
# (--perf-confirm 0: nothing waits on a confirmation); judge them again against GPU 0's new
# baselines afterwards with --perf-resume (docs/measurements/2026-11-27-h100-kernel-time, machine d).
#   usage: bash benchmarks/kernel_time_host.sh      (wheels: .whl-hf-a/ for the hf stack, .whl-trl/)
# Variables: STEPS (20), BASE_REPEATS (2), PLANT_QLORA_MS (1.45), PLANT_MAXLEN_MS (12.75),
#   WALL_S (each GPU's whole plan, default 540)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
steps=${STEPS:-20}
core='sft_hf-qwen3_8b-qlora-short-b4 or sft_hf-qwen3_8b-full-short-b4 or sft_hf-qwen3_8b-lora-maxlen-b4'
root=reports/kernel-time/host
mkdir -p "$root"
bash scripts/offline-run.sh --install-only > "$root/install.log" 2>&1 || { cat "$root/install.log"; exit 1; }
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit --format=csv,noheader
session() {  # GPU LABEL SELECTION [pytest args...]
  local gpu=$1 label=$2 selection=$3; shift 3
  CUDA_VISIBLE_DEVICES=$gpu TRAINPERF_OUT="$root/$label" LOG_NAME=pytest PERF_WALL_S=300 \
    bash scripts/offline-run.sh perf_tests -k "$selection" --perf-output "$root/$label/run" --perf-steps "$steps" \
    --perf-diagnose off "$@" > /dev/null 2>&1
  echo "[kernel-time] gpu $gpu $label: rc=$? $(grep -a -c ' ok after ' "$root/$label/pytest.log") run(s) at $(date +%T)"
  rm -f "$root/$label/results.tgz"
}
with_trl() {  # VERSION GPU LABEL SELECTION [pytest args...]: a session with that trl in front
  local version=$1; shift
  python3 -m pip install -q --no-index --no-deps --no-compile --target "/tmp/trl-$version" .whl-trl/"$version"/*.whl
  PYTHONPATH="/tmp/trl-$version${PYTHONPATH:+:$PYTHONPATH}" session "$@"
}
gpu0() {
  session 0 baselines "$core" --perf-update-baselines --perf-baseline-repeats "${BASE_REPEATS:-2}"
  session 0 plant-python 'sft_hf-qwen3_8b-lora-maxlen-b4' --perf-plant python:50 --perf-confirm 0
}
gpu1() {
  session 1 aa-1 "$core" --perf-confirm 0
  session 1 plant-gpu-qlora 'sft_hf-qwen3_8b-qlora-short-b4' --perf-plant "gpu:${PLANT_QLORA_MS:-1.45}" --perf-confirm 0
  session 1 plant-gpu-maxlen 'sft_hf-qwen3_8b-lora-maxlen-b4' --perf-plant "gpu:${PLANT_MAXLEN_MS:-12.75}" --perf-confirm 0
  session 1 clock-off 'sft_hf-qwen3_8b-qlora-short-b4 or sft_hf-qwen3_8b-lora-maxlen-b4' --perf-kernel-steps 0 --perf-confirm 0
}
gpu2() {
  session 2 aa-2 "$core" --perf-confirm 0 --perf-repeats 2
  session 2 grpo-lora 'rl_trl-qwen2_5_3b-lora-fixed-b16-p128-c64-g8' --perf-confirm 0
}
gpu3() {
  with_trl 1.6.0 3 trl-1.6.0 'sft_hf-qwen3_8b-lora-maxlen-b4' --perf-update-baselines --perf-baseline-repeats 2 \
    --perf-baselines "$PWD/$root/baselines-trl-1.6.0"
  with_trl 1.7.0 3 trl-1.7.0 'sft_hf-qwen3_8b-lora-maxlen-b4' --perf-baselines "$PWD/$root/baselines-trl-1.6.0" \
    --perf-confirm 0
  session 3 grpo-full 'rl_trl-qwen2_5_3b-full-fixed-b16-p128-c64-g8' --perf-confirm 0
  session 3 aa-3 "$core" --perf-confirm 0
}
for gpu in 0 1 2 3; do
  timeout "${WALL_S:-540}" bash -c "$(declare -f session with_trl "gpu$gpu"); root=$root steps=$steps core='$core'; gpu$gpu" &
done
wait
PYTHONPATH=src python3 benchmarks/kernel_spread.py "$root"/*/run --json "$root/spread.json" | tee "$root/table.txt"
out=${OUT:-reports/out}
mkdir -p "$out"
tar czf "$out/kernel-time-host.tgz" --exclude='*.safetensors' --exclude='*.parquet' --exclude='*.pt.trace.json*' \
  --exclude="trainer" "$root" baselines/h100
