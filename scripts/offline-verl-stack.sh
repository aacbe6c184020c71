#!/usr/bin/env bash
# Bring a verl stack (with the vLLM or the SGLang engine) to an air-gapped GPU runner in as few
# copies as possible, where the transfer to the runner is limited per copy.
# On a machine with internet (any x86-64, no GPU needed): install the engine's lean set
# (scripts/verl-<engine>-lean.txt without its "maybe" lines, plus scripts/verl-vllm-extra.txt for
# vLLM) for the runner's Python into a folder, prune what a Hopper (sm90) PPO/GRPO run on a dense
# model cannot load, and cut one xz tarball into parts of at most TRAINPERF_PART_MIB each:
#   bash scripts/offline-verl-stack.sh [--engine sglang]            -> .whl-verl/site/part-NN (vLLM)
#                                                                      .whl-sglang/site/part-NN (SGLang)
# On the runner, each part copied into the repository is stashed outside it (so the next copy can
# replace it), then all are checked and unpacked:
#   bash scripts/offline-verl-stack.sh [--engine sglang] --stash    -> $TRAINPERF_SITE_ROOT/<engine>-parts/
#   bash scripts/offline-verl-stack.sh [--engine sglang] --unpack   -> $TRAINPERF_SITE_ROOT/site-verl, site-sglang
# where scripts/offline-run.sh finds them and makes the 'verl-vllm' / 'verl-sglang' environments.
# Parts cut to another limit are re-cut (same tarball, no rebuild):
#   bash scripts/offline-verl-stack.sh [--engine sglang] --resplit
# Variables:
#   TRAINPERF_PART_MIB      largest part in MiB, where copies to the runner are limited in size
#                           (default 0: one part)
#   TRAINPERF_WHEEL_PYTHON  the runner's Python version (default 3.12)
#   TRAINPERF_SITE_ROOT     where the runner keeps parts and unpacked sites (default /tmp)
# Pruned, each worth a whole part; add a file back here if a run says it is missing.
#  vLLM: its FlashAttention-2 kernels (Hopper runs FA3; FA2 is Ampere's; vLLM imports each in
#   try/except), its MoE kernels (dense models only; imported under contextlib.suppress), its Rust
#   front end (used only with VLLM_RUST_FRONTEND_PATH).
#  SGLang (read from the wheels of sglang-kernel 0.4.2.post2):
#   - sgl_kernel/sm100/common_ops.abi3.so: sgl_kernel/load_utils.py:60-67 picks sm90/common_ops.*
#     when torch reports compute capability 90 (H100/H200) and sm100/ for every other GPU, so the
#     SGLang bundle loads on sm90 GPUs only.
#   - sgl_kernel/flashmla_ops.abi3.so: FlashMLA (DeepSeek MLA attention), loaded only by
#     sgl_kernel/flash_mla.py:5-10 inside try/except, which sgl_kernel/__init__.py does not import;
#     sglang imports it only inside functions of nsa_backend.py and in xpu_backend.py.
#   Kept: sgl_kernel/flash_ops.abi3.so (FA3, the prebuilt Hopper attention). flashinfer-cubin is
#   not in the set: its cubins are trtllm-gen/cute-dsl/deep-gemm kernels (flashinfer/artifacts.py
#   :138-149) that flashinfer/jit/env.py:67-92 only points a cache directory at.
#  Both: Ray's Java jar.
set -euo pipefail
engine=vllm
if [[ "${1:-}" == "--engine" ]]; then engine=${2:?--engine takes vllm or sglang}; shift 2; fi
site_root=${TRAINPERF_SITE_ROOT:-/tmp}
pyver=${TRAINPERF_WHEEL_PYTHON:-3.12}
case "$engine" in
  vllm)   dir=.whl-verl;   site=$site_root/site-verl;   parts=$site_root/verl-parts
          prune=(vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so vllm/_moe_C_stable_libtorch.abi3.so vllm/vllm-rs) ;;
  sglang) dir=.whl-sglang; site=$site_root/site-sglang; parts=$site_root/sglang-parts
          prune=(sgl_kernel/sm100/common_ops.abi3.so sgl_kernel/flashmla_ops.abi3.so) ;;
  *) echo "--engine takes vllm or sglang, not '$engine'"; exit 2 ;;
