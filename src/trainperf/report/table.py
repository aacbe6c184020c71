"""The per-case table printed at the end of a run and written to ``summary.md`` (pure formatting)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

from trainperf.case import Outcome
from trainperf.judge.metrics import (
    BUSY_SHARE,
    HOST_TIME,
    KERNEL_TIME,
    METRICS,
    PEAK_ALLOCATED,
    STEP_TIME,
    TOKENS_PER_S,
)
from trainperf.plan.headroom import mfu_cell
from trainperf.result import CaseResult, Unjudged, skip_cause
from trainperf.stored_verdict import StoredVerdict
from trainperf.traces.diff import describe as describe_trace_diff

CASE_COLUMNS = {
    "case": "case",
    "outcome": "outcome",
    "verdict": "verdict",
    "mfu": "MFU",
    "estimate": "est GiB",
    "change": "vs baseline",
}
"""The columns that are the case's, not a metric's."""
SHOWN = (
    "case",
    "outcome",
    "verdict",
    STEP_TIME,
    KERNEL_TIME,
    HOST_TIME,
    TOKENS_PER_S,
    "samples_per_hour",
    "mfu",
    BUSY_SHARE,
    PEAK_ALLOCATED,
    "estimate",
    "device_mem_peak_gib",
    "energy_per_token_j",
    "power_mean_w",
    "change",
)
"""What the table shows, in order: the figures read first, as a terminal is narrow. Every metric is
still judged (a changed one is named under the table) and written to the JSON, JUnit and store."""
COLUMNS = tuple((key, CASE_COLUMNS[key] if key in CASE_COLUMNS else METRICS[key].column) for key in SHOWN)
"""(key, title): a metric's title is its definition's ``column``."""
WHERE_MEASURED = (BUSY_SHARE, KERNEL_TIME, HOST_TIME)
"""Columns shown only where a result of the table has the figure: the busy share comes from
profiled steps, which a nightly takes only when asked (``--perf-trace``); kernel and host time from
a GPU's kernel window."""


def columns(results: Sequence[CaseResult]) -> list[tuple[str, str]]:
    """The table's (key, title) for these results: ``COLUMNS`` less those measured by none of them."""
    measured = {name for result in results for name in result.metrics}
    return [(key, title) for key, title in COLUMNS if key not in WHERE_MEASURED or key in measured]


def format_value(value: float | None) -> str:
    """A figure with as many digits as its size deserves; '-' for none (or not finite)."""
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def _change(verdict: StoredVerdict) -> str:
    """The most telling metric change: step time, else throughput, else the first with a ratio."""
    ratios = {m.metric: m.ratio for m in verdict.metrics if m.ratio is not None}
    kernel = f", kernel {(ratios[KERNEL_TIME] - 1) * 100:+.1f}%" if KERNEL_TIME in ratios else ""
    for name in (STEP_TIME, TOKENS_PER_S, PEAK_ALLOCATED):
        if name in ratios:
            return f"{name.split('_')[0]} {(ratios[name] - 1) * 100:+.1f}%{kernel}"
    return "-"


def rows(results: Sequence[CaseResult], shown: Sequence[tuple[str, str]] | None = None) -> list[list[str]]:
    table = []
    for result in results:
        values = {name: value.value for name, value in result.metrics.items()}
        row = []
        for key, _ in shown if shown is not None else columns(results):
            if key == "case":
                row.append(result.case_id)
            elif key == "outcome":
                row.append(result.outcome)
            elif key == "verdict":
                row.append(result.verdict.verdict or "-")
            elif key == "change":  # a skipped case's cause, in a few words, where others say what moved
                skipped = result.outcome == Outcome.SKIPPED.value
                row.append((skip_cause(result.message) or "-") if skipped else _change(result.verdict))
            elif key == "mfu":
                row.append(mfu_cell(result.limits))
            elif key == "estimate":
                # As stored: to three places (``MemoryEstimate.to_dict``).
                row.append(format_value(round(result.estimate.total_gib, 3)) if result.estimate else "-")
            else:
                row.append(format_value(values.get(key)))
        table.append(row)
    return table


