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
        confirmations=sum(1 for r in known for run in r.runs if run.get("purpose") == "confirmation"),
        measured_min=sum(costs[r.case_id].gpu_s for r in known) / 60,
        projected_min=sum(float(projected[r.case_id]) for r in known) / 60,
        unprojected_cases=len(unknown),
        unprojected_min=sum(costs[r.case_id].gpu_s for r in unknown) / 60,
    )


def night_lines(sessions: Sequence[Mapping[str, Any]], results: Sequence[CaseResult]) -> list[str]:
    """The night's line for a run (or a merge) whose sessions planned one; none otherwise."""
    night = recorded_night(sessions)
    cost = night_cost(night, results) if night else None
    return [cost.line()] if cost else []
