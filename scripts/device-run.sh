#!/usr/bin/env bash
# Run the suite on a lent GPU machine (the workplace's `device` tool): install the carried
# wheels, detect the GPU class, run pytest for that class with the given arguments, and pack
# the run folder and the class's baselines into $OUT/results.tgz.
#   usage: bash scripts/device-run.sh [pytest args...]   (-m <class> is added for you)
set -uo pipefail
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  # A caller's PYTHONPATH (a family's own wheels, e.g. /tmp/site-verl) stays in front.
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/site"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv
gpu_class=$(python3 -m trainperf.cli env --class-only)
echo "GPU class: $gpu_class"
out=${OUT:-/tmp/out}
mkdir -p "$out"
# Stop pytest (SIGINT: it still prints its summary and the children are killed) before the
# device tool's own limit, so that the results are always packed below.
timeout --signal=INT "${PERF_WALL_S:-540}" \
  python3 -m pytest -p trainperf.plugin -m "$gpu_class" -rA "$@" 2>&1 | tee "$out/${LOG_NAME:-pytest}.log"
rc=${PIPESTATUS[0]}
tar czf "$out/results.tgz" --exclude='*.pt.trace.json*' reports baselines
exit "$rc"
