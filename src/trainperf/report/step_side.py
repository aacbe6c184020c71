"""Which part of the step moved where a wall-clock figure stepped: the dashboard's label beside a
change point or a red streak of step time, tokens/s or energy (pure: a case's trend in, a line out).

Wall-clock figures hold the GPU's kernels and the host's share (``judge.metric_types.Part``). Where the
case records kernel time, its level just before and just after the run tells them apart: kernel time
inside its own tolerance means the host moved (a slower or busier host, Python, the data path), not
the GPU's work; beyond it, the kernels did. An on-call reader then knows whether to look at the
runner or at the software before opening a run folder.
"""

from __future__ import annotations

from trainperf.judge import stats
from trainperf.judge.metric_types import Part
from trainperf.judge.metrics import KERNEL_TIME, METRICS
from trainperf.report.trend_model import CaseTrend, on_line

SIDE_RUNS = 5
"""Runs on either side whose kernel time makes each level: enough to outvote one odd run."""


def holds_the_host(metric: str) -> bool:
    """A timing figure that holds both parts of a step (step time, tokens/s, energy)."""
    spec = METRICS.get(metric)
    return spec is not None and spec.timing and spec.part is Part.WHOLE


def kernel_change(trend: CaseTrend, index: int, since: int | None = None) -> float | None:
    """Kernel time's relative change from the runs on the line before ``since`` (default ``index``)
    to those from ``index`` on, None where either side recorded none."""
    start = index if since is None else since
    before = [r.values[KERNEL_TIME] for r in trend.runs[:start] if on_line(r) and KERNEL_TIME in r.values]
    after = [r.values[KERNEL_TIME] for r in trend.runs[index:] if on_line(r) and KERNEL_TIME in r.values]
    before, after = before[-SIDE_RUNS:], after[:SIDE_RUNS]
    if not before or not after or not stats.median(before):
        return None
    return stats.median(after) / stats.median(before) - 1


def step_side(
    trend: CaseTrend, index: int, changes: list[tuple[str, float]], since: int | None = None
) -> str:
    """The label for a finding whose largest change is a wall-clock figure, or '' (no such change, or
    no kernel time on both sides to tell)."""
    if not changes or not holds_the_host(changes[0][0]):
        return ""
    kernel = trend.metrics.get(KERNEL_TIME)
    change = kernel_change(trend, index, since)
    if kernel is None or change is None:
        return ""
    if abs(change) <= kernel.tolerance:
        return f"host side: kernel time {change:+.1%}, inside its ±{kernel.tolerance:.1%}"
    return f"kernels {change:+.1%}: the GPU's work changed"
