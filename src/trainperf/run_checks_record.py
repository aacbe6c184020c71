"""What was checked around one run of a case, as its record keeps it (``RunRecord``): its GPUs before the
launch (``gpu_before``), what contaminated its timing (``contamination``), whether each GPU's memory came
back to idle after it (``idle_after``) and its turn on a shared host (``host_turn``).

The parent makes them around the child (``launch.guard``, ``measure.idle``, ``measure.host_turns``).
Each key is written only where its writer had it, so a key not recorded is None here and not written
back; a key this trainperf does not know, or a value that does not read as its field, is kept aside as
the file had it and written back, so that rewriting a result (a merge, a resumed run) loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import (
    listed,
    stored_flag,
    stored_int,
    stored_mapping,
    stored_number_or_none,
    stored_texts,
    unread_keys,
    written_back,
)

Process = tuple[int, int | None]
"""A compute context on a GPU: its pid and the bytes it used (None where NVML did not say)."""


@dataclass(frozen=True, slots=True)
class GpuState:
    """One GPU as read just before a case starts (``measure.hygiene``)."""

    device: str
    processes: tuple[Process, ...] = ()
    mem_used_b: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    power_limit_w: float | None = None
    temperature_c: int | None = None
    clock_event_reasons: int | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Every figure, null where NVML gave none: the reading has always named them all."""
        return {
            "device": self.device,
            "processes": _listed_processes(self.processes),
            "mem_used_b": self.mem_used_b,
            "sm_clock_mhz": self.sm_clock_mhz,
            "sm_clock_max_mhz": self.sm_clock_max_mhz,
            "power_limit_w": self.power_limit_w,
            "temperature_c": self.temperature_c,
            "clock_event_reasons": self.clock_event_reasons,
            **self.unread,
        }

    @classmethod
    def from_dict(cls, data: Any) -> GpuState | None:
        """The reading, or None where it is not one (no object, no device). A figure stored as null
        reads as None and is written back so; one of another type is kept aside as the file had it."""
        if not isinstance(data, dict) or not isinstance(data.get("device"), str):
            return None
        processes = _processes(data.get("processes"))
        figures: dict[str, Any] = {
            **{name: stored_int(data.get(name)) for name in _GPU_COUNTS},
            "power_limit_w": stored_number_or_none(data.get("power_limit_w")),
        }
        unread = {
            key: value
            for key, value in data.items()
            if key not in _GPU_STATE_KEYS
            or key == "processes"
            and processes is None
            or key in figures
            and figures[key] is None
            and value is not None
        }
        return cls(data["device"], processes or (), **figures, unread=unread)


_GPU_COUNTS = ("mem_used_b", "sm_clock_mhz", "sm_clock_max_mhz", "temperature_c", "clock_event_reasons")
_GPU_STATE_KEYS = frozenset(GpuState.__dataclass_fields__) - {"unread"}


@dataclass(frozen=True, slots=True)
class GpuCheck:
    """The run's GPUs as read before its launch, after the wait for them to come clean (``gpu_before``):
    each GPU's state, the foreign processes and the throttling left on them."""

    gpus: tuple[GpuState, ...] | None = None
    foreign_processes: Mapping[str, tuple[Process, ...]] | None = None
    """Per GPU, the compute contexts not the suite's own."""
    throttled: Mapping[str, tuple[str, ...]] | None = None
    """Per GPU, the clock-event reasons that held it back (``sw_power_cap``, ...)."""
    clean: bool | None = None
    waited_s: float | None = None
    """How long the launch waited for the GPUs to come clean."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "gpus": [gpu.to_dict() for gpu in self.gpus] if self.gpus is not None else None,
            "foreign_processes": _per_gpu(self.foreign_processes, _listed_processes),
            "throttled": _per_gpu(self.throttled, list),
            "clean": self.clean,
            "waited_s": self.waited_s,
        }
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> GpuCheck | None:
        if not isinstance(data, dict):
            return None
        read: dict[str, Any] = {
            "gpus": _gpu_states(data.get("gpus")),
            "foreign_processes": stored_mapping(data.get("foreign_processes"), _processes),
            "throttled": stored_mapping(data.get("throttled"), _texts),
            "clean": stored_flag(data.get("clean")),
            "waited_s": stored_number_or_none(data.get("waited_s")),
        }
        return cls(**read, unread=unread_keys(data, read))


@dataclass(frozen=True, slots=True)
class IdleCheck:
    """Whether one GPU's memory came back near its level before the run (``measure.idle.wait_idle``)."""

    idle: bool | None = None
    mem_used_gib: float | None = None
    """The memory in use when the wait ended."""
    waited_s: float | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stored = {"idle": self.idle, "mem_used_gib": self.mem_used_gib, "waited_s": self.waited_s}
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> IdleCheck | None:
        if not isinstance(data, dict):
            return None
        read: dict[str, Any] = {
            "idle": stored_flag(data.get("idle")),
            "mem_used_gib": stored_number_or_none(data.get("mem_used_gib")),
            "waited_s": stored_number_or_none(data.get("waited_s")),
        }
        return cls(**read, unread=unread_keys(data, read))


