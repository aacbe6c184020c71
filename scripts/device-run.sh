#!/usr/bin/env bash
# Run the suite on a lent GPU machine (the workplace's `device` tool): install the carried
# wheels, detect the GPU class, run pytest for that class with the given arguments, and pack
# the run folder and the class's baselines into $OUT/results.tgz.
#   usage: bash scripts/device-run.sh [pytest args...]   (-m <class> is added for you)
#          bash scripts/device-run.sh trainperf fidelity CASE ...   (a trainperf command instead)
set -uo pipefail
export PYTHONUNBUFFERED=1
# The 'hf' family's wheels: .whl/ (all of them) or .whl-hf/ (all but bitsandbytes, small enough to
# travel beside a part of the verl stack). What an earlier call installed stays in
# /tmp/site while the machine is warm, so a call that carries none still finds it.
# .whl/ is a superset of .whl-hf/: when a warm machine's repo copy holds both (an earlier call
# carried one, this call the other), pip refuses the same wheel twice, so take .whl/ alone.
hf_wheels=$(ls .whl/*.whl 2>/dev/null || ls .whl-hf/*.whl 2>/dev/null)
if [ -n "$hf_wheels" ]; then
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $hf_wheels || exit 1
fi
if [ -d /tmp/site ]; then
  # A caller's PYTHONPATH (a family's own wheels, e.g. /tmp/site-verl) stays in front.
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/tmp/site"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The 'unsloth' workload environment from carried wheels (scripts/fetch-wheels.sh unsloth: the
# .whl-unsloth-*/ folders, each carried in its own call, plus .whl/'s bitsandbytes, dill and
# multiprocess), installed beside the image's torch/transformers/peft. The image's layout is not
# ours to assume (a venv with --system-site-packages may not see its packages), so the
# environment's "interpreter" is a wrapper that puts that folder first on the path; the suite
# runs sft_unsloth children through .venvs/unsloth/bin/python without the 'hf' PYTHONPATH above.
if compgen -G ".whl-unsloth-*/*.whl" > /dev/null; then
  shared=$(ls .whl/bitsandbytes-*.whl .whl/dill-*.whl .whl/multiprocess-*.whl 2>/dev/null)
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-unsloth \
    .whl-unsloth-*/*.whl $shared || exit 1
  mkdir -p .venvs/unsloth/bin
  printf '#!/bin/sh\nPYTHONPATH=/tmp/site-unsloth${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$(command -v python3)" \
    > .venvs/unsloth/bin/python
  chmod +x .venvs/unsloth/bin/python
  python3 -m trainperf.cli env list
fi
# The 'verl-vllm' and 'verl-sglang' workload environments, unpacked by scripts/pack-verl-site.sh
# [--engine sglang] --unpack into /tmp/site-verl or /tmp/site-sglang (they survive between calls
# while the machine is warm); a wrapper interpreter each, as for unsloth. FlashInfer is not in the
# lean vLLM set, so vLLM must not ask for its sampler. Wheels for the vLLM environment that are not
# in its packed site (.whl-verl/extra: e.g. antlr4, an sdist-only dependency of omegaconf built into
# a wheel here) go into the same folder.
for engine in vllm sglang; do
  site=/tmp/site-verl; [ "$engine" = sglang ] && site=/tmp/site-sglang
  [ -d "$site/verl" ] || continue
  extra=""
  if [ "$engine" = vllm ]; then
    extra="VLLM_USE_FLASHINFER_SAMPLER=0 "
    if compgen -G ".whl-verl/extra/*.whl" > /dev/null; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        .whl-verl/extra/*.whl || exit 1
    fi
  fi
  mkdir -p ".venvs/verl-$engine/bin"
  printf '#!/bin/sh\n%sPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$extra" "$site" "$(command -v python3)" \
    > ".venvs/verl-$engine/bin/python"
  chmod +x ".venvs/verl-$engine/bin/python"
  python3 -m trainperf.cli env list
done
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv
gpu_class=$(python3 -m trainperf.cli env --class-only)
echo "GPU class: $gpu_class"
out=${OUT:-/tmp/out}
mkdir -p "$out"
# Stop pytest (SIGINT: it still prints its summary and the children are killed) before the
# device tool's own limit, so that the results are always packed below.
if [ "${1:-}" = "trainperf" ]; then  # a trainperf command instead of pytest (e.g. fidelity)
  command=(python3 -m trainperf.cli "${@:2}")
else
  command=(python3 -m pytest -p trainperf.plugin -m "$gpu_class" -rA "$@")
fi
timeout --signal=INT "${PERF_WALL_S:-540}" "${command[@]}" 2>&1 | tee "$out/${LOG_NAME:-pytest}.log"
rc=${PIPESTATUS[0]}
# Profiler traces (--perf-trace) are large: packed only when asked (PERF_PACK_TRACES=1);
# their analysis is in the result files either way.
exclude=(--exclude='*.pt.trace.json*' --exclude='*.safetensors' --exclude='*.parquet')  # synthetic inputs too
[ "${PERF_PACK_TRACES:-0}" = 1 ] && exclude=()
tar czf "$out/results.tgz" "${exclude[@]}" reports baselines
exit "$rc"
