#!/usr/bin/env bash
# Long jobs on a GPU runner reached through short-lived connections (an ssh session that drops,
# a remote-command service or CI step that ends, at its time limit, every process it started):
# start a command detached, in its own process session, and follow it from later connections.
#   bash scripts/offline-job.sh start NAME 'COMMAND; COMMAND ...'   returns at once
#   bash scripts/offline-job.sh wait NAME [SECONDS]                 follow it, then collect
#   bash scripts/offline-job.sh list
# The job runs in its own copy of the repo ($TRAINPERF_JOBS/NAME/repo), so that later
# connections, which may refresh the repo and copy in other folders (the next stack's parts),
# cannot disturb it. Its COMMAND sees OUT=$TRAINPERF_JOBS/NAME/out (offline-run.sh packs
# results.tgz there).
# `wait` returns when the job ends or after SECONDS (default: when it ends; give SECONDS where a
# connection to the runner is cut after a while, to return inside it), and copies into the output folder (TRAINPERF_OUT or OUT, default ./reports/out) the
# job's out/ files, its log and, while it still runs, a snapshot of its reports/ and baselines/
# (results-partial.tgz), so that nothing is lost if the runner goes away before the job ends.
# Variables: TRAINPERF_JOBS (default /tmp/trainperf-jobs), TRAINPERF_JOBS_POLL_S (default 10).
set -uo pipefail
jobs_root=${TRAINPERF_JOBS:-/tmp/trainperf-jobs}
poll_s=${TRAINPERF_JOBS_POLL_S:-10}
usage() { echo "usage: offline-job.sh start NAME 'COMMAND' | wait NAME [SECONDS] | list" >&2; exit 2; }
running() { [[ -s "$1/pid" ]] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

verb=${1:-}; name=${2:-}
case "$verb" in
  start)
    [[ -n "$name" && -n "${3:-}" ]] || usage
    job="$jobs_root/$name"
    if running "$job"; then echo "job $name is already running (pid $(cat "$job/pid"))"; exit 1; fi
    rm -rf "$job"; mkdir -p "$job/out"
    # The repo without the stacks' parts and downloads (kept outside it by --stash),
    # earlier reports, git's objects and local virtual environments.
    excludes=(./.git ./.venv ./reports ./.whl-verl/site ./.whl-verl/download './.whl-verl/batch-*' ./.whl-sglang
              ./.mypy_cache ./.ruff_cache)
    if ! tar -cf - --hard-dereference "${excludes[@]/#/--exclude=}" . | tar -xf - -C "$job" --one-top-level=repo; then
      rm -rf "$job"; echo "could not copy the repo to $job/repo (disk full?)"; exit 1
    fi
    printf '%s\n' "$3" > "$job/command"
    date +%s > "$job/started"
    # Only the job itself goes to the background (not a subshell around it that would hold the
    # caller's output open), with every descriptor pointed away from the caller and
    # the others closed (a runner may wait for a pipe of its own that the job would inherit).
    (cd "$job/repo" || exit 1
     for fd in /proc/$BASHPID/fd/*; do n=${fd##*/}; if (( n > 2 )); then eval "exec $n>&-"; fi; done 2>/dev/null
     OUT="$job/out" setsid nohup bash -c "( $3 ); echo \$? > '$job/rc'" > "$job/log" 2>&1 < /dev/null &
     echo $! > "$job/pid")
    sleep 2
    echo "job $name started (pid $(cat "$job/pid")): $3"
    tail -n 5 "$job/log" ;;
  wait)
    [[ -n "$name" ]] || usage
    job="$jobs_root/$name"
    [[ -d "$job" ]] || { echo "no job named $name: start it first (offline-job.sh list shows the jobs here)"; exit 2; }
    limit=${3:-0}; waited=0; last=""
    while running "$job" && (( limit == 0 || waited < limit )); do
      sleep "$poll_s"; waited=$((waited + poll_s))
      # The suite's own progress lines ([trainperf] ... step k/n), one per change.
      line=$(grep -a '^\[trainperf\]' "$job/log" | tail -n 1)
      if [[ -n "$line" && "$line" != "$last" ]]; then echo "$line"; last=$line; fi
    done
    out=${TRAINPERF_OUT:-${OUT:-reports/out}}; mkdir -p "$out"
    cp "$job/log" "$out/$name.log"
    elapsed=$(( $(date +%s) - $(cat "$job/started") ))
    if running "$job"; then
      (cd "$job/repo" && tar czf "$out/results-partial.tgz" --exclude='*.safetensors' --exclude='*.parquet' \
        --exclude='*.pt.trace.json*' reports baselines 2>/dev/null)
      echo "job $name: still running after ${elapsed}s; snapshot in results-partial.tgz; run wait again"
      exit 0
    fi
    cp -r "$job/out/." "$out/" 2>/dev/null
    rc=$(cat "$job/rc" 2>/dev/null || echo "unknown (killed?)")
    echo "job $name: finished after ${elapsed}s, rc $rc"
    [[ "$rc" == 0 ]] ;;
  list)
    for job in "$jobs_root"/*/; do
      [[ -d "$job" ]] || continue
      state="finished, rc $(cat "$job/rc" 2>/dev/null || echo '?')"; running "$job" && state=running
      echo "$(basename "$job"): $state: $(cat "$job/command")"
    done ;;
  *) usage ;;
esac
