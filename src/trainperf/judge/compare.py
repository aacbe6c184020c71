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

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from trainperf.case import Outcome
from trainperf.judge import stats
from trainperf.judge.comparability import GATED_CONFIG_KEYS, PartGates, config_changes, timing_comparable
from trainperf.judge.fingerprint import environment_changes
from trainperf.judge.metrics import Direction, Metric, resolve_metric
from trainperf.result import CaseResult, MetricValue

ALPHA = 0.01
NOT_GATED = "not gated: "
MIN_SAMPLES_FOR_TEST = 5
MIN_PAIRS = 8
# A step "repeats" when its times across the baseline's fresh runs (3 by default) lie within 5%.
MIN_RUNS_FOR_STABILITY = 3
STABLE_STEP_RANGE = 0.05
MIN_STABLE_PAIRS = 5


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
    parts: str = ""
    """Which part of the step moved: ``step +21% = kernels +0.2% (GEMM -0.1 ms) + host +31%``."""
    confirm: bool = False
    """A regression of host-dependent timing alone: fresh runs confirm it before it fails."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        for metric in data["metrics"]:
            metric["verdict"] = metric["verdict"].value
        return data


def keyed_groups(value: MetricValue) -> dict[str, list[float]] | None:
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
    if abs(cur - base) <= metric.abs_tolerance:
        return verdict
    current_groups, baseline_groups = keyed_groups(current), keyed_groups(baseline)
    keys, stable = (
        paired_keys(current_groups, baseline_groups) if current_groups and baseline_groups else ([], False)
    )
    if keys:
        assert current_groups is not None and baseline_groups is not None
        _judge_paired_steps(verdict, metric, current_groups, baseline_groups, keys, stable)
    else:
        _judge_samples(verdict, metric, current, baseline)
    return verdict


def _judge_paired_steps(
    verdict: MetricVerdict,
    metric: Metric,
    current_groups: dict[str, list[float]],
    baseline_groups: dict[str, list[float]],
    keys: list[str],
    stable: bool,
) -> None:
    """The change is the median of the paired steps' ratios; its support a bootstrap test of it,
    which resamples the runs too where both sides have several (``stats.run_step_bootstrap_medians``)."""
    lower_better = metric.direction is Direction.LOWER
    ratios = stats.paired_ratios(
        {k: stats.median(current_groups[k]) for k in keys},
        {k: stats.median(baseline_groups[k]) for k in keys},
    )
    ratio = stats.median(ratios)
    by_run = stats.steps_of_every_run(current_groups, baseline_groups, keys, MIN_PAIRS)
    verdict.interval, p_up, p_down = stats.paired_support(ratios, by_run)
    verdict.ratio = ratio
    verdict.note = (
        f"paired over {len(ratios)} steps"
        + (" that repeat within the baseline's runs" if stable else "")
        + (f", runs resampled ({len(by_run[0][0])} vs {len(by_run[1][0])})" if by_run else "")
    )
    relative_worse = (ratio - 1) if lower_better else (1 - ratio)
    if abs(relative_worse) <= metric.tolerance:
        return
    _judge(
        verdict,
        metric,
        relative_worse,
        p_up if lower_better else p_down,
        p_down if lower_better else p_up,
    )


def _judge_samples(
    verdict: MetricVerdict, metric: Metric, current: MetricValue, baseline: MetricValue
) -> None:
    """Unpaired: the change is the values' ratio; its support a Mann-Whitney test on the samples
    where both sides have enough of them, none (the change alone decides) where they don't."""
    lower_better = metric.direction is Direction.LOWER
    base, cur = baseline.value, current.value
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
        return
    if not have_samples:
        verdict.verdict = Verdict.REGRESSED if relative_worse > 0 else Verdict.IMPROVED
        return
    assert current.samples is not None and baseline.samples is not None
    cur_larger = stats.mann_whitney_greater(current.samples, baseline.samples)
    cur_smaller = stats.mann_whitney_greater(baseline.samples, current.samples)
    p_worse, p_better = (cur_larger, cur_smaller) if lower_better else (cur_smaller, cur_larger)
    _judge(verdict, metric, relative_worse, p_worse, p_better)


@dataclass(frozen=True, slots=True)
class _Judging:
    """One case's judging context: both sides, their outcomes and the session's rules."""

    result: CaseResult
    baseline: CaseResult | None
    base_outcome: Outcome | None
    expectation: str
    environment: list[tuple[str, Any, Any]]
    strict: bool
    gates: PartGates


def compare_case(
    result: CaseResult,
    baseline: CaseResult | None,
    metrics: dict[str, Metric],
    *,
    expectation: str,
    timing_comparable: bool = True,
    strict: bool = False,
    timing_note: str = "",
    gates: PartGates | None = None,
) -> CaseVerdict:
    """Judge a case. ``expectation`` is the catalogue's expected outcome on this class. Timing figures
    are gated by the part of the machine they depend on (``gates``, from ``judge.verdict``); without
    them, alike by ``timing_comparable``, ``timing_note`` saying why not. A figure not gated is shown."""
    case = _Judging(
        result,
        baseline,
        Outcome(baseline.outcome) if baseline else None,
        expectation,
        environment_changes(baseline.fingerprint, result.fingerprint) if baseline else [],
        strict,
        gates or PartGates.uniform(timing_comparable, timing_note),
    )
    not_run = _judge_failure_to_run(case)
    if not_run is not None:
        return not_run
    # The case ran.
    if expectation in ("oom", "config_error") and case.base_outcome in (None, Outcome(expectation)):
        what = "an OOM" if expectation == "oom" else "a configuration error (pre-flight)"
        return CaseVerdict(
            Verdict.OUTCOME_CHANGED,
            False,
            f"fits now where {what} was expected: update the catalogue or baseline",
            environment_changes=case.environment,
        )
    if baseline is None or case.base_outcome is not Outcome.OK:
        return _judge_without_baseline(case, metrics)
    changes = config_changes(baseline.effective_config, result.effective_config)
    verdicts = _metric_verdicts(case, baseline, metrics)
    return _judge_ran(case, verdicts, changes)


