"""How many steps a run needs to detect what its full length detects (statistics, no I/O).

The gate compares a run's steady steps with its baseline's same batches: a regression needs the
median per-step ratio beyond the metric's tolerance and a one-sided bootstrap p below ``ALPHA``
(``judge.compare``). How often that fires for a given slowdown depends on how many steps are
compared and how much a step's time moves between fresh runs, and the baseline, pooled from several
fresh runs, shows the latter for every step. So the power of the gate at a shorter run length can
be simulated from the baseline alone: draw the compared steps' ratios from its own run-to-run
ratios, apply the slowdown, judge as the gate does. The shortest length whose power is that of the
full length (within a margin) detects the same slowdowns, and the steps beyond it buy nothing.

A prefix of a run is comparable with its baseline only where the first N steps are the same
batches as the baseline's first N; the caller sees to that (the data is sized for the full run).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from trainperf.judge import stats
from trainperf.judge.compare import ALPHA, keyed_groups, paired_keys
from trainperf.judge.metrics import Direction, Metric
from trainperf.judge.step_series import step_of
from trainperf.result import MetricValue

DESIGN_EFFECT_OVER_TOLERANCE = 5 / 3
"""The change a plan must keep detecting, as a multiple of the metric's tolerance: a 5% slowdown of
step time (tolerance 3%), 13% more energy per token (8%), 17% fewer tokens/s (10%)."""
POWER_MARGIN = 0.02
"""A planned length may detect that change this much less often than the full length (the
simulation's own error at ``TRIALS`` is about 1 point)."""
TRIALS = 1000


@dataclass(frozen=True, slots=True)
class MetricPower:
    """One metric's detection at a run length: the share of simulated regressions the gate calls."""

    metric: str
    effect: float
    compared: int
    power: float
    false_alarm: float
    """The share of simulated unchanged runs the gate calls a regression at this length."""
    rate: bool = False
    """A figure where higher is better (tokens/s): its change to catch is a drop."""

    @property
    def change(self) -> str:
        """The simulated change as a reader sees it: +5% for a time, -17% for a rate."""
        return f"{'-' if self.rate else '+'}{self.effect:.0%}"


def _worse(ratio: float, direction: Direction) -> float:
    return ratio if direction is Direction.LOWER else 1 / ratio


def noise(metric: Metric, groups: dict[str, list[float]], keys: Sequence[str]) -> list[float]:
    """Ratios "worse than the baseline" (>1 is worse) of one fresh run against the others over
    ``keys``: each run's sample of a step over the median of the other runs' samples of it, as a
    fresh run reads against a pooled baseline. Empty where no step was measured by two runs: one
    run's steps are different batches, and their spread says nothing about how the same batch moves
    between processes."""
    ratios: list[float] = []
    for key in keys:
        samples = groups.get(key, [])
        for index, sample in enumerate(samples):
            others = samples[:index] + samples[index + 1 :]
            if others and sample > 0 and stats.median(others) > 0:
                ratios.append(_worse(sample / stats.median(others), metric.direction))
    return ratios


def median_p_greater(ratios: Sequence[float]) -> float:
    """The gate's bootstrap p-value (the share of resampled medians at or below 1) in closed form:
    a resample's median is at or below 1 when at least half its values are, so the share is a
    binomial tail. Exact for an odd count as resamples grow; for an even count it counts a resample
    whose two middle values straddle 1 as "at or below", so it errs towards no detection."""
    n = len(ratios)
    if n == 0:
        return 1.0
    share = sum(1 for r in ratios if r <= 1) / n
    need = math.ceil(n / 2)
    return sum(math.comb(n, k) * share**k * (1 - share) ** (n - k) for k in range(need, n + 1))


def detection_power(metric: Metric, noise_ratios: Sequence[float], compared: int, effect: float) -> float:
    """Share of ``TRIALS`` simulated runs, ``effect`` worse on each of ``compared`` steps drawn from
    the noise, that the gate calls a regression (deterministic: seeded). At ``effect`` 0 it is the
    false alarms of an unchanged run (before confirmation)."""
    if compared == 0 or not noise_ratios:
        return 0.0
    rng = random.Random(compared)
    worse = 1 + effect if metric.direction is Direction.LOWER else 1 / (1 - effect)
    threshold = 1 + metric.tolerance if metric.direction is Direction.LOWER else 1 / (1 - metric.tolerance)
    called = 0
    for _ in range(TRIALS):
        drawn = [noise_ratios[rng.randrange(len(noise_ratios))] * worse for _ in range(compared)]
        if stats.median(drawn) > threshold and median_p_greater(drawn) < ALPHA:
            called += 1
    return called / TRIALS


def design_effect(metric: Metric) -> float | None:
    """The change a plan keeps detecting; None for a figure that cannot drop past its tolerance (a
    rate whose tolerance is widened to 100% or more, as on the CPU class)."""
    effect = metric.tolerance * DESIGN_EFFECT_OVER_TOLERANCE
    if metric.direction is Direction.LOWER:
        return effect
    if metric.tolerance >= 1:
        return None
    return min(effect, (1 + metric.tolerance) / 2)


def compared_keys(groups: dict[str, list[float]], steps: int) -> list[str]:
    """The baseline's keys the gate pairs with a run of the first ``steps`` steps (the stable ones
    where the baseline has several runs, as ``judge.compare.paired_keys`` picks them)."""
    prefix = {key: samples for key, samples in groups.items() if step_of(key) <= steps}
    keys, _ = paired_keys(prefix, groups)
    return keys


def power_at(metric: Metric, value: MetricValue, steps: int) -> MetricPower | None:
    """The gate's power on ``metric`` for a run of ``steps`` steps against this baseline value; None
    where the value has no keyed samples from two runs to simulate from."""
    groups = keyed_groups(value)
    effect = design_effect(metric)
    if groups is None or effect is None:
        return None
    keys = compared_keys(groups, steps)
    ratios = noise(metric, groups, keys)
    if not ratios:
        return None
    power = detection_power(metric, ratios, len(keys), effect)
    false_alarm = detection_power(metric, ratios, len(keys), 0.0)
    rate = metric.direction is Direction.HIGHER
    return MetricPower(metric.name, effect, len(keys), power, false_alarm, rate)


__all__ = [
    "DESIGN_EFFECT_OVER_TOLERANCE",
    "POWER_MARGIN",
    "MetricPower",
    "compared_keys",
    "design_effect",
    "detection_power",
    "median_p_greater",
    "noise",
    "power_at",
]
