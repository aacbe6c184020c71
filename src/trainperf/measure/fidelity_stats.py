"""The suite measured by itself (statistics only, no I/O): overhead, noise, detection power, power.

Inputs are what fresh children of one case left behind, grouped by what they were:

- ``A`` and ``A2``: two series of harness runs in the same environment (an A/A pair);
- ``bare``: the same training loop without the harness's per-step hooks and without NVML
  sampling, timed over the steps after ``BARE_WINDOW_START`` with two device syncs in all;
- ``plant<f>``: harness runs with every step made slower by the fraction f.

Verdicts come from the gate's own ``compare_metric`` (paired per-step ratios, bootstrap test) at
the configured tolerance and at a sweep of others, so the report says what the default
settings catch and what a tighter or looser tolerance would.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from trainperf.judge import stats
from trainperf.judge.compare import Verdict, compare_metric
from trainperf.judge.metrics import (
    DEVICE_MEM_PEAK,
    ENERGY_PER_TOKEN,
    METRICS,
    PEAK_ALLOCATED,
    STEP_TIME,
    TOKENS_PER_S,
    Metric,
)
from trainperf.measure.energy import counter_energy_j, power_integral_j
from trainperf.measure.measurement import RunMeasurement, pool_runs
from trainperf.measure.nvml import Sample

AA_BASE, AA_OTHER, BARE = "A", "A2", "bare"
NOISE_METRICS = (STEP_TIME, TOKENS_PER_S, PEAK_ALLOCATED, DEVICE_MEM_PEAK, ENERGY_PER_TOKEN)
"""The figures whose run-to-run spread the fidelity study reports: the ones a verdict rests on."""
TOLERANCE_SWEEP = (0.02, 0.03, 0.05)


def planted_label(fraction: float) -> str:
    return f"plant{fraction:g}"


def planted_fraction(label: str) -> float | None:
    return float(label[len("plant") :]) if label.startswith("plant") else None


@dataclass(slots=True)
class HarnessRun:
    """One harness child: its measurement, raw steps and NVML samples."""

    label: str
    measurement: RunMeasurement
    steps: list[dict[str, Any]]
    samples: list[Sample] = field(default_factory=list)


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation (sample standard deviation over the mean)."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    if mean == 0:
        return None
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(variance) / abs(mean)


def window_tokens_per_s(steps: Sequence[dict[str, Any]], after_step: int) -> float | None:
    """Tokens per second over the steps after ``after_step``: the bare run's window, from the
    harness's per-step records."""
    window = [s for s in steps if int(s["step"]) > after_step]
    seconds = sum(float(s["duration_s"]) for s in window)
    return sum(float(s["tokens"]) for s in window) / seconds if seconds > 0 else None


STEADY_STEP_CV = 0.02
"""A step index whose time varies more than this across fresh children is called unsteady: the
GPU waits on the host there (short batches), or the allocator grows (a new longest batch)."""


