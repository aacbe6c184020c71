"""A night's measured GPU-minutes against its projection (pure: the night's record and the results
in, one figure out; the summary and ``trainperf merge`` print its line).

The projection (``plan.tiers``) is one run per case at its baseline's median wall time. A real
night spends more beside its steps: the configured repeats, confirmation runs, a diagnosis's
profiled run, a cliff's probes, a fresh runner's model generation. Measured is every launch the
results record (``fleet.cost.case_cost``); the line says how far the two are apart, so that a
budget is set from what a night takes, not from what it was projected to take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from trainperf.fleet.cost import case_cost
from trainperf.result import CaseResult

PROJECTED_KEY = "projected_gpu_s"
"""The night's record in run.json: each planned case's projected GPU-seconds (None: unknown)."""


@dataclass(frozen=True, slots=True)
class NightCost:
    night: str
    cases: int
    launches: int
    confirmations: int
    measured_min: float
    """Every launch of the cases that have a projection."""
    projected_min: float
    unprojected_cases: int
    unprojected_min: float
    """What the cases without a projection (no baseline wall time) measured: not in the ratio."""

    def line(self) -> str:
        over = ""
        if self.projected_min > 0:
            over = f" ({(self.measured_min / self.projected_min - 1) * 100:+.0f}%)"
        line = (
            f"trainperf: night {self.night}: {self.cases} case(s) took {self.measured_min:.1f} GPU-min "
            f"({self.launches} launch(es), {self.confirmations} confirmation run(s)) against "
            f"{self.projected_min:.1f} projected{over}"
        )
        if self.unprojected_cases:
            line += (
                f"; {self.unprojected_cases} case(s) without a projection took "
                f"{self.unprojected_min:.1f} GPU-min more"
            )
        return line


def recorded_night(sessions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The night a run's sessions planned (``--perf-night``), from the first that records one."""
    for session in sessions:
        night = ((session.get("settings") or {}).get("fleet") or {}).get("night")
        if night:
            return dict(night)
    return None


def night_cost(night: Mapping[str, Any], results: Sequence[CaseResult]) -> NightCost | None:
    """The night's figures over the results of the cases it planned; None when the record has no
    projection (a run of an older trainperf) or no planned case has a result."""
    projected = night.get(PROJECTED_KEY)
    if not isinstance(projected, dict):
        return None
    planned = [result for result in results if result.case_id in projected]
    if not planned:
        return None
    known = [r for r in planned if isinstance(projected[r.case_id], int | float)]
    unknown = [r for r in planned if r not in known]
    costs = {r.case_id: case_cost(r, one_run=False) for r in planned}
    return NightCost(
        night=str(night.get("date") or "?"),
        cases=len(known),
        launches=sum(costs[r.case_id].launches for r in known),
        confirmations=sum(1 for r in known for run in r.runs if run.purpose == "confirmation"),
        measured_min=sum(costs[r.case_id].gpu_s for r in known) / 60,
        projected_min=sum(float(projected[r.case_id]) for r in known) / 60,
        unprojected_cases=len(unknown),
        unprojected_min=sum(costs[r.case_id].gpu_s for r in unknown) / 60,
    )


@dataclass(frozen=True, slots=True)
class NightWall:
    """A night's wall time on one host's workers against what their order projected."""

    workers: int
    measured_s: float
    """From the earliest pytest session's start to the last case's end (a resumed night: both)."""
    projected_s: float

    def line(self) -> str:
        over = (self.measured_s / self.projected_s - 1) * 100 if self.projected_s else 0.0
        return (
            f"trainperf: on {self.workers} workers the night took {self.measured_s / 60:.1f} min wall "
            f"against {self.projected_s / 60:.1f} projected ({over:+.0f}%)"
        )


def night_wall(sessions: Sequence[Mapping[str, Any]], results: Sequence[CaseResult]) -> NightWall | None:
    """The night's wall time where its sessions dealt the cases to xdist workers; None elsewhere."""
    records = [((s.get("settings") or {}).get("fleet") or {}).get("workers") for s in sessions]
    workers = next((r for r in records if isinstance(r, dict) and r.get("projected_wall_s")), None)
    starts = [_moment(s.get("started")) for s in sessions]
    ends = [
        moment + timedelta(seconds=sum(run.wall_s or 0.0 for run in r.runs))
        for r in results
        if (moment := _moment(r.created)) is not None
    ]
    first = min((m for m in starts if m is not None), default=None)
    if workers is None or first is None or not ends:
        return None
    measured = (max(ends) - first).total_seconds()
    return NightWall(int(workers.get("count") or 0), measured, float(workers["projected_wall_s"]))


def _moment(text: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def night_lines(sessions: Sequence[Mapping[str, Any]], results: Sequence[CaseResult]) -> list[str]:
    """The night's lines for a run (or a merge) whose sessions planned one: its GPU-minutes and, on
    a host's xdist workers, its wall time; none otherwise."""
    night = recorded_night(sessions)
    cost = night_cost(night, results) if night else None
    wall = night_wall(sessions, results) if cost else None
    return [line.line() for line in (cost, wall) if line is not None]
