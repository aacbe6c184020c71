#!/usr/bin/env bash
# Bring the verl-vLLM stack to an offline GPU runner in as few device calls as possible.
# Here (any x86-64 or not, no GPU): install the lean set (scripts/verl-vllm-lean.txt without its
# "maybe" lines) plus scripts/verl-vllm-extra.txt for CPython 3.12 into a folder, prune what a
# Hopper PPO/GRPO run on a dense model cannot load, and cut one xz tarball into < 60 MiB parts:
#   bash scripts/pack-verl-site.sh                 -> .whl-verl/site/part-NN (carry one per call)
# On the runner, each call keeps its part outside the repo copy (kept while the machine is warm):
#   bash scripts/pack-verl-site.sh --stash         -> /tmp/verl-parts/
#   bash scripts/pack-verl-site.sh --unpack        -> /tmp/site-verl (after the last part)
# Pruned, each worth a whole device call: vLLM's FlashAttention-2 kernels (Hopper runs FA3; FA2
# is Ampere's; vLLM imports each in try/except), its MoE kernels (dense models only; imported
# under contextlib.suppress), its Rust front end (used only with VLLM_RUST_FRONTEND_PATH) and
# Ray's Java jar. Add a file back here if a run says it is missing.
set -euo pipefail
dir=.whl-verl
case "${1:-}" in
  --stash)
    mkdir -p /tmp/verl-parts
    cp "$dir"/site/part-* /tmp/verl-parts/
    ls -la /tmp/verl-parts; exit 0 ;;
  --unpack)
    [[ -s /tmp/verl-parts/SHA256SUMS || -s "$dir/site/SHA256SUMS" ]] || { echo "no SHA256SUMS: carry the folder with the checksum file"; exit 1; }
    cp "$dir"/site/SHA256SUMS /tmp/verl-parts/ 2>/dev/null || true
    (cd /tmp/verl-parts && sha256sum -c --quiet SHA256SUMS) || { echo "a part is missing or corrupt: carry it again"; exit 1; }
    mkdir -p /tmp/site-verl
    # xz -T0 decompresses the blocks of a multi-threaded archive in parallel (xz >= 5.4).
    cat /tmp/verl-parts/part-* | xz -T0 -dc | tar -x -C /tmp/site-verl
    echo "unpacked into /tmp/site-verl: export PYTHONPATH=/tmp/site-verl:\$PYTHONPATH"; exit 0 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir/download" "$dir/site"
{ grep -E '^[a-z]' "$here/verl-vllm-lean.txt" | grep -Ev '# *[0-9.]+ +maybe' | cut -f1
  grep -E '^[a-z]' "$here/verl-vllm-extra.txt"; } > "$dir/requirements-site.txt"
platforms=(--platform any --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in $(seq 5 39); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -r "$dir/requirements-site.txt" -d "$dir/download"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" --target "$build/site" \
  $(sed -E 's/[=<>!].*//' "$dir/requirements-site.txt" | while read -r name; do
      ls "$dir"/download/"$(echo "$name" | tr '-' '_')"-*.whl "$dir"/download/"$name"-*.whl 2>/dev/null | head -1; done | sort -u)
rm -f "$build"/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so \
      "$build"/site/vllm/_moe_C_stable_libtorch.abi3.so \
      "$build"/site/vllm/vllm-rs \
      "$build"/site/ray/jars/ray_dist.jar
find "$build/site" -name '__pycache__' -prune -exec rm -rf {} +
rm -f "$dir"/site/part-* "$dir"/site/SHA256SUMS
tar -C "$build/site" -cf - . | xz -T0 -6 > "$build/site.tar.xz"
# Equal parts of at most 60 MiB, so that each call has room left for the repo and small wheels.
size=$(stat -c %s "$build/site.tar.xz"); limit=$((60 * 1024 * 1024))
split -n $(((size + limit - 1) / limit)) -d "$build/site.tar.xz" "$dir/site/part-"
(cd "$dir/site" && sha256sum part-* > SHA256SUMS)
du -sh "$build/site"; ls -la "$dir/site"
echo "$(ls "$dir"/site/part-* | wc -l) parts under $dir/site: carry .whl-verl/site with one part each call"