@dataclass(frozen=True, slots=True)
class RunContamination:
    """What made one run's timing untrustworthy (``launch.guard.contamination``): the judge reads the
    runs' records together (``judge.contamination.Contamination``)."""

    reasons: tuple[str, ...] | None = None
    foreign_process: bool | None = None
    """Whether a foreign process shared the GPU: then its device-wide memory is not the case's alone."""
    on_gpu: bool | None = None
    """Whether anything touched the GPU (False: only the host's CPU was crowded). Records from before
    the split lack it, and read as touching the GPU (``touched_gpu``)."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    @property
    def touched_gpu(self) -> bool:
        return self.on_gpu is not False

    def to_dict(self) -> dict[str, Any]:
        reasons = listed(self.reasons)
        stored = {"reasons": reasons, "foreign_process": self.foreign_process, "on_gpu": self.on_gpu}
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> RunContamination | None:
        if not isinstance(data, dict):
            return None
        read: dict[str, Any] = {
            "reasons": _texts(data.get("reasons")),
            "foreign_process": stored_flag(data.get("foreign_process")),
            "on_gpu": stored_flag(data.get("on_gpu")),
        }
        return cls(**read, unread=unread_keys(data, read))


@dataclass(frozen=True, slots=True)
class HostTurn:
    """A run's turn on a shared host (``--perf-host-lock``, ``measure.host_turns``): alone or beside the
    host's other runs, and how long it waited for it."""

    alone: bool | None = None
    waited_s: float | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)

    def note(self, number: int) -> str:
        how = "alone on the host" if self.alone else "beside the host's other runs"
        waited = f"after waiting {self.waited_s or 0:.0f} s for its turn"
        return f"run {number}: ran {how} (--perf-host-lock), {waited}"

    def to_dict(self) -> dict[str, Any]:
        return written_back({"alone": self.alone, "waited_s": self.waited_s}, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> HostTurn | None:
        if not isinstance(data, dict):
            return None
        read: dict[str, Any] = {
            "alone": stored_flag(data.get("alone")),
            "waited_s": stored_number_or_none(data.get("waited_s")),
        }
        return cls(**read, unread=unread_keys(data, read))


def _texts(value: Any) -> tuple[str, ...] | None:
    """A stored list of strings; None where any item is not one (it would not be written back as it was)."""
    texts = stored_texts(value)
    return texts if texts is not None and list(texts) == value else None


def _processes(value: Any) -> tuple[Process, ...] | None:
    """Stored ``[pid, bytes]`` pairs; None where any is not one."""
    if not isinstance(value, list) or not all(_is_process(item) for item in value):
        return None
    return tuple((pid, used) for pid, used in value)


def _is_process(item: Any) -> bool:
    if not isinstance(item, list) or len(item) != 2:
        return False
    pid, used = item
    return stored_int(pid) is not None and (used is None or stored_int(used) is not None)


def _listed_processes(processes: tuple[Process, ...]) -> list[list[int | None]]:
    return [list(process) for process in processes]


def _gpu_states(value: Any) -> tuple[GpuState, ...] | None:
    if not isinstance(value, list):
        return None
    states = [GpuState.from_dict(item) for item in value]
    return tuple(state for state in states if state is not None) if None not in states else None


def _per_gpu(value: Mapping[str, Any] | None, write: Callable[[Any], Any]) -> dict[str, Any] | None:
    return {device: write(item) for device, item in value.items()} if value is not None else None
