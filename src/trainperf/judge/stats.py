"""Statistics of step samples, kept apart from I/O: steady state, robust summaries, tests.

Facts designed against (measured on Qwen3-8B LoRA on an H200, 6 processes x 40 steps):
single steps reached 1.8x the minimum from host-side stalls, per-process medians varied by
6.6% CV while per-process minima stayed within 0.8%, and the first step took 2-6x a steady
one. So: warm-up is detected rather than assumed, stalls are counted as outliers, and a
regression needs both a size beyond tolerance and a rank test's support.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

MAD_TO_SIGMA = 1.4826


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def mad(values: Sequence[float]) -> float:
    center = median(values)
    return median([abs(v - center) for v in values])


def steady_start(durations: Sequence[float], work: Sequence[float] | None = None) -> int:
    """Index of the first steady-state step: the warm-up steps are ``durations[:index]``.

    Steps are normalised by their work (tokens) when given, since batches of a length
    profile differ. The reference is the median of the second half; warm-up is the leading
    run of steps slower than the reference by more than max(10%, 3 robust sigmas). At least
    the first step (allocation, kernel selection, compilation) and at most half are warm-up.
    """
    n = len(durations)
    if n < 3:
        return min(1, n)
    per_unit = [d / w if work and w else d for d, w in zip(durations, work or [1.0] * n)]
    tail = per_unit[n // 2 :]
    reference = median(tail)
    spread = MAD_TO_SIGMA * mad(tail)
    threshold = reference + max(0.10 * reference, 3 * spread)
    index = 1
    while index < n // 2 and per_unit[index] > threshold:
        index += 1
    return index


@dataclass(frozen=True, slots=True)
class Summary:
    count: int
    median: float
    mean: float
    minimum: float
    p10: float
    p90: float
    robust_cv: float
    """MAD-based coefficient of variation (1.4826 * MAD / median)."""
    outliers: int
    """Samples more than 5 robust sigmas above the median (host stalls, as a rule)."""


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("summary of no values")
    center = median(values)
    sigma = MAD_TO_SIGMA * mad(values)
    outliers = sum(1 for v in values if sigma > 0 and (v - center) / sigma > 5)
    return Summary(
        count=len(values),
        median=center,
        mean=sum(values) / len(values),
        minimum=min(values),
        p10=quantile(values, 0.10),
        p90=quantile(values, 0.90),
        robust_cv=sigma / center if center else 0.0,
        outliers=outliers,
    )


def mann_whitney_greater(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided p-value that values in ``a`` tend to be larger than in ``b``.

    Normal approximation with tie correction and continuity correction; adequate from about
    five samples a side, which every gated case has (steps, not processes).
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    tie_term = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = rank
        ties = j - i + 1
        tie_term += ties**3 - ties
        i = j + 1
    rank_sum_a = sum(r for r, (_, group) in zip(ranks, pooled) if group == 0)
    u_a = rank_sum_a - n1 * (n1 + 1) / 2
    mean_u = n1 * n2 / 2
    n = n1 + n2
    var_u = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var_u <= 0:
        return 0.5
    z = (u_a - mean_u - 0.5) / math.sqrt(var_u)
    return 0.5 * math.erfc(z / math.sqrt(2))


def bootstrap_ratio_interval(
    current: Sequence[float],
    baseline: Sequence[float],
    *,
    statistic: Callable[[Sequence[float]], float] = median,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of statistic(current) / statistic(baseline). Deterministic."""
    if not current or not baseline:
        raise ValueError("bootstrap of no values")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        cur = [current[rng.randrange(len(current))] for _ in current]
        base = [baseline[rng.randrange(len(baseline))] for _ in baseline]
        denominator = statistic(base)
        if denominator:
            ratios.append(statistic(cur) / denominator)
    if not ratios:
        return (math.nan, math.nan)
    tail = (1 - confidence) / 2
    return (quantile(ratios, tail), quantile(ratios, 1 - tail))


def paired_ratios(current: dict[str, float], baseline: dict[str, float]) -> list[float]:
    """Per-key ratios current/baseline over the keys both sides share (the same step, same batch)."""
    return [current[k] / baseline[k] for k in sorted(current.keys() & baseline.keys()) if baseline[k] > 0]


