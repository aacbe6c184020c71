"""Where and with what a case ran, as its result keeps it (``CaseResult.fingerprint``): the machine's
facts (``measure.host.host_fingerprint``) and the stack's versions its first child reported
(``workloads.effective.library_versions``).

The file keeps them as one flat object. The machine's facts are a fixed set and are read as fields;
the versions are an open set (each family adds its own packages), so they are a mapping. A key not
recorded is None here and not written back; a key whose value does not read as its field (a null
power limit, a newer trainperf's figure) is kept aside as the file had it, so that rewriting a
result (a merge, a resumed run) loses nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_TEXT = (str,)
_NUMBER = (int, float)
FACT_TYPES: dict[str, tuple[type, ...]] = {
    "hostname": _TEXT,
    "os": _TEXT,
    "python": _TEXT,
    "cpu_model": _TEXT,
    "cpu_count": (int,),
    "cpu_id": _TEXT,
    "cpu_isa": _TEXT,
    "gpu_name": _TEXT,
    "gpu_uuid": _TEXT,
    "gpu_memory_gib": _NUMBER,
    "driver": _TEXT,
    "cuda_driver": _TEXT,
    "power_limit_w": _NUMBER,
    "runner": _TEXT,
    "child_device_name": _TEXT,
}
"""The machine's facts, in the order the host records them, with the JSON types each reads as."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The machine a case ran on and the versions of the stack it ran with."""

    hostname: str | None = None
    os: str | None = None
    python: str | None = None
    """The suite's interpreter version (the child's may differ: its environment's)."""
    cpu_model: str | None = None
    cpu_count: int | None = None
    cpu_id: str | None = None
    """Vendor, family, model and stepping: tells apart hosts that mask the model name."""
    cpu_isa: str | None = None
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    gpu_memory_gib: float | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    power_limit_w: float | None = None
    child_device_name: str | None = None
    """The device as the child's torch named it, where it reported one."""
    runner: str | None = None
    """The runner's name in the results history (``--perf-runner``, else host/GPU UUID); a baseline
    pooled from a history has its runs' runner."""
    versions: Mapping[str, str] = field(default_factory=dict)
    """Package (or ``torch_cuda``) to version, as the first child that ran reported them."""
    unread: Mapping[str, Any] = field(default_factory=dict)
    """Keys whose values do not read as a fact or a version, as the file had them: written back only."""

    def with_child(self, child: Mapping[str, Any]) -> Fingerprint:
        """This fingerprint with what a child's result reported (``protocol.read_child_result``): its
        stack's ``versions`` and its ``device_name``."""
        device = child.get("device_name")
        added = {**(child.get("versions") or {}), **({"child_device_name": device} if device else {})}
        return Fingerprint.from_dict({**self.to_dict(), **added})

    def to_dict(self) -> dict[str, Any]:
        facts = {name: getattr(self, name) for name in FACT_TYPES}
        recorded = {name: value for name, value in facts.items() if value is not None}
        return {**self.unread, **recorded, **self.versions}

    @classmethod
    def from_dict(cls, data: Any) -> Fingerprint:
        """Read a stored fingerprint; anything but an object reads as an empty one."""
        facts: dict[str, Any] = {}
        versions: dict[str, str] = {}
        unread: dict[str, Any] = {}
        for key, value in (data if isinstance(data, dict) else {}).items():
            if key in FACT_TYPES and _reads_as(value, FACT_TYPES[key]):
                facts[key] = value
            elif key not in FACT_TYPES and isinstance(value, str):
                versions[key] = value
            else:
                unread[key] = value
        return cls(**facts, versions=versions, unread=unread)


def _reads_as(value: Any, types: tuple[type, ...]) -> bool:
    """Whether a stored value is of a fact's type; a number stays as written (an int an int), so the
    file reads back unchanged, and a JSON boolean is no number."""
    return isinstance(value, types) and not isinstance(value, bool)
