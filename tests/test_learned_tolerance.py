"""Timing tolerances learned from a runner's history: narrowed to its own noise, never widened."""

from __future__ import annotations

from trainperf.case_record import CaseRecord
from trainperf.judge import stats
from trainperf.judge.compare import Verdict, compare_case
from trainperf.judge.learned_tolerance import TOLERANCE_FLOOR, learned_tolerances
from trainperf.judge.metrics import METRICS, with_tolerances
from trainperf.result import CaseResult, MetricValue


def _result(
    step_s: float, per_run: list[float] | None = None, n_steps: int = 16, jitter: float = 0.001
) -> CaseResult:
    samples = [step_s * (1 + jitter * ((i * 7) % 5 - 2)) for i in range(n_steps)]
    keys = [f"s{i}" for i in range(n_steps)]
    if per_run:  # a pooled history baseline: every run's steps, keyed alike
        samples = [p * (1 + jitter * ((i * 7) % 5 - 2)) for p in per_run for i in range(n_steps)]
        keys = keys * len(per_run)
    value = MetricValue(step_s, "s", samples, per_run or [step_s], keys)
    return CaseResult(
        case_id="c", case=CaseRecord(), gpu_class="h100", outcome="ok", metrics={"step_time_s": value}
    )


QUIET_HISTORY = [1.350 * (1 + 0.003 * d) for d in (-1, 0, 1, 0.5, -0.5, 0, 1, -1, 0.3, -0.2)]


def test_a_quiet_history_narrows_the_step_time_tolerance() -> None:
    narrowed, notes = learned_tolerances(METRICS, _result(1.35, QUIET_HISTORY))
    assert TOLERANCE_FLOOR <= narrowed["step_time_s"].tolerance < METRICS["step_time_s"].tolerance
    assert notes and notes[0].startswith("step_time_s tolerance 3.0% -> ")


def test_a_noisy_history_never_widens_the_configured_tolerance() -> None:
    noisy = [1.35 * (1 + 0.08 * d) for d in (-1, 0, 1, 0.5, -0.5, 0, 1, -1, 0.3, -0.2)]
    narrowed, notes = learned_tolerances(METRICS, _result(1.35, noisy))
    assert narrowed["step_time_s"].tolerance == METRICS["step_time_s"].tolerance and not notes


def test_too_few_runs_learn_nothing() -> None:
    narrowed, notes = learned_tolerances(METRICS, _result(1.35, QUIET_HISTORY[:4]))
    assert narrowed["step_time_s"] is METRICS["step_time_s"] and not notes


def test_memory_tolerances_are_not_learned() -> None:
    baseline = _result(1.35, QUIET_HISTORY)
    baseline.metrics["peak_allocated_gib"] = MetricValue(20.0, "GiB", None, [20.0] * 10)
    narrowed, _ = learned_tolerances(METRICS, baseline)
    assert narrowed["peak_allocated_gib"] is METRICS["peak_allocated_gib"]


def test_a_two_percent_slowdown_is_regressed_against_a_quiet_history_and_an_aa_run_passes() -> None:
    baseline = _result(1.35, QUIET_HISTORY)
    narrowed, _ = learned_tolerances(METRICS, baseline)
    slow = compare_case(_result(1.35 * 1.02), baseline, narrowed, expectation="ok", timing_comparable=True)
    same = compare_case(_result(1.35 * 1.002), baseline, narrowed, expectation="ok", timing_comparable=True)
    assert slow.verdict is Verdict.REGRESSED and same.verdict is Verdict.PASS
    # At the class's 3% the same slowdown would pass: the history is what catches it.
    assert (
        compare_case(
            _result(1.35 * 1.02), baseline, METRICS, expectation="ok", timing_comparable=True
        ).verdict
        is Verdict.PASS
    )


# Step times of the tiny full fine-tuning over 10 accepted runs in one day on one 2-core CI host
# (tolerance scaled for the cpu class to 90%): two levels, 0.108-0.116 s and 0.120-0.129 s.
TWO_LEVEL_HISTORY = [0.1208, 0.1080, 0.1142, 0.1153, 0.1157, 0.1147, 0.1276, 0.1202, 0.1289, 0.1279]
CPU_METRICS = with_tolerances({}, timing_scale=30.0)


def test_a_level_the_history_already_holds_is_not_a_regression_and_beyond_it_is() -> None:
    baseline = _result(0.1155, TWO_LEVEL_HISTORY)
    narrowed, notes = learned_tolerances(CPU_METRICS, baseline)
    # The robust CV (4.40%) alone would set 8.8%; the 0.1289 s run sat 11.4% above the others.
    assert 0.11 < narrowed["step_time_s"].tolerance < 0.12
    assert "spread 4.40%, widest run 11.4" in notes[0]
    judged = {
        change: compare_case(
            _result(stats.median(TWO_LEVEL_HISTORY) * change),
            baseline,
            narrowed,
            expectation="ok",
            timing_comparable=True,
        ).verdict
        for change in (1.092, 1.16)
    }
    assert judged == {1.092: Verdict.PASS, 1.16: Verdict.REGRESSED}
