#!/usr/bin/env bash
# Upgrade studies on every GPU of one host at once: one background worker per GPU reads its own
# queue (QUEUES/gpuN.plan) and runs its studies one after another on that GPU alone
# (CUDA_VISIBLE_DEVICES=N), through benchmarks/upgrade_gpu.sh, so A and B of a study always share
# one GPU and no two studies share one. Workers start in their own process session and outlive
# the shell that started them; a queue can be extended while its worker runs (it reads the next
# line when a study ends) and ends at a line `end`. Where the host has at least two cores a GPU,
# each worker is pinned to its own block of cores (taskset): studies of other GPUs carry the
# suite's tag, so the host watch counts them as the suite's own load, and the pinning is what
# keeps one study's model build off another's measured steps.
#   usage: bash benchmarks/study_queue_gpu.sh start QUEUES     start one worker per gpuN.plan
#          bash benchmarks/study_queue_gpu.sh status QUEUES    what each worker is doing
#          bash benchmarks/study_queue_gpu.sh wait QUEUES SECONDS   until every queue ended, at most SECONDS
# A plan line:  NAME | NEEDS | COMMAND | OPTIONS -- SELECTION
#   NEEDS    a file the study waits for before it starts (a wheel still on its way), or -
#   COMMAND  ab, or e.g. "bisect trl 1.9.0..1.13.0", or pytest: a suite run on that GPU through
#            scripts/offline-run.sh (e.g. one shard of a nightly: --perf-night DATE --perf-shard 2/3),
#            its log and results.tgz in STUDIES/NAME, its run folder under the checkout's reports/;
#            "alone COMMAND" runs it with no other study on the host (take_host below)
# Each study's log is QUEUES/logs/NAME.log; its folder is under STUDIES (upgrade_gpu.sh).
# Finer than "alone" lines: export TRAINPERF_HOST_LOCK (a file) and TRAINPERF_ALONE (case-id globs)
# before `start`, and every suite run of every queue takes turns child by child (--perf-host-lock):
# the named cases' runs with nothing beside them, the rest side by side.
set -uo pipefail
action=${1:?usage: study_queue_gpu.sh start|status|wait QUEUES [SECONDS]}
queues=$(realpath "${2:?usage: study_queue_gpu.sh start|status|wait QUEUES [SECONDS]}")
here=$(cd "$(dirname "$0")/.." && pwd)

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; echo "${s%"${s##*[![:space:]]}"}"; }

# A study whose command starts with "alone" (alone ab, alone pytest, ...) has the host to itself:
# it waits for the studies running on other GPUs to end, and no study starts while it waits or
# runs. Rounds cancel a machine's drift, not a neighbour that loads one side of an A/B more than the
# other: give host-bound cases (short SFT steps, TRL GRPO's generation) a line of their own. Every
# other study shares the host with the others. The lock is held on descriptor 9 by the worker
# itself, never by the study's processes (a daemon left behind must not keep it).
take_host() {  # GPU ALONE(0|1)
  command -v flock >/dev/null || { [ "$2" = 0 ] || echo "flock missing: not alone" >&2; return 0; }
  exec 9>>"$queues/host.lock"
  if [ "$2" = 1 ]; then
    touch "$queues/alone.waiting.gpu$1"
    flock -x 9
    rm -f "$queues/alone.waiting.gpu$1"
  else
    while compgen -G "$queues/alone.waiting.*" >/dev/null; do sleep 2; done
    flock -s 9
  fi
}

release_host() {
  command -v flock >/dev/null || return 0
  flock -u 9
  exec 9>&-
}

launch() {  # GPU NAME COMMAND ARGS...: the study's own exit status
  local gpu=$1 name=$2 command=$3
  shift 3
  if [ "$command" = pytest ]; then
    local kept=() arg
    for arg in "$@"; do [ "$arg" = "--" ] || kept+=("$arg"); done
    (cd "$here" && CUDA_VISIBLE_DEVICES=$gpu TRAINPERF_OUT="${STUDIES:-reports/studies}/$name" \
      bash scripts/offline-run.sh "${kept[@]}") >"$queues/logs/$name.log" 2>&1 9>&-
  else
    (cd "$here" && CUDA_VISIBLE_DEVICES=$gpu COMMAND=$command bash benchmarks/upgrade_gpu.sh "$name" "$@") \
      >"$queues/logs/$name.log" 2>&1 9>&-
  fi
}

run_study() {  # GPU LINE
  local gpu=$1 name needs command rest alone=0
  IFS='|' read -r name needs command rest <<<"$2"
  name=$(trim "$name"); needs=$(trim "$needs"); command=$(trim "$command")
  case "$command" in alone\ *) alone=1; command=$(trim "${command#alone }") ;; esac
  while [ "$needs" != "-" ] && [ ! -e "$needs" ]; do sleep 5; done
  take_host "$gpu" "$alone"
  echo "$(date -u +%H:%M:%S) start $name$([ "$alone" = 1 ] && echo ' (alone)')" >>"$queues/gpu$gpu.state"
  local args=()
  eval "args=($rest)"  # the plan's own quoting (-k "a or b")
  launch "$gpu" "$name" "$command" "${args[@]}"
  local status=$?  # read before the date below runs: a command substitution sets $? too
  echo "$(date -u +%H:%M:%S) done $name: exit $status" >>"$queues/gpu$gpu.state"
  release_host
}

