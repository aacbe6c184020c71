"""NVML access for the parent process: device lookup, one-shot readings and a background sampler.

The parent samples the GPU a case runs on every ``interval_s`` (50 ms by default; an
in-process NVML sampler at 50 ms did not move step times beyond their noise on an H200).
Everything degrades to "no GPU data" when NVML is absent, so CPU runs use the same code.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field, fields
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError

try:  # nvidia-ml-py is the 'gpu' extra; the CPU path works without it.
    import pynvml as _nvml
except ImportError:  # pragma: no cover - exercised on machines without the extra
    _nvml = None


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    """Wall-clock time (``time.time()``), comparable with the child's step timestamps."""
    mem_used_b: int
    power_w: float | None
    energy_mj: int | None
    """The board's cumulative energy counter (millijoules since driver load); None if unsupported."""
    sm_clock_mhz: int | None
    temperature_c: int | None
    throttle_reasons: int | None


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    index: int
    name: str
    uuid: str
    memory_total_b: int
    driver: str
    cuda_driver_version: str
    power_limit_w: float | None
    pci_bus_id: str


class Nvml:
    """A handle on NVML; ``Nvml.available()`` is False on machines without a driver or the extra."""

    _lock = threading.Lock()
    _initialised = False

    @classmethod
    def available(cls) -> bool:
        if _nvml is None:
            return False
        try:
            cls._init()
            return int(_nvml.nvmlDeviceGetCount()) > 0
        except Exception:  # noqa: BLE001 - any NVML failure means "no GPU here"
            return False

    @classmethod
    def _init(cls) -> None:
        with cls._lock:
            if not cls._initialised:
                assert _nvml is not None
                _nvml.nvmlInit()
                cls._initialised = True

    @classmethod
    def handle(cls, device: str) -> Any:
        """Handle for a physical index (``"0"``) or a UUID (``"GPU-..."``), as in CUDA_VISIBLE_DEVICES."""
        if _nvml is None:
            raise TrainperfError("nvidia-ml-py is not installed: pip install 'trainperf[gpu]'")
        cls._init()
        try:
            if device.startswith(("GPU-", "MIG-")):
                return _nvml.nvmlDeviceGetHandleByUUID(device)
            return _nvml.nvmlDeviceGetHandleByIndex(int(device))
        except (ValueError, _nvml.NVMLError) as exc:
            raise TrainperfError(
                f"GPU '{device}' not found by NVML ({exc}); check CUDA_VISIBLE_DEVICES"
            ) from exc

    @classmethod
    def info(cls, device: str) -> DeviceInfo:
        assert _nvml is not None
        handle = cls.handle(device)
        memory = _nvml.nvmlDeviceGetMemoryInfo(handle)
        cuda = _nvml.nvmlSystemGetCudaDriverVersion()
        return DeviceInfo(
            index=int(_nvml.nvmlDeviceGetIndex(handle)),
            name=_text(_nvml.nvmlDeviceGetName(handle)),
            uuid=_text(_nvml.nvmlDeviceGetUUID(handle)),
            memory_total_b=int(memory.total),
            driver=_text(_nvml.nvmlSystemGetDriverVersion()),
            cuda_driver_version=f"{cuda // 1000}.{(cuda % 1000) // 10}",
            power_limit_w=_optional(lambda: _nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0),
            pci_bus_id=_text(_nvml.nvmlDeviceGetPciInfo(handle).busId),
        )

    @classmethod
    def sample(cls, handle: Any) -> Sample:
        assert _nvml is not None
        return Sample(
            t=time.time(),
            mem_used_b=int(_nvml.nvmlDeviceGetMemoryInfo(handle).used),
            power_w=_optional(lambda: _nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            energy_mj=_optional(lambda: int(_nvml.nvmlDeviceGetTotalEnergyConsumption(handle))),
            sm_clock_mhz=_optional(lambda: int(_nvml.nvmlDeviceGetClockInfo(handle, _nvml.NVML_CLOCK_SM))),
            temperature_c=_optional(
                lambda: int(_nvml.nvmlDeviceGetTemperature(handle, _nvml.NVML_TEMPERATURE_GPU))
            ),
            throttle_reasons=_optional(lambda: int(_nvml.nvmlDeviceGetCurrentClocksEventReasons(handle))),
        )

    @classmethod
    def processes(cls, handle: Any) -> list[int]:
        """PIDs holding a compute context on the device (empty when NVML cannot tell)."""
        assert _nvml is not None
        try:
            return [int(p.pid) for p in _nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
        except _nvml.NVMLError:
            return []

    @classmethod
    def compute_processes(cls, handle: Any) -> list[tuple[int, int | None]]:
        """(pid, used bytes or None) of every compute context on the device; empty when NVML cannot tell."""
        assert _nvml is not None
        try:
            running = _nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except _nvml.NVMLError:
            return []
        return [(int(p.pid), int(p.usedGpuMemory) if p.usedGpuMemory else None) for p in running]

    @classmethod
    def max_sm_clock_mhz(cls, handle: Any) -> int | None:
        assert _nvml is not None
        return _optional(lambda: int(_nvml.nvmlDeviceGetMaxClockInfo(handle, _nvml.NVML_CLOCK_SM)))

    @classmethod
    def power_limit_w(cls, handle: Any) -> float | None:
        assert _nvml is not None
        return _optional(lambda: _nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0)

    @classmethod
    def count(cls) -> int:
        """Number of GPUs NVML sees (0 without a driver or the extra)."""
        return int(_nvml.nvmlDeviceGetCount()) if cls.available() and _nvml is not None else 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _optional(read: Any) -> Any:
    try:
        return read()
    except Exception:  # noqa: BLE001 - a counter a board does not support reads as None
        return None


@dataclass
class Sampler:
    """Samples one device in a daemon thread until ``stop()``; safe to use as a context manager."""

    device: str
    interval_s: float = 0.05
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:  # noqa: PYI034
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        handle = Nvml.handle(self.device)
        self._thread = threading.Thread(target=self._loop, args=(handle,), name="trainperf-nvml", daemon=True)
        self._thread.start()

    def _loop(self, handle: Any) -> None:
        next_due = time.monotonic()
        while not self._stop.is_set():
            try:
                self.samples.append(Nvml.sample(handle))
            except Exception:  # noqa: BLE001 - a failed read loses one sample, not the run
                self.errors += 1
            next_due += self.interval_s
            self._stop.wait(max(0.0, next_due - time.monotonic()))

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.samples


def write_samples(path: Path, samples: Sequence[Sample]) -> None:
    """Samples as CSV beside the child's files: re-measurable later, plotted by the reports."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([f.name for f in fields(Sample)])
        writer.writerows(astuple(sample) for sample in samples)


def read_samples(path: Path) -> list[Sample]:
    def number(text: str, kind: type) -> Any:
        return None if text in ("", "None") else kind(float(text)) if kind is int else kind(text)

    kinds = [float, int, float, int, int, int, int]
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    return [Sample(*(number(cell, kind) for cell, kind in zip(row, kinds))) for row in rows]
