"""The child's host-speed probe as its run keeps it (``RunRecord.host_index``): the index, its parts and
where the calibration ran (``workloads.host_index``, ``workloads.cpu_context``).

The child writes the probe into its result; the parent reads it into these records (``measure``). A key
not recorded is None here and not written back; a key this trainperf does not know (an older one's
``best``), or a value that does not read as its field, is kept aside as the file had it and written back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import stored_int, stored_number_or_none, unread_keys, written_back

_SHARES = ("siblings_busy", "others_busy", "steal")


@dataclass(frozen=True, slots=True)
class CpuContext:
    """Where the calibration ran, and how busy the host was around it; each None where the system
    does not say."""

    cpu: int | None
    """The processor the calibration ended on."""
    siblings: tuple[int, ...]
    """Its SMT siblings (the other hardware threads of its core)."""
    siblings_busy: float | None
    """Their busy share over the calibration: near 1, the calibration shared its core."""
    others_busy: float | None
    """The rest of the host's processors' busy share over it."""
    steal: float | None
    """The host's steal share over it (a hypervisor's other guests)."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Every figure, null where the system said nothing: the child has always named them all."""
        figures = {name: getattr(self, name) for name in _SHARES}
        return {"cpu": self.cpu, "siblings": list(self.siblings), **figures, **self.unread}

    @classmethod
    def from_dict(cls, data: Any) -> CpuContext | None:
        """The context, or None where there is none (no object, no list of siblings)."""
        siblings = data.get("siblings") if isinstance(data, dict) else None
        if not isinstance(siblings, list) or any(stored_int(cpu) is None for cpu in siblings):
            return None
        read: dict[str, Any] = {
            "cpu": stored_int(data.get("cpu")),
            **{name: stored_number_or_none(data.get(name)) for name in _SHARES},
        }
        unread = {
            key: value
            for key, value in data.items()
            if key != "siblings" and (key not in read or read[key] is None and value is not None)
        }
        return cls(**read, siblings=tuple(siblings), unread=unread)


@dataclass(frozen=True, slots=True)
class HostIndex:
    """The host-speed index (operations per microsecond of its fastest round: higher is faster) and
    its parts, the median rounds beside them."""

    index: float | None = None
    """The geometric mean of the two parts' fastest rates: the ``host_index`` metric."""
    median: float | None = None
    """The same over the median rounds: the host as the case met it, a busy neighbour included."""
    python_ops_per_us: float | None = None
    dispatch_ops_per_us: float | None = None
    """PyTorch operator dispatch on a CPU tensor (0 where torch is not installed)."""
    seconds: float | None = None
    """How long the calibration took."""
    cpu_context: CpuContext | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "index": self.index,
            "median": self.median,
            "python_ops_per_us": self.python_ops_per_us,
            "dispatch_ops_per_us": self.dispatch_ops_per_us,
            "seconds": self.seconds,
            "cpu_context": self.cpu_context.to_dict() if self.cpu_context is not None else None,
        }
        return written_back(stored, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> HostIndex | None:
        """The probe, or None where the child recorded none."""
        if not isinstance(data, dict):
            return None
        rates = ("index", "median", "python_ops_per_us", "dispatch_ops_per_us", "seconds")
        read: dict[str, Any] = {
            **{name: stored_number_or_none(data.get(name)) for name in rates},
            "cpu_context": CpuContext.from_dict(data.get("cpu_context")),
        }
        return cls(**read, unread=unread_keys(data, read))
