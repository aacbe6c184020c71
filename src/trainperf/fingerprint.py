"""The environment fingerprint: what machine and software a result came from (parent side)."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from trainperf.monitor.nvml import DeviceInfo

# Keys whose change between baseline and run is worth a line in the report.
COMPARED_KEYS = (
    "gpu_name",
    "driver",
    "cuda_driver",
    "power_limit_w",
    "cpu_model",
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


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_fingerprint(device: DeviceInfo | None) -> dict[str, Any]:
    fingerprint: dict[str, Any] = {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    if device is not None:
        fingerprint.update(
            gpu_name=device.name,
            gpu_uuid=device.uuid,
            gpu_memory_gib=round(device.memory_total_b / 2**30, 1),
            driver=device.driver,
            cuda_driver=device.cuda_driver_version,
            power_limit_w=device.power_limit_w,
        )
    return fingerprint


def environment_changes(baseline: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [
        (key, baseline.get(key), current.get(key))
        for key in COMPARED_KEYS
        if baseline.get(key) != current.get(key) and (key in baseline or key in current)
    ]
