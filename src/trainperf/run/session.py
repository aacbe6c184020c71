"""A pytest session of cases: which cases this machine runs, the run it opens at its first case,
and each case's verdict turned into the test's outcome. The pytest plugin only wires these in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import pytest

from trainperf.case import Case, Outcome
from trainperf.errors import TrainperfError
from trainperf.fleet.budget import Budget
from trainperf.fleet.session_share import SessionShare
from trainperf.fleet.shard import item_key
from trainperf.ground.folder import SESSION_SELECTED, SESSION_UNPLACED
from trainperf.ground.settings import Settings
from trainperf.measure.detection import Detection, detect, emulate
from trainperf.measure.hardware import CPU_CLASS, load_classes
from trainperf.measure.nvml import Nvml
from trainperf.measure.placement import Placement, visible_devices, worker_index
from trainperf.run.case_runner import CaseRunner
from trainperf.run.cliff import run_cliff
from trainperf.run.context import RunContext, open_run
from trainperf.run.runner_port import CaseReport, RunnerPort

BASELINE_WRITTEN_PROPERTY = "trainperf_baseline_written"
"""The test report property naming a baseline a case wrote: ``<case id>=<path>``."""

Item = TypeVar("Item")


@dataclass
class SessionState:
    """What one pytest process knows of its session, from configuration to the summary."""

    settings: Settings
    rootdir: Path
    detection: Detection | None = None
    session_class: str | None = None
    context: RunContext | None = None
    reports: list[CaseReport] = field(default_factory=list)
    deselected_other_class: int = 0
    stamp: str | None = None
    """Under xdist: the run folder's stamp the controller chose and handed to every worker."""
    written: dict[str, str] = field(default_factory=dict)
    """Under xdist, on the controller: baselines the workers wrote, by case id."""
    plan: SessionShare | None = None
    """This session's shard and budget (``--perf-shard``, ``--perf-budget``)."""
    plan_said: bool = False
    """The plan's lines are on the terminal already (said at collection)."""
    selection: list[str] = field(default_factory=list)
    """The cases this session will run (collected, kept, not skipped), recorded when the run opens."""
    unplaced: dict[str, str] = field(default_factory=dict)
    """The cases it skips at the start, needing more GPUs than it sees, with why (recorded beside)."""

    @property
    def budget(self) -> Budget | None:
        return self.plan.budget if self.plan else None

    def conclude_history(self) -> list[str]:
        """Stamp the run's end in the results history; the lines for the summary (none without one)."""
        if self.context is None or self.context.history is None:
            return []
        return self.context.history.conclude(datetime.now(timezone.utc).isoformat(timespec="seconds"))


def case_of(item: Any) -> Case | None:
    """The case a collected test is parametrized with (its ``case`` argument), if any."""
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("case") if callspec else None
    return value if isinstance(value, Case) else None


def choose_cases(
    state: SessionState, perf_items: Sequence[tuple[Item, Case]], by_marker: bool, listing_only: bool
) -> list[Item]:
    """Detect this machine's GPU class, settle the session's class, and return the items of other
    classes to deselect. ``by_marker``: the run names a marker expression (only that selects GPU
    classes; -k filters within this machine's class). ``listing_only``: --collect-only, which runs
    nothing and so may list any class's matrix on any machine."""
    classes = load_classes()
    state.detection = detect(classes, state.settings.gpu_class)
    if state.settings.emulate:
        state.detection = emulate(state.detection, classes, state.settings.emulate)
    here = state.detection.gpu_class.name if state.detection.gpu_class else None
    if not by_marker:
        dropped = [item for item, case in perf_items if here not in case.gpu_classes]
        state.deselected_other_class = len(dropped)
        state.session_class = here
        return dropped
    wanted = {cls for _, case in perf_items for cls in case.gpu_classes}
    if all(CPU_CLASS in case.gpu_classes for _, case in perf_items):
        state.session_class = CPU_CLASS  # tiny cases run on the CPU of any machine
        return []
    wrong = sorted(
        {cls for _, case in perf_items if here not in case.gpu_classes for cls in case.gpu_classes}
    )
    if wrong and not listing_only:
        raise TrainperfError(
            f"the selection asks for cases of class {'/'.join(wrong)} but this machine has "
            f"{state.detection.describe()}; select -m {here or 'cpu'}, or pass --perf-gpu-class NAME to "
            "override"
        )
    state.session_class = here if here in wanted else CPU_CLASS
    return []


def worker_placement(worker: str | None) -> Placement:
    """The GPUs of this process: every visible one, owning the one of its xdist worker number."""
    return Placement(tuple(visible_devices(Nvml.count)), worker_index(worker))


def own_gpu(detection: Detection, placement: Placement) -> Detection:
    """The detection moved to this worker's own GPU (same class: a runner's GPUs are alike)."""
    own = placement.own
    if own is None or detection.device is None or own == detection.device:
        return detection
    return dataclasses.replace(detection, device=own, info=Nvml.info(own))


def runnable_case_ids(items: Sequence[Any]) -> list[str]:
    """The ids the results of ``items`` will be stored under (a cliff search's its own), for the items
    that will run: not marked to be skipped."""
    return [
        item_key(case, item.callspec.params)
        for item in items
        if (case := case_of(item)) and not item.get_closest_marker("skip")
    ]


