#!/usr/bin/env bash
# Build a wheelhouse for an air-gapped GPU runner: download the wheels of a workload environment
# (ci/envs/NAME.txt, both sections: exactly its pins, without dependencies) for the runner's
# Python and platform, minus what the runner's image already has (ci/envs/gpu-image.txt) and what
# .whl/ already holds. The wheels are split into parts of at most TRAINPERF_PART_MIB each
# (.whl-NAME-a/, .whl-NAME-b/, ...) so that each part fits one copy where the transfer to the
# runner is limited per copy; copy them next to the repository on the runner, where
# scripts/offline-run.sh installs them.
#   usage: bash scripts/offline-wheels.sh NAME [DEST_ROOT]      (default DEST_ROOT: the repository)
# Variables:
#   TRAINPERF_PART_MIB       largest part in MiB, where copies to the runner are limited in size
#                            (default 0: one part, .whl-NAME-a/)
#   TRAINPERF_WHEEL_PYTHON   the runner's Python version (default 3.12; platform manylinux x86_64)
#   PYTHON                   the interpreter that runs pip here (default python3)
set -euo pipefail
name=${1:?usage: offline-wheels.sh NAME [DEST_ROOT]}
root=$(cd "$(dirname "$0")/.." && pwd)
dest_root=${2:-$root}
spec="$root/ci/envs/$name.txt"
[ -f "$spec" ] || { echo "offline-wheels: no spec $spec (the environments are ci/envs/*.txt)" >&2; exit 2; }
python=${PYTHON:-python3}
pyver=${TRAINPERF_WHEEL_PYTHON:-3.12}
abi=cp${pyver//./}
pins=$(grep -E '^[A-Za-z0-9_.-]+==' "$spec" | sed 's/[[:space:]].*//' | sort -u)
# The suite's own dependencies travel too (the results store needs SQLAlchemy, the default store
# folder platformdirs): a runner image without them would record no history. Pinned to the
# versions this machine's suite runs with, where it has them.
# dill and multiprocess: what the hf stack's datasets needs that a runner image may lack.
for dep in sqlalchemy platformdirs dill multiprocess; do
  version=$("$python" -c "import importlib.metadata as m; print(m.version('$dep'))" 2>/dev/null) || version=""
  if [ -n "$version" ]; then pins="$pins $dep==$version"; else pins="$pins $dep"; fi
done
shared_with_hf="bitsandbytes dill multiprocess"
have=$(grep -E '^[A-Za-z0-9_.-]+==' "$root/ci/envs/gpu-image.txt" | sed 's/[[:space:]].*//')
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for pin in $pins; do
  pkg=${pin%%==*}; ver=${pin#*==}; [ "$ver" = "$pin" ] && ver=""
  if echo "$have" | grep -qix "$pin"; then echo "skip $pin (in the GPU image)"; continue; fi
  if compgen -G "$dest_root/.whl/$(echo "$pkg" | tr '-' '_')-$ver-*.whl" >/dev/null \
     || compgen -G "$dest_root/.whl/$pkg-$ver-*.whl" >/dev/null; then echo "skip $pin (in .whl/)"; continue; fi
  # What the unsloth environment shares with the 'hf' stack (offline-run.sh installs it into both
  # from one copy): a wheel already in the hf parts does not travel twice.
  if [ "$name" = unsloth ] && [[ " $shared_with_hf " == *" $pkg "* ]] && [ -n "$ver" ] \
     && compgen -G "$dest_root/.whl-hf-?/$(echo "$pkg" | tr '-' '_')-$ver-*.whl" >/dev/null; then
    echo "skip $pin (in the hf parts)"; continue
  fi
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any --implementation cp --abi "$abi" --abi abi3 --abi none \
    -d "$stage" "$pin"
done
# First-fit into parts of at most TRAINPERF_PART_MIB, largest first.
limit=$((${TRAINPERF_PART_MIB:-0} * 1024 * 1024)); group=0; used=0
rm -rf "$dest_root"/.whl-"$name"-?
for wheel in $(ls -S "$stage"/*.whl); do
  size=$(stat -c %s "$wheel")
  if [ "$limit" -gt 0 ] && [ "$used" -gt 0 ] && [ $((used + size)) -gt "$limit" ]; then group=$((group + 1)); used=0; fi
  dir="$dest_root/.whl-$name-$(printf "\\x$(printf %x $((97 + group)))")"
  mkdir -p "$dir"; mv "$wheel" "$dir/"; used=$((used + size))
done
du -sh "$dest_root"/.whl-"$name"-?
