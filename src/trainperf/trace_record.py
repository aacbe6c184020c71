"""A traced run's trace record as a result keeps it (``CaseResult.trace``, and each traced run's
``RunRecord.trace``): where the trace file is (or
why it was deleted), its size, what the profiler recorded, the analysis of the profiled steps
(``traces.analysis``) and the profile summary made from it (``profile_record``).

``traces.collect`` writes the record on the parent side; each key is there only where its writer had
it (a CPU trace has no launch overhead, a trace over the cap no file), so every key not recorded is
None here and not written back; a key this trainperf does not know, or a value that does not read as
its field, is kept aside as the file had it and written back: a stored file reads back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import (
    listed,
    stored_int,
    stored_number_or_none,
    stored_texts,
    unread_keys,
    written_back,
)
from trainperf.jsonio import stored_number as _number
from trainperf.jsonio import stored_text as _text
from trainperf.profile_record import ProfileSummary


@dataclass(frozen=True, slots=True)
class TracedKernel:
    """One of the trace's top kernels (operators on the CPU) over all its profiled steps."""

    name: str
    category: str
    """Its ``traces.categories`` category (``matmul``, ``attention``, ...)."""
    total_ms: float
    share: float
    """Of all kernel (operator) time in the window."""
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "total_ms": self.total_ms,
            "share": self.share,
            "count": self.count,
        }

    @classmethod
    def from_dict(cls, data: Any) -> TracedKernel:
        return cls(
            name=str(data["name"]),
            category=str(data["category"]),
            total_ms=_number(data["total_ms"]),
            share=_number(data["share"]),
            count=int(data["count"]),
        )


@dataclass(frozen=True, slots=True)
class LaunchOverhead:
    """CUDA runtime and driver API time per kernel, and the mean launch call (GPU traces)."""

    kernels: int
    launch_calls: int
    runtime_api_ms: float
    runtime_us_per_kernel: float
    launch_call_mean_us: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernels": self.kernels,
            "launch_calls": self.launch_calls,
            "runtime_api_ms": self.runtime_api_ms,
            "runtime_us_per_kernel": self.runtime_us_per_kernel,
            "launch_call_mean_us": self.launch_call_mean_us,
        }

    @classmethod
    def from_dict(cls, data: Any) -> LaunchOverhead | None:
        if not isinstance(data, dict):
            return None
        return cls(
            kernels=int(data["kernels"]),
            launch_calls=int(data["launch_calls"]),
            runtime_api_ms=_number(data["runtime_api_ms"]),
            runtime_us_per_kernel=_number(data["runtime_us_per_kernel"]),
            launch_call_mean_us=_number(data["launch_call_mean_us"]),
        )


