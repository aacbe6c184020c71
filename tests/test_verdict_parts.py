"""The verdict's room on the CPU, with kernel records faked: kernel time judged against the class on any
runner and at once, the rest of a step only on its own runner while the host index holds, a down-clocked
GPU or a crowded host said as such, and the line that says which part of the step moved."""

from __future__ import annotations

import dataclasses

from trainperf.case_record import CaseRecord
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import Verdict
from trainperf.judge.metrics import (
    HOST_INDEX,
    HOST_SPEED,
    HOST_TIME,
    KERNEL_TIME,
    SM_CLOCK,
    STEP_TIME,
    TOKENS_PER_S,
    with_tolerances,
)
from trainperf.judge.verdict import judge_case, needs_confirmation, with_device_figures
from trainperf.result import CaseResult, KernelSummary, MetricValue
from trainperf.run_checks_record import RunContamination
from trainperf.run_record import RunRecord

METRICS = with_tolerances({})
STEPS = 16


def value(centre: float, unit: str, per_step: list[float], keys: list[str], runs: int = 1) -> MetricValue:
    return MetricValue(centre, unit, per_step * runs, [centre] * runs, keys * runs)


def result(
    step_s: float = 1.0,
    kernel_ms: float = 200.0,
    *,
    runner: str = "host-a/GPU-1",
    index: float = 1.0,
    clock: float = 1980.0,
    runs: int = 1,
    window: tuple[str, str] = ("3:400", "4:300"),
    gemm_ms: float = 60.0,
) -> CaseResult:
    """A GPU result: timed steps of ``step_s``, a two-step kernel window of ``kernel_ms`` each."""
    step_keys = [f"{k}:100" for k in range(5, 5 + STEPS)]
    steps = [step_s * (1 + 0.002 * (k % 3)) for k in range(STEPS)]
    metrics = {
        STEP_TIME: value(step_s, "s", steps, step_keys, runs),
        TOKENS_PER_S: value(100 / step_s, "tok/s", [100 / s for s in steps], step_keys, runs),
        KERNEL_TIME: value(kernel_ms, "ms", [kernel_ms, kernel_ms], list(window), runs),
        HOST_TIME: MetricValue(step_s * 1000 - kernel_ms, "ms", None, [step_s * 1000 - kernel_ms] * runs),
        HOST_INDEX: MetricValue(index, "ops/us", None, [index] * runs),
        SM_CLOCK: MetricValue(clock, "MHz", None, [clock] * runs),
    }
    return CaseResult(
        case_id="sft_hf-qwen3_8b-qlora-short-b4",
        case=CaseRecord(),
        gpu_class="h100",
        outcome="ok",
        metrics=metrics,
        fingerprint=Fingerprint(runner=runner),
        runs=[RunRecord(clock_event_reasons=0)] * runs,
        kernels=KernelSummary({"GEMM": gemm_ms, "quantisation": 27.0}, [], runs),
    )


def judged(current: CaseResult, reference: CaseResult, **kw: object):  # type: ignore[no-untyped-def]
    return judge_case(current, reference, METRICS, expectation="ok", timing=(True, ""), strict=False, **kw)  # type: ignore[arg-type]


def by_name(verdict, name):  # type: ignore[no-untyped-def]
    return next(m for m in verdict.metrics if m.metric == name)


BASELINE = result(runs=3)


def test_on_another_runner_kernel_time_gates_and_step_time_is_shown_with_why() -> None:
    slower_host = judged(result(1.3, runner="host-b/GPU-7"), BASELINE)
    assert slower_host.verdict is Verdict.PASS
    assert not by_name(slower_host, STEP_TIME).gated and by_name(slower_host, KERNEL_TIME).gated
    assert "compares on its own runner only" in slower_host.reason
    assert slower_host.parts.startswith("step +30.0% = kernels +0.0%")
    assert slower_host.parts.endswith("+ host +37.5% shown (host index +0.0%)")  # (1300-200)/(1000-200)


def test_a_one_percent_kernel_change_fails_at_once_without_confirmation_on_any_runner() -> None:
    verdict = judged(result(1.0, 202.0, runner="host-b/GPU-7", gemm_ms=62.0), BASELINE)
    assert verdict.verdict is Verdict.REGRESSED and verdict.fails
    assert not verdict.confirm  # deterministic: no fresh runs to confirm it
    assert by_name(verdict, KERNEL_TIME).interval == (1.01, 1.01)
    assert "kernels +1.0% (GEMM +2.0 ms)" in verdict.parts
    assert judged(result(1.0, 201.0, runner="host-b/GPU-7"), BASELINE).verdict is Verdict.PASS  # 0.5%


