#!/usr/bin/env bash
# Which recipe difference makes Qwen3-32B LoRA at batch 4 run out of memory on the 96 GB Max-Q
# (published, E2) while the suite's case fits there: emulated Max-Q runs (--perf-emulate maxq, on
# a GPU with more memory than 96 GB) of the catalogue's case and of one variant per difference.
#   usage: bash benchmarks/maxq_recipe_gpu.sh      (variables: STEPS, default 10)
# Runs through scripts/offline-run.sh (wheels from .whl/); prints one table last.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${TRAINPERF_OUT:-${OUT:-reports/out}}
mkdir -p reports/maxq-recipe "$bundle"
cat > perf_tests/test_maxq_recipe_variants.py <<'PY'
"""Variants of the Qwen3-32B LoRA batch-4 case, one recipe difference each (benchmarks/maxq_recipe_gpu.sh)."""
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

BASE = {"family": "sft_hf", "model": "qwen3_32b", "method": "lora", "batch_size": 4, "gpu_classes": ("maxq",)}
VARIANTS = [
    Case(**BASE, profile="long"),                                # the catalogue's case
    Case(**BASE, profile="long", gradient_checkpointing=False),  # no gradient checkpointing
    Case(**BASE, profile="maxlen"),                              # every batch as long as the longest
]

@pytest.mark.parametrize("case", params(VARIANTS))
def test_variant(case, trainperf):
    trainperf(case)
PY
TRAINPERF_OUT=reports/maxq-recipe LOG_NAME=pytest PERF_WALL_S=${PERF_WALL_S:-560} bash scripts/offline-run.sh \
  perf_tests/test_maxq_recipe_variants.py -m maxq --perf-emulate maxq --perf-steps "${STEPS:-10}" \
  --perf-output reports/maxq-recipe/runs > /dev/null 2>&1
echo "rc=$?"
rm -f perf_tests/test_maxq_recipe_variants.py
python3 - <<'PY'
import json, pathlib
print(f"{'case':<40} {'outcome':<8} {'alloc GiB':>9} {'device GiB':>10}  message")
for path in sorted(pathlib.Path("reports/maxq-recipe").glob("runs/*/results/*.json")):
    r = json.loads(path.read_text())
    m = r.get("metrics") or {}
    alloc = (m.get("peak_allocated_gib") or {}).get("value")
    dev = (m.get("device_mem_peak_gib") or {}).get("value")
    print(f"{r['case_id']:<40} {r['outcome']:<8} {alloc if alloc is not None else '-':>9} {dev if dev is not None else '-':>10}  {(r.get('message') or '')[:90]}")
PY
tar czf "$bundle/maxq-recipe.tgz" --exclude='*.safetensors' --exclude='*.parquet' reports/maxq-recipe
