"""Child side of kernel time: the GPU's own record of every kernel a window of steps launched.

CUPTI's kernel, memcpy and memset activity, read through the PyTorch profiler with the CUDA activity
alone: no operator callbacks, no stacks, no shapes, no trace file. A marker kernel launched at each
synchronised step edge cuts the device's timeline into steps (``traces.kernel_steps``).

Recording has a price on the host: each launch is also traced (on an H100, a QLoRA step of 17,000
kernels ran about 16% longer), and reading the records back takes tens of microseconds per record. So
the clock records a short window of early steps (``traces.kernel_steps.kernel_window``), which the
parent leaves out of every timing figure, as it does a trace's profiled steps; the kernels' own
durations on the device are what CUPTI's timestamps say whatever the host's pace. The records are read
at the window's last edge, and the next step starts its clock after that, so no timed step carries it.
"""

from __future__ import annotations

from typing import Any

import torch

from trainperf.traces.kernel_steps import MEMORY_KINDS, DeviceActivity, KernelTimes, kernel_times

DEVICE_KINDS = ("kernel", *MEMORY_KINDS)


class KernelClock:
    """Records the device's activity over the steps ``first`` to ``last``, marking each step edge."""

    def __init__(self, device: torch.device, first: int, last: int) -> None:
        self.device = device
        self.first, self.last = first, last
        self._profile: Any = None
        self._result: KernelTimes | None = None

    @classmethod
    def for_run(cls, device: torch.device, window: list[int] | None) -> KernelClock | None:
        """A clock where there is a CUDA device to read and a window to record, else None."""
        if not window or device.type != "cuda" or not torch.cuda.is_available():
            return None
        return cls(device, int(window[0]), int(window[1]))

    def covers(self, step: int) -> bool:
        return self.first <= step <= self.last

    def before_step(self, step: int) -> None:
        """Called after the edge that opens ``step`` (its left edge is already taken): at the window's
        first step, begin recording and mark that edge. CUPTI's start-up lands in this step, which
        is not timed."""
        if step != self.first or self._profile is not None or self._result is not None:
            return
        try:
            from torch._C._profiler import _ExperimentalConfig

            self._profile = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CUDA],
                record_shapes=False,
                with_stack=False,
                profile_memory=False,
                experimental_config=_ExperimentalConfig(disable_external_correlation=True),
            )
            self._profile.start()
            self._mark()
        except Exception as exc:  # noqa: BLE001 - no CUPTI must never stop the measurement
            self._fail(exc)

    def _mark(self) -> None:
        """The marker kernel, launched right after a synchronised edge."""
        with torch.cuda.device(self.device):
            torch.cuda._sleep(0)

    def edge(self, step: int) -> bool:
        """A step's synchronised edge was taken: mark it; after the window's last step, stop and read
        the records. True when that took time the next step must not be charged with."""
        if self._profile is None:
            return False
        self._mark()
        if step < self.last:
            return False
        self.stop()
        return True

    def stop(self) -> None:
        """Stop recording and read the activity into per-step figures (once)."""
        profile, self._profile = self._profile, None
        if profile is None:
            return
        try:
            torch.cuda.synchronize(self.device)
            profile.stop()
            activities = device_activities(profile.profiler.kineto_results.events())
            self._result = kernel_times(activities, first_step=self.first)
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
