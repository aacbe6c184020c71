"""The pytest plugin: options, markers, GPU-class check, the ``trainperf`` fixture, the summary.

Hooks and wiring only; the work is done by ``run`` (cases), ``report`` (the summary) and ``xdist`` (workers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from trainperf import xdist
from trainperf.case import Case, Outcome
from trainperf.errors import TrainperfError
from trainperf.measure.detection import Detection, detect, emulate
from trainperf.measure.hardware import CPU_CLASS, load_classes
from trainperf.report.export import key_figures
from trainperf.report.junit import property_recorder
from trainperf.report.summary import details, write_summary
from trainperf.report.table import failure_detail
from trainperf.run import interruption
from trainperf.run.budget import Budget, leave_out
from trainperf.run.case_runner import CaseReport, CaseRunner
from trainperf.run.cliff import run_cliff
from trainperf.run.context import RunContext, open_run
from trainperf.run.fleet import SessionPlan, plan_session
from trainperf.run.folder import RunFolder
from trainperf.run.settings import OPTIONS, Settings, resolve

MARKERS = {
    "cpu": "tiny cases that run on the CPU of any machine",
    "gpu": "cases that need a GPU",
    "maxq": "cases for the RTX PRO 6000 Blackwell Max-Q runner class",
    "h100": "cases for the H100 runner class",
    "h200": "cases for the H200 runner class",
    "multi_gpu": "cases that need more than one GPU",
    "slow": "cases that take minutes (large models)",
}


@dataclass
class _State:
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
    plan: SessionPlan | None = None
    """This session's shard and budget (``--perf-shard``, ``--perf-budget``)."""

    @property
    def budget(self) -> Budget | None:
        return self.plan.budget if self.plan else None


STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trainperf", "trainperf performance cases")
    for spec in OPTIONS:
        if spec.flag:
            group.addoption(
                spec.cli, action="store_true", default=None, dest=f"perf_{spec.name}", help=spec.help
            )
        else:
            group.addoption(
                spec.cli, default=None, dest=f"perf_{spec.name}", help=f"{spec.help} [{spec.env}]"
            )
        parser.addini(spec.ini, spec.help, default=None)


def pytest_configure(config: pytest.Config) -> None:
    interruption.keep_ctrl_c()
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    cli = {spec.name: config.getoption(f"perf_{spec.name}") for spec in OPTIONS}
    try:
        settings = resolve(cli, config.getini, Path(config.rootpath))
    except TrainperfError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = _State(settings=settings, rootdir=Path(config.rootpath))
    if xdist.is_controller(config):
        config.pluginmanager.register(_WorkerReports(state), "trainperf-worker-reports")
        if settings.resume is None:
            state.stamp = xdist.new_stamp(settings.output)
    state.stamp = state.stamp or xdist.shared_stamp(config)
    config.stash[STATE] = state


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker writes into the one run folder this stamp names."""
    state = node.config.stash[STATE]
    if state.stamp is not None:
        node.workerinput[xdist.STAMP_KEY] = state.stamp


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` for a run that selects trainperf cases on a GPU machine: one worker per visible GPU
    (xdist's default, one per core, for any other run)."""
    return xdist.workers_for_auto(config)


