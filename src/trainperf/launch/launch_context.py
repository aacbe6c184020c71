"""What a launch needs of the run it belongs to: the session's settings and folder, the GPU class
and device it measures on, and where progress is said. ``run.context.RunContext`` is one; the
launch takes this interface instead, so it sits below the case lifecycle that drives it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from trainperf.ground.folder import RunFolder
from trainperf.ground.settings import Settings
from trainperf.measure.hardware import GpuClass
from trainperf.measure.placement import Placement


class LaunchContext(Protocol):
    @property
    def settings(self) -> Settings:
        """Timeouts, tracing, plants, the GPU wait, the interpreter and environment overrides."""

    @property
    def folder(self) -> RunFolder:
        """Where each child's folder, trace and interruption record go."""

    @property
    def gpu_class(self) -> GpuClass:
        """The session's class: its name, and its memory when the run is emulated."""

    @property
    def device(self) -> str | None:
        """The GPU the session measures on; None on a machine without one."""

    @property
    def idle_mem_b(self) -> int | None:
        """The session's GPU memory in use at rest, before any child."""

    @property
    def emulated(self) -> str | None:
        """Set when every child's memory is capped to the class's (``--perf-emulate``)."""

    @property
    def placement(self) -> Placement | None:
        """The GPUs this process may use and the one it owns."""

    @property
    def on_gpu(self) -> bool:
        """Whether children run on a GPU of a GPU class."""

    @property
    def say(self) -> Callable[[str], None]:
        """Where progress lines go."""
