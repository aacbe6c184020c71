"""The environment fingerprint compared: which of a result's machine and software facts changed (no I/O).

The facts are collected on the parent side by ``trainperf.measure.host``."""

from __future__ import annotations

from typing import Any

# Keys whose change between baseline and run is worth a line in the report.
COMPARED_KEYS = (
    "gpu_name",
    "driver",
    "cuda_driver",
    "power_limit_w",
    "cpu_model",
    "cpu_id",
    "cpu_isa",
    "cpu_count",
    "torch",
    "torch_cuda",
    "transformers",
    "peft",
    "trl",
    "accelerate",
    "datasets",
    "bitsandbytes",
    "unsloth",
    "verl",
    "vllm",
    "sglang",
)


def environment_changes(baseline: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [
        (key, baseline.get(key), current.get(key))
        for key in COMPARED_KEYS
        if baseline.get(key) != current.get(key) and (key in baseline or key in current)
    ]