@dataclass(slots=True)
class WindowNoise:
    """Where the run-to-run noise of the window's tokens/s comes from, step index by step index.

    Every child of a case runs the same batches in the same order, so each step index can be
    compared across children: steps that keep the GPU busy repeat to well under 1%, steps that
    wait on the host do not. The overhead is measured over the window's tokens/s (the bare loop
    has no per-step times), so its resolution is set by the unsteady steps inside the window."""

    after_step: int
    runs: int
    tokens_per_s_cv: float | None
    step_cv: dict[int, float]
    """Coefficient of variation of each step index's time across the runs (window steps only)."""
    unsteady_steps: list[int]
    unsteady_time_share: float | None
    """Share of the window's median time spent in unsteady steps."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def window_noise(runs_steps: Sequence[Sequence[dict[str, Any]]], after_step: int) -> WindowNoise:
    """Per-step noise inside the window over runs of one case (harness runs: they time each step)."""
    by_step: dict[int, list[float]] = {}
    for steps in runs_steps:
        for step in steps:
            if int(step["step"]) > after_step:
                by_step.setdefault(int(step["step"]), []).append(float(step["duration_s"]))
    complete = {k: v for k, v in sorted(by_step.items()) if len(v) == len(runs_steps)}
    step_cv = {k: c for k, v in complete.items() if (c := cv(v)) is not None}
    unsteady = [k for k, c in step_cv.items() if c > STEADY_STEP_CV]
    medians = {k: stats.median(v) for k, v in complete.items()}
    total = sum(medians.values())
    share = sum(medians[k] for k in unsteady) / total if total > 0 else None
    window = [t for steps in runs_steps if (t := window_tokens_per_s(steps, after_step)) is not None]
    return WindowNoise(after_step, len(runs_steps), cv(window), step_cv, unsteady, share)


@dataclass(slots=True)
class Overhead:
    harness_tokens_per_s: list[float]
    bare_tokens_per_s: list[float]
    slowdown: float | None
    """1 - median(harness) / median(bare): how much slower the harness makes training."""
    interval: tuple[float, float] | None
    """95% bootstrap interval of the slowdown."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def overhead(harness: Sequence[float], bare: Sequence[float]) -> Overhead:
    if not harness or not bare:
        return Overhead(list(harness), list(bare), None, None)
    slowdown = 1 - stats.median(harness) / stats.median(bare)
    interval = None
    if len(harness) >= 2 and len(bare) >= 2:
        low, high = stats.bootstrap_ratio_interval(harness, bare)
        interval = (1 - high, 1 - low)
    return Overhead(list(harness), list(bare), slowdown, interval)


