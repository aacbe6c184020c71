"""Run one case end to end on the parent side: pre-flight, fresh children, verdict, baseline. Data
flows one way: case -> pre-flight -> child -> result file -> sampler data -> verdict (no torch here)."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from trainperf.case import Case, Outcome
from trainperf.case_record import CaseRecord
from trainperf.errors import TrainperfError
from trainperf.families import family_of, preflight
from trainperf.families.envs import Interpreter, missing_message
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import CaseVerdict, Verdict, timing_comparable
from trainperf.judge.contamination import Contamination
from trainperf.judge.learned_tolerance import learned_tolerances
from trainperf.judge.metrics import STEP_TIME, Metric
from trainperf.judge.step_series import step_medians
from trainperf.judge.verdict import judge_case
from trainperf.launch.launcher import ChildLauncher, ChildRun, interpreter_for
from trainperf.measure.host_turns import HostTurns
from trainperf.measure.measurement import RunMeasurement, pool_runs
from trainperf.measure.placement import cpu_share
from trainperf.measure.step_parts import pool_kernels
from trainperf.paths import portable_argv
from trainperf.result import CaseResult
from trainperf.run import finished_runs
from trainperf.run.case_notes import gpu_notes, reference_notes, setup_notes, turn_notes
from trainperf.run.context import RunContext
from trainperf.run.diagnosis import attach_diagnosis
from trainperf.run.finished_runs import FinishedRuns
from trainperf.run.headroom_fill import attach_limits
from trainperf.run.runner_port import CaseReport
from trainperf.run.step_count import StepCount, memory_limit, step_count
from trainperf.store.baselines import describe_file_baseline
from trainperf.store.references import compare_to_references
from trainperf.traces.collect import attach_diff


class CaseRunner:
    """Repeats, confirmation, judging and the baseline write of one case at a time; what the cliff
    search, the diagnosis and the budget ask of it is ``run.runner_port.RunnerPort``."""

    def __init__(self, context: RunContext) -> None:
        self.ctx = context
        self.launcher = ChildLauncher(context)
        self.turns = HostTurns(context.settings.host_lock, context.settings.alone)
        self.metrics: dict[str, Metric] = context.metrics
        """The current case's metrics: their timing tolerances narrowed where it is judged against
        the runner's history (``judge.learned_tolerance``)."""
        self.class_baseline: CaseResult | None = None
        """The current case's baseline file: its kernel time is the class's, whatever else judges it."""

    def run(self, case: Case) -> CaseReport:
        """Measure (or, resumed, re-judge) a case; a folder that cannot be written is one line."""
        try:
            return self._run(case)
        except OSError as exc:
            raise TrainperfError(unwritable(exc, self.ctx.run_dir)) from exc

    def _run(self, case: Case) -> CaseReport:
        ctx = self.ctx
        while ctx.unsaid:
            ctx.say(ctx.unsaid.pop(0))
        baseline, judged_against = self.baseline_of(case.id, family=case.family)
        notes: list[str] = []
        stored = self._stored(case.id, notes)
        steps = self._steps(case, baseline)
        if stored is not None:
            result = stored
            notes.append("resumed: judged from the stored result, not re-run")
            verdict = self.judge(case, result, baseline)
        else:
            result, verdict = self._measure(case, baseline, steps, notes)
        notes += gpu_notes(result.runs) + setup_notes(result.runs) + turn_notes(result.runs)
        notes += [share.note()] if (share := cpu_share(os.environ)) else []
        resumed = result.verdict if stored is not None else None
        result.verdict = verdict.stored()
        # A diagnosis profiles the last steps, as the baseline's profile did: at its full length.
        full = StepCount(steps.data_steps or steps.steps)
        if why := attach_diagnosis(self, case, full, result, baseline, verdict, resumed=resumed):
            notes.append(why)
        no_diff = attach_diff(result.verdict, result.trace, baseline.trace if baseline else None)
        if no_diff and result.verdict.diagnosis is None:
            notes.append(no_diff)
        result.references = compare_to_references(result, case, ctx.references) or None
        notes += reference_notes(result.references)
        attach_limits(case, result, ctx.gpu_class, ctx.baselines)
        if baseline is not None:
            result.verdict.baseline_step_times = step_medians(baseline.metrics.get(STEP_TIME))
        result.verdict.judged_against = judged_against
        result.verdict.notes = notes
        self.keep(result, verdict)
        return self.conclude(CaseReport(case, result, verdict, notes=notes))

    def baseline_of(
        self, result_id: str, *, from_history: bool = True, family: str | None = None
    ) -> tuple[CaseResult | None, str]:
        """What a case (or a cliff) is judged against, and a line naming it: the class's baseline
        file, or the runner's own history (``--perf-baseline``). Baselines are written against the
        file; a cliff is judged against its file (its searched edge is not a pooled figure). The
        case's metrics: at its ``family``'s tolerances, narrowed where its runner's history is quieter."""
        ctx = self.ctx
        of_family = ctx.family_metrics(ctx.metrics, family_of(family).tolerances) if family else ctx.metrics
        self.metrics = of_family
        on_file = ctx.baselines.load(ctx.gpu_class.name, result_id)
        self.class_baseline = on_file
        if ctx.history is None or ctx.settings.update_baselines or not from_history:
            return on_file, describe_file_baseline(on_file)
        baseline, described = ctx.history.baseline(result_id, ctx.gpu_class.name, on_file)
        if baseline is not None and baseline is not on_file:
            if not ctx.gpu_class.learns_timing_tolerances:
                return baseline, f"{described}; timing tolerances as configured for {ctx.gpu_class.name}"
            self.metrics, learned = learned_tolerances(of_family, baseline)
            described += "".join(f"; {line}" for line in learned)
        return baseline, described

    def _stored(self, case_id: str, notes: list[str]) -> CaseResult | None:
        """The case's result in the resumed folder; None (run it) when there is none or it is unreadable."""
        ctx = self.ctx
        if ctx.settings.resume is None or not ctx.folder.has_result(case_id):
            return None
        try:
            return ctx.folder.load(case_id)
        except TrainperfError as exc:
            line = f"{case_id}: the stored result is unreadable ({exc}); running the case again"
            ctx.say(f"[trainperf] {line}")
            notes.append(line)
            return None

    def _kept_runs(self, case_id: str, steps: StepCount, notes: list[str]) -> FinishedRuns | None:
        """Under --perf-resume, the runs a cut case had finished: the resumed case runs only the rest."""
        if self.ctx.settings.resume is None:
            return None
        kept, why = finished_runs.load(self.ctx.folder, case_id, steps.steps)
        if why is not None:
            self.ctx.say(f"[trainperf] {case_id}: {why}")
            notes.append(why)
        if kept is not None:
            line = f"resumed: {len(kept.result.runs)} run(s) finished before the cut kept, the rest run now"
            self.ctx.say(f"[trainperf] {case_id}: {line}")
            notes.append(line)
        return kept

    def keep(self, result: CaseResult, verdict: CaseVerdict) -> None:
        """The finished case into its run folder, then into the results history (never the other way:
        the folder is complete even when the store is out of reach). A folder that cannot take it
        (a full disk) still leaves the result in the history before the error is raised."""
        try:
            self.ctx.folder.store(result, verdict.verdict.value)
        except OSError:
            if self.ctx.history is not None:
                self.ctx.history.record(result, None)
            raise
        finished_runs.drop(self.ctx.folder, result.case_id)
        if self.ctx.history is not None:
            self.ctx.history.record(result, self.ctx.folder.result_path(result.case_id))

    def _measure(
        self, case: Case, baseline: CaseResult | None, steps: StepCount, notes: list[str]
    ) -> tuple[CaseResult, CaseVerdict]:
        """Fresh runs of the case, judged; a timing regression is confirmed by more fresh runs."""
        ctx = self.ctx
        if steps.note:
            notes.append(steps.note)
        result = self.new_result(case)
        if ctx.on_gpu:
            family = family_of(case.family)
            estimated = family.memory_estimate(case, steps.steps)
            result.estimate = estimated
            if over := family.memory_floor(case, case.memory_cap_gib or ctx.gpu_class.memory_gib):
                notes.append(f"expected to run out of memory at any micro-batch: {over}")
        measurements: list[RunMeasurement] = []
        kept = self._kept_runs(case.id, steps, notes)
        if kept is not None:
            result, measurements = kept.result, kept.measurements
        # A baseline carries a profile summary: its last run profiles its last steps (cheaper than an
        # extra run; those steps are left out of the timing metrics).
        profile_last = ctx.settings.update_baselines and ctx.settings.diagnose
        missing = self._repeats() - (kept.count(finished_runs.MEASUREMENT) if kept else 0)
        self.add_runs(case, steps, result, measurements, max(0, missing), profile_last=profile_last)
        verdict = self.judge(case, result, baseline)
        confirm = ctx.settings.confirm
        if verdict.confirm and confirm and not ctx.settings.update_baselines:
            first = sum(1 for run in result.runs if run.purpose != finished_runs.CONFIRMATION)
            ctx.say(
                f"[trainperf] {case.id}: timing regression in {first} run(s); confirming with "
                f"{confirm} fresh run(s) (--perf-confirm)"
            )
            # The last confirmation run is profiled when a confirmed regression will want a diagnosis:
            # it then costs no extra run (its profiled steps stay out of the timing, as always).
            diagnosable = ctx.settings.diagnose and bool(baseline and baseline.profile)
            confirmed = kept.count(finished_runs.CONFIRMATION) if kept else 0
            self.add_runs(
                case,
                steps,
                result,
                measurements,
                max(0, confirm - confirmed),
                purpose=finished_runs.CONFIRMATION,
                profile_last=diagnosable,
            )
            verdict = self.judge(case, result, baseline)
            held = "confirmed" if verdict.verdict is Verdict.REGRESSED else "not confirmed"
            notes.append(
                f"timing regression of the first {first} run(s) {held} by {confirm} more fresh "
                "run(s); steps are compared through their median across all runs"
            )
        return result, verdict

    def conclude(self, report: CaseReport) -> CaseReport:
        """Write the baseline when asked (--perf-update-baselines)."""
        if self.ctx.settings.update_baselines:
            self._update_baseline(report)
        return report

    def judge(self, case: Case, result: CaseResult, baseline: CaseResult | None) -> CaseVerdict:
        return judge_case(
            result,
            baseline,
            self.metrics,
            expectation=case.expectation(self.ctx.gpu_class.name),
            timing=self._timing_comparable(baseline, result),
            strict=self.ctx.settings.strict,
            device_reference=self.class_baseline,
        )

    def _repeats(self) -> int:
        """Fresh runs per case: a baseline is pooled from several, so that no single process that
        happened to run fast or slow becomes the reference every later run is judged by."""
        settings = self.ctx.settings
        return (
            max(settings.repeats, settings.baseline_repeats)
            if settings.update_baselines
            else settings.repeats
        )

    def _timing_comparable(self, baseline: CaseResult | None, result: CaseResult) -> tuple[bool, str]:
        if baseline is None:
            return (
                result.emulated is None,
                f"the result is emulated ({result.emulated})" if result.emulated else "",
            )
        return timing_comparable(baseline, result, self.ctx.gpu_class.timing_comparable_only_on_same)

    def _update_baseline(self, report: CaseReport) -> None:
        result = report.result
        if result.outcome not in (Outcome.OK.value, Outcome.OOM.value, Outcome.CONFIG_ERROR.value):
            report.notes.append(f"baseline not written: outcome {result.outcome}")
            return
        if result.planted_slowdown or result.planted or result.emulated:
            report.notes.append("baseline not written: planted regression or emulated run")
            return
        if (contamination := Contamination.of_runs(result.runs)) is not None:
            report.notes.append(f"baseline not written: {contamination.note()}; run again on a quiet GPU")
            return
        source = f"{self.ctx.run_dir.name}: {' '.join(portable_argv(sys.argv))}"
        report.baseline_written = self.ctx.baselines.save(result, source)

    def _steps(self, case: Case, baseline: CaseResult | None) -> StepCount:
        """Steps per child (``run.step_count``): the case's own, --perf-steps, a plan, the baseline's."""
        ctx = self.ctx
        memory = memory_limit(case, ctx.gpu_class)
        # The runner's history pools results, not runs: the plan comes from the class's file, whose
        # runs say where memory peaked and how each step moved (history runs pair with its batches).
        if baseline is not None and not baseline.runs:
            baseline = ctx.baselines.load(ctx.gpu_class.name, case.id)
        return step_count(case, ctx.settings, baseline, self.metrics, memory)

    def new_result(self, case: Case) -> CaseResult:
        ctx = self.ctx
        return CaseResult(
            case_id=case.id,
            case=CaseRecord.of(case),
            gpu_class=ctx.gpu_class.name,
            outcome=Outcome.OK.value,
            fingerprint=Fingerprint.from_dict(ctx.fingerprint),
            planted_slowdown=ctx.settings.plant_slowdown,
            planted=ctx.settings.plant,
            emulated=ctx.emulated,
            created=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        )

    def interpreter(self, case: Case) -> Interpreter | None:
        return interpreter_for(self.ctx, case)

    def rejection(self, case: Case, interpreter: Interpreter | None) -> str | None:
        """Why pre-flight refuses ``case`` (a config error, no GPU time spent), or None."""
        try:
            # The rules are those of the verl installed where the case will run: its environment's
            # interpreter, not the suite's (which has no verl and would make pre-flight assume one).
            preflight(case, interpreter.path if interpreter else self.ctx.settings.python)
        except TrainperfError as exc:
            return str(exc)
        return None

    def add_runs(
        self,
        case: Case,
        steps: StepCount,
        result: CaseResult,
        measurements: list[RunMeasurement],
        count: int,
        purpose: str = finished_runs.MEASUREMENT,
        settled_by: str | None = None,
        profile_last: bool = False,
    ) -> None:
        """Run ``count`` more fresh children and pool them into ``result``; stop at the first failure.
        ``settled_by``: see ``ChildLauncher.run``; ``profile_last``: profile the last of them."""
        interpreter = self.interpreter(case)
        rejection = self.rejection(case, interpreter)
        if rejection is not None:
            result.outcome, result.message = Outcome.CONFIG_ERROR.value, rejection
            return
        if interpreter is None:
            result.outcome, result.message = Outcome.SKIPPED.value, missing_message(case.environment)
            return
        total = len(result.runs) + count
        for number in range(count):
            with self.turns.turn(case.id, self.ctx.say) as turn:
                run = self.launcher.run(
                    case,
                    steps.steps,
                    data_steps=steps.data_steps,
                    repeat=len(result.runs),
                    total=total,
                    interpreter=interpreter,
                    settled_by=settled_by,
                    traced=True if profile_last and number == count - 1 else None,
                )
            run.info.purpose = purpose
            if turn is not None:
                run.info.host_turn = turn
            if not add_run(result, run):
                if run.measurement is not None:  # keep what was measured up to the failure (memory at OOM)
                    result.metrics = pool_runs([*measurements, run.measurement])
                return
            assert run.measurement is not None
            measurements.append(run.measurement)
            if purpose in finished_runs.KEPT_PURPOSES:  # a cut in the next run loses none of these
                finished_runs.keep(self.ctx.folder, FinishedRuns(steps.steps, result, measurements))
        result.metrics = pool_runs(measurements)
        result.kernels = pool_kernels(result.runs)

    def run_probe(self, case: Case, steps: int, settled_by: str) -> CaseResult:
        """One fresh child of ``case`` as a cliff probe: a result of its own, never pooled with others;
        an interruption of it is settled when ``settled_by`` (the search's result) arrives."""
        probed = self.new_result(case)
        self.add_runs(case, StepCount(steps), probed, [], 1, purpose="cliff-probe", settled_by=settled_by)
        return probed

    def run_profiled(
        self, case: Case, steps: StepCount, result: CaseResult, interpreter: Interpreter
    ) -> ChildRun:
        """One more fresh child, profiled over its last steps, numbered after ``result``'s runs but
        never pooled into it (a diagnosis's run: its profile, not its figures, is what it is for)."""
        repeat = len(result.runs)
        return self.launcher.run(
            case,
            steps.steps,
            repeat=repeat,
            total=repeat + 1,
            interpreter=interpreter,
            traced=True,
            data_steps=steps.data_steps,
        )


def unwritable(exc: OSError, run_dir: Path) -> str:
    """One line for a run folder that stopped taking files: what, why, and how to finish the run."""
    where = exc.filename or run_dir
    return (
        f"cannot write {where}: {exc.strerror or exc}; the cases finished before are kept in {run_dir}: "
        f"free space (or make it writable) and run again with --perf-resume={run_dir}"
    )


def add_run(result: CaseResult, run: ChildRun) -> bool:
    """Record one child's run in ``result``; False (with the outcome set) when it did not end well."""
    child, info = run.child, run.info
    result.runs.append(info)
    if result.trace is None and info.trace and info.trace.summary:
        result.trace = info.trace
    if result.profile is None and info.trace:
        result.profile = info.trace.profile
    result.take_child_config(child)
    if run.outcome is not Outcome.OK:
        result.outcome, result.message = run.outcome.value, run.message
        return False
    return True


__all__ = ["CaseRunner", "add_run"]
