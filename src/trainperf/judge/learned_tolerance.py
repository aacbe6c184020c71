"""Timing tolerances learned from a runner's own history (no I/O).

A class-wide tolerance (3% on step time) has to cover every runner of the class: hosts of one
GPU type moved host-bound cases by -22% to +18%. A runner judged against its own history knows
its own noise: on an H100 the GPU-bound maxlen case repeats within 0.3% from one fresh process
to the next, so a 2% slowdown there is far outside what that runner does by chance. Here the
timing tolerance of a case judged against history is narrowed to what its runs show, never
widened past the configured one.

What the runs show is two things. Their spread (a robust CV) describes a runner whose runs scatter
around one level. A shared CPU host or virtual machine instead moves between levels (a 2-core CI
host's tiny full fine-tuning read 0.108-0.129 s per step over 10 accepted runs in one day: a robust
CV of 4.45%, so a 2x tolerance of 8.9%, and the next run, at 0.125 s, read as a +9.2% regression
that fresh runs on the same host confirmed). So the learned tolerance is also never narrower than
the widest deviation of an accepted run from the median of the others: a level the runner has
already produced, and the gate accepted, is not a change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from trainperf.judge import stats
from trainperf.judge.host_runs import widest_run_move
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


def widest_accepted_deviation(per_run: list[float]) -> float | None:
    """The largest relative deviation of one run's value from the median of the other runs."""
    return widest_run_move(per_run) if len(per_run) >= MIN_RUNS_TO_LEARN else None


def learned_tolerance(configured: float, per_run: list[float]) -> tuple[float, str] | None:
    """The narrowed tolerance for one timing metric and why, or None where the history says too
    little or would not narrow it."""
    spread = run_spread(per_run)
    widest = widest_accepted_deviation(per_run)
    if spread is None or widest is None:
        return None
    learned = min(configured, max(TOLERANCE_FLOOR, NOISE_MULTIPLE * spread, widest))
    if learned >= configured:
        return None
    return learned, f"{len(per_run)} runs, spread {spread:.2%}, widest run {widest:.2%}"


def learned_tolerances(
    metrics: Mapping[str, Metric], baseline: CaseResult
) -> tuple[dict[str, Metric], list[str]]:
    """The metrics with each timing tolerance narrowed to the history's own noise, and a note per
    narrowed metric (``step_time_s tolerance 3.0% -> 1.0% (10 runs, spread 0.39%, widest run
    0.81%)``)."""
    narrowed = dict(metrics)
    notes = []
    for name, value in baseline.metrics.items():
        metric = resolve_metric(dict(metrics), name)
        if metric is None or not metric.timing or not value.per_run:
            continue
        found = learned_tolerance(metric.tolerance, list(value.per_run))
        if found is None:
            continue
        learned, why = found
        narrowed[name] = dataclasses.replace(metric, name=name, tolerance=learned)
        notes.append(f"{name} tolerance {metric.tolerance:.1%} -> {learned:.1%} ({why})")
    return narrowed, notes
