"""The diagnosis of a confirmed regression (``--perf-diagnose``, on by default): one profiled run of
the case by itself, its profile summary against the baseline's (``traces.diagnose``), and a
``diagnosis:`` line in the verdict. Nothing runs when the case passes; at most one extra run when it
regresses, none when a run of the case was profiled already: with --perf-trace, or the last
confirmation run, which is profiled whenever the baseline has a profile summary to compare with.
An extra run is kept in the run folder but never pooled into the case's metrics.
"""

from __future__ import annotations

from trainperf.case import Case, Outcome
from trainperf.diagnosis_record import Diagnosis
from trainperf.judge.compare import CaseVerdict, Verdict
from trainperf.judge.metrics import Kind, metrics_of_kind
from trainperf.profile_record import ProfileSummary
from trainperf.result import CaseResult
from trainperf.run.runner_port import RunnerPort
from trainperf.run.step_count import StepCount
from trainperf.stored_verdict import StoredVerdict
from trainperf.trace_record import TraceRecord
from trainperf.traces.diagnose import diagnose


def regressed_kinds(verdict: CaseVerdict) -> set[str]:
    """``timing``, ``memory`` and ``energy`` for the gated metrics that regressed."""
    memory, energy = metrics_of_kind(Kind.MEMORY, Kind.HOST_MEMORY), metrics_of_kind(Kind.ENERGY, Kind.POWER)
    kinds = set()
    for metric in verdict.metrics:
        if metric.gated and metric.verdict is Verdict.REGRESSED:
            name = metric.metric
            kinds.add("memory" if name in memory else "energy" if name in energy else "timing")
    return kinds


def attach_diagnosis(
    runner: RunnerPort,
    case: Case,
    steps: StepCount,
    result: CaseResult,
    baseline: CaseResult | None,
    verdict: CaseVerdict,
    *,
    resumed: StoredVerdict | None = None,
) -> str | None:
    """Store the diagnosis in ``result.verdict``; return a note when a regression got none (and why).
    ``resumed``: the stored verdict of a result judged again from a resumed folder, which keeps the
    diagnosis it had and never runs."""
    settings = runner.ctx.settings
    kinds = regressed_kinds(verdict) if verdict.verdict is Verdict.REGRESSED else set()
    if not kinds or not settings.diagnose or settings.update_baselines:
        return None
    if resumed is not None:
        result.verdict.diagnosis = resumed.diagnosis
        return None
    if baseline is None or baseline.profile is None:
        return (
            "no diagnosis: the baseline has no profile summary (write it again with "
            "--perf-update-baselines; --perf-diagnose off skips this)"
        )
    profile = result.profile
    cost = "none: " + next(
        (
            f"{run.purpose or 'measurement'} run {run.dir} was profiled"
            for run in result.runs
            if run.trace and run.trace.profile
        ),
        "this run was profiled",
    )
    if profile is None:
        profile, cost, why = _profiled_run(runner, case, steps, result)
        if profile is None:
            return f"no diagnosis: {why}"
    if profile.kind != baseline.profile.kind:
        return "no diagnosis: one profile is a GPU profile, the other a CPU profile"
    # The diagnosis reads the summaries as their JSON objects, the form a verdict stores them in.
    found = diagnose(baseline.profile.to_dict(), profile.to_dict(), memory="memory" in kinds)
    result.verdict.diagnosis = Diagnosis(
        nature=found["nature"],
        line=found["line"],
        threshold_ms=found["threshold_ms"],
        work_threshold_ms=found["work_threshold_ms"],
        uniform_scale=found["uniform_scale"],
        regressed=tuple(sorted(kinds)),
        cost=cost,
        profile=profile,
    )
    return None


def _profiled_run(
    runner: RunnerPort, case: Case, steps: StepCount, result: CaseResult
) -> tuple[ProfileSummary | None, str, str]:
    """One more fresh run of the case, profiled over its last steps; (profile, cost, why not)."""
    ctx = runner.ctx
    interpreter = runner.interpreter(case)
    if interpreter is None:
        return None, "", "the case's environment is missing"
    ctx.say(
        f"[trainperf] {case.id}: regression confirmed; one profiled run to diagnose it (--perf-diagnose off)"
    )
    run = runner.run_profiled(case, steps, result, interpreter)
    trace = run.info.trace or TraceRecord()
    cost = f"one extra profiled run ({run.info.wall_s or 0:.0f} s, {run.info.dir})"
    if run.outcome is not Outcome.OK:
        return None, cost, f"the profiled run ended {run.outcome.value} ({run.message})"
    if trace.profile is None:
        return None, cost, f"the profiled run has no profile ({trace.error or 'no trace'})"
    return trace.profile, cost, ""
