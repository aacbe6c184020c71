"""Host time judged over the steps both hosts ran at full speed: a host that flips between a fast and a
slow spell moves a run's median by its mix of spells, not by the software (CPU, faked step records)."""

from __future__ import annotations

import dataclasses

from trainperf.case_record import CaseRecord
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import Verdict
from trainperf.judge.host_spells import MIN_FULL_SPEED_STEPS, full_speed_steps, run_segments
from trainperf.judge.metrics import HOST_SPEED, HOST_TIME, KERNEL_TIME, STEP_TIME, with_tolerances
from trainperf.judge.verdict import judge_case
from trainperf.result import CaseResult, KernelSummary, MetricValue
from trainperf.run_record import RunRecord

METRICS = with_tolerances({})
FAST, SLOW = 5.8, 3.3
"""Probe readings of the two spells measured on one H200 (ops/us)."""
STEPS = 30


def spelled(slow_steps: set[int], *, step_s: float = 0.70, slow_s: float = 0.90, runs: int = 2) -> CaseResult:
    """Runs whose steps take ``step_s`` in fast spells and ``slow_s`` in the slow ones (``slow_steps``),
    the same batches (keys) in every run, a fixed kernel time and one runner."""
    keys = [f"{k}:400" for k in range(6, 6 + STEPS)]
    steps = [slow_s if k in slow_steps else step_s for k in range(STEPS)]
    speeds = [SLOW if k in slow_steps else FAST for k in range(STEPS)]
    median = sorted(steps)[STEPS // 2]
    mean_speed = sum(speeds) / STEPS
    return CaseResult(
        case_id="sft_hf-qwen3_8b-qlora-short-b4",
        case=CaseRecord(),
        gpu_class="h200",
        outcome="ok",
        metrics={
            STEP_TIME: MetricValue(median, "s", steps * runs, [median] * runs, keys * runs),
            HOST_SPEED: MetricValue(mean_speed, "ops/us", speeds * runs, [mean_speed] * runs, keys * runs),
            KERNEL_TIME: MetricValue(
                133.0, "ms", [133.0, 133.0] * runs, [133.0] * runs, ["3:400", "4:300"] * runs
            ),
            HOST_TIME: MetricValue(median * 1000 - 133, "ms", None, [median * 1000 - 133] * runs),
        },
        fingerprint=Fingerprint(runner="vm/GPU-e57ea6fb"),
        runs=[RunRecord(clock_event_reasons=0)] * runs,
        kernels=KernelSummary({"GEMM": 43.0}, [], runs),
    )


def judged(current: CaseResult, reference: CaseResult):  # type: ignore[no-untyped-def]
    return judge_case(current, reference, METRICS, expectation="ok", timing=(True, ""), strict=False)


def step_of(verdict):  # type: ignore[no-untyped-def]
    return next(m for m in verdict.metrics if m.metric == STEP_TIME)


REFERENCE = spelled(set(range(0, 30, 5)))  # a slow spell every fifth step


def test_a_run_whose_host_spent_more_steps_slow_passes_over_its_full_speed_steps() -> None:
    """Nothing changed but the mix: 21 of 30 steps slow against 6. Over all steps the median moves
    +28.6% (its host's, not the software's); over the steps at full speed on both sides, 0.0%."""
    more_slow = spelled(set(range(0, 30, 5)) | set(range(12, 30)))
    verdict = judged(more_slow, REFERENCE)
    step = step_of(verdict)
    assert verdict.verdict is Verdict.PASS and step.gated
    assert step.ratio == 1.0
    assert (
        "over the steps at the host's full speed on both sides (18 of 60 and 48 of 60 run-steps" in step.note
    )
    assert "step over 18 of 60 steps at full host speed" in verdict.parts


def test_a_host_side_slowdown_is_caught_over_the_full_speed_steps_whatever_the_mix() -> None:
    """+50 ms of Python a step (+7.1% of a 0.70 s step) in a run whose host also spent more steps slow."""
    planted = spelled(set(range(0, 30, 5)) | set(range(20, 30)), step_s=0.75, slow_s=0.95)
    verdict = judged(planted, REFERENCE)
    assert verdict.verdict is Verdict.REGRESSED
    assert abs(step_of(verdict).ratio - 0.75 / 0.70) < 1e-9


def test_without_enough_full_speed_steps_on_both_sides_host_time_is_judged_over_all_steps() -> None:
    """Too few steps at full speed in common: no selection. The host's lower speed through the steps
    does not excuse the slower step (it is partly the case's own doing): host time is judged over all
    the steps, where 23 of 30 batches ran slow and 7 did not: beyond tolerance, not significant."""
    mostly_slow = spelled(set(range(STEPS)) - set(range(MIN_FULL_SPEED_STEPS - 1)))
    assert full_speed_steps(mostly_slow, REFERENCE, METRICS) is None
    verdict = judged(mostly_slow, REFERENCE)
    assert step_of(verdict).gated and verdict.verdict is Verdict.NOISY
    assert "host speed" in verdict.parts


def test_steps_without_probes_select_nothing() -> None:
    """A reference taken before the step probe: its host speed is no per-step series."""
    speed = REFERENCE.metrics[HOST_SPEED]
    older = dataclasses.replace(
        REFERENCE,
        metrics={**REFERENCE.metrics, HOST_SPEED: MetricValue(speed.value, "ops/us", None, speed.per_run)},
    )
    assert full_speed_steps(spelled(set()), older, METRICS) is None


def history_of(mixes: list[set[int]], levels: list[float]) -> CaseResult:
    """A runner's history pooled as ``store.history_baseline.pooled_baseline`` pools it: one run per
    mix of slow steps, each run's fast steps at its own level (its process), samples run after run."""
    runs = [spelled(slow, step_s=level, slow_s=level * 1.3, runs=1) for slow, level in zip(mixes, levels)]

    def pooled(name: str) -> MetricValue:
        values = [run.metrics[name] for run in runs]
        return MetricValue(
            sorted(v.value for v in values)[len(values) // 2],
            values[0].unit,
            [s for v in values for s in v.samples or []] or None,
            [v.value for v in values],
            [k for v in values for k in v.keys or []] or None,
        )

    return dataclasses.replace(
        runs[0], metrics={name: pooled(name) for name in runs[0].metrics}, runs=[RunRecord()] * len(runs)
    )


# Ten processes of one runner: their hosts spent 3 to 27 of 30 steps in the slow spell (whole-run
# medians 0.70-0.91 s, 30% apart), their full-speed steps within 1% of one another.
HISTORY = history_of(
    [set(range(0, 30, 10)), set(range(0, 30, 3)), set(range(2, 29)), set(range(0, 30, 2)), set(range(5, 12))]
    * 2,
    [0.700, 0.703, 0.698, 0.701, 0.704, 0.699, 0.702, 0.700, 0.697, 0.703],
)


def test_run_segments_split_a_pooled_figure_where_a_batch_comes_again() -> None:
    assert run_segments(["6:1", "7:2", "8:3", "6:1", "7:2", "6:1"]) == [(0, 3), (3, 5), (5, 6)]
    assert run_segments([]) == []


def test_against_a_runners_history_the_run_floor_is_measured_over_its_full_speed_steps() -> None:
    """The whole runs moved 30% from one another with the host's mix of spells; over their full-speed
    steps, 0.7%. Host time gates at that, not at 30%: +50 ms of Python a step (+7.1%) is a regression
    against the history, and an unchanged run with yet another mix passes."""
    whole = [v for v in HISTORY.metrics[STEP_TIME].per_run or []]
    assert max(whole) / min(whole) > 1.25
    spells = full_speed_steps(spelled(set()), HISTORY, METRICS)
    assert spells is not None
    levels = spells.reference.metrics[STEP_TIME].per_run
    # The two runs with 3 fast steps of 30 are left out of the levels (too few to say their process's).
    assert levels is not None and len(levels) == 8 and max(levels) / min(levels) < 1.011
    planted = judged(spelled(set(range(9, 30, 2)), step_s=0.75, slow_s=0.975), HISTORY)
    assert planted.verdict is Verdict.REGRESSED
    assert abs(step_of(planted).ratio - 0.75 / 0.7005) < 0.005
    clean = judged(spelled(set(range(1, 30, 4)), step_s=0.701, slow_s=0.91), HISTORY)
    assert clean.verdict is Verdict.PASS and step_of(clean).gated


def test_a_run_with_too_few_full_speed_steps_is_left_out_of_the_run_to_run_levels() -> None:
    nearly_all_slow = set(range(STEPS)) - {0, 1, 2}
    history = history_of([set(), nearly_all_slow, set()], [0.70, 0.90, 0.71])
    spells = full_speed_steps(spelled(set()), history, METRICS)
    assert spells is not None and spells.reference.metrics[STEP_TIME].per_run == [0.70, 0.71]