worker() {  # GPU
  local gpu=$1 index=0 line
  while true; do
    line=$(sed -n "$((index + 1))p" "$queues/gpu$gpu.plan")
    if [ -z "$line" ]; then sleep 5; continue; fi
    index=$((index + 1))
    [ "$(trim "$line")" = "end" ] && { echo "$(date -u +%H:%M:%S) end" >>"$queues/gpu$gpu.state"; return; }
    case "$line" in \#*) continue ;; esac
    run_study "$gpu" "$line"
  done
}

case "$action" in
  start)
    mkdir -p "$queues/logs"
    plans=("$queues"/gpu*.plan)
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$gpus" -gt 0 ] || gpus=${#plans[@]}
    per=$(($(nproc) / gpus))
    for plan in "${plans[@]}"; do
      gpu=${plan##*/gpu}; gpu=${gpu%.plan}; pin=()
      if [ "$per" -ge 2 ] && command -v taskset >/dev/null; then
        pin=(taskset -c "$((gpu * per))-$((gpu * per + per - 1))")
      fi
      setsid nohup "${pin[@]}" bash "$0" worker "$queues" "$gpu" >"$queues/logs/worker$gpu.log" 2>&1 </dev/null &
      echo "worker for GPU $gpu started (pid $!) ${pin[*]}"
    done ;;
  worker) worker "${3:?GPU}" ;;
  status)
    for state in "$queues"/gpu*.state; do
      [ -e "$state" ] || continue
      echo "${state##*/}: $(tail -n 1 "$state")"
      current=$(tail -n 1 "$state" | sed -n 's/.* start \([^ ]*\).*/\1/p')  # a name has no spaces
      if [ -n "$current" ]; then
        grep -E '^\[trainperf|^== ' "$queues/logs/$current.log" 2>/dev/null | tail -n 1 | cut -c1-160
      fi
    done ;;
  wait)
    limit=$((SECONDS + ${3:?SECONDS}))
    while [ $SECONDS -lt "$limit" ]; do
      ended=0; total=0
      for plan in "$queues"/gpu*.plan; do
        total=$((total + 1)); grep -q ' end$' "${plan%.plan}.state" 2>/dev/null && ended=$((ended + 1))
      done
      [ "$ended" -eq "$total" ] && break
      sleep 10
    done
    bash "$0" status "$queues" ;;
  *) echo "study_queue_gpu.sh: unknown action $action (start, status, wait)" >&2; exit 2 ;;
esac