class _WorkerReports:
    """Registered on the xdist controller only: notes the baselines the workers wrote, which
    their test reports carry as user properties."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == "trainperf_baseline_written":
                case_id, _, path = str(value).partition("=")
                self.state.written.setdefault(case_id, path)


def case_of(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("case") if callspec else None
    return value if isinstance(value, Case) else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    _select_class(config, items)
    state = config.stash[STATE]
    if state.detection is not None:
        state.plan = plan_session(
            items,
            state.settings,
            state.session_class,
            case_of,
            lambda out: config.hook.pytest_deselected(items=out),
            config.option.markexpr,
        )
        state.settings = state.plan.settings


def _select_class(config: pytest.Config, items: list[pytest.Item]) -> None:
    perf_items = [(item, case) for item in items if (case := case_of(item)) is not None]
    if not perf_items:
        return
    state = config.stash[STATE]
    try:
        classes = load_classes()
        state.detection = detect(classes, state.settings.gpu_class)
        if state.settings.emulate:
            state.detection = emulate(state.detection, classes, state.settings.emulate)
    except TrainperfError as exc:
        raise pytest.UsageError(str(exc)) from None
    here = state.detection.gpu_class.name if state.detection.gpu_class else None
    # Only a marker expression selects GPU classes; -k filters within this machine's class.
    explicit = bool(config.option.markexpr)
    if not explicit:
        dropped = [item for item, case in perf_items if here not in case.gpu_classes]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if i not in set(dropped)]
            state.deselected_other_class = len(dropped)
        state.session_class = here
        return
    wanted = {cls for _, case in perf_items for cls in case.gpu_classes}
    if all(CPU_CLASS in case.gpu_classes for _, case in perf_items):
        state.session_class = CPU_CLASS  # tiny cases run on the CPU of any machine
        return
    wrong = sorted(
        {cls for _, case in perf_items if here not in case.gpu_classes for cls in case.gpu_classes}
    )
    # Listing a GPU class's matrix (--collect-only) runs nothing, so it works on any machine.
    if wrong and not config.option.collectonly:
        raise pytest.UsageError(
            f"the selection asks for cases of class {'/'.join(wrong)} but this machine has "
            f"{state.detection.describe()}; select -m {here or 'cpu'}, or pass --perf-gpu-class NAME to "
            "override"
        )
    state.session_class = here if here in wanted else CPU_CLASS


class Harness:
    """What a catalogue test calls: ``trainperf.check(case)``."""

    def __init__(self, state: _State, config: pytest.Config) -> None:
        self.state = state
        self.config = config

    def _context(self) -> RunContext:
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
            placement = xdist.placement_for(self.config) if detection.device is not None else None
            if placement is not None:
                detection = xdist.own_gpu(detection, placement)
            state.context = open_run(
                state.settings,
                detection,
                state.rootdir,
                stamp=state.stamp,
                worker=xdist.worker_id(self.config),
            )
            state.context.placement = placement
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            capture = self.config.pluginmanager.get_plugin("capturemanager")
            if reporter is not None:
                state.context.say = lambda line: _say_live(reporter, capture, line)
        return state.context

    def check(self, case: Case, record_property: Any = None) -> CaseReport:
        try:
            context = self._context()
            if context.placement is not None and case.gpus > len(context.placement.devices):
                pytest.skip(f"needs {case.gpus} GPUs; this session sees {len(context.placement.devices)}")
            runner = CaseRunner(context)
            report = leave_out(self.state.budget, runner, case, case.id) or runner.run(case)
        except TrainperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        return self._conclude(report, record_property)

    def check_cliff(
        self, case: Case, axis: str, low: int, high: int, record_property: Any = None
    ) -> CaseReport:
        try:
            runner, key = CaseRunner(self._context()), f"{case.id}-cliff-{axis}"
            left_out = leave_out(self.state.budget, runner, case, key)
            report = left_out or run_cliff(runner, case, axis, low, high)
        except TrainperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        return self._conclude(report, record_property)

    def _conclude(self, report: CaseReport, record_property: Any) -> CaseReport:
        """Record the report and turn its verdict into the test's outcome."""
        self.state.reports.append(report)
        if record_property is not None:
            for name, value in key_figures(report.result).items():
                record_property(f"trainperf_{name}", value)
            if report.baseline_written:
                record_property(
                    "trainperf_baseline_written", f"{report.result.case_id}={report.baseline_written}"
                )
        if report.result.outcome == Outcome.SKIPPED.value:
            pytest.skip(report.result.message or "skipped")
        if report.verdict.fails:
            pytest.fail("\n".join(failure_detail(report.result)), pytrace=False)
        return report


