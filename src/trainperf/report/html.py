"""The run folder's ``index.html``: one self-contained page (inline CSS and SVG, no external files).

A marker script sets ``data-report="rendered"`` on load and ``data-script-error`` on any script
error, so a headless browser can check the page (``tests/test_report_html.py``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.ground.folder import RunFolder
from trainperf.judge.metrics import KERNEL_TIME, METRICS, STEP_TIME, TOKENS_PER_S, Direction, resolve_metric
from trainperf.judge.step_series import step_medians
from trainperf.report.headroom_lines import limit_lines
from trainperf.report.rundata import probe_series, runs_of
from trainperf.report.svg import Bar, Line, Mark, grouped_ratio_chart, line_chart, stacked_bars
from trainperf.report.table import columns, diagnosis_lines, rows, unjudged_row
from trainperf.result import CaseResult, Unjudged
from trainperf.traces.diff import describe

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f3f3f3; } td:first-child { text-align: left; }
.v-regressed, .v-outcome-changed, .v-config-changed { background: #fdd; }
.v-noisy { background: #ffc; } .v-improved { background: #dfd; } .v-unjudged { color: #666; }
section { margin: 18px 0; } .plots { display: flex; flex-wrap: wrap; gap: 12px; }
pre { background: #f7f7f7; padding: 8px; font-size: 12px; white-space: pre-wrap; }
p.diagnosis { font-family: monospace; font-size: 12px; background: #fff4e5; padding: 4px 8px; margin: 4px 0; }
"""
MARKER = """
window.onerror = function (msg) { document.documentElement.setAttribute('data-script-error', String(msg)); };
window.addEventListener('load', function () {
  var svgs = document.querySelectorAll('svg.plot'), outside = 0, cut = [];
  svgs.forEach(function (svg) {
    // Screen boxes, so that rotated labels (a y axis) are measured as drawn.
    var frame = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(function (text) {
      var box = text.getBoundingClientRect();
      if (box.left < frame.left - 0.5 || box.top < frame.top - 0.5 || box.right > frame.right + 0.5 ||
          box.bottom > frame.bottom + 0.5) {
        outside += 1;
        if (outside <= 3) { cut.push(svg.getAttribute('aria-label') + ': ' + text.textContent); }
      }
    });
  });
  document.documentElement.setAttribute('data-plots', String(svgs.length));
  document.documentElement.setAttribute('data-labels-outside', String(outside));
  if (cut.length) { document.documentElement.setAttribute('data-labels-cut', cut.join(' | ')); }
  document.documentElement.setAttribute('data-report', 'rendered');
});
"""
TIMING = (
    STEP_TIME,
    KERNEL_TIME,
    TOKENS_PER_S,
    "peak_allocated_gib",
    "device_mem_peak_gib",
    "energy_per_token_j",
)
"""The metrics the ratio charts show: the ones a verdict rests on."""


def _case(result: CaseResult) -> Case | None:
    try:
        return result.case.as_case()
    except (TypeError, ValueError):
        return None


def _table(results: Sequence[CaseResult], unjudged: Sequence[Unjudged]) -> str:
    """Every case of the selection: the judged ones, then those cut, never run or skipped at the start."""
    shown = columns(results)
    head = "".join(f"<th>{escape(title)}</th>" for _, title in shown)
    body = []
    for result, row in zip(results, rows(results)):
        verdict = escape(result.verdict.verdict or "-")
        cells = "".join(f"<td>{escape(cell)}</td>" for cell in row)
        body.append(f'<tr class="v-{verdict}">{cells}</tr>')
    for case in unjudged:
        cells = "".join(f"<td>{escape(cell)}</td>" for cell in unjudged_row(case, shown))
        body.append(f'<tr class="v-unjudged">{cells}</tr>')
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _memory_and_power(run_dir: Path, results: Sequence[CaseResult], idle_b: int) -> list[str]:
    plots, power = [], []
    for result in results:
        lines = []
        for series in runs_of(run_dir, result):
            if series.allocated_gib():
                lines.append(Line(f"{series.label} allocated (allocator)", series.allocated_gib()))
            if series.samples:
                lines.append(Line(f"{series.label} device (NVML)", series.device_gib(idle_b), dashed=True))
            if series.power_w():
                power.append(Line(f"{result.case_id} {series.label}", series.power_w()))
        if lines:
            plots.append(line_chart(f"memory: {result.case_id}", "seconds", "GiB", lines))
    if power:
        plots.append(line_chart("board power", "seconds", "W", power))
    return plots