def test_on_its_own_runner_a_host_side_slowdown_gates_through_step_time_and_is_confirmed() -> None:
    verdict = judged(result(1.10), BASELINE)
    assert verdict.verdict is Verdict.REGRESSED
    assert by_name(verdict, STEP_TIME).gated
    assert verdict.confirm and needs_confirmation(verdict, METRICS)
    assert verdict.parts == "step +10.0% = kernels +0.0% + host +12.5% (host index +0.0%)"


def test_a_host_index_beyond_its_noise_stops_host_gating_and_says_so() -> None:
    verdict = judged(result(1.10, index=0.6), BASELINE)
    assert verdict.verdict is Verdict.PASS
    assert "host index -40.0%" in verdict.reason and "a slower host" in verdict.reason
    # Within the floor (25%) of the index's own noise, it still gates.
    assert judged(result(1.10, index=0.8), BASELINE).verdict is Verdict.REGRESSED


def test_a_down_clocked_gpu_is_said_as_such_unless_it_sits_at_its_own_power_cap() -> None:
    verdict = judged(result(1.0, 240.0, clock=1600.0), BASELINE)
    assert verdict.verdict is Verdict.PASS and not by_name(verdict, KERNEL_TIME).gated
    assert "1600 MHz against 1980 MHz" in verdict.reason and "down-clocked" in verdict.reason
    capped = result(1.0, 240.0, clock=1600.0)
    capped.runs = [RunRecord(clock_event_reasons=0x4)]
    assert judged(capped, BASELINE).verdict is Verdict.REGRESSED


def test_kernel_windows_of_other_batches_are_not_compared() -> None:
    verdict = judged(result(1.0, 260.0, window=("3:435", "4:277")), BASELINE)
    assert not by_name(verdict, KERNEL_TIME).gated
    assert "other batches" in by_name(verdict, KERNEL_TIME).note


def test_a_crowded_host_leaves_kernel_time_judged_a_shared_gpu_does_not() -> None:
    crowded = result(1.3, 202.0)
    crowded.runs = [
        RunRecord(contamination=RunContamination(("host CPU: busy",), foreign_process=False, on_gpu=False))
    ]
    verdict = judged(crowded, BASELINE)
    assert verdict.verdict is Verdict.REGRESSED  # the kernel regression stands beside the crowding
    assert not by_name(verdict, STEP_TIME).gated and by_name(verdict, KERNEL_TIME).gated
    shared = result(1.3, 202.0)
    foreign = RunContamination(("GPU 0: foreign process",), foreign_process=True)
    shared.runs = [RunRecord(contamination=foreign)]
    assert judged(shared, BASELINE).verdict is Verdict.CONTAMINATED


def test_a_reference_without_kernel_time_gates_wall_time_only_where_the_host_cannot_carry_it() -> None:
    old = result(runs=3)
    old.metrics = {k: v for k, v in old.metrics.items() if k in (STEP_TIME, TOKENS_PER_S)}
    # Its own runner: wall time gates as before, and a host-side slowdown is confirmed.
    own = judged(result(1.10), old)
    assert own.verdict is Verdict.REGRESSED and own.confirm and own.parts == ""
    # Another runner, a host-bound step (kernels 18% of it): the +10% is the host's, shown with how to gate.
    other = judged(result(1.10, runner="host-b/GPU-7"), old)
    assert other.verdict is Verdict.PASS and not by_name(other, STEP_TIME).gated
    assert "no kernel time and kernels are 18% of this step" in other.reason
    assert "re-take the baseline with kernel time" in other.reason
    # Another runner, a step that is nearly all kernels: its wall time is the GPU's work, and gates.
    gpu_bound = result(1.0, 980.0, runs=3)
    gpu_bound.metrics = {k: v for k, v in gpu_bound.metrics.items() if k in (STEP_TIME, TOKENS_PER_S)}
    slower = judged(result(1.10, 1078.0, runner="host-b/GPU-7"), gpu_bound)
    assert slower.verdict is Verdict.REGRESSED and by_name(slower, STEP_TIME).gated