def _say_live(reporter: Any, capture: Any, line: str) -> None:
    """Progress goes to the terminal as it happens, past pytest's output capture (as live
    logging does): a run killed from outside still shows how far each case got."""
    if capture is None:
        reporter.write_line(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(line)


@pytest.fixture(scope="session")
def trainperf_session(request: pytest.FixtureRequest) -> Harness:
    return Harness(request.config.stash[STATE], request.config)


class CaseCheck:
    """The ``trainperf`` fixture: ``trainperf(case)`` measures and gates a case;
    ``trainperf.cliff(case, "batch_size", 1, 512)`` finds and gates its OOM cliff."""

    def __init__(self, harness: Harness, record_property: Any) -> None:
        self._harness, self._record = harness, record_property

    def __call__(self, case: Case) -> CaseReport:
        return self._harness.check(case, self._record)

    def cliff(self, case: Case, axis: str, low: int, high: int) -> CaseReport:
        return self._harness.check_cliff(case, axis, low, high, self._record)


@pytest.fixture
def trainperf(trainperf_session: Harness, request: pytest.FixtureRequest) -> CaseCheck:
    """Run a case and gate it: ``trainperf(case)``, or its OOM cliff: ``trainperf.cliff(...)``."""
    return CaseCheck(trainperf_session, property_recorder(request.node))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or xdist.worker_id(config):
        return  # a worker's terminal is not shown; the controller writes the one summary
    if state.deselected_other_class:
        terminalreporter.write_line(
            f"trainperf: {state.deselected_other_class} case(s) of other GPU classes deselected "
            f"(this machine: {state.detection.describe() if state.detection else '?'})"
        )
    for line in state.plan.lines if state.plan else []:
        terminalreporter.write_line(line)
    if xdist.is_controller(config):
        _controller_summary(terminalreporter, state)
        return
    if state.context is None:
        return
    run_dir = state.context.run_dir
    if state.reports:
        results = [report.result for report in state.reports]
        notes = {report.result.case_id: report.notes for report in state.reports}
        written = {r.result.case_id: r.baseline_written for r in state.reports if r.baseline_written}
        _summarize(
            terminalreporter, run_dir, state.context.gpu_class.name, results, details(results, notes, written)
        )
    _conclude_history(terminalreporter, state)
    _say_interruption(terminalreporter, run_dir)


def _conclude_history(terminalreporter: Any, state: _State) -> None:
    if state.context is not None and state.context.history is not None:
        for line in state.context.history.conclude(datetime.now(timezone.utc).isoformat(timespec="seconds")):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker has no terminal summary: its part of the run is stamped and closed here."""
    state = session.config.stash.get(STATE, None)
    if state is not None and xdist.worker_id(session.config) and state.context and state.context.history:
        state.context.history.conclude(datetime.now(timezone.utc).isoformat(timespec="seconds"))


def _controller_summary(terminalreporter: Any, state: _State) -> None:
    """Under xdist: one summary of every worker's results, read from the run folder's result files."""
    settings = state.settings
    folders = [settings.resume] if settings.resume else xdist.run_dirs(settings.output, state.stamp or "")
    for run_dir in folders:
        try:
            results = RunFolder(run_dir).results_by_finish()
        except TrainperfError as exc:
            terminalreporter.write_line(f"trainperf: {exc}")
            continue
        if results:
            lines = details(results, {}, dict(state.written))
            _summarize(terminalreporter, run_dir, results[0].gpu_class, results, lines)
        _say_interruption(terminalreporter, run_dir)


def _say_interruption(terminalreporter: Any, run_dir: Path) -> None:
    """The last line of a cut run's summary: the case it cut and how to go on."""
    cut = interruption.pending(run_dir)
    if cut is not None:
        terminalreporter.write_line(interruption.describe(run_dir, cut))


def _summarize(
    terminalreporter: Any, run_dir: Path, gpu_class: str, results: list[Any], lines: list[str]
) -> None:
    terminalreporter.section(f"trainperf: {gpu_class} ({len(results)} cases)")
    terminalreporter.write_line(write_summary(run_dir, gpu_class, results, lines))
    for line in lines:
        terminalreporter.write_line(line)
    terminalreporter.write_line(
        f"trainperf: results in {run_dir} (summary.md, index.html, benchmark.json, results/*.json)"
    )
