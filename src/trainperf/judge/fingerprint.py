"""The environment fingerprint compared: which of a result's machine and software facts changed (no I/O).

The facts are collected on the parent side by ``trainperf.measure.host``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MACHINE_KEYS = (
    "gpu_name",
    "driver",
    "cuda_driver",
    "power_limit_w",
    "cpu_model",
    "cpu_id",
    "cpu_isa",
    "cpu_count",
)
"""Where a run ran: the machine's facts."""
SOFTWARE_KEYS = (
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
"""What a run ran with: the stack's versions (what an upgrade moves)."""
COMPARED_KEYS = MACHINE_KEYS + SOFTWARE_KEYS
"""Keys whose change between baseline and run is worth a line in the report."""


def environment_changes(
    baseline: Mapping[str, Any], current: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    return [
        (key, baseline.get(key), current.get(key))
        for key in COMPARED_KEYS
        if baseline.get(key) != current.get(key) and (key in baseline or key in current)
    ]
