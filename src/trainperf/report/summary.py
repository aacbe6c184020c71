"""A run's summary: the lines under the table and the report files, for a serial or an xdist run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from trainperf.paths import portable
from trainperf.report.build import write_reports
from trainperf.report.table import failure_detail, render_text
from trainperf.result import CaseResult

QUIET_VERDICTS = ("pass", "new", "expected-oom", "not-compared")


def details(
    results: Iterable[CaseResult], notes: Mapping[str, Sequence[str]], written: Mapping[str, Path | str]
) -> list[str]:
    """The lines under the table: why a case failed or was flagged, its notes, baselines written."""
    lines: list[str] = []
    for result in results:
        # A pass whose timing was shown but not gated (another host, an emulated class) says why:
        # its table row can read "step +260%".
        ungated = "not gated" in str(result.verdict.get("reason", ""))
        if result.verdict.get("verdict") not in QUIET_VERDICTS or ungated:
            lines += failure_detail(result)
        lines += [
            f"{result.case_id}: {note}" for note in notes.get(result.case_id, result.verdict.get("notes", []))
        ]
        if result.case_id in written:
            lines.append(f"{result.case_id}: baseline written to {portable(written[result.case_id])}")
    return lines


def write_summary(run_dir: Path, gpu_class: str, results: Sequence[CaseResult], lines: Sequence[str]) -> str:
    """Write the run's reports (summary.md, index.html, benchmark.json) and return the text table;
    where they cannot be written (a full disk), the table still, and a line saying how to get them."""
    table = render_text(results)
    try:
        write_reports(run_dir, results, f"trainperf {gpu_class}: {run_dir.name}", lines)
    except OSError as exc:
        return (
            f"{table}\ntrainperf: reports not written under {run_dir} ({exc.strerror}); the results are "
            f"in its results/ folder: `trainperf report {run_dir}` writes them once there is room"
        )
    return table
