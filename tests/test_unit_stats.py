"""Unit tests of trainperf.judge.stats: summaries, warm-up detection, the rank test and the bootstrap
tests."""

from __future__ import annotations

import math

import pytest

from trainperf.judge import stats

# -- median / quantile / mad ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [([3.0], 3.0), ([5.0, 1.0, 3.0], 3.0), ([4.0, 1.0, 3.0, 2.0], 2.5), ([1.0, 1.0, 9.0, 9.0], 5.0)],
)
def test_median_hand_values(values: list[float], expected: float) -> None:
    assert stats.median(values) == expected


def test_median_and_quantile_of_nothing_raise() -> None:
    with pytest.raises(ValueError):
        stats.median([])
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 0.0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 1.0, 4.0),
        ([1.0, 2.0, 3.0, 4.0], 0.25, 1.75),  # pos 0.75 -> 1 + 0.75 * (2 - 1)
        ([4.0, 3.0, 2.0, 1.0], 0.5, 2.5),  # unsorted input
        ([10.0, 20.0, 30.0, 40.0, 50.0], 0.9, 46.0),  # pos 3.6 -> 40 + 0.6 * 10
        ([7.0], 0.3, 7.0),
    ],
)
def test_quantile_linear_interpolation(values: list[float], q: float, expected: float) -> None:
    assert stats.quantile(values, q) == pytest.approx(expected)


def test_mad_ignores_one_huge_value() -> None:
    # median 3; absolute deviations 2, 1, 0, 1, 97 -> median 1
    assert stats.mad([1.0, 2.0, 3.0, 4.0, 100.0]) == 1.0


# -- steady_start -----------------------------------------------------------------------------


def test_steady_start_detects_slow_warmup() -> None:
    assert stats.steady_start([5.0, 3.0] + [1.0] * 8) == 2


def test_steady_start_keeps_at_least_first_step() -> None:
    """Even a perfectly flat run discards step 0 (allocation, kernel selection)."""
    assert stats.steady_start([1.0] * 10) == 1


def test_steady_start_at_most_half() -> None:
    assert stats.steady_start([9.0] * 7 + [1.0] * 3) == 5


@pytest.mark.parametrize(("durations", "expected"), [([], 0), ([5.0], 1), ([5.0, 1.0], 1)])
def test_steady_start_short_runs(durations: list[float], expected: int) -> None:
    assert stats.steady_start(durations) == expected


def test_steady_start_normalises_by_work() -> None:
    """A long batch that is slow per step but normal per token is not warm-up."""
    durations = [5.0, 2.0] + [1.0] * 8
    tokens = [100.0, 200.0] + [100.0] * 8
    assert stats.steady_start(durations) == 2
    assert stats.steady_start(durations, tokens) == 1


def test_steady_start_ignores_noise_below_ten_percent() -> None:
    durations = [3.0, 1.08, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0]
    assert stats.steady_start(durations) == 1


# -- summarize ------------------------------------------------------------------------------


def test_summarize_counts_stall_as_outlier() -> None:
    values = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 3.0]
    summary = stats.summarize(values)
    assert summary.count == 9
    assert summary.outliers == 1
    assert summary.median == 1.00
    assert summary.minimum == 0.98
    assert summary.mean == pytest.approx(sum(values) / 9)
    assert summary.robust_cv == pytest.approx(stats.MAD_TO_SIGMA * 0.01 / 1.0)


@pytest.mark.parametrize(("last", "outliers"), [(1.06, 0), (1.10, 1)])
def test_summarize_outlier_threshold_is_five_robust_sigmas(last: float, outliers: int) -> None:
    # median 1.00, MAD 0.01 -> sigma 0.0148: 1.06 is 4.0 sigma above, 1.10 is 6.7 sigma above.
    values = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, last]
    assert stats.summarize(values).outliers == outliers


def test_summarize_no_outlier_for_ordinary_spread() -> None:
    assert stats.summarize([1.00, 1.01, 0.99, 1.02, 0.98, 1.05]).outliers == 0


# -- Mann-Whitney ---------------------------------------------------------------------------


def test_mann_whitney_hand_value_without_ties() -> None:
    # U_a = 6, mean 3, var 2*3/12*6 = 3 -> z = (6 - 3 - 0.5)/sqrt(3) = 1.4434 -> p = 0.074457
    assert stats.mann_whitney_greater([3.0, 4.0, 5.0], [1.0, 2.0]) == pytest.approx(0.0744573, rel=1e-5)


def test_mann_whitney_hand_value_with_ties() -> None:
    # Ranks: 0->1, 1s->2.5, 2s->5.5, 3->8; R_a = 21.5, U_a = 11.5; tie term 6 + 60 = 66;
    # var = 16/12 * (9 - 66/56) = 10.4286; z = 3/sqrt(10.4286) = 0.92898 -> p = 0.17645
    assert stats.mann_whitney_greater([1, 2, 2, 3], [2, 2, 1, 0]) == pytest.approx(0.176448, rel=1e-4)


def test_mann_whitney_clear_shift() -> None:
    high = [2.0 + i / 10 for i in range(10)]
    low = [1.0 + i / 10 for i in range(10)]
    assert stats.mann_whitney_greater(high, low) < 0.01
    assert stats.mann_whitney_greater(low, high) > 0.99


