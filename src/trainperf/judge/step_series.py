"""Per-step times as a series (no I/O): each step's median over the fresh runs that measured it.

A result pools the steady steps of its runs with one ``step:tokens`` key per sample, so the run's
series and its baseline's line up step by step (synthetic data: step k is the same batch in both).
The verdict keeps the baseline's series, so a run's page can draw both without the baseline file.
"""

from __future__ import annotations

from trainperf.judge import stats
from trainperf.result import MetricValue


def step_of(key: str) -> int:
    """The step number of a ``step:tokens`` key (0 for a key without one)."""
    head = key.split(":", 1)[0]
    return int(head) if head.isdigit() else 0


def step_medians(value: MetricValue | None) -> list[list[float]]:
    """``[[step, median seconds], ...]`` sorted by step; empty when the samples carry no keys."""
    if value is None or not value.keys or not value.samples or len(value.keys) != len(value.samples):
        return []
    by_step: dict[int, list[float]] = {}
    for key, sample in zip(value.keys, value.samples):
        if step := step_of(key):
            by_step.setdefault(step, []).append(sample)
    return [[float(step), stats.median(samples)] for step, samples in sorted(by_step.items())]
