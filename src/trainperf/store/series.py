"""A case x metric series of the results history's points, its change points and environment steps.

Pure: the points come from ``HistoryStore.history_points`` (``store/interface.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainperf.judge.changepoints import ChangePoint, change_points
from trainperf.judge.fingerprint import environment_changes
from trainperf.store.records import Point


@dataclass(slots=True)
class Series:
    """A case x metric series of one runner, its change points and the environment at each."""

    case_id: str
    runner: str
    metric: str
    points: list[Point]
    change_points: list[ChangePoint]
    environment: dict[int, list[tuple[str, Any, Any]]]
    """Position -> what changed in the environment (driver, CUDA, packages) since the run before."""


def series_of(points: Sequence[Point], metric: str) -> list[Series]:
    """The points grouped by case and runner, one series per pair that has ``metric``, annotated."""
    return all_series(points, [metric])[metric]


def all_series(points: Sequence[Point], metric_names: Sequence[str]) -> dict[str, list[Series]]:
    """``series_of`` for several metrics; each group's environment changes are worked out once."""
    groups: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        groups.setdefault((point.case_id, point.runner), []).append(point)
    found: dict[str, list[Series]] = {name: [] for name in metric_names}
    for (case_id, runner), group in sorted(groups.items()):
        environment = environment_steps(group)
        for name in metric_names:
            having = [p for p in group if name in p.values]
            if not having:
                continue
            shifts = environment if len(having) == len(group) else environment_steps(having)
            found[name].append(Series(case_id, runner, name, having, _level_changes(having, name), shifts))
    return found


def _level_changes(points: Sequence[Point], metric: str) -> list[ChangePoint]:
    """Change points within each stretch of runs of one length: a planned run's tokens/s and energy
    per token cover its first steps, so where the length changes the series moves by itself (the
    environment steps say so there) and that move is not a change of the case."""
    found: list[ChangePoint] = []
    start = 0
    for end in range(1, len(points) + 1):
        if end < len(points) and not _length_changed(points[end - 1], points[end]):
            continue
        stretch = [point.values[metric] for point in points[start:end]]
        found += [dataclasses.replace(cp, index=cp.index + start) for cp in change_points(stretch)]
        start = end
    return found


def _length_changed(before: Point, after: Point) -> bool:
    return before.steps is not None and after.steps is not None and before.steps != after.steps


def environment_steps(points: Sequence[Point]) -> dict[int, list[tuple[str, Any, Any]]]:
    """Position -> what changed (packages, driver, hardware, the measured steps) since the run before it."""
    environment = {}
    for position in range(1, len(points)):
        before, after = points[position - 1], points[position]
        changed = environment_changes(before.fingerprint, after.fingerprint)
        if before.runner_env != after.runner_env and not changed:
            changed = [("hardware", before.runner_env, after.runner_env)]
        if _length_changed(before, after):
            changed = [*changed, ("measured steps", before.steps, after.steps)]
        if changed:
            environment[position] = changed
    return environment
