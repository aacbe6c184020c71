"""Child side of kernel time: the GPU's own record of every kernel a window of steps launched.

CUPTI's kernel, memcpy and memset activity, read either from CUPTI's Activity API directly
(``workloads.cupti_clock``: the device's work alone, a few microseconds a record to read back) or
through the PyTorch profiler with the CUDA activity alone (no operator callbacks, no stacks, no trace
file; it also records every runtime call, about 30 us a kernel to read back). ``--perf-kernel-clock``
picks; ``auto`` takes CUPTI directly where its library answers. A marker kernel launched at each
synchronised step edge cuts the device's timeline into steps (``traces.kernel_steps``).

Recording has a price on the host: each launch is also traced (through the profiler, a QLoRA step of
17,000 kernels ran about 16% longer on an H100). So the clock records a short window of early steps
(``traces.kernel_steps.kernel_window``), which the parent leaves out of every timing figure, as it does a
trace's profiled steps; the kernels' own durations on the device are what CUPTI's timestamps say
whatever the host's pace. The records are read at the window's last edge, and the next step starts
its clock after that, so no timed step carries it.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch

from trainperf.traces.cupti_records import RecordError
from trainperf.traces.kernel_steps import (
    MEMORY_KINDS,
    DeviceActivity,
    KernelTimes,
    in_nanoseconds,
    kernel_times,
)
from trainperf.workloads.cupti_clock import CuptiActivityReader, open_library

DEVICE_KINDS = ("kernel", *MEMORY_KINDS)


class Recorder(Protocol):
    name: str

    def start(self) -> None: ...

    def stop(self) -> list[DeviceActivity]: ...


class CuptiRecorder:
    """CUPTI's Activity API directly: kernels, copies and sets only."""

    name = "cupti"

    def __init__(self) -> None:
        self.reader = CuptiActivityReader(open_library(), torch._C._demangle)

    def start(self) -> None:
        self.reader.start()

    def stop(self) -> list[DeviceActivity]:
        try:
            recording = self.reader.stop()
        except RecordError as exc:
            raise RuntimeError(
                f"{exc}: a CUPTI record layout this reader does not know; --perf-kernel-clock profiler "
                "reads the records through PyTorch's profiler"
            ) from exc
        if recording.lost:
            raise RuntimeError(recording.lost)
        return recording.activities


class ProfilerRecorder:
    """The PyTorch profiler with the CUDA activity alone."""

    name = "profiler"

    def __init__(self) -> None:
        from torch._C._profiler import _ExperimentalConfig

        self.profile: Any = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA],
            record_shapes=False,
            with_stack=False,
            profile_memory=False,
            experimental_config=_ExperimentalConfig(disable_external_correlation=True),
        )

    def start(self) -> None:
        self.profile.start()

    def stop(self) -> list[DeviceActivity]:
        self.profile.stop()
        return device_activities(self.profile.profiler.kineto_results.events())


def start_recorder(clock: str) -> tuple[Recorder, str]:
    """A started recorder for ``clock`` (``traces.kernel_steps.KERNEL_CLOCKS``), and why it is not the
    one asked for, if so: ``auto`` tries CUPTI directly, then the profiler; an explicit choice has no
    fallback."""
    note = ""
    if clock in ("auto", "cupti"):
        try:
            cupti = CuptiRecorder()
            cupti.start()
            return cupti, note
        except Exception as exc:  # any failure of the direct path falls back under auto
            if clock == "cupti":
                raise
            reason = f"{type(exc).__name__}: {exc}"[:200]
            note = f"CUPTI directly unavailable ({reason}): read through the profiler"
    profiler = ProfilerRecorder()
    profiler.start()
    return profiler, note


class KernelClock:
    """Records the device's activity over the steps ``first`` to ``last``, marking each step edge."""

    def __init__(self, device: torch.device, first: int, last: int, clock: str = "auto") -> None:
        self.device = device
        self.first, self.last = first, last
        self.clock = clock
        self._recorder: Recorder | None = None
        self._host_marks_ns: list[int] = []
        """When each marker was launched, on the host's clock: the records' own clock is checked
        against it."""
        self._note = ""
        self._result: KernelTimes | None = None

    @classmethod
    def for_run(
        cls, device: torch.device, window: list[int] | None, clock: str = "auto"
    ) -> KernelClock | None:
        """A clock where there is a CUDA device to read and a window to record, else None."""
        if not window or device.type != "cuda" or not torch.cuda.is_available():
            return None
        return cls(device, int(window[0]), int(window[1]), clock)

    def covers(self, step: int) -> bool:
        return self.first <= step <= self.last

    def before_step(self, step: int) -> None:
        """Called after the edge that opens ``step`` (its left edge is already taken): at the window's
        first step, begin recording and mark that edge. CUPTI's start-up lands in this step, which
        is not timed."""
        if step != self.first or self._recorder is not None or self._result is not None:
            return
        try:
            self._recorder, self._note = start_recorder(self.clock)
            self._mark()
        except Exception as exc:  # noqa: BLE001 - no CUPTI must never stop the measurement
            self._fail(exc)

    def _mark(self) -> None:
        """The marker kernel, launched right after a synchronised edge."""
        with torch.cuda.device(self.device):
            self._host_marks_ns.append(time.perf_counter_ns())
            torch.cuda._sleep(0)

    def edge(self, step: int) -> bool:
        """A step's synchronised edge was taken: mark it; after the window's last step, stop and read
        the records. True when that took time the next step must not be charged with."""
        if self._recorder is None:
            return False
        self._mark()
        if step < self.last:
            return False
        self.stop()
        return True

    def stop(self) -> None:
        """Stop recording and read the activity into per-step figures (once)."""
        recorder, self._recorder = self._recorder, None
        if recorder is None:
            return
        began = time.perf_counter()
        try:
            torch.cuda.synchronize(self.device)
            activities, converted = in_nanoseconds(recorder.stop(), self._host_marks_ns)
            self._result = kernel_times(activities, first_step=self.first)
            note = "; ".join(part for part in (self._note, converted) if part)
            self._result.clock, self._result.clock_note = recorder.name, note
            self._result.read_back_s = round(time.perf_counter() - began, 4)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc, recorder.name)

    def _fail(self, exc: BaseException, clock: str = "") -> None:
        self._recorder = None
        error = f"kernel time not recorded: {type(exc).__name__}: {exc}"[:300]
        self._result = KernelTimes(error=error, clock=clock, clock_note=self._note)

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
