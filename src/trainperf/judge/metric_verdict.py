"""Metric verdicts: one figure against its baseline's (no I/O).

pass, regressed, improved, noisy, new. A regression needs a change beyond the metric's tolerance
*and* statistical support at ``ALPHA``: for steps paired with the baseline's same batches, a
one-sided bootstrap test of the median per-step ratio (over the steps that repeat across the
baseline's runs, where it has several); otherwise a one-sided Mann-Whitney test on the samples. A
change beyond tolerance without that support is noisy. A figure the GPU sets alone (kernel time)
repeats too closely to need a test: it is compared batch by batch, and a change beyond its tolerance
is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainperf.judge import stats
from trainperf.judge.metrics import Direction, Metric, Part
from trainperf.result import MetricValue
from trainperf.stored_verdict import StoredMetricVerdict

ALPHA = 0.01
MIN_SAMPLES_FOR_TEST = 5
MIN_PAIRS = 8
# A step "repeats" when its times across the baseline's fresh runs (3 by default) lie within 5%.
MIN_RUNS_FOR_STABILITY = 3
STABLE_STEP_RANGE = 0.05
MIN_STABLE_PAIRS = 5


class Verdict(str, Enum):
    PASS = "pass"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    NOISY = "noisy"
    NEW = "new"
    OUTCOME_CHANGED = "outcome-changed"
    CONFIG_CHANGED = "config-changed"
    EXPECTED_OOM = "expected-oom"
    NOT_COMPARED = "not-compared"
    CONTAMINATED = "contaminated"


@dataclass(slots=True)
class MetricVerdict:
    metric: str
    verdict: Verdict
    current: float | None
    baseline: float | None
    ratio: float | None
    interval: tuple[float, float] | None = None
    p_value: float | None = None
    gated: bool = True
    note: str = ""

    def stored(self) -> StoredMetricVerdict:
        """The metric's verdict as its case's result keeps it."""
        return StoredMetricVerdict(
            self.metric,
            self.verdict.value,
            self.current,
            self.baseline,
            self.ratio,
            self.interval,
            self.p_value,
            self.gated,
            self.note,
        )


def keyed_groups(value: MetricValue) -> dict[str, list[float]] | None:
    """Samples grouped by their work key (one per fresh run), None when not keyed."""
    if not value.keys or not value.samples or len(value.keys) != len(value.samples):
        return None
    groups: dict[str, list[float]] = {}
    for key, sample in zip(value.keys, value.samples):
        groups.setdefault(key, []).append(sample)
    return groups


def paired_keys(
    current_groups: dict[str, list[float]], baseline_groups: dict[str, list[float]]
) -> tuple[list[str], bool]:
    """The steps to compare pair by pair, and whether they are the baseline's stable ones.

    Where the baseline was pooled from several fresh runs, it shows which steps repeat: on an
    H100 the GPU-bound steps of Qwen3-8B LoRA repeated within 2% while host-bound short batches
    and steps that met a new shape (allocator growth) moved by 20-40% from run to run. Judging
    only the steps that repeat keeps a uniform slowdown visible instead of drowned in that noise.
    """
    shared = sorted(current_groups.keys() & baseline_groups.keys())
    stable = [
        key
        for key in shared
        if len(baseline_groups[key]) >= MIN_RUNS_FOR_STABILITY
        and stats.relative_range(baseline_groups[key]) <= STABLE_STEP_RANGE
    ]
    if len(stable) >= MIN_STABLE_PAIRS:
        return stable, True
    return (shared, False) if len(shared) >= MIN_PAIRS else ([], False)


def _judge(
    verdict: MetricVerdict, metric: Metric, relative_worse: float, p_worse: float, p_better: float
) -> None:
    if relative_worse > 0:
        verdict.p_value = p_worse
        verdict.verdict = Verdict.REGRESSED if p_worse < ALPHA else Verdict.NOISY
    else:
        verdict.p_value = p_better
        verdict.verdict = Verdict.IMPROVED if p_better < ALPHA else Verdict.NOISY
    if verdict.verdict is Verdict.NOISY:
        verdict.note = f"beyond tolerance but not significant (p={verdict.p_value:.3f})"


def compare_metric(metric: Metric, current: MetricValue, baseline: MetricValue | None) -> MetricVerdict:
    """Judge one metric. Keyed samples (same batches both sides) are compared step by step:
    the change is the median of per-step ratios and its support a one-sided bootstrap test of
    that median, so host stalls on a few steps move neither. Otherwise: the values' ratio and a Mann-Whitney
    test on samples."""
    if baseline is None:
        return MetricVerdict(metric.name, Verdict.NEW, current.value, None, None, gated=metric.gated)
    base, cur = baseline.value, current.value
    verdict = MetricVerdict(
        metric.name, Verdict.PASS, cur, base, cur / base if base else None, gated=metric.gated
    )
    if abs(cur - base) <= metric.abs_tolerance:
        return verdict
    current_groups, baseline_groups = keyed_groups(current), keyed_groups(baseline)
    shared = (
        sorted(current_groups.keys() & baseline_groups.keys()) if current_groups and baseline_groups else []
    )
    if metric.part is Part.DEVICE and shared:
        assert current_groups is not None and baseline_groups is not None
        _judge_by_batch(verdict, metric, current_groups, baseline_groups, shared)
        return verdict
    keys, stable = (
        paired_keys(current_groups, baseline_groups) if current_groups and baseline_groups else ([], False)
    )
    if keys:
        assert current_groups is not None and baseline_groups is not None
        _judge_paired_steps(verdict, metric, current_groups, baseline_groups, keys, stable)
    else:
        _judge_samples(verdict, metric, current, baseline)
    return verdict


def _judge_paired_steps(
    verdict: MetricVerdict,
    metric: Metric,
    current_groups: dict[str, list[float]],
    baseline_groups: dict[str, list[float]],
    keys: list[str],
    stable: bool,
) -> None:
    """The change is the median of the paired steps' ratios; its support a bootstrap test of it,
    which resamples the runs too where both sides have several (``stats.run_step_bootstrap_medians``)."""
    lower_better = metric.direction is Direction.LOWER
    ratios = stats.paired_ratios(
        {k: stats.median(current_groups[k]) for k in keys},
        {k: stats.median(baseline_groups[k]) for k in keys},
    )
    ratio = stats.median(ratios)
    by_run = stats.steps_of_every_run(current_groups, baseline_groups, keys, MIN_PAIRS)
    verdict.interval, p_up, p_down = stats.paired_support(ratios, by_run)
    verdict.ratio = ratio
    verdict.note = (
        f"paired over {len(ratios)} steps"
        + (" that repeat within the baseline's runs" if stable else "")
        + (f", runs resampled ({len(by_run[0][0])} vs {len(by_run[1][0])})" if by_run else "")
    )
    relative_worse = (ratio - 1) if lower_better else (1 - ratio)
    if abs(relative_worse) <= metric.tolerance:
        return
    _judge(
        verdict,
        metric,
        relative_worse,
        p_up if lower_better else p_down,
        p_down if lower_better else p_up,
    )


def _judge_by_batch(
    verdict: MetricVerdict,
    metric: Metric,
    current_groups: dict[str, list[float]],
    baseline_groups: dict[str, list[float]],
    keys: list[str],
) -> None:
    """A figure the GPU sets alone (kernel time): each run's value of a batch over the reference's
    median of the same batch. It repeats to well under its tolerance across the machines of a class,
    so the change is the median of those ratios, its interval their range, and no test is needed: one
    run beyond the tolerance is a change, and a run of the same work within it is not."""
    ratios = [value / stats.median(baseline_groups[key]) for key in keys for value in current_groups[key]]
    ratio = stats.median(ratios)
    verdict.ratio, verdict.interval = ratio, (min(ratios), max(ratios))
    verdict.note = f"paired over {len(keys)} window step(s), {len(ratios)} run-step(s); range shown"
    worse = (ratio - 1) if metric.direction is Direction.LOWER else (1 - ratio)
    if abs(worse) > metric.tolerance:
        verdict.verdict = Verdict.REGRESSED if worse > 0 else Verdict.IMPROVED


def _judge_samples(
    verdict: MetricVerdict, metric: Metric, current: MetricValue, baseline: MetricValue
) -> None:
    """Unpaired: the change is the values' ratio; its support a Mann-Whitney test on the samples
    where both sides have enough of them, none (the change alone decides) where they don't."""
    lower_better = metric.direction is Direction.LOWER
    base, cur = baseline.value, current.value
    relative_worse = ((cur - base) if lower_better else (base - cur)) / abs(base) if base else 0.0
    have_samples = (
        current.samples is not None
        and baseline.samples is not None
        and min(len(current.samples), len(baseline.samples)) >= MIN_SAMPLES_FOR_TEST
    )
    if have_samples:
        assert current.samples is not None and baseline.samples is not None
        verdict.interval = stats.bootstrap_ratio_interval(current.samples, baseline.samples)
    if abs(relative_worse) <= metric.tolerance:
        return
    if not have_samples:
        verdict.verdict = Verdict.REGRESSED if relative_worse > 0 else Verdict.IMPROVED
        return
    assert current.samples is not None and baseline.samples is not None
    cur_larger = stats.mann_whitney_greater(current.samples, baseline.samples)
    cur_smaller = stats.mann_whitney_greater(baseline.samples, current.samples)
    p_worse, p_better = (cur_larger, cur_smaller) if lower_better else (cur_smaller, cur_larger)
    _judge(verdict, metric, relative_worse, p_worse, p_better)
