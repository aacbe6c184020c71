"""Case verdicts: a result against its baseline as a whole, from its metrics' verdicts
(``judge.metric_verdict``; no I/O). Which timing figures gate is ``judge.verdict``'s to say.

Case verdicts, most severe first: outcome-changed (fit before, not now; or a crash),
config-changed (the effective configuration differs), regressed, noisy, improved, new, pass.
A run that shared its GPU or was throttled from outside is contaminated (``judge.contamination``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainperf.case import Outcome
from trainperf.judge.comparability import GATED_CONFIG_KEYS, PartGates, config_changes, timing_comparable
from trainperf.judge.fingerprint import environment_changes
from trainperf.judge.metric_verdict import (
    ALPHA,
    MIN_PAIRS,
    MIN_STABLE_PAIRS,
    MetricVerdict,
    Verdict,
    compare_metric,
    keyed_groups,
    paired_keys,
)
from trainperf.judge.metrics import Metric, resolve_metric
from trainperf.result import CaseResult
from trainperf.stored_verdict import StoredVerdict

NOT_GATED = "not gated: "


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
    kernels: str = ""
    """Where kernel time moved (regressed or improved): which groups and kernels moved
    (``judge.kernel_changes``)."""
    confirm: bool = False
    """A regression of host-dependent timing alone: fresh runs confirm it before it fails."""

    def stored(self) -> StoredVerdict:
        """The verdict as the case's result keeps it; the run adds what it was judged against."""
        return StoredVerdict(
            verdict=self.verdict.value,
            fails=self.fails,
            reason=self.reason,
            metrics=[metric.stored() for metric in self.metrics],
            config_changes=list(self.config_changes),
            environment_changes=list(self.environment_changes),
            parts=self.parts,
            kernels=self.kernels,
            confirm=self.confirm,
        )


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
        environment_changes(baseline.fingerprint.to_dict(), result.fingerprint.to_dict()) if baseline else [],
        strict,
        gates or PartGates.uniform(timing_comparable, timing_note),
    )
    not_run = _judge_failure_to_run(case)
    if not_run is not None:
        return not_run
    # The case ran.
    if expectation in (Outcome.OOM, Outcome.CONFIG_ERROR) and case.base_outcome in (
        None,
        Outcome(expectation),
    ):
        what = "an OOM" if expectation == Outcome.OOM else "a configuration error (pre-flight)"
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
            base_outcome is Outcome.CONFIG_ERROR or case.expectation == Outcome.CONFIG_ERROR
        )
        return CaseVerdict(
            Verdict.PASS if expected_error else Verdict.OUTCOME_CHANGED,
            not expected_error,
            f"{outcome.value}: {case.result.message}",
            environment_changes=env,
        )
    if outcome is Outcome.OOM:
        if case.expectation == Outcome.OOM or base_outcome is Outcome.OOM:
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
        elif metric.tolerance_note:
            verdict.note = "; ".join(part for part in (verdict.note, metric.tolerance_note) if part)
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
    "MIN_PAIRS",
    "MIN_STABLE_PAIRS",
    "CaseVerdict",
    "MetricVerdict",
    "PartGates",
    "Verdict",
    "compare_case",
    "compare_metric",
    "config_changes",
    "keyed_groups",
    "paired_keys",
    "timing_comparable",
]