@dataclass(slots=True)
class PairedOverhead:
    rounds: int
    """Rounds that hold a bare run and at least one harness run."""
    slowdown: float | None
    """Median over rounds of 1 - mean(harness tokens/s in the round) / bare tokens/s in the round."""
    interval: tuple[float, float] | None
    """95% bootstrap interval of that median."""
    per_round: list[float] = dataclasses.field(default_factory=list)
    """Each round's slowdown, in launch order: a trend over the session shows here, not in the median."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


MIN_PAIRED_ROUNDS = 3


def paired_overhead(rounds: Sequence[tuple[Sequence[float], float]]) -> PairedOverhead:
    """Overhead from runs launched side by side: each round's harness runs against its own bare
    run, so a drift over the session (a GPU warming, a neighbour arriving) cancels instead of
    landing on whichever side ran more at the end. ``rounds``: (harness tokens/s, bare tokens/s)."""
    slowdowns = [1 - (sum(harness) / len(harness)) / bare for harness, bare in rounds if harness and bare > 0]
    if len(slowdowns) < MIN_PAIRED_ROUNDS:
        return PairedOverhead(len(slowdowns), None, None, slowdowns)
    return PairedOverhead(
        len(slowdowns), stats.median(slowdowns), stats.bootstrap_median_interval(slowdowns), slowdowns
    )


@dataclass(slots=True)
class Noise:
    runs: int
    cv: dict[str, float | None]
    per_run: dict[str, list[float]]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def noise(runs: Sequence[RunMeasurement]) -> Noise:
    per_run = {name: [r.metrics[name] for r in runs if name in r.metrics] for name in NOISE_METRICS}
    return Noise(len(runs), {name: cv(values) for name, values in per_run.items()}, per_run)


@dataclass(slots=True)
class Judgement:
    """One comparison the gate would make: ``current`` judged against ``baseline``."""

    series: str
    pooled: bool
    """True: every run of the series pooled; False: one run of it alone."""
    comparison: str
    tolerance: float
    verdict: str
    ratio: float | None
    interval: tuple[float, float] | None
    p_value: float | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def judge_step_time(
    current: Sequence[RunMeasurement],
    baseline: Sequence[RunMeasurement],
    tolerance: float,
    series: str,
    run: int | None,
) -> Judgement:
    """The gate's step-time verdict for pooled ``current`` runs (all of ``series``, or its ``run``-th
    alone) against pooled ``baseline`` runs."""
    metric: Metric = dataclasses.replace(METRICS[STEP_TIME], tolerance=tolerance)
    verdict = compare_metric(metric, pool_runs(current)[STEP_TIME], pool_runs(baseline)[STEP_TIME])
    which = f"pooled ({len(current)})" if run is None else f"run {run}"
    return Judgement(
        series, run is None, f"{series} {which} vs A ({len(baseline)})", tolerance,
        verdict.verdict.value, verdict.ratio, verdict.interval, verdict.p_value,
    )  # fmt: skip


def detection(groups: dict[str, list[RunMeasurement]], tolerances: Sequence[float]) -> list[Judgement]:
    """A/A and planted slowdowns judged against the A series, pooled and run by run."""
    base = groups.get(AA_BASE, [])
    if not base:
        return []
    judged: list[Judgement] = []
    others = [
        AA_OTHER,
        *sorted(
            (k for k in groups if planted_fraction(k) is not None), key=lambda k: planted_fraction(k) or 0.0
        ),
    ]
    for tolerance in tolerances:
        for label in others:
            runs = groups.get(label, [])
            if not runs:
                continue
            judged.append(judge_step_time(runs, base, tolerance, label, None))
            for index, run in enumerate(runs, 1):
                judged.append(judge_step_time([run], base, tolerance, label, index))
    return judged


def detection_summary(judged: Sequence[Judgement]) -> list[dict[str, Any]]:
    """Per tolerance and series: how many single runs and whether the pooled runs were flagged."""
    rows: dict[tuple[float, str], dict[str, Any]] = {}
    for j in judged:
        row = rows.setdefault(
            (j.tolerance, j.series),
            {"tolerance": j.tolerance, "series": j.series, "single_flagged": 0, "single": 0},
        )
        if j.pooled:
            row["pooled"] = j.verdict
            row["pooled_ratio"] = j.ratio
        else:
            row["single"] += 1
            row["single_flagged"] += j.verdict == Verdict.REGRESSED.value
    return [rows[key] for key in sorted(rows)]


def smallest_detected(summary: Sequence[dict[str, Any]], tolerance: float) -> float | None:
    """The smallest planted slowdown whose pooled runs and every single run were flagged."""
    caught = [
        planted_fraction(row["series"])
        for row in summary
        if row["tolerance"] == tolerance
        and planted_fraction(row["series"]) is not None
        and row.get("pooled") == Verdict.REGRESSED.value
        and row["single_flagged"] == row["single"]
    ]
    return min((f for f in caught if f is not None), default=None)


@dataclass(slots=True)
class PowerCheck:
    """Energy of the steady window from the board's counter against the integral of sampled power."""

    counter_j: list[float]
    integral_j: list[float]
    relative_difference: float | None
    """median over runs of integral / counter - 1."""
    interval_median_s: float | None
    interval_p95_s: float | None
    interval_max_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def power_check(runs: Sequence[HarnessRun], after_step: int) -> PowerCheck:
    counters: list[float] = []
    integrals: list[float] = []
    differences: list[float] = []
    intervals: list[float] = []
    for run in runs:
        edges = [s for s in run.steps if int(s["step"]) >= after_step]
        if len(edges) < 2 or not run.samples:
            continue
        start, end = float(edges[0]["t_end"]), float(edges[-1]["t_end"])
        counted = counter_energy_j(run.samples, start, end)
        integrated = power_integral_j(run.samples, start, end)
        if counted and integrated:
            counters.append(counted)
            integrals.append(integrated)
            differences.append(integrated / counted - 1)
        intervals.extend(b.t - a.t for a, b in pairwise(run.samples))
    return PowerCheck(
        counters,
        integrals,
        stats.median(differences) if differences else None,
        stats.median(intervals) if intervals else None,
        stats.quantile(intervals, 0.95) if intervals else None,
        max(intervals) if intervals else None,
    )
