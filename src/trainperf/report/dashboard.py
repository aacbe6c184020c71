"""The trend site: a static dashboard of the results history (like asv's published site).

``index.html`` has one row per case and runner with a sparkline per headline metric (step time,
tokens/s, peak memory, energy per token, OOM cliff); ``cases/<case>.html`` plots each metric's
series with its change points (red) and environment changes (blue) marked, every point a link to
its run's report. Inline SVG and CSS only: no CDN, so it reads offline. A marker script records
load and script errors on the page for a headless browser check.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from html import escape
from pathlib import Path

from trainperf.paths import PAGE_FILE
from trainperf.report.html import MARKER
from trainperf.run.folder import RunFolder
from trainperf.store.db import Store
from trainperf.store.series import Series, all_series, history_points

HEADLINE = (
    ("step_time_s", "step time (s)"),
    ("tokens_per_s", "tokens/s"),
    ("peak_allocated_gib", "peak allocated (GiB)"),
    ("energy_per_token_j", "energy/token (J)"),
)
CLIFF_PREFIX = "cliff_"
CLIFF_AXES = ("cliff_batch_size", "cliff_max_seq_len", "cliff_grad_accum", "cliff_micro_batch_size")
OTHER = (
    "device_mem_peak_gib",
    "peak_reserved_gib",
    "host_peak_rss_gib",
    "warmup_s",
    "power_mean_w",
    "throughput_per_gpu",
)
STYLE = """
body { font-family: system-ui, sans-serif; margin: 20px; color: #222; }
table { border-collapse: collapse; font-size: 12px; } td, th { border: 1px solid #ddd; padding: 2px 6px; }
th { background: #f3f3f3; } td.v { text-align: right; white-space: nowrap; }
.cp { color: #c00; font-weight: bold; } .env { color: #15c; }
svg { background: #fff; } .plots { display: flex; flex-wrap: wrap; gap: 16px; }
"""
SPARK_W, SPARK_H = 120, 24
PLOT_W, PLOT_H, PAD = 640, 220, 46


def build_site(store: Store, output: Path, *, reports_url: str | None = None) -> int:
    """Write the site under ``output``; returns the number of case pages."""
    names = [m for m, _ in HEADLINE] + list(CLIFF_AXES) + list(OTHER)
    points = history_points(store, names)
    per_metric = {
        name: {(s.case_id, s.runner): s for s in found} for name, found in all_series(points, names).items()
    }
    keys = sorted({key for table in per_metric.values() for key in table})
    (output / "cases").mkdir(parents=True, exist_ok=True)
    rows = []
    for case_id in sorted({case for case, _ in keys}):
        runners = [runner for case, runner in keys if case == case_id]
        page = f"cases/{_slug(case_id)}.html"
        sections = []
        for runner in runners:
            found = {
                name: per_metric[name][(case_id, runner)]
                for name in names
                if (case_id, runner) in per_metric[name]
            }
            rows.append(_index_row(case_id, runner, page, found))
            sections.append(_runner_section(runner, found, output / "cases", reports_url))
        (output / page).write_text(
            _page(
                f"trainperf history: {case_id}",
                f"<p><a href='../{PAGE_FILE}'>all cases</a></p><h1>{escape(case_id)}</h1>{''.join(sections)}",
            )
        )
    head = "".join(f"<th>{escape(label)}</th>" for _, label in HEADLINE)
    table = (
        f"<table><tr><th>case</th><th>runner</th><th>runs</th>{head}<th>OOM cliff</th></tr>"
        f"{''.join(rows)}</table>"
    )
    legend = (
        "<p>Latest value beside each sparkline; <span class='cp'>&#9650;</span> "
        "a change point in the last 10 runs.</p>"
    )
    (output / PAGE_FILE).write_text(_page("trainperf history", f"<h1>trainperf history</h1>{legend}{table}"))
    return len({case for case, _ in keys})


def _slug(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<script>{MARKER}</script><style>{STYLE}</style></head><body>{body}</body></html>"
    )


def _index_row(case_id: str, runner: str, page: str, found: dict[str, Series]) -> str:
    count = max((len(s.points) for s in found.values()), default=0)
    cells = [
        f"<td><a href='{escape(page)}'>{escape(case_id)}</a></td>",
        f"<td>{escape(runner)}</td><td class='v'>{count}</td>",
    ]
    cliff = next((found[name] for name in CLIFF_AXES if name in found), None)
    for series in [found.get(name) for name, _ in HEADLINE] + [cliff]:
        cells.append(_spark_cell(series))
    return f"<tr>{''.join(cells)}</tr>"


def _spark_cell(series: Series | None) -> str:
    if series is None or not series.points:
        return "<td class='v'>-</td>"
    values = [p.values[series.metric] for p in series.points]
    recent = any(cp.index >= len(values) - 10 for cp in series.change_points)
    flag = " <span class='cp' title='change point in the last 10 runs'>&#9650;</span>" if recent else ""
    return f"<td class='v'>{_sparkline(values)} {_fmt(values[-1])}{flag}</td>"


def _sparkline(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    span = (high - low) or abs(high) or 1.0
    step = SPARK_W / max(1, len(values) - 1)
    coords = " ".join(
        f"{i * step:.1f},{SPARK_H - 2 - (v - low) / span * (SPARK_H - 4):.1f}" for i, v in enumerate(values)
    )
    return (
        f"<svg class='plot spark' width='{SPARK_W}' height='{SPARK_H}' viewBox='0 0 {SPARK_W} {SPARK_H}'>"
        f"<polyline fill='none' stroke='#36c' stroke-width='1.2' points='{coords}'/></svg>"
    )


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _runner_section(runner: str, found: dict[str, Series], pages: Path, reports_url: str | None) -> str:
    plots = [_plot(series, pages, reports_url) for series in found.values()]
    notes = _change_notes(found)
    return (
        f"<section><h2>runner {escape(runner)}</h2><div class='plots'>{''.join(plots)}</div>{notes}</section>"
    )


def _change_notes(found: dict[str, Series]) -> str:
    """Each change point with the environment diff between the runs on either side of it."""
    items = []
    for series in found.values():
        for cp in series.change_points:
            before, after = series.points[cp.index - 1], series.points[cp.index]
            diff = env_diff_text(series, cp.index)
            items.append(
                f"<li><span class='cp'>{escape(series.metric)} {(cp.ratio - 1) * 100:+.1f}%</span> at run "
                f"{escape(after.started)} (after {escape(before.started)}): {escape(diff)}</li>"
            )
    return f"<h3>change points</h3><ul>{''.join(items)}</ul>" if items else "<p>no change point</p>"


def env_diff_text(series: Series, index: int) -> str:
    from trainperf.judge.fingerprint import environment_changes

    changed = environment_changes(series.points[index - 1].fingerprint, series.points[index].fingerprint)
    return ", ".join(f"{k} {a} -> {b}" for k, a, b in changed) or "no environment change"


def _plot(series: Series, pages: Path, reports_url: str | None) -> str:
    values = [p.values[series.metric] for p in series.points]
    low, high = min(values), max(values)
    span = (high - low) or abs(high) * 0.01 or 1.0
    low, high = low - 0.05 * span, high + 0.05 * span
    inner_w, inner_h = PLOT_W - 2 * PAD, PLOT_H - 2 * PAD
    step = inner_w / max(1, len(values) - 1)

    def x(i: float) -> float:
        return PAD + i * step

    def y(v: float) -> float:
        return PAD + inner_h - (v - low) / (high - low) * inner_h

    parts = [
        f"<svg class='plot series' width='{PLOT_W}' height='{PLOT_H}' viewBox='0 0 {PLOT_W} {PLOT_H}'>",
        f"<text x='{PAD}' y='18' font-size='13'>{escape(series.metric)}</text>",
        f"<text x='4' y='{PAD}' font-size='10'>{_fmt(high)}</text>",
        f"<text x='4' y='{PAD + inner_h}' font-size='10'>{_fmt(low)}</text>",
    ]
    for position, changed in series.environment.items():
        title = escape(", ".join(f"{k} {a} -> {b}" for k, a, b in changed))
        parts.append(
            f"<line class='env' x1='{x(position - 0.5):.1f}' x2='{x(position - 0.5):.1f}' "
            f"y1='{PAD}' y2='{PAD + inner_h}' stroke='#15c' stroke-dasharray='2,3'>"
            f"<title>environment: {title}</title></line>"
        )
    for cp in series.change_points:
        parts.append(
            f"<line class='cp' x1='{x(cp.index - 0.5):.1f}' x2='{x(cp.index - 0.5):.1f}' "
            f"y1='{PAD - 6}' y2='{PAD + inner_h}' stroke='#c00' stroke-width='2'>"
            f"<title>change point {(cp.ratio - 1) * 100:+.1f}%</title></line>"
        )
    coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts.append(f"<polyline fill='none' stroke='#36c' stroke-width='1' points='{coords}'/>")
    page_dir = str(pages.resolve())
    for i, (point, value) in enumerate(zip(series.points, values)):
        href = escape(_report_link(point.run_dir, page_dir, reports_url))
        parts.append(
            f"<a href='{href}'><circle cx='{x(i):.1f}' cy='{y(value):.1f}' r='2.5' fill='#36c'>"
            f"<title>{escape(point.started)}: {_fmt(value)}</title></circle></a>"
        )
    parts.append("</svg>")
    return "".join(parts)


@functools.lru_cache(maxsize=4096)
def _report_link(run_dir: str | None, pages: str, reports_url: str | None) -> str:
    """The run's report: under ``reports_url`` by the run folder's name, else a path relative to the page."""
    if not run_dir:
        return "#"
    if reports_url:
        return f"{reports_url.rstrip('/')}/{Path(run_dir).name}/{PAGE_FILE}"
    return os.path.relpath(RunFolder(Path(run_dir)).page_path, pages)
