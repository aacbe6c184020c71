#!/usr/bin/env bash
# Download the lean verl-vLLM wheel set (scripts/verl-vllm-lean.txt) for an offline GPU runner,
# and cut it into pieces that fit the device tool's 64 MiB per call.
#   bash scripts/fetch-verl-wheels.sh [--with-maybe]     -> .whl-verl/batch-<k>/ (each < 60 MiB)
# On the runner, after carrying every batch folder:   bash scripts/fetch-verl-wheels.sh --install
set -euo pipefail
dir=.whl-verl
if [[ "${1:-}" == "--install" ]]; then
  mkdir -p "$dir/whole"
  for first in "$dir"/batch-*/*.part-aa; do            # reassemble split wheels
    [[ -e "$first" ]] || continue
    name=$(basename "${first%.part-aa}")
    cat "$dir"/batch-*/"$name".part-* > "$dir/whole/$name"
  done
  find "$dir" -name '*.whl' -path '*/batch-*' -exec cp {} "$dir/whole/" \;
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-verl "$dir"/whole/*.whl
  echo "installed into /tmp/site-verl: export PYTHONPATH=/tmp/site-verl:\$PYTHONPATH"
  exit 0
fi
skip='# *[0-9.]+ +maybe'
[[ "${1:-}" == "--with-maybe" ]] && skip='^$'
mkdir -p "$dir/download"
grep -E '^[a-z]' "$(dirname "$0")/verl-vllm-lean.txt" | grep -Ev "$skip" | cut -f1 > "$dir/requirements.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
  -r "$dir/requirements.txt" -d "$dir/download"
# Pack into batches of < 60 MiB, splitting any wheel larger than that.
limit=$((60 * 1024 * 1024)); batch=1; used=0
mkdir -p "$dir/batch-$batch"
for wheel in "$dir"/download/*.whl; do
  size=$(stat -c %s "$wheel")
  if (( size > limit )); then
    split -b "$limit" "$wheel" "$dir/download/$(basename "$wheel").part-"
    for part in "$dir"/download/"$(basename "$wheel")".part-*; do
      batch=$((batch + 1)); mkdir -p "$dir/batch-$batch"; mv "$part" "$dir/batch-$batch/"
    done
    batch=$((batch + 1)); used=0; mkdir -p "$dir/batch-$batch"; continue
  fi
  if (( used + size > limit )); then batch=$((batch + 1)); used=0; mkdir -p "$dir/batch-$batch"; fi
  cp "$wheel" "$dir/batch-$batch/"; used=$((used + size))
done
echo "$(ls -d "$dir"/batch-* | wc -l) batches of < 60 MiB under $dir (carry one per device call)"