def _step_times(run_dir: Path, results: Sequence[CaseResult]) -> list[str]:
    plots = []
    for result in results:
        lines = []
        for series in runs_of(run_dir, result):
            if series.step_times(False):
                lines.append(Line(f"{series.label} measured", series.step_times(False)))
            if series.step_times(True):
                lines.append(
                    Line(f"{series.label} profiled (not timed)", series.step_times(True), dashed=True)
                )
        if lines:
            plots.append(line_chart(f"step time: {result.case_id}", "step", "s", lines))
    return plots


def _throughput_vs_batch(run_dir: Path, results: Sequence[CaseResult]) -> list[str]:
    """Throughput against batch size per configuration: measured cases, cliff probes, the OOM cliff."""
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    marks: dict[str, list[Mark]] = defaultdict(list)
    for result in results:
        case = _case(result)
        if case is None:
            continue
        key = f"{case.family} {case.model} {case.method} {case.profile}"
        if result.cliff:
            for probe in result.cliff.probes:
                probe_id = case.replace(batch_size=probe.value).id
                rates = [r for s in probe_series(run_dir, probe_id) if (r := s.tokens_per_s()) is not None]
                if probe.fits and rates:
                    groups[key].append((float(probe.value), max(rates)))
                elif probe.outcome == Outcome.OOM:
                    marks[key].append(Mark(float(probe.value), "OOM", 0.0))
            if result.cliff.smallest_oom is not None:
                marks[key].append(Mark(float(result.cliff.smallest_oom), f"cliff: {result.cliff.summary}"))
        elif result.outcome == Outcome.OOM:
            marks[key].append(Mark(float(case.batch_size), "OOM", 0.0))
        elif TOKENS_PER_S in result.metrics:
            groups[key].append((float(case.batch_size), result.metrics[TOKENS_PER_S].value))
    return [
        line_chart(
            f"throughput vs batch size: {key}",
            "batch size",
            "tokens/s",
            [Line(key, sorted(groups[key]))],
            marks[key],
        )
        for key in sorted(set(groups) | set(marks))
        if len(groups[key]) + len(marks[key]) >= 2  # one case alone is a point, not a plot
    ]


def _phases(run_dir: Path, results: Sequence[CaseResult]) -> str:
    bars = []
    for result in results:
        for series in runs_of(run_dir, result):
            phases = series.phases()
            if phases:
                bars.append(Bar(f"{result.case_id} {series.label}", sorted(phases.items())))
    return stacked_bars("seconds per step by phase (RL)", "s", bars)


def _ratio_row(
    name: str, ratio: float, interval: tuple[float, float] | None
) -> tuple[str, float, tuple[float, float] | None, bool]:
    """A metric's ratio for the ratio charts, with whether it changed for the worse (its direction)."""
    defined = resolve_metric(METRICS, name)
    higher_is_worse = defined is None or defined.direction is Direction.LOWER
    return name, ratio, interval, ratio > 1 if higher_is_worse else ratio < 1


def _ratios(results: Sequence[CaseResult]) -> str:
    groups = []
    for result in results:
        rows_ = [
            _ratio_row(metric.metric, metric.ratio, metric.interval)
            for metric in result.verdict.metrics
            if metric.metric in TIMING and metric.ratio is not None
        ]
        groups.append((result.case_id, rows_))
    return grouped_ratio_chart("this run / baseline (95% interval)", groups)


def _step_times_vs_baseline(results: Sequence[CaseResult]) -> list[str]:
    """Each case's per-step times (median over its runs) over its baseline's, step by step."""
    plots = []
    for result in results:
        current = step_medians(result.metrics.get(STEP_TIME))
        baseline = result.verdict.baseline_step_times
        if len(current) + len(baseline) < 2 or not baseline:
            continue
        lines = [
            Line("this run (median over runs)", [(x, y) for x, y in current]),
            Line("baseline", [(float(x), float(y)) for x, y in baseline], dashed=True),
        ]
        plots.append(line_chart(f"step time vs baseline: {result.case_id}", "step", "s", lines))
    return plots


def _diagnoses(results: Sequence[CaseResult]) -> str:
    return "".join(
        f'<p class="diagnosis">{escape(result.case_id)}: {escape(line)}</p>'
        for result in results
        for line in diagnosis_lines(result)
    )


def _limits(results: Sequence[CaseResult]) -> str:
    lines = limit_lines(results)
    return f"<pre>{escape(chr(10).join(lines))}</pre>" if lines else ""


def _interval(metric: dict[str, Any]) -> tuple[float, float] | None:
    interval = metric.get("interval")
    return (float(interval[0]), float(interval[1])) if interval and None not in interval else None


