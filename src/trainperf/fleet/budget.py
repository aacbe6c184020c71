"""``--perf-budget MINUTES``: the most valuable cases first, and no case started that would not end
in time.

Value: a case whose step time moved recently (a change point among its last stored runs) comes
first, then the case that has gone longest without a run (never run: first of all). A case is
not started when its expected duration is more than what is left of the budget; the session
records it as skipped, "over --perf-budget" (``run.session.leave_out``), and so lists it in the
summary with everything else. This module only weighs and counts: it runs and records nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainperf.judge.changepoints import change_points

RECENT_RUNS = 5
"""A change point among a case's last this many stored runs counts as recent."""


@dataclass(frozen=True, slots=True)
class CaseValue:
    recent_change: bool
    last_run: str
    """When the case last started (ISO time); "" when it never ran."""


def values_from_timeline(rows: Sequence[Any]) -> dict[str, CaseValue]:
    """Each stored case's value: a recent change point in its step time, and its last run."""
    series: dict[str, list[float]] = {}
    last: dict[str, str] = {}
    for row in rows:
        if row.step_time_s is not None:
            series.setdefault(row.case_id, []).append(float(row.step_time_s))
        last[row.case_id] = max(last.get(row.case_id, ""), row.created)
    found = {}
    for case_id, started in last.items():
        values = series.get(case_id, [])
        recent = any(point.index >= len(values) - RECENT_RUNS for point in change_points(values))
        found[case_id] = CaseValue(recent, started)
    return found


def by_value(keys: Sequence[str], values: Mapping[str, CaseValue]) -> list[str]:
    """Keys in the order a budget spends on them: a recent change, then the longest unrun; ties by key."""

    def rank(key: str) -> tuple[bool, str, str]:
        value = values.get(key, CaseValue(False, ""))
        return (not value.recent_change, value.last_run, key)

    return sorted(keys, key=rank)


@dataclass(slots=True)
class Budget:
    """A session's wall-clock budget, spent from the moment it is created."""

    minutes: float
    expected_s: dict[str, float]
    started: float = field(default_factory=time.monotonic)
    left_out: list[str] = field(default_factory=list)

    def refusal(self, key: str) -> str | None:
        """Why ``key`` is not started (one line), or None when it fits in what is left."""
        left_s = self.minutes * 60 - (time.monotonic() - self.started)
        needed_s = self.expected_s.get(key, 0.0)
        if needed_s <= left_s:
            return None
        self.left_out.append(key)
        return (
            f"over --perf-budget {self.minutes:g} min: expected {needed_s / 60:.1f} min, "
            f"{max(left_s, 0) / 60:.1f} min left"
        )
