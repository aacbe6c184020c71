"""Child side of kernel time: the GPU's own record of every kernel a run's steps launched.

CUPTI's kernel, memcpy and memset activity, read through the PyTorch profiler with the CUDA activity
alone: no operator callbacks, no stacks, no shapes, no trace file, so the host does little more per
launch than without it (the overhead is measured, docs/verdicts.md). A marker kernel launched at each
synchronised step edge cuts the device's timeline into steps (``traces.kernel_steps``). The clock
starts before the left edge of the first step and stops after the last edge it covers, so CUPTI's
start-up and the reading of its records land in no timed step.

A run profiled with ``--perf-trace`` hands the device over to the trace before its profiled steps:
the clock covers the steps before them (Kineto admits one profiler at a time).
"""

from __future__ import annotations

from typing import Any

import torch

from trainperf.traces.kernel_steps import MEMORY_KINDS, DeviceActivity, KernelTimes, kernel_times

DEVICE_KINDS = ("kernel", *MEMORY_KINDS)


class KernelClock:
    """Records the device's activity from ``start`` to ``stop``; ``mark`` at every step edge."""

    def __init__(self, device: torch.device, last_step: int) -> None:
        self.device = device
        self.last_step = last_step
        """The step whose edge ends the clock: the run's last, or the last before a trace's window."""
        self._profile: Any = None
        self._result: KernelTimes | None = None

    @classmethod
    def for_run(cls, device: torch.device, wanted: bool, last_step: int) -> KernelClock | None:
        """A clock where there is a CUDA device to read and steps to time, else None."""
        if not wanted or device.type != "cuda" or not torch.cuda.is_available() or last_step < 1:
            return None
        return cls(device, last_step)

    def start(self) -> None:
        """Begin recording, then mark the left edge of the first step (called after its synchronisation)."""
        try:
            self._profile = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CUDA],
                record_shapes=False,
                with_stack=False,
                profile_memory=False,
            )
            self._profile.start()
            self.mark()
        except Exception as exc:  # noqa: BLE001 - no CUPTI must never stop the measurement
            self._fail(exc)

    def mark(self) -> None:
        """The marker kernel, launched right after a synchronised edge."""
        if self._profile is not None:
            with torch.cuda.device(self.device):
                torch.cuda._sleep(0)

    def edge(self, step: int) -> None:
        """A step's edge was taken: mark it, and stop after the clock's last step."""
        if self._profile is None:
            return
        self.mark()
        if step >= self.last_step:
            self.stop()

    def stop(self) -> None:
        """Stop recording and read the activity into per-step figures (once)."""
        profile, self._profile = self._profile, None
        if profile is None:
            return
        try:
            torch.cuda.synchronize(self.device)
            profile.stop()
            self._result = kernel_times(device_activities(profile.profiler.kineto_results.events()))
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self._profile = None
        self._result = KernelTimes(error=f"kernel time not recorded: {type(exc).__name__}: {exc}"[:300])

    def result(self) -> dict[str, Any] | None:
        """The record for the child's result; the clock is stopped first where a run ended early."""
        self.stop()
        return self._result.to_dict() if self._result is not None else None


def device_activities(events: Any) -> list[DeviceActivity]:
    """The GPU-side kernel, memcpy and memset events of a Kineto result."""
    found = []
    for event in events:
        if event.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        kind = _kind(event)
        if kind in DEVICE_KINDS:
            start = int(event.start_ns())
            found.append(DeviceActivity(event.name(), kind, start, start + int(event.duration_ns())))
    return found


def _kind(event: Any) -> str:
    """Kineto's activity type; by the name where this torch's event does not say it."""
    if hasattr(event, "activity_type"):
        return str(event.activity_type())
    name = str(event.name())
    if name.startswith("Memcpy"):
        return "gpu_memcpy"
    if name.startswith("Memset"):
        return "gpu_memset"
    return "kernel"
