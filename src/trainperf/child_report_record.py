"""What a run's child reported beside its steps, as the run keeps it (``RunRecord``): where a framework's
start-up went (``setup``) and the allocator snapshot it wrote at an out-of-memory (``memory_snapshot``).

The child writes them into its result (``workloads.rl_verl``, ``workloads.profiling``); the parent reads
them into these records. Each key is written only where the child had it, so a key not recorded is None
here and not written back; a key this trainperf does not know, or a value that does not read as its
field, is kept aside as the file had it and written back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import (
    stored_int,
    stored_mapping,
    stored_number_or_none,
    stored_text,
    unread_keys,
    written_back,
)


@dataclass(frozen=True, slots=True)
class FrameworkSetup:
    """Where a framework's start-up went (verl's, ``workloads.verl.setup``), and its line for the report."""

    phases: Mapping[str, float] | None = None
    """Seconds per phase the log shows (``ray_s``, ``inputs_s``, ``workers_s``, ``rollout_s``)."""
    vllm: Mapping[str, float | str] | None = None
    """The inference engine's own figures by name (its compile, CUDA graphs, weights) and whether its
    compile cache was hit (``compile_cache``)."""
    first_step_extra_s: float | None = None
    """The first step's time over the median of the others (the framework's warm-up inside it)."""
    total_s: float | None = None
    line: str | None = None
    """The ``set-up ...`` line the case's notes show."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "phases": dict(self.phases) if self.phases is not None else None,
            "vllm": dict(self.vllm) if self.vllm is not None else None,
            "first_step_extra_s": self.first_step_extra_s,
            "total_s": self.total_s,
            "line": self.line,
        }
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> FrameworkSetup | None:
        if not isinstance(data, dict):
            return None
        read: dict[str, Any] = {
            "phases": stored_mapping(data.get("phases"), stored_number_or_none),
            "vllm": stored_mapping(data.get("vllm"), _number_or_text),
            "first_step_extra_s": stored_number_or_none(data.get("first_step_extra_s")),
            "total_s": stored_number_or_none(data.get("total_s")),
            "line": stored_text(data.get("line")),
        }
        return cls(**read, unread=unread_keys(data, read))


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """The CUDA allocator's history a child wrote at an out-of-memory (``workloads.profiling``): its
    files, named relative to the run's folder, or why there are none."""

    file: str | None = None
    """The snapshot's pickle (``memory_snapshot.pickle``)."""
    file_bytes: int | None = None
    """The pickle's size (stored as ``bytes``)."""
    html: str | None = None
    """Its view for a browser, where one could be made."""
    html_error: str | None = None
    """Why the view could not be made."""
    error: str | None = None
    """Why no snapshot was written."""
    skipped: str | None = None
    """Why none was taken (a CPU run)."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "file": self.file,
            "bytes": self.file_bytes,
            "html": self.html,
            "html_error": self.html_error,
            "error": self.error,
            "skipped": self.skipped,
        }
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> MemorySnapshot | None:
        if not isinstance(data, dict):
            return None
        texts = ("file", "html", "html_error", "error", "skipped")
        read: dict[str, Any] = {
            **{name: stored_text(data.get(name)) for name in texts},
            "bytes": stored_int(data.get("bytes")),
        }
        fields = {("file_bytes" if key == "bytes" else key): value for key, value in read.items()}
        return cls(**fields, unread=unread_keys(data, read))


def _number_or_text(value: Any) -> float | str | None:
    number = stored_number_or_none(value)
    return number if number is not None else stored_text(value)