def test_a_runners_history_judges_the_host_and_the_class_file_the_kernels() -> None:
    history = result(1.0, 300.0, runs=3)  # its kernel figures would say -33%: they are not the class's
    merged = with_device_figures(history, BASELINE)
    assert merged is not None and merged.metrics[KERNEL_TIME].value == 200.0
    assert merged.metrics[STEP_TIME] is history.metrics[STEP_TIME]
    verdict = judged(result(1.0, 200.0), history, device_reference=BASELINE)
    assert verdict.verdict is Verdict.PASS
    assert dataclasses.replace(history).metrics[KERNEL_TIME].value == 300.0  # the history is not changed


def test_a_family_whose_figures_spread_wider_declares_its_own_tolerances() -> None:
    """verl's PPO step spread 0.83% over three H200s and its actor update 17% on one runner: +1.0% of
    kernel time and +12% of step time on the same runner are within its own tolerances, beyond the
    class's for any other family; a tolerance set in pyproject.toml, or learned, stands."""
    from trainperf.families import family_of
    from trainperf.judge.family_tolerance import FamilyTolerances, with_family_tolerances

    verl = family_of("rl_verl").tolerances
    assert verl.kernel is not None and verl.kernel > METRICS[KERNEL_TIME].tolerance
    assert verl.host is not None and verl.host > METRICS[STEP_TIME].tolerance
    wider = with_family_tolerances(METRICS, verl, class_metrics=METRICS, configured=())
    for current in (result(kernel_ms=202.0), result(step_s=1.12)):
        assert judged(current, BASELINE).verdict is Verdict.REGRESSED
        verdict = judge_case(current, BASELINE, wider, expectation="ok", timing=(True, ""), strict=False)
        assert verdict.verdict is Verdict.PASS
        assert by_name(verdict, KERNEL_TIME).gated and by_name(verdict, STEP_TIME).gated
    still = judge_case(result(step_s=1.4), BASELINE, wider, expectation="ok", timing=(True, ""), strict=False)
    assert still.verdict is Verdict.REGRESSED
    kept = with_family_tolerances(METRICS, verl, class_metrics=METRICS, configured=[KERNEL_TIME])
    assert kept[KERNEL_TIME] == METRICS[KERNEL_TIME] and kept[STEP_TIME].tolerance == verl.host
    learned = {**METRICS, KERNEL_TIME: dataclasses.replace(METRICS[KERNEL_TIME], tolerance=0.005)}
    narrowed = with_family_tolerances(learned, verl, class_metrics=METRICS, configured=())
    assert narrowed[KERNEL_TIME].tolerance == 0.005
    tighter = FamilyTolerances(kernel=0.001, host=0.001)
    assert with_family_tolerances(METRICS, tighter, class_metrics=METRICS, configured=()) == METRICS
    assert family_of("sft_hf").tolerances == FamilyTolerances()


def timed(speed: float, **kw: object) -> CaseResult:
    """A result whose steps timed the host at each edge: their mean speed ``speed``."""
    base = result(**kw)  # type: ignore[arg-type]
    speeds = MetricValue(speed, "ops/us", None, [speed] * len(base.runs))
    return dataclasses.replace(base, metrics={**base.metrics, HOST_SPEED: speeds})


def test_where_both_sides_timed_the_host_at_each_step_the_line_names_that_speed() -> None:
    """The host's speed through the steps (its mean) says more than the index before the case."""
    verdict = judged(timed(0.9, step_s=1.10), timed(1.0, runs=3))
    assert verdict.parts == "step +10.0% = kernels +0.0% + host +12.5% (host speed -10.0% through the steps)"


def test_a_host_slower_through_the_steps_still_gates_its_host_time() -> None:
    """A run whose host read slower through its steps is still judged on host time: that speed is partly
    the case's own doing (runs with +50 ms of Python a step read it 7-22% slower than their runner's
    unchanged runs on two H200s), so it cannot excuse a slower step. Its regression goes to fresh runs."""
    slower = judged(timed(0.78, step_s=1.10), timed(1.0, runs=3))
    assert slower.verdict is Verdict.REGRESSED and by_name(slower, STEP_TIME).gated
    assert slower.confirm
    assert "host speed -22.0% through the steps" in slower.parts
    assert judged(timed(0.95, step_s=1.10), timed(1.0, runs=3)).verdict is Verdict.REGRESSED
