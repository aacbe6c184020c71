#!/usr/bin/env bash
# Run the suite on an air-gapped GPU runner (no internet): install the wheelhouses copied next
# to the repository, detect the GPU class, run pytest for that class with the given arguments,
# and pack the run folder and the class's baselines into results.tgz to copy back.
#   usage: bash scripts/offline-run.sh [pytest args...]            (-m <class> is added for you)
#          bash scripts/offline-run.sh trainperf fidelity CASE ...  (a trainperf command instead)
#          bash scripts/offline-run.sh --install-only    install the wheelhouses and stop (then run
#                       several pytest processes at once, e.g. one --perf-shard per GPU, each through
#                       this script from a copy without the wheelhouse folders: none installs twice)
# Wheelhouses it installs, when present (made elsewhere with scripts/offline-wheels.sh and
# scripts/offline-verl-stack.sh):
#   .whl/ or .whl-hf/ (or its parts .whl-hf-a/, ...)  the 'hf' stack and the suite's own
#                       dependencies                       -> $TRAINPERF_SITE_ROOT/site
#   .whl-unsloth-*/     the 'unsloth' workload environment     -> $TRAINPERF_SITE_ROOT/site-unsloth
#   unpacked verl sites (offline-verl-stack.sh --unpack)       -> the 'verl-vllm' / 'verl-sglang' environments
# Variables:
#   TRAINPERF_OUT (or OUT)  where results.tgz and the log go (default ./reports/out)
#   PERF_WALL_S             wall-clock limit of the whole run in seconds (default: none): pytest is
#                           stopped with SIGINT before a connection's or a CI step's own limit cuts
#                           it, so that it still prints its summary and the results are packed
#   LOG_NAME                the log's file name under the output folder (default pytest)
#   PERF_PACK_TRACES=1      pack profiler traces too (large; their analysis is in the results anyway)
#   TRAINPERF_SITE_ROOT     where the wheelhouses are installed (default /tmp; what an earlier run
#                           installed there is found again by a later one on the same runner)
set -uo pipefail
export PYTHONUNBUFFERED=1
site_root=${TRAINPERF_SITE_ROOT:-/tmp}
# The 'hf' family's wheels: .whl/ (all of them) or .whl-hf/ (all but bitsandbytes, small enough to
# travel beside a part of the verl stack). What an earlier run installed stays in $site_root/site,
# so a run that brings none still finds it. .whl/ is a superset of .whl-hf/: when the repo copy
# holds both (one copied for an earlier run, one for this), pip refuses the same wheel twice, so
# take .whl/ alone.
# scripts/offline-wheels.sh hf writes its parts as .whl-hf-a/, .whl-hf-b/, ...: those count as .whl-hf/.
hf_wheels=$(ls .whl/*.whl 2>/dev/null || ls .whl-hf/*.whl .whl-hf-?/*.whl 2>/dev/null)
if [ -n "$hf_wheels" ]; then
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site_root/site" $hf_wheels || exit 1
fi
if [ -d "$site_root/site" ]; then
  # A caller's PYTHONPATH (a family's own wheels, e.g. $site_root/site-verl) stays in front.
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$site_root/site"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
# The 'unsloth' workload environment from its wheelhouse (scripts/offline-wheels.sh unsloth: the
# .whl-unsloth-*/ parts, plus .whl/'s bitsandbytes, dill and multiprocess), installed beside the
# image's torch/transformers/peft. The image's layout is not
# ours to assume (a venv with --system-site-packages may not see its packages), so the
# environment's "interpreter" is a wrapper that puts that folder first on the path; the suite
# runs sft_unsloth children through .venvs/unsloth/bin/python without the 'hf' PYTHONPATH above.
if compgen -G ".whl-unsloth-*/*.whl" > /dev/null; then
  # The wheels it shares with the 'hf' stack travel once, in .whl/ or .whl-hf-?/; a part of the
  # unsloth wheelhouse that holds them too is taken as it is (pip refuses one wheel given twice).
  shared=""
  for wheel in $(ls .whl/bitsandbytes-*.whl .whl/dill-*.whl .whl/multiprocess-*.whl \
                    .whl-hf-?/bitsandbytes-*.whl .whl-hf-?/dill-*.whl .whl-hf-?/multiprocess-*.whl 2>/dev/null); do
    name=$(basename "$wheel")
    compgen -G ".whl-unsloth-*/$name" > /dev/null || [[ " $shared " == *"/$name "* ]] || shared="$shared $wheel"
  done
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site_root/site-unsloth" \
    .whl-unsloth-*/*.whl $shared || exit 1
  mkdir -p .venvs/unsloth/bin
  printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' "$site_root/site-unsloth" "$(command -v python3)" \
    > .venvs/unsloth/bin/python
  chmod +x .venvs/unsloth/bin/python
  python3 -m trainperf.cli env list
fi
# The 'verl-vllm' and 'verl-sglang' workload environments, unpacked by scripts/offline-verl-stack.sh
# [--engine sglang] --unpack into $site_root/site-verl or $site_root/site-sglang (kept between
# runs); a wrapper interpreter each, as for unsloth. FlashInfer is not in the
# lean vLLM set, so vLLM must not ask for its sampler. Wheels for the vLLM environment that are not
# in its packed site (.whl-verl/extra: e.g. antlr4, an sdist-only dependency of omegaconf built into
# a wheel here) go into the same folder.
for engine in vllm sglang; do
  site=$site_root/site-verl; [ "$engine" = sglang ] && site=$site_root/site-sglang
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
if [ "${1:-}" = "--install-only" ]; then
  echo "offline-run: wheelhouses installed under $site_root"
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv
gpu_class=$(python3 -m trainperf.cli env --class-only)
echo "GPU class: $gpu_class"
out=${TRAINPERF_OUT:-${OUT:-reports/out}}
mkdir -p "$out"
# Stop pytest (SIGINT: it still prints its summary and the children are killed) before the
# runner's own limit, so that the results are always packed below.
if [ "${1:-}" = "trainperf" ]; then  # a trainperf command instead of pytest (e.g. fidelity)
  command=(python3 -m trainperf.cli "${@:2}")
else
  # -p loads the plugin from the checkout; where trainperf is installed it is the same plugin
  # (the entry point has the module's name), not a second one.
  command=(python3 -m pytest -p trainperf.plugin -m "$gpu_class" -rA "$@")
fi
limit=(); [ -n "${PERF_WALL_S:-}" ] && limit=(timeout --signal=INT "$PERF_WALL_S")
"${limit[@]}" "${command[@]}" 2>&1 | tee "$out/${LOG_NAME:-pytest}.log"
rc=${PIPESTATUS[0]}
# Profiler traces (--perf-trace) are large: packed only when asked (PERF_PACK_TRACES=1);
# their analysis is in the result files either way.
exclude=(--exclude='*.pt.trace.json*' --exclude='*.safetensors' --exclude='*.parquet')  # synthetic inputs too
[ "${PERF_PACK_TRACES:-0}" = 1 ] && exclude=()
# The output folder may lie under reports/ (the default): leave it, and the tarball, out of it.
out_abs=$(realpath -m "$out")
[[ "$out_abs" == "$PWD"/* ]] && exclude+=(--exclude="${out_abs#"$PWD"/}")
tar czf "$out/results.tgz" "${exclude[@]}" reports baselines
exit "$rc"
