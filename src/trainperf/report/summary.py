"""A run's summary: the lines under the table and the report files, for a serial or an xdist run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from trainperf.case import Outcome
from trainperf.judge.comparability import ANOTHER_HOST
from trainperf.judge.verdict import OWN_RUNNER
from trainperf.paths import portable
from trainperf.report.build import write_reports
from trainperf.report.headline import headline
from trainperf.report.table import failure_detail, render_text
from trainperf.result import CaseResult, Unjudged

QUIET_VERDICTS = ("pass", "new", "expected-oom", "not-compared")


def details(
    results: Sequence[CaseResult], notes: Mapping[str, Sequence[str]], written: Mapping[str, Path | str]
) -> list[str]:
    """The lines under the table: why a case failed or was flagged, its notes, baselines written."""
    lines: list[str] = []
    for result in results:
        # A pass whose timing was shown but not gated (another host, an emulated class) says why:
        # its table row can read "step +260%". One whose host time was shown because its reference is
        # another runner's says which part moved; the line under the table says why, once.
        reason = result.verdict.reason
        quiet = result.verdict.verdict in QUIET_VERDICTS
        if result.outcome == Outcome.SKIPPED.value:  # why it was skipped, on the page as in pytest's -rs
            lines.append(f"{result.case_id}: skipped - {result.message or reason or 'no reason recorded'}")
        elif quiet and OWN_RUNNER in reason and result.verdict.parts:
            lines.append(f"{result.case_id}: {result.verdict.parts}")
        elif not quiet or "not gated" in reason:
            lines += failure_detail(result)
        lines += [f"{result.case_id}: {note}" for note in notes.get(result.case_id, result.verdict.notes)]
        if result.case_id in written:
            lines.append(f"{result.case_id}: baseline written to {portable(written[result.case_id])}")
    return lines + another_host_line(results) + own_runner_line(results) + kernel_clock_line(results)


def kernel_clock_line(results: Sequence[CaseResult]) -> list[str]:
    """One line where a run's kernel records were not read as asked (``--perf-kernel-clock auto`` fell
    back to the profiler: its read-back costs about ten times more) or had to be converted: the cases
    and the first reason, so that a slower clock or another profiler in the process is seen."""
    noted: dict[str, str] = {}
    for result in results:
        for run in result.runs:
            note = run.kernel_clock_note
            if note and result.case_id not in noted:
                noted[result.case_id] = f"{run.kernel_clock}: {note}"
    if not noted:
        return []
    first = next(iter(noted.values()))
    return [f"kernel records of {len(noted)} case(s) not read as asked ({', '.join(noted)}): {first}"]


def own_baselines_command(gpu_class: str) -> str:
    """The command that writes this host's own baselines of a class, beside the committed ones."""
    return f"pytest -m {gpu_class} --perf-update-baselines --perf-baselines baselines-$(hostname)"


def own_runner_line(results: Sequence[CaseResult]) -> list[str]:
    """One line for the cases whose kernel time was judged against the class while their host's share
    was shown, its reference being another runner's: what gates it on this runner."""
    shown = [r for r in results if OWN_RUNNER in r.verdict.reason]
    if not shown:
        return []
    gpu_class = shown[0].gpu_class
    fix = own_baselines_command(gpu_class)
    line = (
        f"host time of {len(shown)} case(s) shown, not gated (kernel time judged against the class): their "
        "references were taken on other runners; it gates here once this runner's history holds "
        f"--perf-history-runs accepted runs (--perf-baseline auto), or with its own baselines: {fix}"
    )
    return [line]


def another_host_line(results: Sequence[CaseResult]) -> list[str]:
    """One line for the cases whose timing was shown but not gated because their baselines were
    measured on another host (a pass there reads like any other): which, why, and the command
    that gives this host baselines of its own."""
    notes = {
        result.case_id: (result.gpu_class, metric.note.removeprefix("not gated: "))
        for result in results
        for metric in result.verdict.metrics
        if not metric.gated and ANOTHER_HOST in metric.note
    }
    if not notes:
        return []
    gpu_class, why = next(iter(notes.values()))
    fix = own_baselines_command(gpu_class)
    line = (
        f"timing of {len(notes)} case(s) shown, not gated: {why}; to gate timing on this host, write its "
        f"own baselines once, on an idle machine: {fix}, then run with --perf-baselines baselines-$(hostname)"
    )
    return [line]


def write_summary(
    run_dir: Path,
    gpu_class: str,
    results: Sequence[CaseResult],
    lines: Sequence[str],
    width: int | None = None,
    unjudged: Sequence[Unjudged] = (),
    night: Sequence[str] = (),
) -> str:
    """Write the run's reports (summary.md, index.html, benchmark.json) and return the headline, a
    night's cost lines (``night``) and the text table (fitted to ``width``, a terminal's columns);
    where they cannot be written (a full disk), those still, and a line saying how to get them.
    ``unjudged``: the selection's cases without a result (cut, not run), which the headline counts."""
    table = "\n".join([headline(results, unjudged), *night, render_text(results, width)])
    try:
        write_reports(run_dir, results, f"trainperf {gpu_class}: {run_dir.name}", lines, unjudged, night)
    except OSError as exc:
        return (
            f"{table}\ntrainperf: reports not written under {run_dir} ({exc.strerror}); the results are "
            f"in its results/ folder: `trainperf report {run_dir}` writes them once there is room"
        )
    return table
