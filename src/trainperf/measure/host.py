"""The environment fingerprint: what machine and software a result came from (parent side)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainperf.measure.nvml import DeviceInfo


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Instruction-set extensions that change which CPU kernels PyTorch and bitsandbytes dispatch to:
# two hosts that differ in these run the same case at very different speeds (the tiny QLoRA cases
# took 2.3x as long on one 2-core host as on another, both reporting the model name "AMD EPYC").
TIMING_RELEVANT_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "avx_vnni",
    "asimd",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
)


def _cpuinfo_fields() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def cpu_identity(fields: dict[str, str]) -> tuple[str, str]:
    """``(cpu_id, cpu_isa)``: vendor, family, model and stepping, and the timing-relevant ISA flags.

    Virtual machines often mask the model name ("AMD EPYC" for several generations); family,
    model, stepping and the flags still tell the hosts apart."""
    vendor = fields.get("vendor_id") or fields.get("CPU implementer") or platform.machine()
    parts = [
        f"{label} {fields[key]}"
        for label, key in (
            ("family", "cpu family"),
            ("model", "model"),
            ("stepping", "stepping"),
            ("part", "CPU part"),
            ("variant", "CPU variant"),
            ("revision", "CPU revision"),
        )
        if fields.get(key)
    ]
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    isa = " ".join(flag for flag in TIMING_RELEVANT_FLAGS if flag in flags)
    return " ".join([vendor, *parts]), isa or "-"


def host_fingerprint(device: DeviceInfo | None) -> dict[str, Any]:
    fingerprint: dict[str, Any] = {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    fingerprint["cpu_id"], fingerprint["cpu_isa"] = cpu_identity(_cpuinfo_fields())
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


def checkout_commit(root: Path) -> dict[str, Any]:
    """pytest-benchmark's ``commit_info`` for the checkout at ``root``; empty outside a git checkout."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        commit = git("rev-parse", "HEAD")
        if not commit:
            return {}
        return {
            "id": commit,
            "time": git("show", "-s", "--format=%cI", "HEAD"),
            "author_time": git("show", "-s", "--format=%aI", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "project": root.resolve().name,
            "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        }
    except (OSError, subprocess.SubprocessError):
        return {}
