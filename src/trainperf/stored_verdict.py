"""A case's verdict as its result keeps it: plain values that reports read and result files hold.

The judge reaches a verdict with its own types (``judge.compare.CaseVerdict``, ``Verdict`` members)
and hands the result this record (``CaseVerdict.stored``); the run then adds what the case was
judged against, its notes, the baseline's per-step times, a diagnosis and a trace diff. Result
files, committed baselines and the results history written before this record hold the same keys
as a JSON object, some missing and a baseline's empty: ``from_dict`` reads every one of them, and
``to_dict`` writes the keys they have always had.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trainperf.diagnosis_record import Diagnosis, TraceDiff

Change = tuple[str, Any, Any]
"""(key, the baseline's value, this run's value)."""


@dataclass(slots=True)
class StoredMetricVerdict:
    """One metric against its baseline's: the judge's ``MetricVerdict`` in plain values."""

    metric: str
    verdict: str
    current: float | None = None
    baseline: float | None = None
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    """The ratio's 95% interval (for kernel time, the range of its run-steps' ratios)."""
    p_value: float | None = None
    gated: bool = True
    """False where the figure is shown but cannot fail the case (another host, a contaminated run,
    an informational metric)."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoredMetricVerdict:
        return cls(
            metric=str(data.get("metric") or ""),
            verdict=str(data.get("verdict") or ""),
            current=_number(data.get("current")),
            baseline=_number(data.get("baseline")),
            ratio=_number(data.get("ratio")),
            interval=_interval(data.get("interval")),
            p_value=_number(data.get("p_value")),
            gated=bool(data.get("gated", True)),
            note=str(data.get("note") or ""),
        )


@dataclass(slots=True)
class StoredVerdict:
    """A case's verdict, its metrics' verdicts and what the run added after judging it."""

    verdict: str = ""
    """The case's verdict (a ``judge.metric_verdict.Verdict`` value); empty where the result was
    never judged (a baseline, an ingested fidelity child)."""
    fails: bool = False
    reason: str = ""
    metrics: list[StoredMetricVerdict] = field(default_factory=list)
    config_changes: list[Change] = field(default_factory=list)
    environment_changes: list[Change] = field(default_factory=list)
    parts: str = ""
    """Which part of the step moved: ``step +21% = kernels +0.2% (GEMM -0.1 ms) + host +31%``."""
    kernels: str = ""
    """Which kernel groups and kernels moved, where kernel time did."""
    confirm: bool = False
    """A regression of host-dependent timing alone, which fresh runs confirm before it fails."""
    judged_against: str = ""
    """A line naming the reference: the class's baseline file or the runner's accepted history."""
    notes: list[str] = field(default_factory=list)
    baseline_step_times: list[list[float]] = field(default_factory=list)
    """The baseline's ``[step, median seconds]`` (``judge.step_series``), drawn under this run's."""
    diagnosis: Diagnosis | None = None
    """A confirmed regression's diagnosis (``run.diagnosis``: ``traces.diagnose``'s record, its
    ``line`` the one shown); None where there is none."""
    trace_diff: TraceDiff | None = None
    """A timing regression's trace against the baseline's (``traces.diff``); None where there is none."""

    @property
    def judged(self) -> bool:
        return bool(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        """The judge's keys, then those the run adds only where it added them; a record that says
        nothing (a baseline's) is ``{}``, as it always was on disk."""
        if self == StoredVerdict():
            return {}
        data: dict[str, Any] = {
            "verdict": self.verdict or None,  # not judged reads null, as ingested fidelity children did
            "fails": self.fails,
            "reason": self.reason,
            "metrics": [metric.to_dict() for metric in self.metrics],
            "config_changes": [list(change) for change in self.config_changes],
            "environment_changes": [list(change) for change in self.environment_changes],
            "parts": self.parts,
            "kernels": self.kernels,
            "confirm": self.confirm,
        }
        added = {
            "judged_against": self.judged_against,
            "notes": list(self.notes),
            "baseline_step_times": [list(point) for point in self.baseline_step_times],
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis is not None else None,
            "trace_diff": self.trace_diff.to_dict() if self.trace_diff is not None else None,
        }
        return data | {key: value for key, value in added.items() if value}

    @classmethod
    def from_dict(cls, data: Any) -> StoredVerdict:
        """Read a stored verdict; a key it lacks (an older file, a baseline's ``{}``) keeps its default."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            verdict=str(data.get("verdict") or ""),
            fails=bool(data.get("fails")),
            reason=str(data.get("reason") or ""),
            metrics=[
                StoredMetricVerdict.from_dict(m) for m in data.get("metrics") or [] if isinstance(m, dict)
            ],
            config_changes=_changes(data.get("config_changes")),
            environment_changes=_changes(data.get("environment_changes")),
            parts=str(data.get("parts") or ""),
            kernels=str(data.get("kernels") or ""),
            confirm=bool(data.get("confirm")),
            judged_against=str(data.get("judged_against") or ""),
            notes=[str(note) for note in data.get("notes") or []],
            baseline_step_times=[
                [float(x) for x in point] for point in data.get("baseline_step_times") or []
            ],
            diagnosis=Diagnosis.from_dict(data.get("diagnosis")),
            trace_diff=TraceDiff.from_dict(data.get("trace_diff")),
        )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _interval(value: Any) -> tuple[float, float] | None:
    """Both ends, or None where there is no interval or an end is missing."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and None not in value:
        return float(value[0]), float(value[1])
    return None


def _changes(value: Any) -> list[Change]:
    return [
        (str(change[0]), change[1], change[2])
        for change in value or []
        if isinstance(change, (list, tuple)) and len(change) == 3
    ]
