"""``summary.md``: the case table, then traces, trace diffs and cliffs (fit for a CI job summary)."""

from __future__ import annotations

from collections.abc import Sequence

from trainperf.report.headroom_lines import limits_markdown
from trainperf.report.table import diagnosis_lines, render_markdown
from trainperf.result import CaseResult, Unjudged
from trainperf.traces.diff import describe


def _trace_rows(results: Sequence[CaseResult]) -> list[str]:
    lines = []
    for result in results:
        record = result.trace
        summary = record.summary if record else None
        if record is None or summary is None:
            continue
        if summary.kind == "gpu":
            idle = (
                f"host-bound {summary.per_step(summary.idle_host_bound_ms):.2f} ms, other "
                f"{summary.per_step(summary.idle_other_ms):.2f} ms"
            )
            launch = f"{summary.launch.runtime_us_per_kernel:.1f}" if summary.launch else "-"
        else:
            idle, launch = f"{summary.per_step(summary.idle_ms):.2f} ms", "-"
        categories = ", ".join(
            f"{name} {summary.per_step(ms):.2f}" for name, ms in list(summary.categories_ms.items())[:4]
        )
        where = record.file or record.deleted or "-"
        size = f"{(record.file_bytes or 0) / 2**20:.1f} MB"
        lines.append(
            f"| {result.case_id} | {summary.kind} | {summary.busy_fraction:.1%} | {idle} | "
            f"{categories} | "
            f"{launch} | {where} ({size}) |"
        )
    if not lines:
        return []
    header = "| case | trace | busy | idle per step | top categories, ms per step | API us/kernel | file |"
    return ["", "## Traces (profiled steps, not timed)", "", header, "|" + "---|" * 7, *lines]


def _diffs(results: Sequence[CaseResult]) -> list[str]:
    lines = []
    for result in results:
        if diff := result.verdict.trace_diff:
            lines += [f"- {result.case_id}: {describe(diff)[0].removeprefix('trace diff: ')}"]
            lines += [f"  {line.strip()}" for line in describe(diff)[1:]]
    return ["", "## Trace diffs against the baseline", "", *lines] if lines else []


def _diagnoses(results: Sequence[CaseResult]) -> list[str]:
    lines = [f"- {result.case_id}: `{line}`" for result in results for line in diagnosis_lines(result)]
    return ["", "## Diagnoses of regressions", "", *lines] if lines else []


def _cliffs(results: Sequence[CaseResult]) -> list[str]:
    lines = []
    for result in results:
        cliff = result.cliff
        if cliff:
            lines.append(
                f"| {result.case_id} | {cliff.summary or '-'} | {cliff.launched} | "
                f"{'yes' if cliff.confirmed else 'no'} | {cliff.largest_fit} |"
            )
    if not lines:
        return []
    return [
        "",
        "## OOM cliffs",
        "",
        "| cliff | result | launches | confirmed | largest fit |",
        "|---|---|---|---|---|",
        *lines,
    ]


def render_summary(
    results: Sequence[CaseResult],
    title: str,
    details: Sequence[str] = (),
    headline: str = "",
    unjudged: Sequence[Unjudged] = (),
    sublines: Sequence[str] = (),
) -> str:
    """``summary.md``: the title, the headline (``report.headline``) first and the lines under it
    (``sublines``: a night's cost against its projection), the table of every case (``unjudged``
    after the judged), the details."""
    text = render_markdown(results, title, details, unjudged).rstrip("\n")
    if headline:
        title_line, _, rest = text.partition("\n")
        under = "".join(f"\n\n{sub}" for sub in sublines)
        text = f"{title_line}\n\n**{headline}**{under}\n{rest}"
    extra = (
        limits_markdown(results)
        + _trace_rows(results)
        + _diagnoses(results)
        + _diffs(results)
        + _cliffs(results)
    )
    extra += ["", "Plots: `index.html` in this folder; pytest-benchmark format: `benchmark.json`."]
    return "\n".join([text, *extra]) + "\n"
