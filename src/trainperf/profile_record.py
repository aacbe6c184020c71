"""A profiled run's profile summary as a result keeps it (``CaseResult.profile``, and inside its trace
record): where one step's time and memory go. ``traces.profile.profile_summary`` makes it from a trace's
analysis; a baseline's is what a regression's diagnosis (``traces.diagnose``) compares with.

The file keeps every figure as the run wrote it: a number read stays an int or a float as it was, and
``scope`` is written only where the profiled window is not a whole step, so a stored file reads back
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainperf.jsonio import stored_number as _number


@dataclass(frozen=True, slots=True)
class ProfiledKernel:
    """One of the top kernels (operators on the CPU) of the profiled window, per step."""

    name: str
    group: str
    """Its group of ``traces.profile.GROUPS``."""
    ms: float
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.group, "ms": self.ms, "count": self.count}

    @classmethod
    def from_dict(cls, data: Any) -> ProfiledKernel:
        return cls(
            name=str(data["name"]), group=str(data["group"]), ms=_number(data["ms"]), count=int(data["count"])
        )


@dataclass(frozen=True, slots=True)
class AllocatorBlock:
    """A live block of the CUDA caching allocator and the first frame outside torch that allocated it."""

    size_b: int
    frame: str

    def to_dict(self) -> dict[str, Any]:
        return {"size_b": self.size_b, "frame": self.frame}


@dataclass(frozen=True, slots=True)
class AllocatorSummary:
    """The allocator's peak, what it held at the end and its largest blocks; or, where there are none
    (a CPU run, a snapshot that failed), why not."""

    peak_allocated_b: int | None = None
    allocated_b: int | None = None
    blocks: tuple[AllocatorBlock, ...] = ()
    unavailable: str | None = None
    """Why there is no allocator summary (stored as ``n/a``); None where there is one."""

    def to_dict(self) -> dict[str, Any]:
        if self.unavailable is not None:
            return {"n/a": self.unavailable}
        return {
            "peak_allocated_b": self.peak_allocated_b,
            "allocated_b": self.allocated_b,
            "blocks": [block.to_dict() for block in self.blocks],
        }

    @classmethod
    def from_dict(cls, data: Any) -> AllocatorSummary:
        if not isinstance(data, dict) or "n/a" in data:
            reason = data.get("n/a") if isinstance(data, dict) else None
            return cls(unavailable=str(reason or "no allocator summary"))
        return cls(
            peak_allocated_b=data.get("peak_allocated_b"),
            allocated_b=data.get("allocated_b"),
            blocks=tuple(
                AllocatorBlock(size_b=int(block["size_b"]), frame=str(block.get("frame") or ""))
                for block in data.get("blocks") or []
            ),
        )


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    """Per-step GPU time by group, host-side time, the top kernels and the allocator's largest blocks of
    one profiled run (on the CPU class: the main thread's operators and the time outside them)."""

    kind: str
    """``gpu`` or ``cpu``: profiles of different kinds are not compared."""
    steps: int
    step_ms: float
    busy_ms: float
    host_side_ms: float
    idle_other_ms: float
    device_ms: dict[str, float]
    """Busy time per step by group, one entry per group of ``traces.profile.GROUPS``."""
    top_kernels: tuple[ProfiledKernel, ...]
    memory: AllocatorSummary
    scope: str | None = None
    """What the profiled window covers where it is not a whole step (a verl stage); None otherwise."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "steps": self.steps,
            "step_ms": self.step_ms,
            "busy_ms": self.busy_ms,
            "host_side_ms": self.host_side_ms,
            "idle_other_ms": self.idle_other_ms,
            "device_ms": dict(self.device_ms),
            "top_kernels": [kernel.to_dict() for kernel in self.top_kernels],
            "memory": self.memory.to_dict(),
        }
        if self.scope is not None:
            data["scope"] = self.scope
        return data

    @classmethod
    def from_dict(cls, data: Any) -> ProfileSummary | None:
        """The summary, or None where there is none or it is not one (a file with a defect loses its
        profile, not its result: a diagnosis then says the baseline has none)."""
        if not isinstance(data, dict) or not data:
            return None
        try:
            return cls(
                kind=str(data["kind"]),
                steps=int(data["steps"]),
                step_ms=_number(data["step_ms"]),
                busy_ms=_number(data["busy_ms"]),
                host_side_ms=_number(data["host_side_ms"]),
                idle_other_ms=_number(data["idle_other_ms"]),
                device_ms={str(group): _number(ms) for group, ms in data["device_ms"].items()},
                top_kernels=tuple(ProfiledKernel.from_dict(kernel) for kernel in data["top_kernels"]),
                memory=AllocatorSummary.from_dict(data.get("memory")),
                scope=data["scope"] if isinstance(data.get("scope"), str) else None,
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None
