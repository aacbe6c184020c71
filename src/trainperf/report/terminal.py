"""What a pytest session writes to the terminal: live progress as it happens, and at the end the
summary of each run folder (its table, the lines under it, where its reports are)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from trainperf.errors import TrainperfError
from trainperf.families import FAMILIES
from trainperf.fleet.night_cost import night_lines
from trainperf.ground.folder import RunFolder
from trainperf.launch import interruption
from trainperf.paths import REPORT_FILES, RESULTS_DIR
from trainperf.recording.ingest import sessions_of
from trainperf.recording.session_end import (
    INTERRUPTED_END,
    NO_END,
    NORMAL_END,
    selected_cases,
    session_end,
    unplaced_cases,
)
from trainperf.report.progress import SessionProgress
from trainperf.report.summary import details, write_summary
from trainperf.result import INTERRUPTED, NOT_RUN, SKIPPED_AT_START, CaseResult, Unjudged, skip_cause
from trainperf.run.session import SessionState, case_of


def live_line_writer(reporter: Any, capture: Any) -> Callable[[str], None]:
    """Progress goes to the terminal as it happens, past pytest's output capture (as live
    logging does): a run killed from outside still shows how far each case got."""

    def say(line: str) -> None:
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(line)

    return say


def write_deselected_note(terminal: Any, state: SessionState) -> None:
    if state.deselected_other_class:
        terminal.write_line(
            f"trainperf: {state.deselected_other_class} case(s) of other GPU classes deselected "
            f"(this machine: {state.detection.describe() if state.detection else '?'})"
        )
    if not state.plan_said:
        write_plan_lines(terminal, state)


def write_plan_lines(terminal: Any, state: SessionState) -> None:
    """The night's, the shard's and the budget's lines: once, at the start where the session has
    them then (a serial session), else in the summary (an xdist controller hears them at the end)."""
    for line in state.plan.lines if state.plan else []:
        terminal.write_line(line)
    state.plan_said = True


def write_session_summary(terminal: Any, state: SessionState) -> None:
    """A serial run (or one xdist worker's view): the cases this process ran, from their reports."""
    if state.context is None:
        return
    run_dir = state.context.run_dir
    if state.reports:
        results = [report.result for report in state.reports]
        notes = {report.result.case_id: report.notes for report in state.reports}
        written = {r.result.case_id: r.baseline_written for r in state.reports if r.baseline_written}
        lines = details(results, notes, written)
        _write_folder_summary(terminal, run_dir, state.context.gpu_class.name, results, lines)
    for line in state.conclude_history():
        terminal.write_line(line)
    if not state.reports:
        _write_interruption(terminal, run_dir, state.context.gpu_class.name)


def write_workers_summary(terminal: Any, run_dirs: Sequence[Path], written: dict[str, str]) -> None:
    """Under xdist: one summary of every worker's results, read from the run folders' result files."""
    for run_dir in run_dirs:
        try:
            results = RunFolder(run_dir).results_by_finish()
        except TrainperfError as exc:
            terminal.write_line(f"trainperf: {exc}")
            continue
        if results:
            lines = details(results, {}, dict(written))
            _write_folder_summary(terminal, run_dir, results[0].gpu_class, results, lines)
        else:
            _write_interruption(terminal, run_dir, _recorded_class(run_dir))


DEFAULT_WIDTH = 100
"""A CI log's width where no terminal says its own."""


def terminal_width() -> int:
    """``COLUMNS`` where set, else the terminal's, else ``DEFAULT_WIDTH`` (a log file, a CI step)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns if sys.stdout.isatty() else DEFAULT_WIDTH


def _write_interruption(terminal: Any, run_dir: Path, gpu_class: str) -> None:
    """A run stopped before its first case ended: its reports with the headline alone (the cut case,
    the selected ones it never reached) where it selected cases, else the cut's line alone."""
    folder_lines = run_folder_lines(run_dir, [])
    if any(case.state == NOT_RUN for case in folder_lines[1]):
        _write_folder_summary(terminal, run_dir, gpu_class, [], [], folder_lines)
    elif (cut := interruption.pending(run_dir)) is not None:
        terminal.write_line(interruption.describe(run_dir, cut))


def _recorded_class(run_dir: Path) -> str:
    """The GPU class the run folder's sessions recorded ("" where none did)."""
    return next((str(s["gpu_class"]) for s in _sessions(run_dir) if s.get("gpu_class")), "")


def _write_folder_summary(
    terminal: Any,
    run_dir: Path,
    gpu_class: str,
    results: Sequence[CaseResult],
    lines: list[str],
    read: tuple[list[str], list[Unjudged]] | None = None,
) -> None:
    """The table with its headline and the night's cost, the lines under it (last, the case a stop cut:
    summary.md's too) and where the reports are. ``read``: ``run_folder_lines`` already read."""
    terminal.section(f"trainperf: {gpu_class} ({len(results)} cases)")
    folder_lines, unjudged = read or run_folder_lines(run_dir, results)
    lines = lines + folder_lines
    night = run_folder_night(run_dir, results)
    terminal.write_line(write_summary(run_dir, gpu_class, results, lines, terminal_width(), unjudged, night))
    for line in lines:
        terminal.write_line(line)
    # Only what is there: a disk that filled up mid-run may have left a report unwritten.
    written = [name for name in REPORT_FILES if (run_dir / name).is_file()]
    missing = [name for name in REPORT_FILES if name not in written]
    kept = ", ".join([*written, f"{RESULTS_DIR}/*.json"])
    unwritten = f"; not written: {', '.join(missing)}" if missing else ""
    terminal.write_line(f"trainperf: results in {run_dir} ({kept}){unwritten}")


def run_folder_lines(run_dir: Path, results: Sequence[CaseResult]) -> tuple[list[str], list[Unjudged]]:
    """What a run folder says beside its results, for its summary whoever writes it (the session, or
    ``trainperf report`` rebuilding it): the case a stop cut, the cases skipped at the start or never
    reached, which the headline counts. The night's cost leads instead (``run_folder_night``)."""
    sessions = _sessions(run_dir)
    lines: list[str] = []
    if merged := RunFolder(run_dir).merged_unjudged():  # a merged night: what its shards did not judge
        return [*lines, *(f"{case.case_id}: {case.why}" for case in merged)], merged
    cut = interruption.pending(run_dir)
    unjudged = [] if cut is None else [Unjudged(cut.case_id, INTERRUPTED, cut.label)]
    lines += [] if cut is None else [interruption.describe(run_dir, cut)]
    reached = {result.case_id for result in results} | {case.case_id for case in unjudged}
    for key, why in sorted(unplaced_cases(sessions).items()):
        if key not in reached:  # a later session on a larger host may have run it
            unjudged.append(Unjudged(key, SKIPPED_AT_START, why, skip_cause(why)))
            lines.append(f"skipped: {key}: {why}")
    reached |= {case.case_id for case in unjudged}
    never = sorted(selected_cases(sessions) - reached)
    if never:
        end = session_end(sessions, cut)
        why, cause = f"not run: the session {end.how()}", SESSION_CAUSES[end.kind]
        unjudged += [Unjudged(key, NOT_RUN, why, cause) for key in never]
        lines.append(f"not run: {len(never)} selected case(s), the session {end.how()}: {', '.join(never)}")
        if end.kind == INTERRUPTED_END and cut is None:  # a cut child's line says it already
            lines.append(f"trainperf: {interruption.resume_hint(run_dir)}")
    return lines, unjudged


SESSION_CAUSES = {
    INTERRUPTED_END: "the session was interrupted",
    NORMAL_END: "the session ended without them",
    NO_END: "the session recorded no end",
}
"""The headline's words for how a session ended before cases it selected."""


def run_folder_night(run_dir: Path, results: Sequence[CaseResult]) -> list[str]:
    """A night's GPU-minutes and, on xdist workers, its wall time against its projection, from every
    session record of the folder (the workers' too); none for a run that planned no night."""
    return night_lines(_sessions(run_dir), results)


def _sessions(run_dir: Path) -> list[dict[str, Any]]:
    """The run's session records; none where they cannot be read (the summary goes on without them)."""
    try:
        return sessions_of(run_dir)
    except TrainperfError:
        return []


class ProgressLines:
    """A pytest plugin of the session's progress lines (``report.progress``), on the process that
    shows the terminal: a serial session, or an xdist controller (the workers' cases end there)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.progress: SessionProgress | None = None
        self.ids: set[str] = set()

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
                reporter.write("\n")  # after -q's progress dots, which ensure_newline does not end
            reporter.write_line(line)

    def _begin(self, ids: Sequence[str], skipped: dict[str, int] | None = None) -> None:
        if self.progress is None and (ids or skipped) and not self.config.option.collectonly:
            self.ids = set(ids)
            workers = getattr(self.config.option, "numprocesses", None)  # xdist's -n, resolved by now
            spread = workers if isinstance(workers, int) and workers > 0 else 1
            self.progress = SessionProgress(len(ids), spread, dict(skipped or {}))
            self._say(self.progress.start_line())

    def pytest_collection_finish(self, session: Any) -> None:
        """A serial session: its cases, once the night, the shard and the class have chosen them; those
        marked skipped already (more GPUs than the host has) are said apart, not counted ahead."""
        ids: list[str] = []
        skipped: dict[str, int] = {}
        for item in (item for item in session.items if case_of(item) is not None):
            if (mark := item.get_closest_marker("skip")) is None:
                ids.append(item.nodeid)
                continue
            reason = str(mark.kwargs.get("reason") or (mark.args[0] if mark.args else "skipped"))
            skipped[reason] = skipped.get(reason, 0) + 1
        self._begin(ids, skipped)

    @pytest.hookimpl(optionalhook=True)  # xdist's hook: a session without xdist never calls it
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self._begin([nodeid for nodeid in ids if case_label(nodeid)])

    def pytest_runtest_logreport(self, report: Any) -> None:
        ended = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if self.progress is None or not ended or report.nodeid not in self.ids:
            return
        self.ids.discard(report.nodeid)
        label = case_label(report.nodeid) or report.nodeid
        self._say(self.progress.ended(label, report.outcome, float(report.duration)))


def case_label(nodeid: str) -> str | None:
    """The case id of a case's test id (``test_case[<case id>]``, a case id begins with its family);
    None for any other test (an xdist controller knows its items by their ids alone)."""
    if not nodeid.endswith("]") or "[" not in nodeid:
        return None
    label = nodeid[nodeid.index("[") + 1 : -1]
    return label if label.split("-", 1)[0] in FAMILIES else None
