"""Host-dependent timing on its own runner, judged at no less than what the runner's own processes
moved: the figures of one cloud H200 runner (TRL GRPO's baseline runs at 3.36 and 3.99 s a step) with
kernel records faked, on the CPU."""

from __future__ import annotations

import dataclasses

import pytest

from tests.test_verdict_parts import BASELINE, by_name, judged, result
from trainperf.judge.compare import Verdict
from trainperf.judge.host_runs import widest_run_move
from trainperf.judge.metrics import KERNEL_TIME, STEP_TIME, TOKENS_PER_S
from trainperf.result import CaseResult, MetricValue


def with_runs(reference: CaseResult, name: str, per_run: list[float]) -> CaseResult:
    """The reference with one metric's runs read at ``per_run`` (its pooled value unchanged)."""
    value = reference.metrics[name]
    metrics = {**reference.metrics, name: dataclasses.replace(value, per_run=per_run)}
    return dataclasses.replace(reference, metrics=metrics)


def moving_reference() -> CaseResult:
    """A two-run baseline taken on this runner whose processes read their step 18.6% apart."""
    reference = with_runs(result(runs=2), STEP_TIME, [1.0, 1.186])
    return with_runs(reference, TOKENS_PER_S, [100.0, 100 / 1.186])


def test_the_widest_move_is_one_run_against_the_median_of_the_others() -> None:
    assert widest_run_move([3.362, 3.988]) == pytest.approx(0.1862, abs=1e-4)
    assert widest_run_move([1.0, 1.0, 1.3]) == pytest.approx(0.3)
    assert widest_run_move([1.0]) is None


def test_a_move_this_runner_has_already_produced_passes_and_says_how_far_it_can_tell() -> None:
    verdict = judged(result(1.157), moving_reference())
    assert verdict.verdict is Verdict.PASS
    step = by_name(verdict, STEP_TIME)
    assert step.gated and "reference runs moved 18.6% from one another" in step.note
    assert verdict.parts.endswith("(host index +0.0%; this runner's runs 18.6% apart)")
    # The same run against a baseline whose runs agreed is a host-side regression, confirmed first.
    steady = judged(result(1.157), BASELINE)
    assert steady.verdict is Verdict.REGRESSED and steady.confirm


def test_beyond_the_runners_own_move_host_time_still_gates() -> None:
    verdict = judged(result(1.30), moving_reference())
    assert verdict.verdict in (Verdict.REGRESSED, Verdict.NOISY)
    assert by_name(verdict, STEP_TIME).verdict is not Verdict.PASS


def test_kernel_time_is_not_widened_by_the_hosts_move() -> None:
    reference = with_runs(moving_reference(), KERNEL_TIME, [200.0, 200.0])
    verdict = judged(result(1.0, 202.0, gemm_ms=62.0), reference)
    assert verdict.verdict is Verdict.REGRESSED and not verdict.confirm
    assert by_name(verdict, KERNEL_TIME).note.startswith("paired over")


def test_on_another_runner_host_time_stays_shown_without_a_widened_tolerance() -> None:
    verdict = judged(result(1.5, runner="host-b/GPU-7"), moving_reference())
    step = by_name(verdict, STEP_TIME)
    assert not step.gated and "reference runs moved" not in step.note


def test_a_reference_without_runs_of_its_own_keeps_the_configured_tolerance() -> None:
    single = dataclasses.replace(
        BASELINE, metrics={**BASELINE.metrics, STEP_TIME: MetricValue(1.0, "s", None, [1.0])}
    )
    assert judged(result(1.10), single).verdict is Verdict.REGRESSED