def _comparisons(run_dir: Path) -> list[str]:
    """``trainperf compare --json`` or ``ab --json`` output saved in the run folder, when present."""
    plots = []
    for name in ("compare.json", "ab.json"):
        path = run_dir / name
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        groups = [
            (
                str(case.get("case_id")),
                [
                    _ratio_row(str(metric["metric"]), float(metric["ratio"]), _interval(metric))
                    for metric in case.get("metrics", [])
                    if metric.get("metric") in TIMING and metric.get("ratio") is not None
                ],
            )
            for case in data.get("cases", [])
        ]
        plots.append(grouped_ratio_chart(f"{name}: B / A (95% interval)", groups))
    return [p for p in plots if p]


def _traces(results: Sequence[CaseResult]) -> tuple[str, str, str]:
    busy_bars, category_bars, lines = [], [], []
    for result in results:
        record = result.trace
        summary = record.summary if record else None
        if record is None or summary is None:
            continue
        if summary.kind == "gpu":
            parts = [
                ("GPU busy", summary.busy_ms),
                ("host-bound idle", summary.idle_host_bound_ms),
                ("other idle", summary.idle_other_ms),
            ]
        else:
            parts = [("CPU busy (main thread)", summary.busy_ms), ("CPU idle", summary.idle_ms)]
        busy_bars.append(Bar(result.case_id, [(name, summary.per_step(value)) for name, value in parts]))
        category_bars.append(
            Bar(result.case_id, [(n, summary.per_step(v)) for n, v in summary.categories_ms.items()])
        )
        top = "; ".join(f"{kernel.name[:60]} {kernel.share:.0%}" for kernel in summary.top[:5])
        where = record.file or record.deleted or ""
        lines += [f"{result.case_id}: {line.strip()}" for line in describe(result.verdict.trace_diff)]
        lines.append(
            f"{result.case_id}: {summary.kind} busy {summary.busy_fraction:.1%} over {summary.steps} "
            "profiled step(s); "
            f"top: {top}; trace {where} ({(record.file_bytes or 0) / 2**20:.1f} MB)"
        )
    busy = stacked_bars("busy / idle per profiled step", "ms", busy_bars, normalise=True)
    categories = stacked_bars("time by category per profiled step", "ms", category_bars)
    return busy, categories, "\n".join(lines)


def render_html(
    run_dir: Path,
    results: Sequence[CaseResult],
    title: str,
    details: Sequence[str] = (),
    headline: str = "",
    unjudged: Sequence[Unjudged] = (),
    sublines: Sequence[str] = (),
) -> str:
    info = run_info(run_dir)
    idle_b = int(info.get("idle_mem_b") or 0)
    busy, categories, trace_text = _traces(results)
    sections = [
        (
            "Cases",
            _table(results, unjudged)
            + _diagnoses(results)
            + (f"<pre>{escape(chr(10).join(details))}</pre>" if details else ""),
        ),
        ("How far from the limit", _limits(results)),
        ("Ratios to baseline", _ratios(results)),
        ("Step times against the baseline", "".join(_step_times_vs_baseline(results))),
        ("Compare and A/B", "".join(_comparisons(run_dir))),
        ("Traces", busy + categories + (f"<pre>{escape(trace_text)}</pre>" if trace_text else "")),
        ("Throughput vs batch size", "".join(_throughput_vs_batch(run_dir, results))),
        ("Memory and power over time", "".join(_memory_and_power(run_dir, results, idle_b))),
        ("RL phases", _phases(run_dir, results)),
        ("Step times", "".join(_step_times(run_dir, results))),
    ]
    body = "".join(
        f'<section><h2>{escape(name)}</h2><div class="plots">{html}</div></section>'
        for name, html in sections
        if html
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><script>{MARKER}</script><style>{STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>"
        + (f'<p class="headline"><strong>{escape(headline)}</strong></p>' if headline else "")
        + "".join(f'<p class="night">{escape(sub)}</p>' for sub in sublines)
        + f"<p>{escape(_describe_run(info))}</p>{body}</body></html>\n"
    )


def run_info(run_dir: Path) -> dict[str, Any]:
    """The run's latest session record (``run.json``); empty when there is none."""
    sessions = RunFolder(run_dir).session_records() or [{}]
    return sessions[-1]


def _describe_run(info: dict[str, Any]) -> str:
    fingerprint = info.get("fingerprint") or {}
    parts = [f"class {info.get('gpu_class', '?')}", f"started {str(info.get('started', '?'))[:19]}"]
    commit = (info.get("commit") or {}).get("id")
    parts += [f"commit {str(commit)[:12]}"] if commit else []
    parts += [
        f"{key} {fingerprint[key]}"
        for key in ("gpu_name", "driver", "cuda", "torch", "cpu")
        if fingerprint.get(key)
    ]
    return "; ".join(parts)
