"""Change points in a case x metric series (one value per run, oldest first). Pure statistics.

Chosen by measurement (benchmarks/changepoint_eval.py, docs/history.md): ruptures' PELT (its C
KernelCPD, linear kernel) on the series scaled by its robust noise, after a running-median filter
takes out single-run host stalls, and each candidate kept only when a rank test between its
neighbouring segments supports it: Mann-Whitney, exact where a side holds at most
``EXACT_UP_TO`` runs, the normal approximation above that.
Apache Otava and MongoDB's E-divisive were measured on the same series; both pin numpy versions
the training stack cannot share (== 2.2.0 and < 2).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import itertools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.judge import stats

PENALTY_PER_LOG_N = 3.0
"""PELT's penalty, in units of log(n) of the noise-scaled series (a BIC-like choice)."""
MIN_SEGMENT = 3
"""Runs on each side of a change point: a single odd run is a stall, not a change of level."""
ALPHA = 0.001
"""One-sided rank-test level a candidate must reach against its neighbouring segment."""
EXACT_UP_TO = 8
"""Up to this many runs on a side the rank test's p-value is exact: the normal approximation gave
p = 2.7e-3 for a step 3 runs old against 30 (exact: 1.8e-4), so a recent step was never kept.
SciPy's ``mannwhitneyu(method="auto")`` switches at the same size. The exact distribution is
computed here (``exact_u_tail``, checked against SciPy's in the self-tests): importing
``scipy.stats`` after numpy took 0.8-0.9 s on a 2-core host (2.6-3.4 s under load), about the
whole ``trainperf history`` command, and the dashboard tests every case's series."""
STALL_SIGMAS = 5.0
FILTER_WIDTH = 5


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int
    """Position in the series of the first run at the new level."""
    before: float
    """Median of the segment before it."""
    after: float
    """Median of the segment after it."""
    p_value: float

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else math.inf


def robust_sigma(values: Sequence[float]) -> float:
    """Noise estimated from successive differences: a step moves one difference, not the MAD."""
    diffs = [b - a for a, b in itertools.pairwise(values)]
    if len(diffs) < 2:
        return 0.0
    return stats.MAD_TO_SIGMA * stats.mad(diffs) / math.sqrt(2)


def despiked(values: Sequence[float], sigma: float) -> list[float]:
    """Each run more than ``STALL_SIGMAS`` sigma from its running median replaced by that median:
    a running median keeps a step's edge but drops an isolated stall."""
    half = FILTER_WIDTH // 2
    cleaned = list(values)
    for i, value in enumerate(values):
        window = values[max(0, i - half) : i + half + 1]
        center = stats.median(window)
        if sigma > 0 and abs(value - center) > STALL_SIGMAS * sigma:
            cleaned[i] = center
    return cleaned


def _candidates(values: Sequence[float], sigma: float) -> list[int]:
    import numpy as np

    signal = (np.asarray(values, dtype=float) / sigma).reshape(-1, 1)
    # KernelCPD with the linear kernel is PELT on the l2 cost, in ruptures' C code: fast enough for
    # a dashboard of a year of nightly runs (the pure-Python Pelt took ~1 s per 365-run series).
    # The routine returns, for each end, where its last segment starts: walked back from the end.
    last_start = _pelt_l2()(signal, PENALTY_PER_LOG_N * math.log(len(values)), MIN_SEGMENT)
    breaks, end = [], int(last_start[len(values)])
    while end > 0:
        breaks.append(end)
        end = int(last_start[end])
    return breaks[::-1]


@functools.cache
def _pelt_l2() -> Callable[[Any, float, int], Any]:
    """ruptures' PELT on the l2 cost (the C routine behind ``KernelCPD(kernel="linear")``).

    ``import ruptures`` imports every detector and cost, which pull in SciPy: 1.7 s of a 2.6 s
    ``trainperf history``. This routine needs only numpy, so its compiled module is loaded from
    ruptures' installed files without the package's ``__init__``; another layout takes the plain import.
    """
    name = "ruptures.detection._detection.ekcpd"
    package = importlib.util.find_spec("ruptures")
    if name not in sys.modules and package is not None and package.submodule_search_locations:
        folder = Path(package.submodule_search_locations[0], "detection", "_detection")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"ekcpd{suffix}"
            spec = importlib.util.spec_from_file_location(name, path) if path.is_file() else None
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[name] = module  # one copy, shared with a later ``import ruptures``
                break
    return importlib.import_module(name).ekcpd_pelt_L2


def _supported(values: Sequence[float], breaks: list[int]) -> list[ChangePoint]:
    """Drop the weakest candidate until every one is significant against its neighbouring segments."""
    breaks = list(breaks)
    while breaks:
        edges = [0, *breaks, len(values)]
        tested = []
        for k, index in enumerate(breaks):
            left, right = values[edges[k] : index], values[index : edges[k + 2]]
            tested.append(ChangePoint(index, stats.median(left), stats.median(right), shift_p(left, right)))
        weakest = max(tested, key=lambda cp: cp.p_value)
        if weakest.p_value < ALPHA:
            return tested
        breaks.remove(weakest.index)
    return []


def shift_p(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided evidence that ``after`` sits at another level than ``before``: the smaller of the
    two one-sided Mann-Whitney p-values, exact when a side is short."""
    if min(len(before), len(after)) <= EXACT_UP_TO:
        return min(_exact_greater(after, before), _exact_greater(before, after))
    return min(stats.mann_whitney_greater(after, before), stats.mann_whitney_greater(before, after))


def _exact_greater(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided exact p-value that ``a`` tends to be larger than ``b``: P(U >= U observed)."""
    u_a = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    # A tie counts half, so U may end in .5: rounded down, the tail is taken from the smaller U,
    # which can only make the p-value larger (conservative).
    return exact_u_tail(len(a), len(b), math.floor(u_a))


@functools.lru_cache(maxsize=256)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings of m and n untied values give each U = 0 .. m*n: the
    coefficients of the Gaussian binomial [m+n choose m](q) = prod_i (1 - q^(n+i)) / (1 - q^i)."""
    counts = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        for k in range(m * n, n + i - 1, -1):  # times (1 - q^(n+i)), from the top down
            counts[k] -= counts[k - n - i]
        for k in range(i, m * n + 1):  # divided by (1 - q^i): a running sum with stride i
            counts[k] += counts[k - i]
    return tuple(counts)


def exact_u_tail(m: int, n: int, u: int) -> float:
    """P(U >= u) for the Mann-Whitney U of samples of m and n values under the null, exactly."""
    if u <= 0:
        return 1.0
    counts = _u_counts(m, n)
    return sum(counts[u:]) / math.comb(m + n, m)


def change_points(values: Sequence[float]) -> list[ChangePoint]:
    """The change points of a series, oldest first; none for a series too short to split."""
    if len(values) < 2 * MIN_SEGMENT:
        return []
    sigma = robust_sigma(values)
    if sigma <= 0:
        sigma = (abs(stats.median(values)) or 1.0) * 1e-6
    cleaned = despiked(values, sigma)
    return _supported(cleaned, _candidates(cleaned, sigma))


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics (binomial ranks): exact,
    deterministic and without resampling, so a year of history is summarised in seconds."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("interval of no values")
    tail = (1 - confidence) / 2
    rank, cumulative = 0, 0.0
    for k in range(n + 1):
        cumulative += math.comb(n, k) / 2**n  # P(X <= k), X ~ Binomial(n, 1/2)
        if cumulative > tail:
            break
        rank = k + 1
    if rank == 0:
        return ordered[0], ordered[-1]
    return ordered[rank - 1], ordered[n - rank]
