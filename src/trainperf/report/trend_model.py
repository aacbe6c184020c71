"""The dashboard's reading of a case's stored runs: levels, change points, tolerance, what went red.

Pure: it takes the runs the store found (``HistoryStore.stored_runs``) and returns what the pages
draw. A run is drawn on its case's line when it measured something trustworthy (it ran, was not
contaminated, no slowdown was planted in it); every other stored run is still drawn, as a marker of
its own kind.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from trainperf.case import Outcome
from trainperf.judge import stats
from trainperf.judge.changepoints import ChangePoint
from trainperf.judge.metrics import METRICS, Direction
from trainperf.store.records import StoredRun
from trainperf.store.series import all_series, environment_steps

RED = ("regressed", "outcome-changed", "config-changed")
BASELINE_RUNS = 10
"""Runs before a red streak its size is measured against (the history gate's own window)."""
LEARNED = re.compile(r"(\w+) tolerance [\d.]+% -> ([\d.]+)%")


def kind_of(run: StoredRun) -> str:
    """The marker a run is drawn with: skipped, failed, planted, contaminated, regressed, noisy,
    improved, pass."""
    if not run.kind:
        run.kind = _classified(run)
    return run.kind


def _classified(run: StoredRun) -> str:
    if run.outcome == Outcome.SKIPPED:
        return "skipped"  # it did not run (an environment missing, too few GPUs): no failure
    if run.outcome != Outcome.OK:
        return "failed"
    if run.planted:
        return "planted"
    if run.verdict == "contaminated":
        return "contaminated"
    if run.verdict in RED:
        return "regressed"
    if run.verdict in ("noisy", "improved"):
        return run.verdict
    return "pass"


LINE_KINDS = frozenset(("pass", "regressed", "noisy", "improved"))
"""Runs whose values are trusted as the case's level (a noisy run is flagged, not dropped)."""


def on_line(run: StoredRun) -> bool:
    return kind_of(run) in LINE_KINDS


@dataclass(slots=True)
class Segment:
    first: int
    last: int
    """Run indices (into the case's runs) of the segment's first and last run on the line."""
    median: float


@dataclass(slots=True)
class MetricTrend:
    """One metric of a case: its reference (100%), tolerance, change points and levels."""

    metric: str
    reference: float
    tolerance: float
    tolerance_note: str
    lower_is_better: bool | None
    change_points: list[tuple[int, ChangePoint]]
    """(run index of the first run at the new level, the change point)."""
    segments: list[Segment]
    environment: dict[int, list[tuple[str, Any, Any]]]

    def percent(self, value: float) -> float:
        return 100.0 * value / self.reference if self.reference else 100.0

    def adverse(self, change: float) -> bool:
        """Whether a relative change goes the bad way for this metric."""
        if self.lower_is_better is None:
            return False
        return change > 0 if self.lower_is_better else change < 0


@dataclass(slots=True)
class CaseTrend:
    case_id: str
    runner: str
    runs: list[StoredRun]
    metrics: dict[str, MetricTrend] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    """Each run's start, seconds since the epoch (the plots' x)."""
    kinds: list[str] = field(default_factory=list)
    """Each run's ``kind_of``."""

    def counts(self) -> Counter[str]:
        return Counter(kind_of(run) for run in self.runs)


@dataclass(slots=True)
class Finding:
    """A row of the first page: a red streak (the latest runs not good) or a change point."""

    trend: CaseTrend
    run: int
    """Run index of the run the row is about (the streak's latest run, the change point's first)."""
    changes: list[tuple[str, float]]
    """(metric, relative change) with the largest first."""
    since: int = -1
    """The streak's first run; the last good run is the one before it."""

    @property
    def size(self) -> float:
        return abs(self.changes[0][1]) if self.changes else float("inf")


def build_trends(runs: Sequence[StoredRun], metric_names: Sequence[str]) -> list[CaseTrend]:
    """The trends of each case and runner, with change points found on the runs of the line."""
    groups: dict[tuple[str, str], CaseTrend] = {}
    for run in runs:
        groups.setdefault((run.case_id, run.runner), CaseTrend(run.case_id, run.runner, [])).runs.append(run)
    for trend in groups.values():
        trend.times = [epoch(run.started) for run in trend.runs]
        trend.kinds = [kind_of(run) for run in trend.runs]
        _add_metrics(trend, metric_names)
    return [groups[key] for key in sorted(groups)]


def _add_metrics(trend: CaseTrend, metric_names: Sequence[str]) -> None:
    """Each metric's trend over the runs on the line. A metric with one value throughout (memory
    figures often are) has no change point by definition: only the others go through detection."""
    line = [(i, run) for i, run in enumerate(trend.runs) if trend.kinds[i] in LINE_KINDS]
    index_of = {id(point): i for i, point in line}
    varying: list[str] = []
    constant: list[str] = []
    for name in metric_names:
        seen = {point.values[name] for _, point in line if name in point.values}
        if seen:
            (varying if len(seen) > 1 else constant).append(name)
    found = all_series([point for _, point in line], varying) if varying else {}
    whole: dict[int, list[tuple[str, Any, Any]]] | None = None
    for name in varying:
        for series in found[name]:
            if len(series.points) == len(line):
                whole = series.environment  # the line's own, reused below
            positions = [index_of[id(point)] for point in series.points]
            values = [point.values[name] for point in series.points]
            metric = _metric_trend(name, trend.runs, positions, values, series.change_points)
            metric.environment = {positions[k]: v for k, v in series.environment.items()}
            trend.metrics[name] = metric
    for name in constant:
        having = [(i, point) for i, point in line if name in point.values]
        positions, values = [i for i, _ in having], [point.values[name] for _, point in having]
        metric = _metric_trend(name, trend.runs, positions, values, [])
        if len(having) == len(line):  # the usual case: worked out once for all such metrics
            whole = environment_steps([point for _, point in line]) if whole is None else whole
        shifts = (
            whole
            if len(having) == len(line) and whole is not None
            else environment_steps([p for _, p in having])
        )
        metric.environment = {positions[k]: v for k, v in shifts.items()}
        trend.metrics[name] = metric
    _off_line_only(trend, metric_names)


def _off_line_only(trend: CaseTrend, metric_names: Sequence[str]) -> None:
    """Metrics only runs off the line have (a case whose only run was contaminated): drawn too,
    as markers around their own median, with no level or change point."""
    for name in metric_names:
        values = [run.values[name] for run in trend.runs if name in run.values]
        if name in trend.metrics or not values:
            continue
        tolerance, note = tolerance_of(name, trend.runs[-1].judged_against)
        metric = METRICS.get(name)
        lower = None if metric is None or not metric.tolerance else metric.direction is Direction.LOWER
        trend.metrics[name] = MetricTrend(name, stats.median(values), tolerance, note, lower, [], [], {})


@functools.lru_cache(maxsize=65536)
def epoch(started: str) -> float:
    """An ISO time as seconds since the epoch; one without a zone is UTC."""
    moment = datetime.fromisoformat(started.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _metric_trend(
    name: str, runs: list[StoredRun], positions: list[int], values: list[float], found: list[ChangePoint]
) -> MetricTrend:
    edges = [0, *(cp.index for cp in found), len(values)]
    segments = [
        Segment(positions[a], positions[b - 1], stats.median(values[a:b]))
        for a, b in itertools.pairwise(edges)
    ]
    first = [v for p, v in zip(positions[: edges[1]], values) if kind_of(runs[p]) != "regressed"]
    reference = stats.median(first or values[: edges[1]])
    tolerance, note = tolerance_of(name, runs[positions[-1]].judged_against)
    metric = METRICS.get(name)
    lower = None if metric is None or not metric.tolerance else metric.direction is Direction.LOWER
    return MetricTrend(
        name, reference, tolerance, note, lower, [(positions[cp.index], cp) for cp in found], segments, {}
    )


def tolerance_of(name: str, judged_against: str | None) -> tuple[float, str]:
    """The tolerance the gate applied to the latest run: the learned one its record names, else the
    registry's default."""
    for metric, learned in LEARNED.findall(judged_against or ""):
        if metric == name:
            return float(learned) / 100, "learned from the runner's history (latest run)"
    metric = METRICS.get(name)
    return (metric.tolerance, "the suite's default") if metric else (0.0, "")


def red_streaks(trends: Sequence[CaseTrend]) -> list[Finding]:
    """Per case, the runs since its last good one, where its latest run is not good; the largest
    (the metric furthest beyond its tolerance, the streak's median against the good runs before
    it) first."""
    found = []
    for trend in trends:
        if not trend.runs or kind_of(trend.runs[-1]) in ("pass", "improved"):
            continue
        since = len(trend.runs) - 1
        while since > 0 and kind_of(trend.runs[since - 1]) not in ("pass", "improved"):
            since -= 1
        latest = len(trend.runs) - 1
        found.append(Finding(trend, latest, streak_changes(trend, since, latest), since))
    return sorted(found, key=lambda f: (-f.size, f.trend.case_id))


def streak_changes(trend: CaseTrend, since: int, latest: int) -> list[tuple[str, float]]:
    """Each metric's change over the streak: the median of the streak's runs on the line against
    the median of the good runs before it; adverse changes beyond their tolerance first, then gated
    metrics (what a verdict can rest on) before reported ones such as warm-up, each by its size in
    tolerances.

    The streak's runs scatter around their level as the good runs did around theirs: on a
    host-bound case with 5% run-to-run noise the latest run alone read a +3% step as -4.6%. Their
    median reads the level. The reference stays the gate's own window (the last good runs), so a
    look further back never crosses an older level. A streak ending in a failed run has no value
    (it ranks first); one with no run on the line (contaminated or planted only) is sized by what
    its runs measured."""
    streak = trend.runs[since : latest + 1]
    if kind_of(streak[-1]) == "failed":
        return []
    measured = [r for r in streak if on_line(r)] or [r for r in streak if kind_of(r) != "failed"]
    before = [r for r in trend.runs[:since] if kind_of(r) in ("pass", "improved")][-BASELINE_RUNS:]
    changes = []
    for name, metric in trend.metrics.items():
        earlier = [r.values[name] for r in before if name in r.values]
        now = [r.values[name] for r in measured if name in r.values]
        if not now or not earlier or not stats.median(earlier):
            continue
        change = stats.median(now) / stats.median(earlier) - 1
        beyond = metric.adverse(change) and abs(change) > metric.tolerance
        gated = METRICS[name].gated if name in METRICS else True
        changes.append((not beyond, not gated, -abs(change) / (metric.tolerance or 1.0), name, change))
    return [(name, change) for *_, name, change in sorted(changes)]


def change_findings(trends: Sequence[CaseTrend]) -> list[Finding]:
    """Every change point in the window beyond its metric's tolerance, one row per case and run (its
    metrics together), largest first. A step inside the tolerance is real to the detector on a long
    quiet series (-0.8% of host memory over a year) but no gate would act on it: listed, it buries
    the steps that matter."""
    rows: dict[tuple[int, int], Finding] = {}
    for position, trend in enumerate(trends):
        for name, metric in trend.metrics.items():
            for index, cp in metric.change_points:
                if metric.tolerance > 0 and abs(cp.ratio - 1) <= metric.tolerance:
                    continue
                row = rows.setdefault((position, index), Finding(trend, index, []))
                row.changes.append((name, cp.ratio - 1))
    for row in rows.values():
        row.changes.sort(key=lambda item: -abs(item[1]))
    return sorted(rows.values(), key=lambda f: (-f.size, f.trend.case_id))


def environment_at(trend: CaseTrend, index: int, since: int | None = None) -> list[tuple[str, Any, Any]]:
    """What changed in the environment between the run before ``since`` (default ``index``) and
    the run at ``index``."""
    from trainperf.judge.fingerprint import environment_changes

    start = index if since is None else since
    if start <= 0:
        return []
    before, after = trend.runs[start - 1], trend.runs[index]
    changed = environment_changes(before.fingerprint, after.fingerprint)
    if before.runner_env != after.runner_env and not changed:
        changed = [("hardware", before.runner_env, after.runner_env)]
    return changed