def align(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell: the header, a rule, then one line per row."""
    widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def render_text(results: Sequence[CaseResult], width: int | None = None) -> str:
    """The table as text; with ``width`` (a terminal's columns), fitted to it (``fit``), with a line
    naming what was left out."""
    shown = columns(results)
    body = rows(results, shown)
    if width is None:
        return "\n".join(align([title for _, title in shown], body))
    shown, body, left_out = fit(shown, body, width)
    lines = _with_long_ids_above(shown, body)
    if left_out:
        note = f"(left out to fit {width} columns: {', '.join(left_out)}; summary.md has every column)"
        lines += textwrap.wrap(note, width=max(width, 40))
    return "\n".join(lines)


KEPT = ("case", "verdict", STEP_TIME, "change")
"""What a fitted table always keeps: which case, its verdict and the figure that moved."""
LEFT_OUT_FIRST = (
    "power_mean_w", "energy_per_token_j", "device_mem_peak_gib", "estimate", BUSY_SHARE, "mfu",
    "samples_per_hour", "outcome", HOST_TIME, TOKENS_PER_S, PEAK_ALLOCATED, KERNEL_TIME,
)  # fmt: skip
"""The order a narrow terminal loses columns in: the figures read least first."""
ID_CAP = 44
"""In a fitted table, a case id longer than this stands on a line of its own, whole (ids are what
users copy into ``-k``), with its figures on the next line."""


def fit(
    shown: Sequence[tuple[str, str]], body: Sequence[Sequence[str]], width: int
) -> tuple[list[tuple[str, str]], list[list[str]], list[str]]:
    """Columns that fit ``width`` (all of them where they do): those every row leaves empty go first
    (unnamed), then ``LEFT_OUT_FIRST`` in order (named); an id over ``ID_CAP`` counts as ``ID_CAP``
    wide, since it will stand on its own line."""
    if _width(shown, body, range(len(shown))) <= width:
        return list(shown), [list(row) for row in body], []
    keep = [i for i, (key, _) in enumerate(shown) if key in KEPT or any(row[i] != "-" for row in body)]
    capped = [[row[0][:ID_CAP], *row[1:]] for row in body] if shown and shown[0][0] == "case" else body
    left_out: list[str] = []
    for key in LEFT_OUT_FIRST:
        if _width(shown, capped, keep) <= width:
            break
        index = next((i for i in keep if shown[i][0] == key), None)
        if index is not None:
            keep.remove(index)
            left_out.append(shown[index][1])
    return [shown[i] for i in keep], [[row[i] for i in keep] for row in body], left_out


def _with_long_ids_above(shown: Sequence[tuple[str, str]], body: Sequence[Sequence[str]]) -> list[str]:
    """The aligned table, each id longer than ``ID_CAP`` whole on a line above its figures."""
    if not shown or shown[0][0] != "case" or all(len(row[0]) <= ID_CAP for row in body):
        return align([title for _, title in shown], body)
    long_ids = {n: row[0] for n, row in enumerate(body) if len(row[0]) > ID_CAP}
    blanked = [["" if n in long_ids else row[0], *row[1:]] for n, row in enumerate(body)]
    aligned = align([title for _, title in shown], blanked)
    lines = aligned[:2]
    for n, line in enumerate(aligned[2:]):
        lines += [long_ids[n]] if n in long_ids else []
        lines.append(line)
    return lines


def _width(shown: Sequence[tuple[str, str]], body: Sequence[Sequence[str]], keep: Sequence[int]) -> int:
    widths = [max([len(shown[i][1]), *(len(row[i]) for row in body)]) for i in keep]
    return sum(widths) + 2 * (len(widths) - 1)


def unjudged_row(case: Unjudged, shown: Sequence[tuple[str, str]]) -> list[str]:
    """A case of the selection without a result, in the table's columns: its state as its outcome
    (interrupted, not run, skipped) and why, in a few words, where a result says what moved."""
    cells = {"case": case.case_id, "outcome": case.state, "change": case.cause or case.state}
    return [cells.get(key, "-") for key, _ in shown]


def render_markdown(
    results: Sequence[CaseResult], title: str, details: Sequence[str] = (), unjudged: Sequence[Unjudged] = ()
) -> str:
    shown = columns(results)
    header = [title for _, title in shown]
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results)]
    lines += ["| " + " | ".join(unjudged_row(case, shown)) + " |" for case in unjudged]
    if details:
        lines += ["", *details]
    return "\n".join(lines) + "\n"


def failure_detail(result: CaseResult) -> list[str]:
    """Lines explaining a verdict: the changed metrics and configuration, and environment drift."""
    verdict = result.verdict
    lines = [f"{result.case_id}: {verdict.verdict or 'not judged'} - {verdict.reason}"]
    if verdict.parts:
        lines.append(f"    {verdict.parts}")
    if verdict.kernels:
        lines.append(f"    what moved: {verdict.kernels}")
    if verdict.judged_against:
        lines.append(f"    judged against {verdict.judged_against}")
    for metric in verdict.metrics:
        if metric.verdict in ("regressed", "improved", "noisy") and metric.gated:
            interval = metric.interval
            span = f" 95% CI of ratio [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
            p_value = f" p={metric.p_value:.2g}" if metric.p_value is not None else ""
            change = f"{(metric.ratio - 1) * 100:+.1f}%" if metric.ratio is not None else "n/a"
            lines.append(
                f"    {metric.metric}: {format_value(metric.baseline)} -> {format_value(metric.current)} "
                f"({change}){span}{p_value} [{metric.verdict}]"
            )
    if verdict.trace_diff:
        lines += [f"    {line}" for line in describe_trace_diff(verdict.trace_diff)]
    lines += [f"    {line}" for line in diagnosis_lines(result)]
    for key, old, new in verdict.environment_changes:
        lines.append(f"    environment: {key} {old} -> {new}")
    return lines


def diagnosis_lines(result: CaseResult) -> list[str]:
    """The ``diagnosis:`` lines a result carries (its verdict's diagnosis record: its ``line``, or
    its ``lines``); none when it has none."""
    diagnosis = result.verdict.diagnosis
    lines = diagnosis.shown_lines() if diagnosis else []
    return [line if line.startswith("diagnosis:") else f"diagnosis: {line}" for line in lines if line]