GPU_ONLY = ("idle_host_bound_ms", "idle_other_ms", "gaps", "host_bound_gaps")
"""Figures only a GPU trace has: the device's idle gaps, split by whether they waited on the host."""
CPU_ONLY = ("idle_ms", "autograd_engine_ms")
"""Figures only a CPU trace has: the main thread's time outside operators, and autograd's own."""


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What the profiled steps' trace says (``traces.analysis.analyse``), over all its profiled steps:
    busy time, idle time, time by category, the top kernels and, on the GPU, the launch overhead."""

    kind: str
    """``gpu`` or ``cpu``: a CPU trace's figures are its main thread's."""
    steps: int
    window_ms: float
    busy_ms: float
    busy_fraction: float
    categories_ms: dict[str, float]
    top: tuple[TracedKernel, ...]
    idle_host_bound_ms: float | None = None
    idle_other_ms: float | None = None
    gaps: int | None = None
    host_bound_gaps: int | None = None
    launch: LaunchOverhead | None = None
    idle_ms: float | None = None
    autograd_engine_ms: float | None = None

    def per_step(self, total_ms: float | None) -> float:
        """A figure over the window, per profiled step (traces of different lengths compare per step)."""
        return (total_ms or 0.0) / max(1, self.steps)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "steps": self.steps,
            "window_ms": self.window_ms,
            "busy_ms": self.busy_ms,
            "busy_fraction": self.busy_fraction,
            "categories_ms": dict(self.categories_ms),
            "top": [kernel.to_dict() for kernel in self.top],
        }
        for key in (*GPU_ONLY, *CPU_ONLY):
            if (value := getattr(self, key)) is not None:
                data[key] = value
        if self.launch is not None:
            data["launch"] = self.launch.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any) -> TraceSummary | None:
        """The summary, or None where there is none or it is not one."""
        if not isinstance(data, dict) or not data:
            return None
        try:
            return cls(
                kind=str(data["kind"]),
                steps=int(data["steps"]),
                window_ms=_number(data["window_ms"]),
                busy_ms=_number(data["busy_ms"]),
                busy_fraction=_number(data["busy_fraction"]),
                categories_ms={str(name): _number(ms) for name, ms in data["categories_ms"].items()},
                top=tuple(TracedKernel.from_dict(kernel) for kernel in data["top"]),
                launch=LaunchOverhead.from_dict(data.get("launch")),
                **{key: _optional_number(data.get(key)) for key in (*GPU_ONLY, *CPU_ONLY)},
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """The first traced run's record: its trace file (or why it is gone), sizes, what was recorded, the
    analysis and the profile summary; or the ``error`` that left it without them."""

    file: str | None = None
    """The trace's path under the run folder (``traces/<case>/<run>.pt.trace.json.gz``)."""
    deleted: str | None = None
    """Why the trace file is not kept (over the size cap), where it is not."""
    file_bytes: int | None = None
    """The compressed trace's size (stored as ``bytes``)."""
    raw_bytes: int | None = None
    cap_mb: float | None = None
    activities: tuple[str, ...] | None = None
    profiled_steps: tuple[int, ...] | None = None
    environment: dict[str, str] | None = None
    """The environment variables that change what a trace shows, by name (``CUDA_LAUNCH_BLOCKING``)."""
    scope: str | None = None
    """What the profiled window covers where it is not a whole step (a verl stage)."""
    summary: TraceSummary | None = None
    profile: ProfileSummary | None = None
    rank_traces: tuple[str, ...] | None = None
    """A multi-GPU run's other ranks' traces beside it (their paths, or why they were deleted)."""
    error: str | None = None
    stop_error: str | None = None
    """The profiler's own failure when it stopped, where it had one."""
    unread: Mapping[str, Any] = field(default_factory=dict)
    """Keys this trainperf does not know and values that do not read as their field, as the file had
    them: written back, never read."""

    def to_dict(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "file": self.file,
            "deleted": self.deleted,
            "bytes": self.file_bytes,
            "raw_bytes": self.raw_bytes,
            "cap_mb": self.cap_mb,
            "activities": listed(self.activities),
            "profiled_steps": listed(self.profiled_steps),
            "environment": dict(self.environment) if self.environment is not None else None,
            "scope": self.scope,
            "summary": self.summary.to_dict() if self.summary else None,
            "profile": self.profile.to_dict() if self.profile else None,
            "rank_traces": listed(self.rank_traces),
            "error": self.error,
            "stop_error": self.stop_error,
        }
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> TraceRecord | None:
        """The record, or None where there is none (an untraced run)."""
        if not isinstance(data, dict) or not data:
            return None
        environment = data.get("environment")
        read: dict[str, Any] = {
            "file": _text(data.get("file")),
            "deleted": _text(data.get("deleted")),
            "bytes": _optional_number(data.get("bytes")),
            "raw_bytes": _optional_number(data.get("raw_bytes")),
            "cap_mb": _optional_number(data.get("cap_mb")),
            "activities": stored_texts(data.get("activities")),
            "profiled_steps": _integers(data.get("profiled_steps")),
            "environment": (
                {str(k): str(v) for k, v in environment.items()} if isinstance(environment, dict) else None
            ),
            "scope": _text(data.get("scope")),
            "summary": TraceSummary.from_dict(data.get("summary")),
            "profile": ProfileSummary.from_dict(data.get("profile")),
            "rank_traces": stored_texts(data.get("rank_traces")),
            "error": _text(data.get("error")),
            "stop_error": _text(data.get("stop_error")),
        }
        fields = {("file_bytes" if key == "bytes" else key): value for key, value in read.items()}
        return cls(**fields, unread=unread_keys(data, read))


def _optional_number(value: Any) -> Any:
    """``jsonio.stored_number_or_none`` typed loosely: the summary's counts are ints, its times floats."""
    return stored_number_or_none(value)


def _integers(value: Any) -> tuple[int, ...] | None:
    """A stored list of integers; None where any item is not one (it is then kept aside as stored)."""
    if not isinstance(value, list) or any(stored_int(item) is None for item in value):
        return None
    return tuple(value)
