"""Verdicts: a result against its baseline, metric by metric and as a whole (no I/O).

Metric verdicts: pass, regressed, improved, noisy, new. A regression needs a change beyond
the metric's tolerance *and* statistical support at ``ALPHA``: for steps paired with the
baseline's same batches, a one-sided bootstrap test of the median per-step ratio (over the
steps that repeat across the baseline's runs, where it has several); otherwise a one-sided
Mann-Whitney test on the samples. A change beyond tolerance without that support is noisy.

Case verdicts, most severe first: outcome-changed (fit before, not now; or a crash),
config-changed (the effective configuration differs), regressed, noisy, improved, new, pass.
A run that shared its GPU or was throttled from outside is contaminated (``judge.contamination``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from trainperf.case import Outcome
from trainperf.judge import stats
from trainperf.judge.fingerprint import environment_changes
from trainperf.judge.metrics import Direction, Metric, resolve_metric
from trainperf.result import CaseResult, MetricValue

ALPHA = 0.01
MIN_SAMPLES_FOR_TEST = 5
MIN_PAIRS = 8
# A step "repeats" when its times across the baseline's fresh runs (3 by default) lie within 5%.
MIN_RUNS_FOR_STABILITY = 3
STABLE_STEP_RANGE = 0.05
MIN_STABLE_PAIRS = 5

# Effective-configuration keys whose change means "not the same work any more".
GATED_CONFIG_KEYS = (
    "model_class",
    "total_params",
    "trainable_params",
    "trainable_dtypes",
    "quantized_modules",
    "lora_layers",
    "adapter_targets",
    "attn_implementation",
    "gradient_checkpointing",
    "loaded_in_4bit",
    "precision",
    # What unsloth decides on its own (sft_unsloth): attention kernel, activation offload, and
    # which kind of modules got adapters (gpt-oss: attention only, or the experts too).
    "attention_backend",
    "gradient_offload",
    "adapter_scope",
)


class Verdict(str, Enum):
    PASS = "pass"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    NOISY = "noisy"
    NEW = "new"
    OUTCOME_CHANGED = "outcome-changed"
    CONFIG_CHANGED = "config-changed"
    EXPECTED_OOM = "expected-oom"
    NOT_COMPARED = "not-compared"
    CONTAMINATED = "contaminated"


@dataclass(slots=True)
class MetricVerdict:
    metric: str
    verdict: Verdict
    current: float | None
    baseline: float | None
    ratio: float | None
    interval: tuple[float, float] | None = None
    p_value: float | None = None
    gated: bool = True
    note: str = ""


@dataclass(slots=True)
class CaseVerdict:
    verdict: Verdict
    fails: bool
    reason: str
    metrics: list[MetricVerdict] = field(default_factory=list)
    config_changes: list[tuple[str, Any, Any]] = field(default_factory=list)
    environment_changes: list[tuple[str, Any, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        for metric in data["metrics"]:
            metric["verdict"] = metric["verdict"].value
        return data


def _groups(value: MetricValue) -> dict[str, list[float]] | None:
    """Samples grouped by their work key (one per fresh run), None when not keyed."""
    if not value.keys or not value.samples or len(value.keys) != len(value.samples):
        return None
    groups: dict[str, list[float]] = {}
    for key, sample in zip(value.keys, value.samples):
        groups.setdefault(key, []).append(sample)
    return groups


def paired_keys(
    current_groups: dict[str, list[float]], baseline_groups: dict[str, list[float]]
) -> tuple[list[str], bool]:
    """The steps to compare pair by pair, and whether they are the baseline's stable ones.

    Where the baseline was pooled from several fresh runs, it shows which steps repeat: on an
    H100 the GPU-bound steps of Qwen3-8B LoRA repeated within 2% while host-bound short batches
    and steps that met a new shape (allocator growth) moved by 20-40% from run to run. Judging
    only the steps that repeat keeps a uniform slowdown visible instead of drowned in that noise.
    """
    shared = sorted(current_groups.keys() & baseline_groups.keys())
    stable = [
        key
        for key in shared
        if len(baseline_groups[key]) >= MIN_RUNS_FOR_STABILITY
        and stats.relative_range(baseline_groups[key]) <= STABLE_STEP_RANGE
    ]
    if len(stable) >= MIN_STABLE_PAIRS:
        return stable, True
    return (shared, False) if len(shared) >= MIN_PAIRS else ([], False)


def _judge(
    verdict: MetricVerdict, metric: Metric, relative_worse: float, p_worse: float, p_better: float
) -> None:
    if relative_worse > 0:
        verdict.p_value = p_worse
        verdict.verdict = Verdict.REGRESSED if p_worse < ALPHA else Verdict.NOISY
    else:
        verdict.p_value = p_better
        verdict.verdict = Verdict.IMPROVED if p_better < ALPHA else Verdict.NOISY
    if verdict.verdict is Verdict.NOISY:
        verdict.note = f"beyond tolerance but not significant (p={verdict.p_value:.3f})"


def compare_metric(metric: Metric, current: MetricValue, baseline: MetricValue | None) -> MetricVerdict:
    """Judge one metric. Keyed samples (same batches both sides) are compared step by step:
    the change is the median of per-step ratios and its support a one-sided bootstrap test of
    that median, so host stalls on a few steps move neither. Otherwise: the values' ratio and a Mann-Whitney
    test on samples."""
    if baseline is None:
        return MetricVerdict(metric.name, Verdict.NEW, current.value, None, None, gated=metric.gated)
    base, cur = baseline.value, current.value
    verdict = MetricVerdict(
        metric.name, Verdict.PASS, cur, base, cur / base if base else None, gated=metric.gated
    )
    lower_better = metric.direction is Direction.LOWER
    if abs(cur - base) <= metric.abs_tolerance:
        return verdict
    current_groups, baseline_groups = _groups(current), _groups(baseline)
    keys, stable = (
        paired_keys(current_groups, baseline_groups) if current_groups and baseline_groups else ([], False)
    )
    if keys:
        assert current_groups is not None and baseline_groups is not None
        ratios = stats.paired_ratios(
            {k: stats.median(current_groups[k]) for k in keys},
            {k: stats.median(baseline_groups[k]) for k in keys},
        )
        ratio = stats.median(ratios)
        verdict.ratio, verdict.interval = ratio, stats.bootstrap_median_interval(ratios)
        verdict.note = f"paired over {len(ratios)} steps" + (
            " that repeat within the baseline's runs" if stable else ""
        )
        relative_worse = (ratio - 1) if lower_better else (1 - ratio)
        if abs(relative_worse) <= metric.tolerance:
            return verdict
        p_up = stats.bootstrap_median_p_greater(ratios)
        p_down = stats.bootstrap_median_p_greater([1 / r for r in ratios if r > 0])
        _judge(
            verdict,
            metric,
            relative_worse,
            p_up if lower_better else p_down,
            p_down if lower_better else p_up,
        )
        return verdict
    relative_worse = ((cur - base) if lower_better else (base - cur)) / abs(base) if base else 0.0
    have_samples = (
        current.samples is not None
        and baseline.samples is not None
        and min(len(current.samples), len(baseline.samples)) >= MIN_SAMPLES_FOR_TEST
    )
    if have_samples:
        assert current.samples is not None and baseline.samples is not None
        verdict.interval = stats.bootstrap_ratio_interval(current.samples, baseline.samples)
    if abs(relative_worse) <= metric.tolerance:
        return verdict
    if not have_samples:
        verdict.verdict = Verdict.REGRESSED if relative_worse > 0 else Verdict.IMPROVED
        return verdict
    assert current.samples is not None and baseline.samples is not None
    cur_larger = stats.mann_whitney_greater(current.samples, baseline.samples)
    cur_smaller = stats.mann_whitney_greater(baseline.samples, current.samples)
    p_worse, p_better = (cur_larger, cur_smaller) if lower_better else (cur_smaller, cur_larger)
    _judge(verdict, metric, relative_worse, p_worse, p_better)
    return verdict


def timing_comparable(baseline: CaseResult, result: CaseResult, same_keys: Sequence[str]) -> tuple[bool, str]:
    """Whether a result's timing can be judged against a baseline's, and if not why: an emulated
    result never can; otherwise the fingerprint keys its class names (``timing_comparable_only_on_same``,
    e.g. the CPU's identity) must match. The reason names each differing key with both values."""
    for label, side in (("baseline", baseline), ("result", result)):
        if side.emulated:
            return False, f"the {label} is emulated ({side.emulated})"
    differing = [
        f"{key} {_shown(baseline.fingerprint.get(key))} -> {_shown(result.fingerprint.get(key))}"
        for key in same_keys
        if baseline.fingerprint.get(key) != result.fingerprint.get(key)
    ]
    if differing:
        return False, "the baseline was measured on another host (" + "; ".join(differing) + ")"
    return True, ""


def _shown(value: Any) -> str:
    return "unrecorded" if value is None else repr(value)


def config_changes(baseline: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [
        (key, baseline.get(key), current.get(key))
        for key in GATED_CONFIG_KEYS
        if (key in baseline or key in current) and baseline.get(key) != current.get(key)
    ]


def compare_case(
    result: CaseResult,
    baseline: CaseResult | None,
    metrics: dict[str, Metric],
    *,
    expectation: str,
    timing_comparable: bool,
    strict: bool = False,
    timing_note: str = "",
) -> CaseVerdict:
    """Judge a case. ``expectation`` is the catalogue's expected outcome on this class; where the
    timing is not comparable, ``timing_note`` says why (it is shown, never gated)."""
    outcome = Outcome(result.outcome)
    env = environment_changes(baseline.fingerprint, result.fingerprint) if baseline else []
    base_outcome = Outcome(baseline.outcome) if baseline else None

    if outcome is Outcome.SKIPPED:
        return CaseVerdict(Verdict.NOT_COMPARED, False, result.message or "skipped", environment_changes=env)
    if outcome in (Outcome.CRASH, Outcome.TIMEOUT, Outcome.CONFIG_ERROR):
        expected_error = outcome is Outcome.CONFIG_ERROR and (
            base_outcome is Outcome.CONFIG_ERROR or expectation == "config_error"
        )
        return CaseVerdict(
            Verdict.PASS if expected_error else Verdict.OUTCOME_CHANGED,
            not expected_error,
            f"{outcome.value}: {result.message}",
            environment_changes=env,
        )
    if outcome is Outcome.OOM:
        if expectation == "oom" or base_outcome is Outcome.OOM:
            return CaseVerdict(
                Verdict.EXPECTED_OOM, False, "out of memory, as expected", environment_changes=env
            )
        was = base_outcome.value if base_outcome else f"expected {expectation}"
        return CaseVerdict(
            Verdict.OUTCOME_CHANGED,
            True,
            f"out of memory ({was} before): {result.message}",
            environment_changes=env,
        )
    # The case ran.
    if expectation in ("oom", "config_error") and base_outcome in (None, Outcome(expectation)):
        what = "an OOM" if expectation == "oom" else "a configuration error (pre-flight)"
        return CaseVerdict(
            Verdict.OUTCOME_CHANGED,
            False,
            f"fits now where {what} was expected: update the catalogue or baseline",
            environment_changes=env,
        )
    if baseline is None or base_outcome is not Outcome.OK:
        reason = (
            "no baseline"
            if baseline is None
            else f"baseline outcome was {base_outcome.value if base_outcome else '?'}"
        )
        known = {n: resolve_metric(metrics, n) for n in result.metrics}
        verdicts = [compare_metric(m, result.metrics[n], None) for n, m in known.items() if m is not None]
        return CaseVerdict(Verdict.NEW, strict, reason, verdicts, environment_changes=env)

    changes = config_changes(baseline.effective_config, result.effective_config)
    verdicts = []
    for name, value in result.metrics.items():
        metric = resolve_metric(metrics, name)
        if metric is None:
            continue
        verdict = compare_metric(metric, value, baseline.metrics.get(name))
        if metric.timing and not timing_comparable:
            verdict.gated = False
            verdict.note = f"not gated: {timing_note or 'timing not comparable with the baseline'}"
        verdicts.append(verdict)
    gated = [v for v in verdicts if v.gated]
    if changes:
        listed = ", ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in changes)
        return CaseVerdict(
            Verdict.CONFIG_CHANGED,
            True,
            f"effective configuration changed ({listed})",
            verdicts,
            changes,
            env,
        )
    regressed = [v for v in gated if v.verdict is Verdict.REGRESSED]
    if regressed:
        listed = ", ".join(f"{v.metric} {_percent(v.ratio)}" for v in regressed)
        return CaseVerdict(Verdict.REGRESSED, True, f"regressed: {listed}", verdicts, changes, env)
    noisy = [v for v in gated if v.verdict is Verdict.NOISY]
    if noisy:
        listed = ", ".join(f"{v.metric} {_percent(v.ratio)}" for v in noisy)
        return CaseVerdict(
            Verdict.NOISY,
            strict,
            f"noisy: {listed} (beyond tolerance, not significant)",
            verdicts,
            changes,
            env,
        )
    if strict and env:
        listed = ", ".join(f"{k}: {old} -> {new}" for k, old, new in env)
        return CaseVerdict(
            Verdict.CONFIG_CHANGED, True, f"environment changed (strict): {listed}", verdicts, changes, env
        )
    improved = [v for v in gated if v.verdict is Verdict.IMPROVED]
    if improved:
        listed = ", ".join(f"{v.metric} {_percent(v.ratio)}" for v in improved)
        return CaseVerdict(Verdict.IMPROVED, False, f"improved: {listed}", verdicts, changes, env)
    if not timing_comparable and any(not v.gated and v.verdict is not Verdict.PASS for v in verdicts):
        why = timing_note or "timing not comparable with the baseline"
        return CaseVerdict(
            Verdict.PASS, False, f"within tolerance; timing shown, not gated: {why}", verdicts, changes, env
        )
    return CaseVerdict(Verdict.PASS, False, "within tolerance", verdicts, changes, env)


def _percent(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"