def bootstrap_median_interval(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``values``. Deterministic."""
    if not values:
        raise ValueError("bootstrap of no values")
    medians = _bootstrap_medians(values, resamples, seed)
    tail = (1 - confidence) / 2
    return (quantile(medians, tail), quantile(medians, 1 - tail))


def bootstrap_median_p_greater(values: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> float:
    """One-sided bootstrap p-value that the median of ``values`` (ratios) exceeds 1: the share of
    resampled medians at or below 1. Deterministic. Unlike a sign test it reaches small p-values
    with few values when they all agree (5 steady steps, each 4% slower, give 0)."""
    if not values:
        return 1.0
    return sum(1 for m in _bootstrap_medians(values, resamples, seed) if m <= 1) / resamples


def _bootstrap_medians(values: Sequence[float], resamples: int, seed: int) -> list[float]:
    """Medians of ``resamples`` resamples of ``values`` with replacement (deterministic per seed)."""
    rng = random.Random(seed)
    return [median([values[rng.randrange(len(values))] for _ in values]) for _ in range(resamples)]


def steps_of_every_run(
    current_groups: Mapping[str, list[float]],
    baseline_groups: Mapping[str, list[float]],
    keys: Sequence[str],
    min_steps: int,
) -> tuple[list[list[float]], list[list[float]]] | None:
    """``[step][run]`` values of the steps every run of each side has, where both sides have at
    least two runs and ``min_steps`` such steps; None otherwise (one run has no run-to-run spread
    to resample). A step's list holds one value a run, in run order, so index i is the same run."""
    runs_current = max(len(current_groups[k]) for k in keys)
    runs_baseline = max(len(baseline_groups[k]) for k in keys)
    if min(runs_current, runs_baseline) < 2:
        return None
    full = [
        k for k in keys if len(current_groups[k]) == runs_current and len(baseline_groups[k]) == runs_baseline
    ]
    if len(full) < min_steps:
        return None
    return [current_groups[k] for k in full], [baseline_groups[k] for k in full]


def paired_support(
    ratios: Sequence[float], by_run: tuple[list[list[float]], list[list[float]]] | None
) -> tuple[tuple[float, float], float, float]:
    """The 95% interval of the median paired ratio and the one-sided p-values that it is above 1
    and below 1: from the runs and steps resampled where ``by_run`` has them, else the steps."""
    if by_run is None:
        p_down = bootstrap_median_p_greater([1 / r for r in ratios if r > 0])
        return bootstrap_median_interval(ratios), bootstrap_median_p_greater(ratios), p_down
    medians = run_step_bootstrap_medians(*by_run)
    p_up = sum(1 for m in medians if m <= 1) / len(medians)
    return interval_of(medians), p_up, sum(1 for m in medians if m >= 1) / len(medians)


def run_step_bootstrap_medians(
    current: Sequence[Sequence[float]],
    baseline: Sequence[Sequence[float]],
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> list[float]:
    """Medians of paired per-step ratios, resampling each side's runs as well as the steps.

    ``current[k][i]`` is step k of run i (every run has every step; likewise ``baseline``). Each
    resample draws each side's runs with replacement, then the steps; a step's value is its median
    over the drawn runs. Steps of one run share that run's state (the host's clocks, a neighbour,
    the allocator's layout), so resampling the steps alone reads one run-level shift as if every
    step had confirmed it: on an H200 (2026-11-26), two rounds each of an A/B of a host-bound case
    read +17.4% [+9.5%, +24.5%], and three more rounds of the same pair +1.6% [-4.9%, +8.3%].
    Deterministic per seed.
    """
    if not current or not baseline or len(current) != len(baseline):
        raise ValueError("bootstrap of no values, or of unpaired steps")
    rng = random.Random(seed)
    runs_current, runs_baseline = len(current[0]), len(baseline[0])
    medians = []
    for _ in range(resamples):
        drawn_current = [rng.randrange(runs_current) for _ in range(runs_current)]
        drawn_baseline = [rng.randrange(runs_baseline) for _ in range(runs_baseline)]
        ratios = []
        for _ in current:
            step = rng.randrange(len(current))
            denominator = median([baseline[step][i] for i in drawn_baseline])
            if denominator > 0:
                ratios.append(median([current[step][i] for i in drawn_current]) / denominator)
        if ratios:
            medians.append(median(ratios))
    return medians


def interval_of(medians: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap statistics."""
    if not medians:
        return (math.nan, math.nan)
    tail = (1 - confidence) / 2
    return (quantile(medians, tail), quantile(medians, 1 - tail))


def relative_range(values: Sequence[float]) -> float:
    """(max - min) / median: how far repeats of one measurement spread."""
    center = median(values)
    return (max(values) - min(values)) / center if center else math.inf
