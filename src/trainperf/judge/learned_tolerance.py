"""Timing tolerances learned from a runner's own history (no I/O).

A class-wide tolerance (3% on step time) has to cover every runner of the class: hosts of one
GPU type moved host-bound cases by -22% to +18%. A runner judged against its own history knows
its own noise: on an H100 the GPU-bound maxlen case repeats within 0.3% from one fresh process
to the next, so a 2% slowdown there is far outside what that runner does by chance. Here the
timing tolerance of a case judged against history is narrowed to what its runs show, never
widened past the configured one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from trainperf.judge import stats
from trainperf.judge.metrics import Metric, resolve_metric
from trainperf.result import CaseResult

NOISE_MULTIPLE = 2.0
"""Run-to-run spread (robust CV of the runs' values) times this is the learned tolerance: a breach of
it is then confirmed by fresh runs (--perf-confirm) before it fails, which keeps A/A runs green."""
TOLERANCE_FLOOR = 0.01
"""Never narrower than 1%: below that, clock and thermal drift of one host dominate."""
MIN_RUNS_TO_LEARN = 5
"""Fewer runs say too little about a runner's spread: the configured tolerance stands."""


def run_spread(per_run: list[float]) -> float | None:
    """Robust coefficient of variation of the runs' values (1.4826 MAD over the median)."""
    if len(per_run) < MIN_RUNS_TO_LEARN:
        return None
    centre = stats.median(per_run)
    return 1.4826 * stats.mad(per_run) / abs(centre) if centre else None


def learned_tolerances(
    metrics: Mapping[str, Metric], baseline: CaseResult
) -> tuple[dict[str, Metric], list[str]]:
    """The metrics with each timing tolerance narrowed to the history's own spread, and a note per
    narrowed metric (``step_time_s tolerance 3.0% -> 1.2% (10 runs, spread 0.3%)``)."""
    narrowed = dict(metrics)
    notes = []
    for name, value in baseline.metrics.items():
        metric = resolve_metric(dict(metrics), name)
        if metric is None or not metric.timing or not value.per_run:
            continue
        spread = run_spread(list(value.per_run))
        if spread is None:
            continue
        learned = min(metric.tolerance, max(TOLERANCE_FLOOR, NOISE_MULTIPLE * spread))
        if learned < metric.tolerance:
            narrowed[name] = dataclasses.replace(metric, name=name, tolerance=learned)
            notes.append(
                f"{name} tolerance {metric.tolerance:.1%} -> {learned:.1%} "
                f"({len(value.per_run)} runs, spread {spread:.2%})"
            )
    return narrowed, notes
