"""No colour contradicts a metric's direction: on a case's history plot, a run the case judged
regressed (or improved) is drawn so only on the metrics that moved that way beyond their tolerance;
checked for every metric of the registry that has a direction."""

from __future__ import annotations

import pytest

from trainperf.judge.metric_types import Direction
from trainperf.judge.metrics import METRICS
from trainperf.report.trend_model import MetricTrend
from trainperf.report.trend_svg import kind_on_metric

DIRECTED = sorted(
    name for name, metric in METRICS.items() if metric.direction is not None and metric.tolerance
)


def _trend(name: str) -> MetricTrend:
    lower = METRICS[name].direction is Direction.LOWER
    return MetricTrend(name, 10.0, 0.05, "", lower, [], [], {})


@pytest.mark.parametrize("name", DIRECTED)
def test_a_case_verdict_colours_a_metric_only_where_the_metric_moved_that_way(name: str) -> None:
    trend = _trend(name)
    worse, better = (120.0, 80.0) if trend.lower_is_better else (80.0, 120.0)
    assert kind_on_metric("regressed", trend, worse) == "regressed"
    assert kind_on_metric("regressed", trend, better) == "pass"  # moved the good way: not drawn red
    assert kind_on_metric("regressed", trend, 102.0) == "pass"  # within its tolerance
    assert kind_on_metric("improved", trend, better) == "improved"
    assert kind_on_metric("improved", trend, worse) == "pass"
    assert kind_on_metric("noisy", trend, worse) == "noisy"  # other kinds are the case's own


def test_the_registry_has_directed_metrics_to_check() -> None:
    assert len(DIRECTED) >= 5
