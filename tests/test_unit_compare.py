"""Unit tests of trainperf.judge.compare: metric verdicts (paired and unpaired) and case verdicts."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge import stats
from trainperf.judge.compare import Verdict, compare_case, compare_metric
from trainperf.judge.metrics import METRICS, with_tolerances
from trainperf.result import CaseResult, MetricValue
from trainperf.stored_verdict import StoredMetricVerdict, StoredVerdict

STEP = METRICS["step_time_s"]
TPS = METRICS["tokens_per_s"]
ALLOC = METRICS["peak_allocated_gib"]
N_STEPS = 30


def _keys(n: int = N_STEPS) -> list[str]:
    return [f"{step}:{1000 + 37 * step}" for step in range(n)]


def _baseline_steps(seed: int = 0) -> list[float]:
    """30 step times around 1 s with +-2% jitter (deterministic)."""
    rng = random.Random(seed)
    return [1.0 + rng.uniform(-0.02, 0.02) for _ in range(N_STEPS)]


def _keyed(samples: list[float], unit: str = "s") -> MetricValue:
    return MetricValue(
        value=stats.median(samples), unit=unit, samples=list(samples), keys=_keys(len(samples))
    )


def _unkeyed(samples: list[float], unit: str = "s") -> MetricValue:
    return MetricValue(value=stats.median(samples), unit=unit, samples=list(samples))


# -- compare_metric ---------------------------------------------------------------------------


def test_new_without_baseline() -> None:
    verdict = compare_metric(STEP, MetricValue(1.0, "s"), None)
    assert verdict.verdict is Verdict.NEW
    assert verdict.baseline is None and verdict.ratio is None


def test_pass_within_tolerance() -> None:
    base = _baseline_steps()
    current = [v * 1.02 for v in base]
    verdict = compare_metric(STEP, _keyed(current), _keyed(base))
    assert verdict.verdict is Verdict.PASS
    assert verdict.ratio == pytest.approx(1.02)


def test_paired_ten_percent_slowdown_with_outliers_regresses() -> None:
    base = _baseline_steps()
    current = [v * 1.10 for v in base]
    for index in (4, 17, 25):
        current[index] *= 3.0  # host stalls in the current run
    base[9] *= 0.5  # and one oddly fast baseline step
    verdict = compare_metric(STEP, _keyed(current), _keyed(base))
    assert verdict.verdict is Verdict.REGRESSED
    assert verdict.ratio == pytest.approx(1.10, abs=0.005)
    assert verdict.p_value is not None and verdict.p_value < 0.01
    assert verdict.interval is not None and verdict.interval[0] > 1.05
    assert "paired" in verdict.note


def test_paired_few_stalls_do_not_regress() -> None:
    """3 of 30 steps stalled by +60%: the median of per-step ratios stays ~1."""
    base = _baseline_steps()
    rng = random.Random(1)
    current = [v * (1 + rng.uniform(-0.01, 0.01)) for v in base]
    for index in (3, 11, 29):
        current[index] *= 1.6
    verdict = compare_metric(STEP, _keyed(current), _keyed(base))
    assert verdict.verdict is Verdict.PASS
    assert verdict.ratio == pytest.approx(1.0, abs=0.02)
    assert verdict.note == "paired over 30 steps"


def test_paired_improvement() -> None:
    base = _baseline_steps()
    verdict = compare_metric(STEP, _keyed([v * 0.90 for v in base]), _keyed(base))
    assert verdict.verdict is Verdict.IMPROVED
    assert verdict.ratio == pytest.approx(0.90)


def test_unpaired_overlapping_samples_beyond_tolerance_are_noisy() -> None:
    base = [0.70, 0.85, 1.00, 1.15, 1.30, 0.92, 1.07]
    current = [v * 1.08 for v in base]  # +8% > 5% tolerance, but the spreads overlap widely
    verdict = compare_metric(STEP, _unkeyed(current), _unkeyed(base))
    assert verdict.verdict is Verdict.NOISY
    assert verdict.p_value is not None and verdict.p_value >= 0.01


def test_unpaired_clear_shift_regresses_and_improves() -> None:
    base = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01]
    slower = compare_metric(STEP, _unkeyed([v * 1.2 for v in base]), _unkeyed(base))
    faster = compare_metric(STEP, _unkeyed([v * 0.8 for v in base]), _unkeyed(base))
    assert slower.verdict is Verdict.REGRESSED
    assert faster.verdict is Verdict.IMPROVED


def test_too_few_pairs_falls_back_to_unpaired() -> None:
    """Fewer than MIN_PAIRS shared keys: the pooled values are compared, not per-step ratios."""
    base = _baseline_steps()[:6]
    verdict = compare_metric(STEP, _keyed([v * 1.2 for v in base]), _keyed(base))
    assert verdict.verdict is Verdict.REGRESSED
    assert "paired" not in verdict.note


def test_without_samples_size_alone_decides() -> None:
    assert compare_metric(STEP, MetricValue(1.2, "s"), MetricValue(1.0, "s")).verdict is Verdict.REGRESSED
    assert compare_metric(STEP, MetricValue(0.8, "s"), MetricValue(1.0, "s")).verdict is Verdict.IMPROVED
    assert compare_metric(STEP, MetricValue(1.02, "s"), MetricValue(1.0, "s")).verdict is Verdict.PASS


@pytest.mark.parametrize("keyed", [True, False])
def test_higher_is_better_direction(keyed: bool) -> None:
    base = [1000.0 / v for v in _baseline_steps()]
    make = _keyed if keyed else _unkeyed
    lower = compare_metric(TPS, make([v * 0.8 for v in base], "tok/s"), make(base, "tok/s"))
    higher = compare_metric(TPS, make([v * 1.2 for v in base], "tok/s"), make(base, "tok/s"))
    assert lower.verdict is Verdict.REGRESSED
    assert higher.verdict is Verdict.IMPROVED


def test_abs_tolerance_suppresses_tiny_memory_change() -> None:
    # +20% relative, but 0.2 GiB is below the metric's 0.25 GiB floor.
    assert compare_metric(ALLOC, MetricValue(1.2, "GiB"), MetricValue(1.0, "GiB")).verdict is Verdict.PASS
    assert (
        compare_metric(ALLOC, MetricValue(1.5, "GiB"), MetricValue(1.0, "GiB")).verdict is Verdict.REGRESSED
    )


# -- compare_case --------------------------------------------------------------------------


CONFIG = {"model_class": "Qwen3ForCausalLM", "gradient_checkpointing": True, "precision": "bf16"}


def _result(outcome: str = "ok", metrics: dict[str, MetricValue] | None = None, **kw: Any) -> CaseResult:
    return CaseResult(
        case_id="sft_hf-qwen3_tiny-lora-short-b4",
        case=CaseRecord(),
        gpu_class="cpu",
        outcome=outcome,
        message=kw.pop("message", ""),
        metrics=metrics or {},
        effective_config=EffectiveConfig.from_dict(kw.pop("effective_config", CONFIG)),
        fingerprint=Fingerprint.from_dict(kw.pop("fingerprint", {"torch": "2.13.0"})),
        **kw,
    )


def _ok_metrics(step_scale: float = 1.0, alloc: float = 10.0) -> dict[str, MetricValue]:
    base = _baseline_steps()
    return {
        "step_time_s": _keyed([v * step_scale for v in base]),
        "peak_allocated_gib": MetricValue(alloc, "GiB"),
    }


def _judge(result: CaseResult, baseline: CaseResult | None, *, expectation: str = "ok", **kw: Any) -> Any:
    kw.setdefault("timing_comparable", True)
    return compare_case(result, baseline, with_tolerances({}), expectation=expectation, **kw)


def test_case_expected_oom_passes() -> None:
    verdict = _judge(_result("oom", message="CUDA out of memory"), None, expectation="oom")
    assert verdict.verdict is Verdict.EXPECTED_OOM
    assert verdict.fails is False


def test_case_oom_where_baseline_was_ok_fails() -> None:
    verdict = _judge(_result("oom", message="CUDA out of memory"), _result(metrics=_ok_metrics()))
    assert verdict.verdict is Verdict.OUTCOME_CHANGED
    assert verdict.fails is True
    assert "ok before" in verdict.reason


@pytest.mark.parametrize("outcome", ["crash", "timeout"])
def test_case_crash_or_timeout_fails(outcome: str) -> None:
    verdict = _judge(_result(outcome, message="boom"), _result(metrics=_ok_metrics()))
    assert verdict.verdict is Verdict.OUTCOME_CHANGED
    assert verdict.fails is True
    assert "boom" in verdict.reason


def test_case_fits_where_oom_expected_is_flagged_not_failed() -> None:
    verdict = _judge(_result(metrics=_ok_metrics()), None, expectation="oom")
    assert verdict.verdict is Verdict.OUTCOME_CHANGED
    assert verdict.fails is False


def test_case_config_change_fails_and_names_key() -> None:
    current = _result(metrics=_ok_metrics(), effective_config={**CONFIG, "gradient_checkpointing": False})
    verdict = _judge(current, _result(metrics=_ok_metrics()))
    assert verdict.verdict is Verdict.CONFIG_CHANGED
    assert verdict.fails is True
    assert "gradient_checkpointing" in verdict.reason
    assert verdict.config_changes == [("gradient_checkpointing", True, False)]


def test_case_ungated_config_key_ignored() -> None:
    current = _result(metrics=_ok_metrics(), effective_config={**CONFIG, "some_note": "x"})
    assert _judge(current, _result(metrics=_ok_metrics())).verdict is Verdict.PASS


def test_case_pass_and_regressed() -> None:
    baseline = _result(metrics=_ok_metrics())
    same = _judge(_result(metrics=_ok_metrics()), baseline)
    slower = _judge(_result(metrics=_ok_metrics(step_scale=1.2)), baseline)
    assert (same.verdict, same.fails) == (Verdict.PASS, False)
    assert (slower.verdict, slower.fails) == (Verdict.REGRESSED, True)
    assert "step_time_s +20.0%" in slower.reason


@pytest.mark.parametrize("strict", [False, True])
def test_case_strict_makes_noisy_fail(strict: bool) -> None:
    base = [0.70, 0.85, 1.00, 1.15, 1.30, 0.92, 1.07]
    baseline = _result(metrics={"step_time_s": _unkeyed(base)})
    current = _result(metrics={"step_time_s": _unkeyed([v * 1.08 for v in base])})
    verdict = _judge(current, baseline, strict=strict)
    assert verdict.verdict is Verdict.NOISY
    assert verdict.fails is strict


@pytest.mark.parametrize("strict", [False, True])
def test_case_strict_makes_new_fail(strict: bool) -> None:
    verdict = _judge(_result(metrics=_ok_metrics()), None, strict=strict)
    assert verdict.verdict is Verdict.NEW
    assert verdict.fails is strict
    assert {m.verdict for m in verdict.metrics} == {Verdict.NEW}


def test_case_timing_not_gated_when_not_comparable() -> None:
    baseline = _result(metrics=_ok_metrics())
    verdict = _judge(_result(metrics=_ok_metrics(step_scale=2.0)), baseline, timing_comparable=False)
    assert verdict.verdict is Verdict.PASS
    assert verdict.fails is False
    step = next(m for m in verdict.metrics if m.metric == "step_time_s")
    assert step.verdict is Verdict.REGRESSED and step.gated is False


def test_case_memory_still_gated_when_timing_not_comparable() -> None:
    baseline = _result(metrics=_ok_metrics())
    verdict = _judge(_result(metrics=_ok_metrics(alloc=14.0)), baseline, timing_comparable=False)
    assert verdict.verdict is Verdict.REGRESSED
    assert verdict.fails is True
    assert "peak_allocated_gib" in verdict.reason


def test_case_informational_metric_never_fails() -> None:
    """power_mean_w is registered with gated=False: a large change is reported, not failed."""
    baseline = _result(metrics={**_ok_metrics(), "power_mean_w": MetricValue(300.0, "W")})
    current = _result(metrics={**_ok_metrics(), "power_mean_w": MetricValue(450.0, "W")})
    verdict = _judge(current, baseline)
    assert verdict.verdict is Verdict.PASS
    power = next(m for m in verdict.metrics if m.metric == "power_mean_w")
    assert power.verdict is Verdict.REGRESSED and power.gated is False


def test_case_verdict_is_stored_as_plain_values_that_round_trip_through_json() -> None:
    verdict = _judge(_result(metrics=_ok_metrics(step_scale=1.2)), _result(metrics=_ok_metrics()))
    stored = verdict.stored()
    data = json.loads(json.dumps(stored.to_dict()))
    assert data["verdict"] == "regressed"
    assert {m["metric"]: m["verdict"] for m in data["metrics"]} == {
        "step_time_s": "regressed",
        "peak_allocated_gib": "pass",
    }
    assert StoredVerdict.from_dict(data) == stored


def test_a_stored_verdict_reads_old_and_empty_dicts() -> None:
    assert StoredVerdict.from_dict({}) == StoredVerdict() and StoredVerdict().to_dict() == {}
    assert not StoredVerdict.from_dict(None).judged
    unjudged = StoredVerdict.from_dict({"verdict": None, "reason": "fidelity child plant0.05 (r1)"})
    assert not unjudged.judged and unjudged.to_dict()["verdict"] is None
    old = StoredVerdict.from_dict(
        {"verdict": "pass", "fails": False, "metrics": [{"metric": "step_time_s", "interval": [0.9, None]}]}
    )
    assert old.judged and old.metrics == [StoredMetricVerdict("step_time_s", "")]
    assert set(old.to_dict()) == {
        "verdict", "fails", "reason", "metrics", "config_changes", "environment_changes", "parts", "kernels",
        "confirm",
    }  # fmt: skip


# -- steps that repeat across the baseline's runs ------------------------------------------------


def _pooled(runs: list[list[float]]) -> MetricValue:
    """Several fresh runs of the same 16 steps, pooled the way the runner pools them."""
    samples = [v for run in runs for v in run]
    keys = [k for _ in runs for k in _keys(len(runs[0]))]
    return MetricValue(stats.median(samples), "s", samples, keys=keys)


def _h100_like_run(seed: int, slowdown: float = 0.0) -> list[float]:
    """Six GPU-bound steps that repeat within 1%, ten host-bound or allocator steps that move
    by up to 40% from run to run (the shape of Qwen3-8B LoRA on an H100)."""
    rng = random.Random(seed)
    steady = [1.44 * (1 + rng.uniform(-0.005, 0.005)) for _ in range(6)]
    noisy = [0.9 * (1 + rng.uniform(-0.4, 0.4)) for _ in range(10)]
    return [v * (1 + slowdown) for v in steady + noisy]


def test_uniform_slowdown_is_judged_on_the_steps_that_repeat() -> None:
    baseline = _pooled([_h100_like_run(seed) for seed in range(3)])
    verdict = compare_metric(STEP, _pooled([_h100_like_run(10, slowdown=0.05)]), baseline)
    assert verdict.verdict is Verdict.REGRESSED
    assert verdict.ratio == pytest.approx(1.05, abs=0.01)
    assert verdict.note == "paired over 6 steps that repeat within the baseline's runs"


def test_same_work_again_passes_on_the_steps_that_repeat() -> None:
    baseline = _pooled([_h100_like_run(seed) for seed in range(3)])
    for seed in range(20, 30):
        assert compare_metric(STEP, _pooled([_h100_like_run(seed)]), baseline).verdict is Verdict.PASS


def test_single_run_baseline_pairs_every_step() -> None:
    baseline = _pooled([_h100_like_run(0)])
    verdict = compare_metric(STEP, _pooled([_h100_like_run(1)]), baseline)
    assert verdict.note == "paired over 16 steps"


def test_timing_on_another_cpu_host_is_shown_with_both_hosts_not_gated() -> None:
    """Two hosts that both report "AMD EPYC" but differ in family and ISA: the timing verdict is
    shown, the case passes, and the reason names what was compared with what."""
    from trainperf.judge.compare import timing_comparable

    base_host = {
        "cpu_model": "AMD EPYC",
        "cpu_id": "AuthenticAMD family 25 model 1 stepping 1",
        "cpu_isa": "avx2 fma",
    }
    this_host = {
        "cpu_model": "AMD EPYC",
        "cpu_id": "AuthenticAMD family 23 model 1 stepping 2",
        "cpu_isa": "avx2 fma",
    }
    baseline = _result(metrics=_ok_metrics(), fingerprint=base_host)
    current = _result(metrics=_ok_metrics(step_scale=2.3), fingerprint=this_host)
    comparable, why = timing_comparable(baseline, current, ("cpu_model", "cpu_id", "cpu_isa", "cpu_count"))
    assert not comparable
    assert "family 25" in why and "family 23" in why and "cpu_isa" not in why
    verdict = _judge(current, baseline, timing_comparable=comparable, timing_note=why)
    assert verdict.verdict is Verdict.PASS and not verdict.fails
    assert "not gated" in verdict.reason and "family 25" in verdict.reason
    step = next(m for m in verdict.metrics if m.metric == "step_time_s")
    assert step.verdict is Verdict.REGRESSED and not step.gated and "another host" in step.note


def test_timing_on_the_same_cpu_host_still_gates() -> None:
    from trainperf.judge.compare import timing_comparable

    host = {
        "cpu_model": "AMD EPYC",
        "cpu_id": "AuthenticAMD family 23 model 1 stepping 2",
        "cpu_isa": "avx2 fma",
    }
    baseline = _result(metrics=_ok_metrics(), fingerprint=host)
    current = _result(metrics=_ok_metrics(step_scale=2.3), fingerprint=dict(host))
    comparable, why = timing_comparable(baseline, current, ("cpu_model", "cpu_id", "cpu_isa"))
    assert comparable and why == ""
    assert _judge(current, baseline, timing_comparable=comparable).verdict is Verdict.REGRESSED


def _runs(*levels: float, seed: int = 0) -> MetricValue:
    """One run a level: 30 keyed steps each at ``level`` s with +-1% jitter, concatenated in run order
    (as ``merge_metric`` pools rounds)."""
    rng = random.Random(seed)
    samples = [level * (1 + rng.uniform(-0.01, 0.01)) for level in levels for _ in range(N_STEPS)]
    return MetricValue(
        value=stats.median(samples),
        unit="s",
        samples=samples,
        per_run=list(levels),
        keys=_keys() * len(levels),
    )


def test_runs_that_disagree_make_a_shift_noisy_not_a_regression() -> None:
    """Two runs a side, as a two-round A/B: B's runs 18% and 17% slower than A's, but A's own two
    runs differ by 20%. Every step agrees within its run, so resampling steps alone called it a
    regression at p < 0.01; resampling the runs too sees the runs' spread and calls it noisy."""
    current, baseline = _runs(0.634, 0.765, seed=1), _runs(0.536, 0.652, seed=2)
    steps_only = stats.paired_ratios(
        {k: stats.median(v) for k, v in _groups(current).items()},
        {k: stats.median(v) for k, v in _groups(baseline).items()},
    )
    assert stats.bootstrap_median_interval(steps_only)[0] > 1.1  # what a steps-only interval said
    verdict = compare_metric(STEP, current, baseline)
    assert verdict.verdict is Verdict.NOISY and verdict.interval is not None
    assert verdict.interval[0] < 1.0 < verdict.interval[1]


def test_runs_that_agree_keep_a_regression_and_a_narrow_interval() -> None:
    current, baseline = _runs(1.10, 1.11, seed=3), _runs(1.00, 1.005, seed=4)
    verdict = compare_metric(STEP, current, baseline)
    assert verdict.verdict is Verdict.REGRESSED and verdict.interval is not None
    assert 1.05 < verdict.interval[0] and verdict.interval[1] < 1.15
    assert "runs resampled (2 vs 2)" in verdict.note


def _groups(value: MetricValue) -> dict[str, list[float]]:
    assert value.keys is not None and value.samples is not None
    groups: dict[str, list[float]] = {}
    for key, sample in zip(value.keys, value.samples):
        groups.setdefault(key, []).append(sample)
    return groups
