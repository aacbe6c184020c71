#!/usr/bin/env bash
# One upgrade study (trainperf ab between two candidate environments) on an air-gapped GPU runner.
# The first call installs the suite's stack from BASE_WHEELS into the runner's interpreter (the
# packages its image lacks: trl, datasets, SQLAlchemy, ...); candidates are built from
# CANDIDATE_WHEELS, layered over that interpreter. The GPU class is detected and added as -m.
#   usage: bash benchmarks/upgrade_gpu.sh NAME [trainperf ab options...] -- [pytest selection...]
#   e.g.   bash benchmarks/upgrade_gpu.sh transformers-5.0.0-5.24.0 --pin-a transformers==5.0.0 \
#            --pin-b transformers==5.24.0 --rounds 2 -- -k "qwen3_8b and lora and maxlen" --perf-steps 20
# Variables:
#   BASE_WHEELS        wheels of the stack the runner lacks (default .whl-up/base)
#   CANDIDATE_WHEELS   wheels of the candidates' pins and what they move (default .whl-up/cand)
#   STUDIES            folder of the studies (default $OUT/studies, else reports/studies)
#   STUDY_WALL_S       wall-clock limit of one study in seconds (default 3600)
#   COMMAND            the study command (default ab; e.g. "bisect trl 1.0.0..1.16.0" for a bisection)
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
name=${1:?usage: upgrade_gpu.sh NAME [trainperf ab options...] -- [pytest selection...]}
shift
base=${BASE_WHEELS:-.whl-up/base}
cand=$(realpath "${CANDIDATE_WHEELS:-.whl-up/cand}")
studies=${STUDIES:-${OUT:+$OUT/studies}}
studies=${studies:-reports/studies}
marker=/tmp/trainperf-upgrade-stack-installed
if [ ! -e "$marker" ] && compgen -G "$base/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check "$base"/*.whl || exit 1
  touch "$marker"
fi
gpu_class=$(python3 -m trainperf.cli env --class-only)
options=(); selection=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do options+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
selection=("$@")
# A study run again (the runner restarted, the wall-clock limit hit) continues from its measured rounds.
[ "${COMMAND:-ab}" = ab ] && options+=(--resume)
echo "== study $name on $gpu_class: ${options[*]} -- ${selection[*]}"
# shellcheck disable=SC2086 # COMMAND is the subcommand and its positional arguments
timeout --signal=INT "${STUDY_WALL_S:-3600}" python3 -m trainperf.cli ${COMMAND:-ab} --wheelhouse "$cand" \
  --output "$studies/$name" "${options[@]}" -- -p trainperf.plugin perf_tests -m "$gpu_class" "${selection[@]}"
status=$?
echo "== study $name: exit status $status"
exit "$status"