def skip_unplaceable(state: SessionState, items: Sequence[Any]) -> None:
    """Mark the cases that need more GPUs than this host shows as skipped before any starts, so that
    the session's progress counts only what can run (a 2-GPU case on a one-GPU runner). A GPU
    session only: the cpu class places nothing. Every process that runs cases collects them, xdist's
    workers too, so no case that needs more GPUs than the host has reaches ``PerfSession.check``."""
    detection = state.detection
    if detection is None or detection.device is None or state.session_class == CPU_CLASS:
        return
    seen = len(visible_devices(Nvml.count))
    for item in items:
        case = case_of(item)
        if case is not None and case.gpus > seen:
            reason = f"needs {case.gpus} GPUs; this session sees {seen}"
            item.add_marker(pytest.mark.skip(reason=reason))
            state.unplaced[item_key(case, item.callspec.params)] = reason


def leave_out(budget: Budget | None, runner: RunnerPort, case: Case, key: str) -> CaseReport | None:
    """The case recorded as skipped when the budget has no room for it, else None (run it)."""
    reason = budget.refusal(key) if budget is not None else None
    if reason is None:
        return None
    result = runner.new_result(case)
    result.case_id, result.outcome, result.message = key, Outcome.SKIPPED.value, reason
    verdict = runner.judge(case, result, None)
    result.verdict = verdict.stored()
    result.verdict.notes = [f"left out: {reason}"]  # listed under the summary
    runner.keep(result, verdict)
    return CaseReport(case, result, verdict, notes=[f"left out: {reason}"])


class PerfSession:
    """The session's cases: opens the run folder at the first case, then runs and judges each
    case and keeps its report for the summary (``report.case_outcome`` makes the verdict the
    test's outcome)."""

    def __init__(
        self, state: SessionState, worker: str | None, say: Callable[[str], None] | None = None
    ) -> None:
        self.state = state
        self.worker = worker
        """The xdist worker id (``gw0``...), None in a serial run."""
        self.say = say
        """Where live progress goes (the terminal, past pytest's capture); None: the run's default."""

    def context(self) -> RunContext:
        state = self.state
        if state.context is None:
            assert state.detection is not None, "trainperf: cases must be collected through the plugin"
            detection = state.detection
            if (
                state.session_class == CPU_CLASS
                and detection.gpu_class
                and detection.gpu_class.name != CPU_CLASS
            ):
                detection = Detection(load_classes()[CPU_CLASS], None, None, detection.overridden)
            placement = worker_placement(self.worker) if detection.device is not None else None
            if placement is not None:
                detection = own_gpu(detection, placement)
            state.context = open_run(
                state.settings, detection, state.rootdir, stamp=state.stamp, worker=self.worker
            )
            state.context.placement = placement
            # The selection is recorded from the start: a session killed before its end still says
            # which cases it never reached.
            recorded: dict[str, Any] = {SESSION_SELECTED: state.selection}
            if state.unplaced:  # listed as skipped, with why, on the page and in a merge
                recorded[SESSION_UNPLACED] = state.unplaced
            state.context.folder.update_session(recorded, self.worker)
            if self.say is not None:
                state.context.say = self.say
        return state.context

    def check(self, case: Case) -> CaseReport:
        try:
            runner = CaseRunner(self.context())
            report = leave_out(self.state.budget, runner, case, case.id) or runner.run(case)
        except TrainperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        self.state.reports.append(report)
        return report

    def check_cliff(self, case: Case, axis: str, low: int, high: int) -> CaseReport:
        try:
            runner, key = CaseRunner(self.context()), f"{case.id}-cliff-{axis}"
            report = leave_out(self.state.budget, runner, case, key) or run_cliff(
                runner, case, axis, low, high
            )
        except TrainperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        self.state.reports.append(report)
        return report


class CaseCheck:
    """The ``trainperf`` fixture: ``trainperf(case)`` measures and gates a case;
    ``trainperf.cliff(case, "batch_size", 1, 512)`` finds and gates its OOM cliff.

    ``conclude`` makes a case's report the test's outcome (``report.case_outcome``)."""

    def __init__(self, session: PerfSession, conclude: Callable[[CaseReport], CaseReport]) -> None:
        self._session, self._conclude = session, conclude

    def __call__(self, case: Case) -> CaseReport:
        return self._conclude(self._session.check(case))

    def cliff(self, case: Case, axis: str, low: int, high: int) -> CaseReport:
        return self._conclude(self._session.check_cliff(case, axis, low, high))


class BaselinesFromWorkers:
    """Registered on the xdist controller only: notes the baselines the workers wrote, which
    their test reports carry as user properties."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == BASELINE_WRITTEN_PROPERTY:
                case_id, _, path = str(value).partition("=")
                self.state.written.setdefault(case_id, path)


BUILTIN_MARKERS = frozenset({"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings"})
MARK_WORDS = frozenset({"and", "or", "not", "True", "False"})


def unknown_markers(markexpr: str, registered: Sequence[str]) -> str | None:
    """Why ``-m EXPR`` selects by a marker nobody registered (``-m h10``: pytest deselects every case
    and exits 5 with no word of the typo), or None. ``registered``: the ini's ``markers`` lines."""
    known = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in registered} | BUILTIN_MARKERS
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\([^)]*\)", "", markexpr))
    unknown = sorted({word for word in words if word not in known and word not in MARK_WORDS})
    if not unknown:
        return None
    classes = sorted(load_classes())
    return (
        f"-m {markexpr!r} names no registered marker {', '.join(repr(w) for w in unknown)}: the GPU classes "
        f"are {', '.join(classes)} (pytest --markers lists every marker)"
    )


class MarkerCheck:
    """Refuses ``-m`` naming an unregistered marker in a session that collected the suite's cases:
    first, before pytest's own ``-m`` deselects them all."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        markexpr = config.option.markexpr
        if markexpr and any(case_of(item) is not None for item in items):
            typo = unknown_markers(markexpr, config.getini("markers"))
            if typo:
                raise pytest.UsageError(typo)
