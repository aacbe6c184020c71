"""Planned step counts (--perf-plan-steps): the gate's power simulated from a baseline's own
run-to-run noise, the memory-peak and data rules, and the cost projection. No training."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.fleet.cost import case_cost
from trainperf.judge import stats
from trainperf.judge.metrics import METRICS, with_tolerances
from trainperf.judge.step_power import detection_power, median_p_greater, power_at
from trainperf.launch.launcher import child_spec
from trainperf.measure.measurement import memory_peak_step
from trainperf.measure.nvml import Sample
from trainperf.result import CaseResult, MetricValue
from trainperf.run.step_count import StepCount, plan_steps, step_count
from trainperf.run_record import RunRecord
from trainperf.workloads.protocol import ChildSpec

CASE = Case(
    family="sft_hf", model="qwen3_8b", method="lora", profile="long", batch_size=4, gpu_classes=("h100",)
)
RL_CASE = Case(
    family="rl_trl", model="qwen2_5_3b", method="lora", profile="fixed", batch_size=16, gpu_classes=("h100",)
)


def baseline(
    *,
    runs: int = 3,
    steps: int = 40,
    noise: float = 0.005,
    warmup: int = 1,
    peak_step: int | None = 3,
    seed: int = 0,
) -> CaseResult:
    """A pooled baseline whose step k took 1 s plus a per-run, per-step noise of ``noise``."""
    rng = random.Random(seed)
    keys = [f"{step}:8192" for step in range(warmup + 1, steps + 1)]
    samples: list[float] = []
    all_keys: list[str] = []
    per_step_base = {key: 1.0 + 0.2 * rng.random() for key in keys}
    for _ in range(runs):
        samples += [per_step_base[key] * (1 + rng.gauss(0, noise)) for key in keys]
        all_keys += keys
    run_record = RunRecord(
        steps_requested=steps, warmup_steps=warmup, wall_s=80.0, memory_peak_step=peak_step
    )
    return CaseResult(
        case_id=CASE.id,
        case=CaseRecord.of(CASE),
        gpu_class="h100",
        outcome="ok",
        metrics={
            "step_time_s": MetricValue(stats.median(samples), "s", samples, [1.0] * runs, all_keys),
            "peak_allocated_gib": MetricValue(20.5, "GiB", None, [20.5] * runs),
        },
        runs=[dataclasses.replace(run_record) for _ in range(runs)],
    )


def test_closed_form_p_matches_the_gates_bootstrap_for_odd_counts() -> None:
    rng = random.Random(7)
    for count in (5, 9, 15, 21):
        for shift in (0.0, 0.01, 0.03):
            ratios = [1 + shift + rng.gauss(0, 0.02) for _ in range(count)]
            assert median_p_greater(ratios) == pytest.approx(
                stats.bootstrap_median_p_greater(ratios), abs=0.03
            )


def test_closed_form_p_errs_towards_no_detection_for_even_counts() -> None:
    rng = random.Random(3)
    for _ in range(20):
        ratios = [1 + 0.01 + rng.gauss(0, 0.02) for _ in range(10)]
        assert median_p_greater(ratios) >= stats.bootstrap_median_p_greater(ratios) - 0.01


def test_power_grows_with_steps_and_falls_with_noise() -> None:
    metric = METRICS["step_time_s"]
    tight = [1 + random.Random(k).gauss(0, 0.005) for k in range(120)]
    loose = [1 + random.Random(k).gauss(0, 0.3) for k in range(120)]
    assert detection_power(metric, tight, 8, 0.05) == 1.0
    assert detection_power(metric, tight, 8, 0.0) == 0.0
    assert detection_power(metric, loose, 8, 0.05) < 0.5
    assert detection_power(metric, loose, 30, 0.05) > detection_power(metric, loose, 8, 0.05)


def test_a_quiet_baseline_is_planned_short_past_its_memory_peak_and_warm_up() -> None:
    planned = plan_steps(CASE, baseline(), dict(METRICS), 40, 80.0)
    assert 6 <= planned.steps < 20
    assert planned.data_steps == 40
    assert planned.note is not None and planned.note.startswith(f"steps planned: {planned.steps} of 40")
    power = power_at(METRICS["step_time_s"], baseline().metrics["step_time_s"], planned.steps)
    assert power is not None and power.power == 1.0 and power.compared >= 5


def test_a_shorter_length_must_not_raise_more_false_alarms() -> None:
    from trainperf.judge.step_power import MetricPower
    from trainperf.run.step_count import _as_good

    full = MetricPower("step_time_s", 0.05, 39, power=1.0, false_alarm=0.01)
    assert _as_good(MetricPower("step_time_s", 0.05, 11, power=0.99, false_alarm=0.02), full)
    assert not _as_good(MetricPower("step_time_s", 0.05, 11, power=1.0, false_alarm=0.05), full)
    assert not _as_good(MetricPower("step_time_s", 0.05, 11, power=0.95, false_alarm=0.0), full)
    assert not _as_good(None, full)
    assert MetricPower("tokens_per_s", 0.17, 11, 1.0, 0.0, rate=True).change == "-17%"


def test_the_plan_runs_up_to_the_step_where_memory_peaked() -> None:
    assert plan_steps(CASE, baseline(peak_step=33), dict(METRICS), 40, 80.0).steps >= 33


def test_a_case_near_its_memory_limit_keeps_its_full_length() -> None:
    # 1 GiB more (within the 5% gate) ran Qwen3-8B full fine-tuning out of memory at step 19 of 40.
    near = baseline()
    near.metrics["device_mem_peak_gib"] = MetricValue(78.3, "GiB", None, [78.3] * 3)
    planned = plan_steps(CASE, near, dict(METRICS), 40, 80.0)
    assert planned.steps == 40 and planned.note is not None
    assert "device peak 78.3 GiB and the 5% the memory gate lets pass do not fit in 80 GiB" in planned.note
    assert plan_steps(CASE, near, dict(METRICS), 40, 141.0).steps < 40  # the same case on an H200
    assert plan_steps(CASE, near, dict(METRICS), 40, None).steps < 40


def test_a_noisy_baseline_keeps_its_full_length() -> None:
    planned = plan_steps(CASE, baseline(noise=0.25), dict(METRICS), 40, 80.0)
    assert planned.steps == 40 and planned.data_steps is None
    assert (
        planned.note is not None
        and "too noisy: at full length the gate catches step_time_s +5% in" in planned.note
    )


UNPLANNABLE = {
    "legacy": (CASE, lambda: baseline(peak_step=None), "does not record where its memory peaked: re-take it"),
    "one run": (CASE, lambda: baseline(runs=1), "the baseline has one run"),
    "rl": (RL_CASE, baseline, "rl_trl data is not the same batches at another length"),
    "none": (CASE, lambda: None, "no baseline"),
    "history": (
        CASE,
        lambda: CaseResult(CASE.id, CaseRecord(), "h100", "ok"),
        "plans need the class's file",
    ),
}


@pytest.mark.parametrize("kind", sorted(UNPLANNABLE))
def test_what_cannot_be_planned_runs_full_length_and_says_why(kind: str) -> None:
    # Parametrized by name: a Case parameter would be taken for a catalogue case of another class.
    case, make, why = UNPLANNABLE[kind]
    planned = plan_steps(case, make(), dict(METRICS), 40, 80.0)
    assert planned.steps == 40 and planned.data_steps is None
    assert planned.note is not None and why in planned.note


class _Settings:
    def __init__(self, steps: int | None = None, plan: bool = True, update: bool = False) -> None:
        self.steps, self.plan_steps, self.update_baselines = steps, plan, update


def test_a_fixed_count_wins_and_a_baseline_write_runs_full_length() -> None:
    metrics = dict(METRICS)
    assert step_count(CASE, _Settings(steps=12), baseline(), metrics, 80.0) == StepCount(12)  # type: ignore[arg-type]
    assert step_count(CASE.replace(steps=9), _Settings(), baseline(), metrics, 80.0) == StepCount(9)  # type: ignore[arg-type]
    assert step_count(CASE, _Settings(update=True), baseline(), metrics, 80.0) == StepCount(40)  # type: ignore[arg-type]
    assert step_count(CASE, _Settings(plan=False), baseline(), metrics, 80.0) == StepCount(40)  # type: ignore[arg-type]
    assert step_count(CASE, _Settings(), None, metrics, None).steps == 16  # type: ignore[arg-type]
    assert step_count(CASE, _Settings(), baseline(), metrics, 80.0).steps < 40  # type: ignore[arg-type]


def test_perf_steps_given_wins_over_the_cases_own_count_and_says_so() -> None:
    # A user shortening a 10-step verl case to read it in minutes gets the steps asked for.
    fixed = CASE.replace(steps=10)
    shortened = step_count(fixed, _Settings(steps=3), baseline(), dict(METRICS), 80.0)  # type: ignore[arg-type]
    assert shortened.steps == 3
    assert shortened.note == "steps: 3 (--perf-steps), the case's own is 10"
    same = step_count(fixed, _Settings(steps=10), baseline(), dict(METRICS), 80.0)  # type: ignore[arg-type]
    assert same == StepCount(10)


def test_widened_cpu_tolerances_need_no_more_steps_than_the_gate_pairs() -> None:
    # Steps that move 5% between runs are not "stable", so the gate needs 8 pairs: warm-up 1 + 8.
    planned = plan_steps(CASE, baseline(noise=0.05, steps=16), with_tolerances({}, 30.0), 16, None)
    assert planned.steps == 9
    quiet = plan_steps(CASE, baseline(noise=0.002, steps=16), with_tolerances({}, 30.0), 16, None)
    assert quiet.steps == 6  # warm-up 1 + the 5 stable pairs the gate needs


def _edge(step: int, t: float, allocated: int, reserved: int) -> dict[str, float]:
    return {"step": step, "t_end": t, "max_allocated_b": allocated, "reserved_b": reserved}


def _sample(t: float, used: int) -> Sample:
    return Sample(
        t=t,
        mem_used_b=used,
        power_w=None,
        energy_mj=None,
        sm_clock_mhz=None,
        temperature_c=None,
        throttle_reasons=None,
    )


def test_memory_peak_step_is_the_last_of_the_allocator_and_device_peaks() -> None:
    steps = [_edge(1, 10.0, 5, 8), _edge(2, 11.0, 9, 8), _edge(3, 12.0, 9, 12), _edge(4, 13.0, 9, 12)]
    memory = {"peak_allocated_b": 9, "peak_reserved_b": 12}
    assert memory_peak_step(steps, memory, []) == 3
    device = [_sample(9.5, 100), _sample(12.5, 300), _sample(12.9, 300)]
    assert memory_peak_step(steps, memory, device) == 4
    assert memory_peak_step(steps, memory, [_sample(14.0, 500)]) is None  # after the last step: unknown
    assert memory_peak_step(steps, {"peak_allocated_b": 10}, []) is None  # never reached at an edge
    assert memory_peak_step(steps, {}, []) == 0


def test_the_child_is_told_the_full_runs_data_only_when_it_runs_less() -> None:
    spec = ChildSpec(case=CASE.to_dict(), steps=12, out_dir="x", data_steps=40)
    assert ChildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).data_steps == 40
    assert (
        spec.dataset_steps == 40 and ChildSpec(case=CASE.to_dict(), steps=12, out_dir="x").dataset_steps == 12
    )
    assert "data_steps" not in ChildSpec(case=CASE.to_dict(), steps=12, out_dir="x").to_dict()

    class _Ctx:
        on_gpu = False
        emulated = None

        class settings:
            plant_slowdown = 0.0
            plant = None
            kernel_clock = "auto"

    assert child_spec(_Ctx(), CASE, 12, Path("x"), data_steps=40).data_steps == 40  # type: ignore[arg-type]
    assert child_spec(_Ctx(), CASE, 12, Path("x"), data_steps=12).data_steps is None  # type: ignore[arg-type]


def test_cost_projection_leaves_out_the_planned_away_steps_at_the_baselines_step_time() -> None:
    result = baseline()
    step = result.metrics["step_time_s"].value
    assert case_cost(result, one_run=True).wall_s == 80.0
    assert case_cost(result, one_run=True, planned_steps=12).wall_s == pytest.approx(
        80.0 - 28 * step, abs=0.01
    )
    assert case_cost(result, one_run=True, planned_steps=40).wall_s == 80.0


def test_cost_cli_projects_a_baselines_folder_and_refuses_a_run_folder(tmp_path: Path) -> None:
    folder = tmp_path / "baselines" / "h100"
    folder.mkdir(parents=True)
    (folder / f"{CASE.id}.json").write_text(json.dumps(baseline().to_dict()))
    cli = [sys.executable, "-m", "trainperf.cli", "cost"]
    planned = subprocess.run([*cli, str(folder), "--plan-steps"], capture_output=True, text=True, check=False)
    assert planned.returncode == 0, planned.stderr
    assert f"{CASE.id}: steps planned:" in planned.stdout
    full = subprocess.run([*cli, str(folder), "--json"], capture_output=True, text=True, check=False)
    shorter = subprocess.run(
        [*cli, str(folder), "--json", "--plan-steps"], capture_output=True, text=True, check=False
    )
    assert json.loads(shorter.stdout)["gpu_minutes"] < json.loads(full.stdout)["gpu_minutes"]
    assert json.loads(shorter.stdout)["cases"][0]["planned_steps"] < 40
    run_folder = tmp_path / "reports" / "run"
    (run_folder / "results").mkdir(parents=True)
    (run_folder / "run.json").write_text(json.dumps({"sessions": []}))
    (run_folder / "results" / f"{CASE.id}.json").write_text(json.dumps(baseline().to_dict()))
    refused = subprocess.run(
        [*cli, str(run_folder), "--plan-steps"], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--plan-steps projects a baselines folder" in refused.stderr
