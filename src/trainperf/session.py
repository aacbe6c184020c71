"""Session set-up shared by the pytest plugin and the CLI: detect the GPU class, open the run folder."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainperf.baseline import BaselineStore
from trainperf.errors import TrainperfError
from trainperf.fingerprint import host_fingerprint
from trainperf.hardware import CPU_CLASS, GpuClass, classify, load_classes, visible_gpu_index
from trainperf.metrics import tolerances_from_pyproject, with_tolerances
from trainperf.monitor.nvml import DeviceInfo, Nvml
from trainperf.paths import PUBLISHED_DIR
from trainperf.references import load_references
from trainperf.runner import RunContext
from trainperf.settings import Settings


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
    if override not in classes:
        raise TrainperfError(f"unknown GPU class '{override}' (--perf-gpu-class); known: {', '.join(sorted(classes))}")
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
        raise TrainperfError(f"--perf-emulate {name}: this GPU already is class {name}; run without --perf-emulate")
    have_gib = detection.info.memory_total_b / 2**30
    if target.memory_gib >= have_gib:
        raise TrainperfError(
            f"--perf-emulate {name} needs a GPU with more than its {target.memory_gib:.0f} GiB; "
            f"'{detection.info.name}' has {have_gib:.0f} GiB"
        )
    return Detection(target, detection.device, detection.info, False, emulated=name)


def open_run(
    settings: Settings, detection: Detection, rootdir: Path, *, stamp: str | None = None, worker: str | None = None
) -> RunContext:
    """Create (or reopen, with --perf-resume) the run folder and everything a case needs.

    ``stamp``: the run folder's time stamp, given by the xdist controller so that every worker
    writes into one folder; ``worker``: the xdist worker, whose session record is its own file.
    """
    if detection.gpu_class is None:
        raise TrainperfError(
            f"GPU {detection.describe()} matches no class in fixtures/hardware/: add a class file there "
            "or pass --perf-gpu-class NAME"
        )
    gpu_class = detection.gpu_class
    on_gpu = gpu_class.name != CPU_CLASS
    if settings.resume is not None:
        run_dir = settings.resume
    elif stamp is not None:
        run_dir = settings.output / f"{stamp}-{gpu_class.name}{'-emulated' if detection.emulated else ''}"
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = settings.output / f"{stamp}-{gpu_class.name}{'-emulated' if detection.emulated else ''}"
        suffix = 1
        while run_dir.exists():
            suffix += 1
            run_dir = settings.output / f"{stamp}-{gpu_class.name}-{suffix}"
    run_dir.mkdir(parents=True, exist_ok=True)
    idle_mem_b = None
    if on_gpu and detection.device is not None:
        idle_mem_b = Nvml.sample(Nvml.handle(detection.device)).mem_used_b
    fingerprint = host_fingerprint(detection.info if on_gpu else None)
    metrics = with_tolerances(tolerances_from_pyproject(rootdir), gpu_class.timing_tolerance_scale)
    _write_run_file(run_dir / (f"run.{worker}.json" if worker else "run.json"), settings, detection, fingerprint, idle_mem_b)
    return RunContext(
        settings=settings,
        run_dir=run_dir,
        gpu_class=gpu_class,
        device=detection.device if on_gpu else None,
        idle_mem_b=idle_mem_b,
        fingerprint=fingerprint,
        metrics=metrics,
        baselines=BaselineStore(settings.baselines),
        references=load_references(settings.baselines / PUBLISHED_DIR),
        emulated=detection.emulated,
    )


def _write_run_file(
    path: Path, settings: Settings, detection: Detection, fingerprint: dict[str, Any], idle_mem_b: int | None
) -> None:
    record = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
        "gpu_class": detection.gpu_class.name if detection.gpu_class else None,
        "class_overridden": detection.overridden,
        "emulated": detection.emulated,
        "device": detection.device,
        "idle_mem_b": idle_mem_b,
        "fingerprint": fingerprint,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
    }
    history = json.loads(path.read_text()).get("sessions", []) if path.is_file() else []
    history.append(record)
    path.write_text(json.dumps({"sessions": history}, indent=1, default=str))


__all__ = ["Detection", "detect", "load_classes", "open_run"]
