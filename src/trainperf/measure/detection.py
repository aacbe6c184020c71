"""Which GPU class this session runs as: detected from NVML, overridden, or emulated on a larger GPU."""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.errors import TrainperfError
from trainperf.measure.hardware import CPU_CLASS, GpuClass, classify, require_class, visible_gpu_index
from trainperf.measure.nvml import DeviceInfo, Nvml


@dataclass(frozen=True, slots=True)
class Detection:
    gpu_class: GpuClass | None
    """None: a GPU that matches no class file."""
    device: str | None
    info: DeviceInfo | None
    overridden: bool
    emulated: str | None = None
    """The smaller class this GPU stands in for (``--perf-emulate``): its memory is capped to it."""

    def describe(self) -> str:
        name = self.gpu_class.name if self.gpu_class else "unknown"
        gpu = f"'{self.info.name}'" if self.info else "no GPU"
        how = ", overridden" if self.overridden else ", emulated" if self.emulated else ""
        return f"{gpu} (class {name}{how})"


def detect(classes: dict[str, GpuClass], override: str | None) -> Detection:
    """The class of the GPU this session will use (the first visible one), or ``cpu``."""
    visible = visible_gpu_index()
    device: str | None = None
    info: DeviceInfo | None = None
    if visible != "-1" and Nvml.available():
        device = visible or "0"
        info = Nvml.info(device)
    detected = classify(info.name if info else None, classes)
    if override is None:
        return Detection(classes[detected] if detected else None, device, info, False)
    require_class(override, classes, "--perf-gpu-class")
    if override != CPU_CLASS and info is None:
        raise TrainperfError(f"--perf-gpu-class {override} needs a GPU, and NVML sees none on this machine")
    return Detection(classes[override], device if override != CPU_CLASS else None, info, True)


def emulate(detection: Detection, classes: dict[str, GpuClass], name: str) -> Detection:
    """Stand this GPU in for a smaller class: cases see that class's memory, baselines and expectations."""
    if name not in classes or name == CPU_CLASS:
        known = ", ".join(sorted(c for c in classes if c != CPU_CLASS))
        raise TrainperfError(f"--perf-emulate {name}: not a GPU class (known: {known})")
    if detection.info is None or detection.device is None:
        raise TrainperfError(f"--perf-emulate {name} caps a larger GPU's memory, and NVML sees no GPU here")
    target = classes[name]
    if detection.gpu_class is not None and detection.gpu_class.name == name:
        raise TrainperfError(
            f"--perf-emulate {name}: this GPU already is class {name}; run without --perf-emulate"
        )
    have_gib = detection.info.memory_total_b / 2**30
    if target.memory_gib >= have_gib:
        raise TrainperfError(
            f"--perf-emulate {name} needs a GPU with more than its {target.memory_gib:.0f} GiB; "
            f"'{detection.info.name}' has {have_gib:.0f} GiB"
        )
    return Detection(target, detection.device, detection.info, False, emulated=name)


__all__ = ["Detection", "detect", "emulate"]
