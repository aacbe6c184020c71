"""The GPU time a session or a merged night measured, against what its plan projected (no I/O).

A sharded night records, in each session's ``run.json``, every case's expected wall time and where
it came from (``fleet.session_plan``: the runner's history, a baseline, or a default). A night that
ran out of time is planned again from these figures, so the page says how far they held: the GPU
time its cases' runs took, against their projection, and the whole night's projection beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainperf.case import gpus_of_case_id
from trainperf.result import CaseResult


@dataclass(frozen=True, slots=True)
class Projected:
    """One case's projected wall time for the night and where the figure came from."""

    seconds: float
    source: str


@dataclass(frozen=True, slots=True)
class GpuTime:
    measured_s: float
    """GPU-seconds the runs of the cases with runs took (a run's wall time times the case's GPUs)."""
    measured_cases: int
    projected_for_measured_s: float
    """The same cases' projected GPU-seconds."""
    projected_s: float
    """Every planned case's projected GPU-seconds."""
    sources: Mapping[str, int]
    """How many planned cases each source projected (``history``, ``baseline``, ``default``...)."""

    def line(self) -> str:
        planned = sum(self.sources.values())
        sources = ", ".join(f"{count} from {source}" for source, count in sorted(self.sources.items()))
        measured = (
            f"{self.measured_s / 60:.1f} GPU-min measured for {self.measured_cases} case(s) with runs"
            + (
                f", projected {self.projected_for_measured_s / 60:.1f} for them "
                f"({self.measured_s / self.projected_for_measured_s - 1:+.0%})"
                if self.projected_for_measured_s
                else ""
            )
        )
        return (
            f"GPU time: {measured}; the plan's {planned} case(s) projected "
            f"{self.projected_s / 60:.1f} GPU-min in all ({sources})"
        )


def projections(sessions: Sequence[Mapping[str, Any]]) -> dict[str, Projected]:
    """Each planned case's projection, from the sessions' recorded shard split (the same in every
    shard of one night; the latest session's figure where they differ)."""
    found: dict[str, Projected] = {}
    for session in sessions:
        fleet = (session.get("settings") or {}).get("fleet") or {}
        for case_id, entry in (fleet.get("split") or {}).items():
            if isinstance(entry, list) and len(entry) >= 3 and isinstance(entry[1], int | float):
                found[str(case_id)] = Projected(float(entry[1]), str(entry[2]))
    return found


def measured_gpu_s(result: CaseResult) -> float:
    """The GPU-seconds a case's runs took: each run's wall time, times the case's GPUs."""
    walls = [run.wall_s for run in result.runs if run.wall_s]
    return sum(walls) * gpus_of_case_id(result.case_id)


def gpu_time(results: Sequence[CaseResult], sessions: Sequence[Mapping[str, Any]]) -> GpuTime | None:
    """Measured against projected GPU time; None where no session recorded a projection."""
    planned = projections(sessions)
    if not planned:
        return None
    ran = [result for result in results if measured_gpu_s(result) > 0]
    return GpuTime(
        measured_s=sum(measured_gpu_s(result) for result in ran),
        measured_cases=len(ran),
        projected_for_measured_s=sum(
            planned[r.case_id].seconds * gpus_of_case_id(r.case_id) for r in ran if r.case_id in planned
        ),
        projected_s=sum(p.seconds * gpus_of_case_id(case_id) for case_id, p in planned.items()),
        sources=dict(Counter(p.source for p in planned.values())),
    )


def gpu_time_line(results: Sequence[CaseResult], sessions: Sequence[Mapping[str, Any]]) -> str:
    """The line for the page, the summary and the terminal; empty where nothing was projected."""
    found = gpu_time(results, sessions)
    return found.line() if found else ""