def _judge_failure_to_run(case: _Judging) -> CaseVerdict | None:
    """The verdict of a case that was skipped or did not finish (crash, timeout, configuration
    error, OOM), None when it ran."""
    outcome, base_outcome, env = Outcome(case.result.outcome), case.base_outcome, case.environment
    if outcome is Outcome.SKIPPED:
        return CaseVerdict(
            Verdict.NOT_COMPARED, False, case.result.message or "skipped", environment_changes=env
        )
    if outcome in (Outcome.CRASH, Outcome.TIMEOUT, Outcome.CONFIG_ERROR):
        expected_error = outcome is Outcome.CONFIG_ERROR and (
            base_outcome is Outcome.CONFIG_ERROR or case.expectation == "config_error"
        )
        return CaseVerdict(
            Verdict.PASS if expected_error else Verdict.OUTCOME_CHANGED,
            not expected_error,
            f"{outcome.value}: {case.result.message}",
            environment_changes=env,
        )
    if outcome is Outcome.OOM:
        if case.expectation == "oom" or base_outcome is Outcome.OOM:
            return CaseVerdict(
                Verdict.EXPECTED_OOM, False, "out of memory, as expected", environment_changes=env
            )
        was = base_outcome.value if base_outcome else f"expected {case.expectation}"
        return CaseVerdict(
            Verdict.OUTCOME_CHANGED,
            True,
            f"out of memory ({was} before): {case.result.message}",
            environment_changes=env,
        )
    return None


def _judge_without_baseline(case: _Judging, metrics: dict[str, Metric]) -> CaseVerdict:
    """A case that ran with no baseline that ran: new, its metrics listed (failing only when strict)."""
    reason = (
        "no baseline"
        if case.baseline is None
        else f"baseline outcome was {case.base_outcome.value if case.base_outcome else '?'}"
    )
    known = {n: resolve_metric(metrics, n) for n in case.result.metrics}
    verdicts = [compare_metric(m, case.result.metrics[n], None) for n, m in known.items() if m is not None]
    return CaseVerdict(Verdict.NEW, case.strict, reason, verdicts, environment_changes=case.environment)


def _metric_verdicts(case: _Judging, baseline: CaseResult, metrics: dict[str, Metric]) -> list[MetricVerdict]:
    """Each known metric against the baseline's; a timing one is shown, not gated, where its part of
    the machine does not compare."""
    verdicts = []
    for name, value in case.result.metrics.items():
        metric = resolve_metric(metrics, name)
        if metric is None:
            continue
        verdict = compare_metric(metric, value, baseline.metrics.get(name))
        gate = case.gates.of(metric.part)
        if metric.timing and not gate.open:
            verdict.gated = False
            verdict.note = f"{NOT_GATED}{gate.why}"
        verdicts.append(verdict)
    return verdicts


def _judge_ran(
    case: _Judging, verdicts: list[MetricVerdict], changes: list[tuple[str, Any, Any]]
) -> CaseVerdict:
    """A case that ran against a baseline that ran, most severe first: configuration changed,
    a gated metric regressed, noisy, the environment changed (strict), improved, pass."""
    env, strict = case.environment, case.strict
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
        return CaseVerdict(
            Verdict.REGRESSED, True, f"regressed: {_listed(regressed)}", verdicts, changes, env
        )
    noisy = [v for v in gated if v.verdict is Verdict.NOISY]
    if noisy:
        return CaseVerdict(
            Verdict.NOISY,
            strict,
            f"noisy: {_listed(noisy)} (beyond tolerance, not significant)",
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
        return CaseVerdict(Verdict.IMPROVED, False, f"improved: {_listed(improved)}", verdicts, changes, env)
    shown = [
        v for v in verdicts if not v.gated and v.verdict is not Verdict.PASS and v.note.startswith(NOT_GATED)
    ]
    if shown:
        why = shown[0].note.removeprefix(NOT_GATED)
        return CaseVerdict(
            Verdict.PASS, False, f"within tolerance; timing shown, not gated: {why}", verdicts, changes, env
        )
    return CaseVerdict(Verdict.PASS, False, "within tolerance", verdicts, changes, env)


def _listed(verdicts: list[MetricVerdict]) -> str:
    return ", ".join(f"{v.metric} {_percent(v.ratio)}" for v in verdicts)


def _percent(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


# The comparability checks are re-exported: callers judge a case and its comparability from one module.
__all__ = [
    "ALPHA",
    "GATED_CONFIG_KEYS",
    "CaseVerdict",
    "MetricVerdict",
    "PartGates",
    "Verdict",
    "compare_case",
    "compare_metric",
    "config_changes",
    "paired_keys",
    "timing_comparable",
]