def test_mann_whitney_same_distribution_not_significant() -> None:
    a = [1.0 + 0.02 * i for i in range(0, 20, 2)]
    b = [1.0 + 0.02 * i for i in range(1, 21, 2)]  # interleaved with a
    assert stats.mann_whitney_greater(a, b) > 0.3
    assert stats.mann_whitney_greater(b, a) > 0.3
    assert stats.mann_whitney_greater(a, a) > 0.3


def test_mann_whitney_swapped_arguments_roughly_complementary() -> None:
    a = [1.0, 1.3, 1.1, 1.6, 1.4, 1.2, 1.9]
    b = [0.9, 1.05, 1.25, 0.8, 1.15, 1.0]
    forward, backward = stats.mann_whitney_greater(a, b), stats.mann_whitney_greater(b, a)
    assert forward < 0.05 < backward
    # The continuity correction makes the two one-sided p-values sum to slightly more than 1.
    assert 1.0 <= forward + backward < 1.2


def test_mann_whitney_empty_and_constant() -> None:
    assert stats.mann_whitney_greater([], [1.0]) == 1.0
    assert stats.mann_whitney_greater([1.0, 1.0], [1.0, 1.0]) == 0.5  # zero variance


# -- bootstrap test, paired ratios -------------------------------------------------------------


def test_bootstrap_p_is_zero_when_every_ratio_agrees() -> None:
    # Five steady steps, each 4% slower: a sign test cannot go below 1/32; the bootstrap can.
    assert stats.bootstrap_median_p_greater([1.04, 1.05, 1.038, 1.042, 1.047]) == 0.0
    assert stats.bootstrap_median_p_greater([0.96, 0.97, 0.95]) == 1.0


def test_bootstrap_p_keeps_a_dissenting_step_in_view() -> None:
    # One of five below 1: a resample's median falls at or below 1 when 3+ draws hit it (~6%).
    p = stats.bootstrap_median_p_greater([1.04, 1.05, 1.038, 1.042, 0.97])
    assert 0.03 < p < 0.09
    assert stats.bootstrap_median_p_greater([]) == 1.0


def test_relative_range() -> None:
    assert stats.relative_range([1.0, 1.02, 0.99]) == pytest.approx(0.03)


def test_paired_ratios_only_shared_keys() -> None:
    current = {"a": 1.0, "b": 3.0, "c": 8.0}
    baseline = {"b": 1.0, "c": 2.0, "d": 5.0}
    assert stats.paired_ratios(current, baseline) == [3.0, 4.0]


def test_paired_ratios_skip_zero_baseline() -> None:
    assert stats.paired_ratios({"a": 1.0, "b": 2.0}, {"a": 0.0, "b": 1.0}) == [2.0]


# -- bootstrap intervals -----------------------------------------------------------------


CURRENT = [1.10, 1.12, 1.08, 1.15, 1.09, 1.11, 1.30, 1.10, 1.07, 1.13]
BASELINE = [1.00, 1.02, 0.99, 1.01, 0.98, 1.03, 1.00, 0.97, 1.02, 1.01]


def test_bootstrap_ratio_interval_deterministic_and_contains_estimate() -> None:
    first = stats.bootstrap_ratio_interval(CURRENT, BASELINE, seed=3, resamples=300)
    again = stats.bootstrap_ratio_interval(CURRENT, BASELINE, seed=3, resamples=300)
    other = stats.bootstrap_ratio_interval(CURRENT, BASELINE, seed=4, resamples=300)
    assert first == again
    assert other != first
    point = stats.median(CURRENT) / stats.median(BASELINE)
    assert first[0] <= point <= first[1]
    assert first[0] > 1.0  # a clear 10% shift: the whole interval lies above 1


def test_bootstrap_median_interval_deterministic_and_contains_median() -> None:
    first = stats.bootstrap_median_interval(CURRENT, seed=7, resamples=300)
    assert first == stats.bootstrap_median_interval(CURRENT, seed=7, resamples=300)
    assert first[0] <= stats.median(CURRENT) <= first[1]
    assert first[0] < first[1]


def test_bootstrap_of_nothing_raises() -> None:
    with pytest.raises(ValueError):
        stats.bootstrap_median_interval([])
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_interval([], [1.0])


def test_bootstrap_ratio_interval_zero_baseline_is_nan() -> None:
    low, high = stats.bootstrap_ratio_interval([1.0, 2.0], [0.0, 0.0], resamples=20)
    assert math.isnan(low) and math.isnan(high)


def test_run_step_bootstrap_spans_the_runs_and_is_deterministic() -> None:
    """Each step of two runs a side: A's runs at 1.0 and 1.2, B's both at 1.1. Drawing A's runs
    with replacement reaches both B/A = 1.1 and 1.1/1.2; steps alone would see one value."""
    current = [[1.1, 1.1] for _ in range(10)]
    baseline = [[1.0, 1.2] for _ in range(10)]
    medians = stats.run_step_bootstrap_medians(current, baseline, seed=5)
    low, high = stats.interval_of(medians)
    assert low == pytest.approx(1.1 / 1.2) and high == pytest.approx(1.1)
    assert medians == stats.run_step_bootstrap_medians(current, baseline, seed=5)
    with pytest.raises(ValueError):
        stats.run_step_bootstrap_medians(current, baseline[:3])
