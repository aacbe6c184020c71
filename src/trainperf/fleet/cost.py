"""What a nightly costs in GPU-minutes, from the wall times its results record (pure: results in,
figures out; ``trainperf cost`` reads the folders).

A run folder's result counts every launch the case made: its measurement, confirmation and
diagnosis runs, and a cliff's probes and confirmations. A baselines class folder stands for one
nightly of its cases: one run per case (the median of the baseline's runs, which were repeats of
one measurement), and a cliff's launches where their wall times were recorded. A case on k GPUs
costs k times its wall time. The spread over several GPUs of one host is the suite's own shard split
(``fleet.shard.split``: longest first, every case whole) of the cases' GPU-seconds.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from trainperf.case import Outcome
from trainperf.cliff_record import NOT_LAUNCHED, CliffRecord
from trainperf.fleet.shard import split
from trainperf.judge.metrics import STEP_TIME
from trainperf.result import CaseResult, requested_steps


@dataclass(frozen=True, slots=True)
class CaseCost:
    case_id: str
    family: str
    gpus: int
    launches: int
    wall_s: float
    unknown_launches: int = 0
    """Launches that happened but recorded no wall time (an older cliff baseline's probes)."""
    launched: bool = True
    """False for a case refused before any launch (pre-flight's ``config_error``, a skip)."""

    @property
    def gpu_s(self) -> float:
        return self.wall_s * self.gpus


def _cliff_walls(cliff: CliffRecord) -> tuple[list[float], int]:
    """The wall times of a cliff's launched probes and confirmations, and how many recorded none
    (a launched probe's 0 s: kept before its wall time was). Probes ruled out by pre-flight or by
    the estimate launched nothing."""
    launched = [p for p in [*cliff.probes, *cliff.confirmation] if p.outcome not in NOT_LAUNCHED]
    walls = [p.wall_s for p in launched if p.wall_s > 0]
    return walls, len(launched) - len(walls)


def case_cost(result: CaseResult, *, one_run: bool, planned_steps: int | None = None) -> CaseCost:
    """A case's launches and wall time; ``one_run``: a baseline file standing for one nightly run.
    ``planned_steps``: the run would be that many steps (``--perf-plan-steps``), its set-up and warm-up
    unchanged and each step left out at the baseline's median steady step time."""
    family = result.case.family or result.case_id.split("-")[0]
    gpus = result.case.gpus or 1
    walls = [run.wall_s for run in result.runs if run.wall_s is not None]
    if one_run and walls:
        walls = [statistics.median(walls) - _left_out_s(result, planned_steps)]
    unknown = 0
    if result.cliff:
        cliff_walls, unknown = _cliff_walls(result.cliff)
        walls += cliff_walls
    launched = result.outcome not in (Outcome.CONFIG_ERROR, Outcome.SKIPPED) or bool(walls)
    return CaseCost(
        result.case_id, family, gpus, len(walls) + unknown, round(sum(walls), 2), unknown, launched
    )


def _left_out_s(result: CaseResult, planned_steps: int | None) -> float:
    full = requested_steps(result) or 0
    step = result.metrics.get(STEP_TIME)
    if planned_steps is None or step is None or planned_steps >= full:
        return 0.0
    return (full - planned_steps) * step.value


@dataclass(frozen=True, slots=True)
class NightlyCost:
    cases: list[CaseCost]
    gpu_counts: tuple[int, ...] = (1, 2, 4)

    @property
    def by_family(self) -> dict[str, float]:
        """GPU-minutes per family, the costliest first."""
        families: dict[str, float] = {}
        for case in self.cases:
            families[case.family] = families.get(case.family, 0.0) + case.gpu_s / 60
        return dict(sorted(families.items(), key=lambda kv: -kv[1]))

    @property
    def makespan_min(self) -> dict[int, float]:
        """Wall minutes on each GPU count: the most loaded GPU under the shards' split."""
        loads = {case.case_id: case.gpu_s for case in self.cases}
        spans = {}
        for count in self.gpu_counts:
            shard_of = split(loads, count)
            per_gpu = [sum(s for key, s in loads.items() if shard_of[key] == n) for n in range(1, count + 1)]
            spans[count] = max(per_gpu, default=0.0) / 60
        return spans

    @property
    def total_min(self) -> float:
        return sum(self.by_family.values())

    @property
    def unknown(self) -> list[CaseCost]:
        """Cases whose figure misses launches: ones without a wall time recorded (a case refused
        before any launch, by pre-flight or as skipped, launched nothing and is complete)."""
        return [case for case in self.cases if case.unknown_launches or (not case.launches and case.launched)]


def nightly_cost(
    results: Iterable[tuple[CaseResult, bool]],
    gpu_counts: tuple[int, ...],
    planned: dict[str, int] | None = None,
) -> NightlyCost:
    """``results``: each result with whether it stands for one nightly run (a baseline file);
    ``planned``: planned steps per case id (a baseline's projection under ``--perf-plan-steps``)."""
    plans = planned or {}
    return NightlyCost(
        [
            case_cost(result, one_run=one_run, planned_steps=plans.get(result.case_id))
            for result, one_run in results
        ],
        gpu_counts,
    )


def cost_lines(cost: NightlyCost) -> list[str]:
    """The report: GPU-minutes by family and in all, launches, the spread over more GPUs, and the
    cases whose figure is incomplete."""
    launches = sum(case.launches for case in cost.cases)
    lines = [f"{len(cost.cases)} case(s), {launches} launch(es): {cost.total_min:.1f} GPU-minutes"]
    lines += [f"  {family:<14} {minutes:8.1f} min" for family, minutes in cost.by_family.items()]
    total = cost.total_min
    for count, span in cost.makespan_min.items():
        ratio = f" ({span / total:.3f} of one GPU)" if total and count > 1 else ""
        where = "on 1 GPU" if count == 1 else f"on {count} GPUs of one host, split as --perf-shard splits"
        lines.append(f"  {where}: {span:.1f} min wall{ratio}")
    for case in cost.unknown:
        what = "no wall time"
        if case.launches:
            what = f"{case.unknown_launches} launch(es) recorded no wall time"
        lines.append(f"  incomplete: {case.case_id}: {what} (not counted)")
    return lines
