"""The pytest plugin: options, markers, GPU-class check, the ``trainperf`` fixture, the summary.

Hooks and wiring only; the work is done by ``run.session`` (the session's cases), ``report``
(the case outcome and the terminal summary) and ``xdist`` (workers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainperf import xdist
from trainperf.errors import TrainperfError
from trainperf.fleet.session_share import SessionShare, session_exit_status, share_of_session
from trainperf.ground.path_checks import check_paths
from trainperf.ground.settings import OPTIONS, resolve
from trainperf.launch import interruption
from trainperf.measure.hardware import markers
from trainperf.report.case_outcome import CaseOutcome
from trainperf.report.junit import property_recorder, wire_junit_figures
from trainperf.report.terminal import (
    ProgressLines,
    live_line_writer,
    write_deselected_note,
    write_plan_lines,
    write_session_summary,
    write_workers_summary,
)
from trainperf.run.session import (
    BaselinesFromWorkers,
    CaseCheck,
    MarkerCheck,
    PerfSession,
    SessionState,
    case_of,
    choose_cases,
    runnable_case_ids,
    skip_unplaceable,
)

STATE = pytest.StashKey[SessionState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trainperf", "trainperf performance cases")
    for spec in OPTIONS:
        shown = spec.help.replace("%", "%%")  # argparse %-formats help: "5% slowdown" would print garbage
        if spec.flag:
            group.addoption(spec.cli, action="store_true", default=None, dest=f"perf_{spec.name}", help=shown)
        else:
            group.addoption(spec.cli, default=None, dest=f"perf_{spec.name}", help=f"{shown} [{spec.env}]")
        parser.addini(spec.ini, spec.help, default=None)


def pytest_configure(config: pytest.Config) -> None:
    interruption.keep_ctrl_c()
    for name, text in markers().items():
        config.addinivalue_line("markers", f"{name}: {text}")
    cli = {spec.name: config.getoption(f"perf_{spec.name}") for spec in OPTIONS}
    try:
        settings = resolve(cli, config.getini, Path(config.rootpath))
    except TrainperfError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = SessionState(settings=settings, rootdir=Path(config.rootpath))
    if xdist.is_controller(config):
        config.pluginmanager.register(BaselinesFromWorkers(state), "trainperf-worker-reports")
        if settings.resume is None:
            state.stamp = xdist.new_stamp(settings.output)
    state.stamp = state.stamp or xdist.shared_stamp(config)
    config.stash[STATE] = state
    config.pluginmanager.register(MarkerCheck(), "trainperf-marker-check")
    if not xdist.worker_id(config):  # the process that shows the terminal
        config.pluginmanager.register(ProgressLines(config), "trainperf-progress")


def pytest_sessionstart(session: pytest.Session) -> None:
    wire_junit_figures(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker writes into the one run folder this stamp names."""
    state = node.config.stash[STATE]
    if state.stamp is not None:
        node.workerinput[xdist.STAMP_KEY] = state.stamp


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: the night's, shard's and budget's lines, from the first worker to finish."""
    state = node.config.stash[STATE]
    lines, emptied = xdist.received_plan_lines(node)
    if state.plan is None and lines:
        state.plan = SessionShare(state.settings, lines, emptied=emptied)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` for a run that selects trainperf cases on a GPU machine: one worker per visible GPU
    (xdist's default, one per core, for any other run). First: the hook takes the first answer, and
    xdist's own (one per core) is registered after a plugin given with ``-p``."""
    return xdist.workers_for_auto(config)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    perf_items = [(item, case) for item in items if (case := case_of(item)) is not None]
    if not perf_items:
        return
    try:
        dropped = choose_cases(
            config.stash[STATE], perf_items, by_marker=bool(config.option.markexpr),
            listing_only=bool(config.option.collectonly),
        )  # fmt: skip
        if not config.option.collectonly:  # a session that runs cases: a mistyped folder is refused
            check_paths(config.stash[STATE].settings)
    except TrainperfError as exc:
        raise pytest.UsageError(str(exc)) from None
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in set(dropped)]
    state = config.stash[STATE]
    if state.detection is not None:
        skip_unplaceable(state, items)  # first: the workers' plan neither deals nor weighs them
        state.plan = share_of_session(
            items,
            state.settings,
            state.session_class,
            case_of,
            lambda out: config.hook.pytest_deselected(items=out),
            config.option.markexpr,
            (state.rootdir, bool(config.option.collectonly)),
            xdist.worker_count(),
        )
        state.settings = state.plan.settings
        xdist.send_plan_lines(config, state.plan.lines, state.plan.emptied)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and not xdist.worker_id(config) and state.plan.lines:
            write_plan_lines(reporter, state)  # before the work, not only in the summary after it


def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None:
        state.selection = runnable_case_ids(session.items)


@pytest.fixture(scope="session")
def trainperf_session(request: pytest.FixtureRequest) -> PerfSession:
    config = request.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    say = live_line_writer(reporter, capture) if reporter is not None else None
    return PerfSession(config.stash[STATE], xdist.worker_id(config), say)


@pytest.fixture
def trainperf(trainperf_session: PerfSession, request: pytest.FixtureRequest) -> CaseCheck:
    """Run a case and gate it: ``trainperf(case)``, or its OOM cliff: ``trainperf.cliff(...)``."""
    return CaseCheck(trainperf_session, CaseOutcome(property_recorder(request.node)))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or xdist.worker_id(config):
        return  # a worker's terminal is not shown; the controller writes the one summary
    write_deselected_note(terminalreporter, state)
    if xdist.is_controller(config):
        write_workers_summary(
            terminalreporter, xdist.controller_run_dirs(state.settings, state.stamp), state.written
        )
    else:
        write_session_summary(terminalreporter, state)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker has no terminal summary: its part of the run is stamped and closed here. A
    session whose night or shard left it no case ends with status 0, not pytest's "no tests" 5."""
    state = session.config.stash.get(STATE, None)
    if state is not None and state.context is not None:
        state.context.record_end(interrupted=session.exitstatus == pytest.ExitCode.INTERRUPTED)
    if state is not None and xdist.worker_id(session.config):
        state.conclude_history()
    if state is not None:
        session.exitstatus = session_exit_status(state.plan, session.exitstatus)