esac
prune+=(ray/jars/ray_dist.jar)
PART_LIMIT_B=$((${TRAINPERF_PART_MIB:-0} * 1024 * 1024))
# Cut one tarball into equal parts of at most PART_LIMIT_B, with their checksums.
split_parts() {
  local tarball=$1 out=$2 size
  size=$(stat -c %s "$tarball")
  rm -f "$out"/part-* "$out"/SHA256SUMS
  local count=1
  [ "$PART_LIMIT_B" -gt 0 ] && count=$(((size + PART_LIMIT_B - 1) / PART_LIMIT_B))
  split -n "$count" -d "$tarball" "$out/part-"
  (cd "$out" && sha256sum part-* > SHA256SUMS)
  ls -la "$out"
  echo "$(ls "$out"/part-* | wc -l) parts under $out: copy one part (and SHA256SUMS with the last) at a time"
}
case "${1:-}" in
  --stash)
    mkdir -p "$parts"
    cp "$dir"/site/part-* "$parts"/
    ls -la "$parts"; exit 0 ;;
  --unpack)
    [[ -s "$parts/SHA256SUMS" || -s "$dir/site/SHA256SUMS" ]] || { echo "no SHA256SUMS: copy the folder with the checksum file"; exit 1; }
    cp "$dir"/site/SHA256SUMS "$parts"/ 2>/dev/null || true
    (cd "$parts" && sha256sum -c --quiet SHA256SUMS) || { echo "a part is missing or corrupt: copy it again"; exit 1; }
    mkdir -p "$site"
    # xz -T0 decompresses the blocks of a multi-threaded archive in parallel (xz >= 5.4).
    cat "$parts"/part-* | xz -T0 -dc | tar -x -C "$site"
    echo "unpacked into $site: export PYTHONPATH=$site:\$PYTHONPATH"; exit 0 ;;
  --resplit)
    [[ -s "$dir/site/SHA256SUMS" ]] || { echo "no parts under $dir/site: build them first (no option)"; exit 1; }
    (cd "$dir/site" && sha256sum -c --quiet SHA256SUMS) || { echo "the parts under $dir/site are corrupt: rebuild them"; exit 1; }
    whole=$(mktemp); cat "$dir"/site/part-* > "$whole"
    split_parts "$whole" "$dir/site"; rm -f "$whole"; exit 0 ;;
  "") ;;
  *) echo "unknown option '$1': --stash, --unpack, --resplit, or nothing to build the parts"; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir/download" "$dir/site"
{ grep -E '^[a-z]' "$here/verl-$engine-lean.txt" | grep -Ev '# *[0-9.]+ +maybe' | cut -f1
  if [[ "$engine" == vllm ]]; then grep -E '^[a-z]' "$here/verl-vllm-extra.txt"; fi; } > "$dir/requirements-site.txt"
if [[ "$engine" == sglang ]]; then
  # Reuse the wheels fetched for the vLLM stack where name and version match (hard links).
  for f in .whl-verl/download/*.whl .whl-verl/extra/*.whl; do
    [[ -e "$f" ]] || continue
    b=$(basename "$f"); n=$(echo "$b" | cut -d- -f1 | tr '_A-Z' '-a-z'); v=$(echo "$b" | cut -d- -f2)
    if grep -qix "$n==$v" "$dir/requirements-site.txt" && [[ ! -e "$dir/download/$b" ]]; then
      ln -f "$f" "$dir/download/$b" 2>/dev/null || cp "$f" "$dir/download/$b"; fi
  done
fi
# antlr4-python3-runtime 4.9.3, the grammar runtime omegaconf and hydra import when verl reads its
# config, is published as an sdist only: its pure-Python wheel is built once into .whl-verl/extra/.
# Without it verl stops at start ("No module named 'antlr4'") after the runner has paid for the copy.
antlr=antlr4-python3-runtime==4.9.3
if grep -qx "$antlr" "$dir/requirements-site.txt"; then
  compgen -G ".whl-verl/extra/antlr4_python3_runtime-4.9.3-*.whl" >/dev/null \
    || python3 -m pip wheel -q --no-deps "$antlr" -w .whl-verl/extra \
    || { echo "could not build the $antlr wheel into .whl-verl/extra (pip wheel $antlr needs the package index)"; exit 1; }
  for wheel in .whl-verl/extra/antlr4_python3_runtime-4.9.3-*.whl; do
    [[ -e "$dir/download/${wheel##*/}" ]] || cp "$wheel" "$dir/download/"
  done
fi
platforms=(--platform any --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in $(seq 5 39); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
grep -v '^antlr4-python3-runtime' "$dir/requirements-site.txt" > "$dir/requirements-download.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp "${platforms[@]}" \
  -r "$dir/requirements-download.txt" -d "$dir/download"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --only-binary=:all: --python-version "$pyver" \
  --implementation cp "${platforms[@]}" --target "$build/site" \
  $(sed -E 's/==/ /' "$dir/requirements-site.txt" | while read -r name version; do
      u=$(echo "$name" | tr '-' '_')
      ls "$dir"/download/"$u"-"$version"-*.whl "$dir"/download/"$name"-"$version"-*.whl 2>/dev/null | head -1
    done | sort -u)
for path in "${prune[@]}"; do rm -f "$build/site/$path"; done
find "$build/site" -name '__pycache__' -prune -exec rm -rf {} +
tar -C "$build/site" -cf - . | xz -T0 -6 > "$build/site.tar.xz"
du -sh "$build/site"
split_parts "$build/site.tar.xz" "$dir/site"
