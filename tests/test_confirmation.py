"""Pooled fresh runs are compared step by step through their median across processes.

That is what makes a confirmation run meaningful: one process that is slow as a whole
(host load; seen on an H100 as +26% on a host-bound case, gone in the next run) cannot fail
a case once two other processes agree with the baseline, while a real slowdown reproduces
in all of them.
"""

from __future__ import annotations

from trainperf.judge.compare import Verdict, compare_metric
from trainperf.judge.metrics import METRICS
from trainperf.result import MetricValue

STEPS = [f"{step}:{100 + 7 * step}" for step in range(2, 32)]
BASE = [0.5 + 0.01 * (i % 5) for i in range(len(STEPS))]


def pooled(*factors: float) -> MetricValue:
    samples = [t * factor for factor in factors for t in BASE]
    return MetricValue(
        value=sorted(samples)[len(samples) // 2], unit="s", samples=samples, keys=STEPS * len(factors)
    )


def judge(current: MetricValue) -> Verdict:
    baseline = MetricValue(value=0.52, unit="s", samples=list(BASE), keys=list(STEPS))
    return compare_metric(METRICS["step_time_s"], current, baseline).verdict


def test_one_slow_process_alone_is_a_regression() -> None:
    assert judge(pooled(1.26)) is Verdict.REGRESSED


def test_one_slow_process_out_of_three_is_outvoted() -> None:
    assert judge(pooled(1.26, 1.01, 0.99)) is Verdict.PASS


def test_a_real_slowdown_in_every_process_stays_a_regression() -> None:
    assert judge(pooled(1.08, 1.09, 1.07)) is Verdict.REGRESSED
