"""GPU classes (``fixtures/hardware/*.yaml``) and detection of the class of this machine's GPU."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainperf.errors import TrainperfError
from trainperf.judge.metrics import Metric, with_tolerances
from trainperf.paths import FIXTURES_DIR

HARDWARE_DIR = FIXTURES_DIR / "hardware"
CPU_CLASS = "cpu"


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuClass:
    """A class of runner a baseline is valid for."""

    name: str
    """Short name used as pytest marker and baselines sub-folder (``maxq``, ``h100``...)."""
    description: str
    name_patterns: tuple[str, ...]
    """fnmatch patterns (case-insensitive) matched against the NVML device name."""
    memory_gib: float
    """Usable device memory in GiB (what a case can plan for)."""
    board_power_w: float | None
    bf16_dense_tflops: float | None
    timing_comparable_only_on_same: tuple[str, ...] = field(default_factory=tuple)
    """Fingerprint fields that must match the baseline's for timing verdicts to count.

    For the ``cpu`` class the processor model varies between machines of one class, so a
    timing baseline from another CPU is reported but never gates.
    """
    timing_tolerance_scale: float = 1.0
    """Multiplies the tolerance of timing metrics: shared CPU machines are noisier than a GPU."""
    learns_timing_tolerances: bool = True
    """Whether a case judged against its runner's history narrows its timing tolerances to what the
    history shows (``judge.learned_tolerance``): false where a runner's own speed moves between
    levels further apart than any ten runs show."""
    plans_from: str | None = None
    """A class whose baseline wall times stand in for this class's when a night or a shard split is
    planned and this class has none for a case (never judged against): one whose wall times are
    close to this class's and mostly above them, so a plan made with them is rarely short."""

    def metrics(self, overrides: dict[str, Any]) -> dict[str, Metric]:
        """The metric registry with this class's tolerances: ``[tool.trainperf.tolerances]``'s
        overrides, the timing ones scaled for the class. Every judge of the class's results reads these."""
        return with_tolerances(overrides, self.timing_tolerance_scale)

    def matches(self, device_name: str) -> bool:
        lowered = device_name.lower()
        return any(fnmatch.fnmatch(lowered, p.lower()) for p in self.name_patterns)


def _from_yaml(path: Path) -> GpuClass:
    try:
        raw: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
        return GpuClass(
            name=str(raw["name"]),
            description=str(raw.get("description", "")),
            name_patterns=_patterns(raw.get("name_patterns", [])),
            memory_gib=float(raw["memory_gib"]),
            board_power_w=_opt_float(raw.get("board_power_w")),
            bf16_dense_tflops=_opt_float(raw.get("bf16_dense_tflops")),
            timing_comparable_only_on_same=tuple(raw.get("timing_comparable_only_on_same", [])),
            timing_tolerance_scale=float(raw.get("timing_tolerance_scale", 1.0)),
            learns_timing_tolerances=_flag(raw, "learns_timing_tolerances", default=True),
            plans_from=str(raw["plans_from"]) if raw.get("plans_from") else None,
        )
    except (KeyError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise TrainperfError(
            f"{path} is not a valid GPU class file ({type(exc).__name__}: {exc}); "
            "compare it with fixtures/hardware/h100.yaml"
        ) from exc


def _patterns(value: Any) -> tuple[str, ...]:
    # A lone string would otherwise be split into characters, one of them "*", matching every GPU.
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise TypeError("name_patterns must be a list of strings")
    return tuple(value)


def _flag(raw: dict[str, Any], key: str, *, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be true or false, got {value!r}")
    return value


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def load_classes(directory: Path = HARDWARE_DIR) -> dict[str, GpuClass]:
    """All GPU classes, keyed by name."""
    classes = {}
    for path in sorted(directory.glob("*.yaml")):
        gpu_class = _from_yaml(path)
        classes[gpu_class.name] = gpu_class
    if CPU_CLASS not in classes:
        raise TrainperfError(f"no '{CPU_CLASS}' class in {directory}; restore fixtures/hardware/cpu.yaml")
    return classes


def require_class(name: str, classes: dict[str, GpuClass], option: str) -> GpuClass:
    """The class ``name`` as given to ``option``, or one line naming the known ones."""
    if name not in classes:
        raise TrainperfError(f"unknown GPU class '{name}' ({option}); known: {', '.join(sorted(classes))}")
    return classes[name]


def classify(device_name: str | None, classes: dict[str, GpuClass]) -> str | None:
    """The class whose patterns match ``device_name``; ``cpu`` without a GPU; None if unknown."""
    if device_name is None:
        return CPU_CLASS
    for gpu_class in classes.values():
        if gpu_class.name != CPU_CLASS and gpu_class.matches(device_name):
            return gpu_class.name
    return None


def visible_gpu_index() -> str | None:
    """The first entry of CUDA_VISIBLE_DEVICES (an index or a UUID), None when unset."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    first = visible.split(",")[0].strip()
    return first or "-1"  # an empty CUDA_VISIBLE_DEVICES hides every GPU


OTHER_MARKERS = {
    "gpu": "cases that need a GPU",
    "multi_gpu": "cases that need more than one GPU",
    "slow": "cases that take minutes (large models)",
}
"""The pytest markers that are not a GPU class's."""


def markers() -> dict[str, str]:
    """Every pytest marker the suite registers: one per GPU class file (a class is declared once, in its
    file; its description is the marker's help), and ``OTHER_MARKERS``."""
    classes = {name: f"cases of the {name} class: {gpu.description}" for name, gpu in load_classes().items()}
    return {**classes, **OTHER_MARKERS}


def planning_classes(gpu_class: str, directory: Path = HARDWARE_DIR) -> tuple[str, ...]:
    """The classes whose baselines a plan for ``gpu_class`` reads, in order: its own, then the one it
    plans from (``GpuClass.plans_from``), if any."""
    try:
        stand_in = load_classes(directory).get(gpu_class)
    except TrainperfError:
        stand_in = None  # a damaged class file is reported where the session detects its class
    if stand_in is None or not stand_in.plans_from or stand_in.plans_from == gpu_class:
        return (gpu_class,)
    return (gpu_class, stand_in.plans_from)
