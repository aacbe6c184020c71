"""What a verdict keeps of a regression's explanation (``StoredVerdict.diagnosis`` and ``trace_diff``):
the diagnosis of a confirmed regression (``run.diagnosis``, from ``traces.diagnose``) and the trace
diff of a timing regression against the baseline's trace (``traces.diff``).

Each key is written only where its writer had it (an older diagnosis has ``lines``, not ``line``),
so every key not recorded is None here and not written back; a key this trainperf does not know, or
a value that does not read as its field, is kept aside as the file had it and written back, so a
stored verdict reads back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import (
    listed,
    read_fields,
    stored_number_or_none,
    stored_text,
    stored_texts,
    unread_keys,
    written_back,
)
from trainperf.profile_record import ProfileSummary

Pair = tuple[float, float]
"""(the baseline's figure, this run's), per profiled step."""
TRACE_DIFF_KEYS = ("kind", "step_ms", "busy_fraction", "components_ms", "grown", "verdict")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The nature of a confirmed regression and the line shown, with what it was computed from."""

    nature: str | None = None
    """``host``, ``device``, ``memory``, ``composite`` or ``unclear``."""
    line: str | None = None
    """The ``diagnosis: ...`` line the reports show."""
    lines: tuple[str, ...] | None = None
    """Several lines, where an older trainperf stored them so instead of one ``line``."""
    threshold_ms: float | None = None
    """The noise in the idle time below which a change is not named."""
    work_threshold_ms: float | None = None
    uniform_scale: float | None = None
    """How far every kernel group slowed alike (a slower clock, not one kernel)."""
    regressed: tuple[str, ...] | None = None
    """The kinds of metric that regressed (``regressed_kinds``)."""
    cost: str | None = None
    """What the diagnosis cost: which run was profiled."""
    profile: ProfileSummary | None = None
    """This run's profile summary, as the diagnosis compared it with the baseline's."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def shown_lines(self) -> list[str]:
        """The lines the reports show: ``line``, else an older record's ``lines``."""
        return [self.line] if self.line else list(self.lines or ())

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "nature": self.nature,
            "line": self.line,
            "lines": listed(self.lines),
            "threshold_ms": self.threshold_ms,
            "work_threshold_ms": self.work_threshold_ms,
            "uniform_scale": self.uniform_scale,
            "regressed": listed(self.regressed),
            "cost": self.cost,
            "profile": self.profile.to_dict() if self.profile is not None else None,
        }
        return written_back(stored, self.unread, order=tuple(stored))  # its fields first, as always

    @classmethod
    def from_dict(cls, data: Any) -> Diagnosis | None:
        """The diagnosis, or None where there is none (no object, or an empty one)."""
        if not isinstance(data, dict) or not data:
            return None
        read = read_fields(data, _DIAGNOSIS_READERS)
        return cls(**read, unread=unread_keys(data, read))


@dataclass(frozen=True, slots=True)
class GrownCategory:
    """A trace category whose time per profiled step grew past the diff's threshold."""

    category: str
    baseline_ms: float
    current_ms: float
    delta_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "baseline_ms": self.baseline_ms,
            "current_ms": self.current_ms,
            "delta_ms": self.delta_ms,
        }


@dataclass(frozen=True, slots=True)
class TraceDiff:
    """A slower run's trace against its baseline's, per profiled step: the step, the busy fraction,
    the step's components, the categories that grew (largest first) and which component grew most."""

    kind: str
    """``gpu`` or ``cpu``: the components are the device's or the main thread's."""
    step_ms: Pair
    busy_fraction: tuple[float | None, float | None]
    components_ms: dict[str, Pair]
    """``GPU busy``, ``host-bound idle``, ``other idle`` (or ``CPU busy``, ``CPU idle``), in that order."""
    grown: tuple[GrownCategory, ...]
    verdict: str
    """``host-bound``, ``GPU-bound``, ``CPU-bound``, ``idle`` or ``no slowdown in the profiled steps``."""
    unread: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "step_ms": list(self.step_ms),
            "busy_fraction": list(self.busy_fraction),
            "components_ms": {label: list(pair) for label, pair in self.components_ms.items()},
            "grown": [category.to_dict() for category in self.grown],
            "verdict": self.verdict,
            **self.unread,
        }

    @classmethod
    def from_dict(cls, data: Any) -> TraceDiff | None:
        """The diff, or None where there is none or the object is not one."""
        if not isinstance(data, dict) or not data:
            return None
        try:
            return cls(
                kind=str(data["kind"]),
                step_ms=_pair(data["step_ms"]),
                busy_fraction=(
                    stored_number_or_none(data["busy_fraction"][0]),
                    stored_number_or_none(data["busy_fraction"][1]),
                ),
                components_ms={str(label): _pair(pair) for label, pair in data["components_ms"].items()},
                grown=tuple(_grown(grown) for grown in data["grown"]),
                verdict=str(data["verdict"]),
                unread={key: value for key, value in data.items() if key not in TRACE_DIFF_KEYS},
            )
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            return None


def _grown(stored: Any) -> GrownCategory:
    """A grown category from its four figures; a key a newer writer added is not one of them, and
    must not cost the whole diff."""
    return GrownCategory(
        str(stored["category"]),
        float(stored["baseline_ms"]),
        float(stored["current_ms"]),
        float(stored["delta_ms"]),
    )


def _pair(stored: Any) -> Pair:
    before, after = stored
    return float(before), float(after)


def _profile(stored: Any) -> ProfileSummary | None:
    """The profile summary where it reads back as stored; else None (and the object is kept unread)."""
    profile = ProfileSummary.from_dict(stored)
    return profile if profile is not None and profile.to_dict() == stored else None


_DIAGNOSIS_READERS: Mapping[str, Callable[[Any], Any]] = {
    "nature": stored_text,
    "line": stored_text,
    "lines": stored_texts,
    "threshold_ms": stored_number_or_none,
    "work_threshold_ms": stored_number_or_none,
    "uniform_scale": stored_number_or_none,
    "regressed": stored_texts,
    "cost": stored_text,
    "profile": _profile,
}
"""A diagnosis's stored keys, each with what reads its value (``jsonio.read_fields``)."""
