#!/usr/bin/env bash
# Download the wheels of a workload environment for the GPU runner image (Python 3.12,
# manylinux x86_64), without dependencies: exactly the pins of ci/envs/NAME.txt (both sections),
# minus what the image already has (ci/envs/gpu-image.txt) and what .whl/ already holds.
# They are split into folders of at most 60 MB (.whl-NAME-a/, .whl-NAME-b/, ...) because one
# device call carries at most 64 MiB; each folder travels in its own call.
#   usage: bash scripts/fetch-wheels.sh NAME [DEST_ROOT]      (default DEST_ROOT: the repository)
set -euo pipefail
name=${1:?usage: fetch-wheels.sh NAME [DEST_ROOT]}
root=$(cd "$(dirname "$0")/.." && pwd)
dest_root=${2:-$root}
spec="$root/ci/envs/$name.txt"
[ -f "$spec" ] || { echo "fetch-wheels: no spec $spec" >&2; exit 2; }
python=${PYTHON:-python3}
pins=$(grep -E '^[A-Za-z0-9_.-]+==' "$spec" | sed 's/[[:space:]].*//' | sort -u)
have=$(grep -E '^[A-Za-z0-9_.-]+==' "$root/ci/envs/gpu-image.txt" | sed 's/[[:space:]].*//')
norm() { echo "$1" | tr 'A-Z_.' 'a-z--'; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for pin in $pins; do
  pkg=${pin%%==*}; ver=${pin#*==}
  if echo "$have" | grep -qix "$pin"; then echo "skip $pin (in the GPU image)"; continue; fi
  if compgen -G "$dest_root/.whl/$(echo "$pkg" | tr '-' '_')-$ver-*.whl" >/dev/null \
     || compgen -G "$dest_root/.whl/$pkg-$ver-*.whl" >/dev/null; then echo "skip $pin (in .whl/)"; continue; fi
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any --implementation cp --abi cp312 --abi abi3 --abi none \
    -d "$stage" "$pin"
done
# First-fit into <= 60 MB groups, largest first.
limit=$((60 * 1000 * 1000)); group=0; used=0
rm -rf "$dest_root"/.whl-"$name"-?
for wheel in $(ls -S "$stage"/*.whl); do
  size=$(stat -c %s "$wheel")
  if [ "$used" -gt 0 ] && [ $((used + size)) -gt "$limit" ]; then group=$((group + 1)); used=0; fi
  dir="$dest_root/.whl-$name-$(printf "\\x$(printf %x $((97 + group)))")"
  mkdir -p "$dir"; mv "$wheel" "$dir/"; used=$((used + size))
done
du -sh "$dest_root"/.whl-"$name"-?
