"""B judged against A as an A/B study keeps it (``ABRecord.comparison``): the object
``report.compare_runs`` writes (``RunComparison.to_dict``), read again by ``trainperf ab --judge-only``
(the sides' labels) and by the upgrade report (what moved between the sides' runs, and each case's
verdict, reason, what moved in its step and its metrics' figures).

What those read is fields; the rest (the class, the outcomes, p-values, the failed cases) is kept as
written. A study's record is compared key by key, so each object is written back in its writer's key
order, a key this trainperf does not know after those, and a key an older writer did not write stays
unwritten; a list with an entry that does not read (a newer writer's) is kept whole as written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainperf.jsonio import (
    read_fields,
    stored_flag,
    stored_number_or_none,
    stored_text,
    unread_keys,
    written_back,
)

# The keys in the order ``report.compare_runs`` writes them.
COMPARISON_ORDER = (
    "run_a", "run_b", "gpu_class", "strict", "environment_changes", "environment_from", "cases",
    "only_in_a", "only_in_b", "failed", "exit_status",
)  # fmt: skip
CASE_ORDER = (
    "case_id", "verdict", "fails", "reason", "parts", "kernels", "outcome_a", "outcome_b",
    "planted_slowdown_a", "planted_slowdown_b", "timing_comparable", "timing_note", "metrics",
    "config_changes",
)  # fmt: skip
METRIC_ORDER = ("metric", "verdict", "a", "b", "ratio", "interval", "p_value", "gated", "note")

Scalar = str | int | float | bool | None
Entry = TypeVar("Entry")


def _every(stored: Any, read: Callable[[Any], Entry | None]) -> tuple[Entry, ...] | None:
    """A stored list whose every entry reads, as a tuple; None where it is no list or an entry does
    not read (the list is then kept whole as written)."""
    if not isinstance(stored, list):
        return None
    entries = tuple(entry for entry in (read(item) for item in stored) if entry is not None)
    return entries if len(entries) == len(stored) else None


def _interval(stored: Any) -> tuple[float | None, float | None] | None:
    """A stored interval, ``[low, high]`` (each null where not finite), or None where it is not one."""
    if not isinstance(stored, list) or len(stored) != 2:
        return None
    low, high = stored
    if any(end is not None and stored_number_or_none(end) is None for end in (low, high)):
        return None
    return low, high


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


@dataclass(frozen=True, slots=True)
class EnvironmentChange:
    """A key of the sides' fingerprints whose value differs (a package's version, the driver), A's and B's
    (null where a side did not record it)."""

    key: str
    a: Scalar
    b: Scalar
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "a": self.a, "b": self.b, **self.unread}

    @classmethod
    def from_dict(cls, data: Any) -> EnvironmentChange | None:
        """The change, or None for anything that is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("key"), str) or not {"a", "b"} <= set(data):
            return None
        a, b = data["a"], data["b"]
        if not _is_scalar(a) or not _is_scalar(b):
            return None
        unread = {key: value for key, value in data.items() if key not in ("key", "a", "b")}
        return cls(data["key"], a, b, unread)


METRIC_READERS: dict[str, Callable[[Any], Any]] = {
    "metric": stored_text,
    "verdict": stored_text,
    "a": stored_number_or_none,
    "b": stored_number_or_none,
    "ratio": stored_number_or_none,
    "interval": _interval,
    "gated": stored_flag,
}


@dataclass(frozen=True, slots=True)
class ComparedMetric:
    """One metric of a case, B against A: its verdict and figures (null where not finite)."""

    metric: str
    verdict: str | None = None
    a: float | None = None
    b: float | None = None
    ratio: float | None = None
    """B over A: the median of the per-step ratios where steps pair."""
    interval: tuple[float | None, float | None] | None = None
    """The 95% interval of ``ratio`` (kernel time's: the range over B's runs)."""
    gated: bool | None = None
    """False where the figure is shown, not judged."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        recorded = {
            "metric": self.metric,
            "verdict": self.verdict,
            "a": self.a,
            "b": self.b,
            "ratio": self.ratio,
            "interval": list(self.interval) if self.interval is not None else None,
            "gated": self.gated,
        }
        return written_back(recorded, self.unread, METRIC_ORDER)

    @classmethod
    def from_dict(cls, data: Any) -> ComparedMetric | None:
        """The metric, or None for anything that is not one."""
        if not isinstance(data, dict):
            return None
        read = read_fields(data, METRIC_READERS)
        return cls(**read, unread=unread_keys(data, read)) if read["metric"] is not None else None


CASE_READERS: dict[str, Callable[[Any], Any]] = {
    "case_id": stored_text,
    "verdict": stored_text,
    "reason": stored_text,
    "parts": stored_text,
    "kernels": stored_text,
    "metrics": lambda stored: _every(stored, ComparedMetric.from_dict),
}


@dataclass(frozen=True, slots=True)
class ComparedCase:
    """One case B ran, judged against A's run of it."""

    case_id: str
    verdict: str
    """``pass``, ``regressed``, ``noisy``, ...: the case's verdict (``judge.compare.Verdict``)."""
    reason: str | None = None
    parts: str | None = None
    """Which part of a step moved (kernels, host), where kernel time was recorded."""
    kernels: str | None = None
    """Which kernel groups and kernels moved, where B's kernel time moved against A's."""
    metrics: tuple[ComparedMetric, ...] | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)

    def metric(self, name: str) -> ComparedMetric | None:
        return next((m for m in self.metrics or () if m.metric == name), None)

    def to_dict(self) -> dict[str, Any]:
        recorded = {
            "case_id": self.case_id,
            "verdict": self.verdict,
            "reason": self.reason,
            "parts": self.parts,
            "kernels": self.kernels,
            "metrics": [m.to_dict() for m in self.metrics] if self.metrics is not None else None,
        }
        return written_back(recorded, self.unread, CASE_ORDER)

    @classmethod
    def from_dict(cls, data: Any) -> ComparedCase | None:
        """The case, or None for anything that is not one (no id or no verdict)."""
        if not isinstance(data, dict):
            return None
        read = read_fields(data, CASE_READERS)
        if read["case_id"] is None or read["verdict"] is None:
            return None
        return cls(**read, unread=unread_keys(data, read))


COMPARISON_READERS: dict[str, Callable[[Any], Any]] = {
    "run_a": stored_text,
    "run_b": stored_text,
    "environment_changes": lambda stored: _every(stored, EnvironmentChange.from_dict),
    "cases": lambda stored: _every(stored, ComparedCase.from_dict),
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Run B judged case by case against run A, with the sides' labels and what differed between their
    machines and stacks."""

    run_a: str | None = None
    """A's label (``trl 1.0.0``, or the folder's name)."""
    run_b: str | None = None
    environment_changes: tuple[EnvironmentChange, ...] | None = None
    cases: tuple[ComparedCase, ...] | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        changes, cases = self.environment_changes, self.cases
        recorded = {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "environment_changes": [c.to_dict() for c in changes] if changes is not None else None,
            "cases": [case.to_dict() for case in cases] if cases is not None else None,
        }
        return written_back(recorded, self.unread, COMPARISON_ORDER)

    @classmethod
    def from_dict(cls, data: Any) -> Comparison | None:
        """The comparison, or None where the record holds none."""
        if not isinstance(data, dict):
            return None
        read = read_fields(data, COMPARISON_READERS)
        return cls(**read, unread=unread_keys(data, read))
