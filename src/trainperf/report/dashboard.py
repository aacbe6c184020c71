"""The trend site: the page an on-call engineer opens first, then one page per case.

``index.html`` answers "what went red, when, by how much": the cases whose latest run is not a
pass (largest first, with the stored verdict, the diagnosis line, the environment diff since the
case's last good run and a link to the run folder), then every change point in the window (not
only recent ones), then all cases with their latest verdicts as coloured cells. ``cases/<case>.html``
draws each metric over time as % of its reference level with the tolerance band, segment medians
between change points and a marker per verdict (``dashboard_case``). Static files, inline SVG and
CSS, one small inline script for tooltips: nothing is fetched, so it reads offline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from pathlib import Path

from trainperf.case import Outcome
from trainperf.judge.metrics import (
    CLIFF_AXES,
    HOST_INDEX,
    HOST_TIME,
    KERNEL_TIME,
    METRICS,
    PEAK_ALLOCATED,
    STEP_TIME,
    TOKENS_PER_S,
)
from trainperf.paths import PAGE_FILE
from trainperf.report.dashboard_case import Links, case_page, kind_chip, legend, shown_time
from trainperf.report.html import MARKER
from trainperf.report.step_side import step_side
from trainperf.report.trend_model import (
    BASELINE_RUNS,
    CaseTrend,
    Finding,
    build_trends,
    change_findings,
    environment_at,
    epoch,
    kind_of,
    on_line,
    red_streaks,
)
from trainperf.report.trend_read import explanation
from trainperf.report.trend_svg import COLOURS
from trainperf.store.interface import HistoryStore

HEADLINE = (STEP_TIME, KERNEL_TIME, TOKENS_PER_S, PEAK_ALLOCATED, "energy_per_token_j")
OTHER = (
    HOST_TIME,
    HOST_INDEX,
    "device_mem_peak_gib",
    "peak_reserved_gib",
    "host_peak_rss_gib",
    "warmup_s",
    "power_mean_w",
    "throughput_per_gpu",
)
SHOWN = (*HEADLINE, *(f"cliff_{axis}" for axis in CLIFF_AXES), *OTHER)
"""The metrics a case page plots, in order: the headline figures, the OOM cliffs, then the rest
that gate or explain a change (the step-time quartile, samples/h and peak power add nothing)."""
LABELS = {name: METRICS[name].label for name in SHOWN}
RECENT_CELLS = 20
SPARK_W, SPARK_H, SPARK_BUCKETS = 140, 26, 70
STYLE = """
body { font-family: system-ui, sans-serif; margin: 18px; color: #222; font-size: 14px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 22px 0 6px; }
table { border-collapse: collapse; font-size: 13px; } td, th { border-bottom: 1px solid #e3e3e3;
  padding: 4px 8px; text-align: left; vertical-align: top; } th { background: #f3f3f3; }
td.size { font-weight: bold; white-space: nowrap; font-size: 15px; } td.size small { font-weight: normal; }
td.size small.side { color: #555; white-space: normal; }
.bad { color: #c0262d; } .good { color: #23882d; } .muted { color: #666; } .nowrap { white-space: nowrap; }
.chip { display: inline-block; padding: 1px 7px; border-radius: 9px; color: #fff; font-size: 12px; }
.cause { max-width: 520px; } .env { color: #15c; }
.cells i { display: inline-block; width: 7px; height: 14px; margin-right: 1px; background: #3a6fb0; }
.cells i.regressed, .cells i.failed { background: #d62728; } .cells i.improved { background: #2ca02c; }
.cells i.noisy { background: #e08a00; } .cells i.contaminated { background: #999; }
.cells i.planted { background: #8e44ad; } .cells i.skipped { background: #aaa; }
.legend { font-size: 12px; color: #444; } .legend svg { vertical-align: middle; }
.plots { display: flex; flex-wrap: wrap; gap: 10px; } svg { background: #fff; }
#tip { position: fixed; display: none; background: #fff; border: 1px solid #888; padding: 3px 6px;
  font-size: 12px; pointer-events: none; box-shadow: 1px 1px 3px #aaa; }
"""


def metric_names() -> list[str]:
    return list(LABELS)


def build_site(
    store: HistoryStore,
    output: Path,
    *,
    reports_url: str | None = None,
    runs_root: Path | None = None,
    since: str | None = None,
) -> int:
    """Write the site under ``output`` for the runs started at or after ``since`` (all by default);
    returns the number of case pages."""
    trends = build_trends(store.stored_runs(metric_names(), since=since), metric_names())
    (output / "cases").mkdir(parents=True, exist_ok=True)
    links = Links(output / "cases", reports_url, runs_root)
    pages = {}
    for case_id in dict.fromkeys(trend.case_id for trend in trends):
        own = [trend for trend in trends if trend.case_id == case_id]
        page = f"cases/{slug(case_id)}.html"
        pages[case_id] = page
        (output / page).write_text(page_html(f"trainperf history: {case_id}", case_page(own, links, LABELS)))
    index_links = Links(output, reports_url, runs_root)
    body = index_body(trends, pages, index_links, runs_root)
    (output / PAGE_FILE).write_text(page_html("trainperf history", body))
    return len(pages)


def slug(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", case_id)


def page_html(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<script>{MARKER}</script><style>{STYLE}</style></head><body>{body}</body></html>"
    )


def index_body(
    trends: Sequence[CaseTrend], pages: dict[str, str], links: Links, runs_root: Path | None
) -> str:
    if not trends:
        return (
            "<h1>trainperf history</h1><p>No stored run in this window: load run folders with "
            "`trainperf ingest`, or start the window earlier (--since).</p>"
        )
    runs = [run for trend in trends for run in trend.runs]
    first, last = min(r.started for r in runs), max(r.started for r in runs)
    header = (
        f"<h1>trainperf history</h1><p class='muted'>{len(runs)} stored results of {len(pages)} case(s) "
        f"on {len({t.runner for t in trends})} runner(s), {escape(shown_time(first))} .. "
        f"{escape(shown_time(last))} "
        f"(UTC). A red case's size: the median of its runs since its last good one (those on the "
        f"line, not contaminated, planted or failed) against the median of the {BASELINE_RUNS} good "
        f"runs before them; a change point's: the medians on either side.</p>{legend()}"
    )
    return (
        header
        + _red_section(red_streaks(trends), pages, links, runs_root)
        + _change_section(change_findings(trends), pages, links, first, last)
        + _all_cases(trends, pages)
    )


def _changes_cell(finding: Finding) -> str:
    if not finding.changes:
        return f"<td class='size bad'><small>{escape(_no_change_because(finding))}</small></td>"
    (name, change), rest = finding.changes[0], _beyond(finding, finding.changes[1:])[:2]
    metric = finding.trend.metrics.get(name)
    tone = "bad" if metric is not None and metric.adverse(change) else "good"
    more = "".join(
        f"<br><small class='{'bad' if finding.trend.metrics[n].adverse(c) else 'good'}'>"
        f"{escape(LABELS.get(n, n))} {c:+.1%}</small>"
        for n, c in rest
    )
    since = finding.since if finding.since >= 0 else None
    side = step_side(finding.trend, finding.run, finding.changes, since)
    told = f"<br><small class='side'>{escape(side)}</small>" if side else ""
    label = escape(LABELS.get(name, name))
    return f"<td class='size {tone}'>{change:+.1%} <small>{label}</small>{more}{told}</td>"


def _no_change_because(finding: Finding) -> str:
    """Why a red row has no change to show: its latest run failed, the history holds no good run
    before it to measure against, or its runs recorded none of the metrics."""
    trend = finding.trend
    if kind_of(trend.runs[finding.run]) == "failed":
        return "no figure: the run failed"
    if not any(kind_of(run) in ("pass", "improved") for run in trend.runs[: finding.since]):
        return "no earlier good run to measure against"
    return "no figure recorded"


def _beyond(finding: Finding, changes: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """The changes beyond their metric's tolerance (the others are the runs' usual spread)."""
    metrics = finding.trend.metrics
    return [(n, c) for n, c in changes if n in metrics and abs(c) > metrics[n].tolerance > 0]


def _case_cell(finding: Finding, pages: dict[str, str]) -> str:
    trend = finding.trend
    page = escape(pages[trend.case_id])
    runner = f"<br><small class='muted'>{escape(trend.runner)}</small>"
    return f"<td><a href='{page}'>{escape(trend.case_id)}</a>{runner}</td>"


def _red_section(
    found: Sequence[Finding], pages: dict[str, str], links: Links, runs_root: Path | None
) -> str:
    if not found:
        return "<h2 class='good'>Every case passed its latest run</h2>"
    rows = []
    for finding in found:
        trend, run = finding.trend, finding.trend.runs[finding.run]
        first = trend.runs[finding.since]
        good = trend.runs[finding.since - 1] if finding.since > 0 else None
        count = finding.run - finding.since + 1
        when = f"{shown_time(first.started)} {first.commit_short}".strip()
        good_text = f"last good {shown_time(good.started)}" if good else "no good run before"
        rows.append(
            f"<tr>{_changes_cell(finding)}{_case_cell(finding, pages)}<td>{kind_chip(run)}</td>"
            f"<td class='nowrap'>since {escape(when)}<br><small class='muted'>{count} run(s); "
            f"{escape(good_text)}</small></td><td class='cause'>{escape(_cause(finding, runs_root))}</td>"
            f"<td class='env'>{escape(_environment(trend, finding.run, finding.since))}</td>"
            f"<td><a href='{escape(links.run(run))}'>run folder</a></td></tr>"
        )
    return (
        f"<h2 class='bad'>Not a pass on the latest run: {len(found)} case(s), largest change first</h2>"
        "<table><tr><th>change</th><th>case</th><th>verdict</th><th>when</th><th>cause</th>"
        f"<th>environment since last good</th><th>run</th></tr>{''.join(rows)}</table>"
    )


def _cause(finding: Finding, runs_root: Path | None) -> str:
    """The diagnosis line where the run folder has it, else the verdict's reason, else what the
    store kept (the message, what it was judged against)."""
    run = finding.trend.runs[finding.run]
    said = explanation(run, runs_root)
    parts = []
    if run.planted:
        parts.append(f"planted +{run.planted:.0%} slowdown (a check of the gate, not a change of the code)")
    if run.outcome != Outcome.OK:
        parts.append(f"outcome {run.outcome}")
    parts += [text for text in (said.diagnosis, said.reason) if text]
    if run.message and run.message not in said.reason:  # a skip's reason is its message: said once
        parts.append(run.message)
    if not said.found:
        # The store keeps what the run was judged against (or the reason where it had none).
        parts += [run.judged_against.split(";")[0]] if run.judged_against else []
        parts.append("the run folder was not found for its diagnosis: pass --runs DIR")
    return "; ".join(parts)


def _environment(trend: CaseTrend, index: int, since: int | None = None) -> str:
    changed = environment_at(trend, index, since)
    return ", ".join(f"{k} {a} -> {b}" for k, a, b in changed) or "none"


def _change_section(
    found: Sequence[Finding], pages: dict[str, str], links: Links, first: str, last: str
) -> str:
    title = f"Change points from {first[:10]} to {last[:10]}: {len(found)}, largest first"
    if not found:
        return f"<h2>{escape(title)}</h2><p>No change point in the window.</p>"
    rows = []
    for finding in found:
        trend, run = finding.trend, finding.trend.runs[finding.run]
        name = finding.changes[0][0]
        cp = next(cp for index, cp in trend.metrics[name].change_points if index == finding.run)
        rows.append(
            f"<tr>{_changes_cell(finding)}{_case_cell(finding, pages)}"
            f"<td class='nowrap'>{escape(shown_time(run.started))}<br><small class='muted'>"
            f"{escape(run.commit_short or 'no commit')}</small></td>"
            f"<td class='nowrap'>{_num(cp.before)} &rarr; {_num(cp.after)}</td><td>{kind_chip(run)}</td>"
            f"<td class='env'>{escape(_environment(trend, finding.run))}</td>"
            f"<td><a href='{escape(links.run(run))}'>run folder</a></td></tr>"
        )
    return (
        f"<h2>{escape(title)}</h2><table><tr><th>change</th><th>case</th><th>first run at the new level</th>"
        "<th>median before &rarr; after</th><th>its verdict</th><th>environment change there</th>"
        "<th>run</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _all_cases(trends: Sequence[CaseTrend], pages: dict[str, str]) -> str:
    rows = []
    for trend in trends:
        counts = trend.counts()
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.most_common())
        cells = "".join(f"<i class='{kind_of(run)}'></i>" for run in trend.runs[-RECENT_CELLS:])
        found = len({index for m in trend.metrics.values() for index, _ in m.change_points})
        rows.append(
            f"<tr><td><a href='{escape(pages[trend.case_id])}'>{escape(trend.case_id)}</a></td>"
            f"<td>{escape(trend.runner)}</td>"
            f"<td>{len(trend.runs)} <small class='muted'>({escape(summary)})</small></td>"
            f"<td class='cells'>{cells}</td><td>{sparkline(trend, STEP_TIME)}</td>"
            f"<td>{sparkline(trend, KERNEL_TIME)}</td>"
            f"<td class='{'bad' if found else 'muted'}'>{found or '-'}</td></tr>"
        )
    return (
        f"<h2>All cases</h2><table><tr><th>case</th><th>runner</th><th>stored runs</th>"
        f"<th>last {RECENT_CELLS} verdicts (oldest left)</th><th>step time, % of reference</th>"
        "<th>kernel time, % of reference</th>"
        f"<th>runs with a change point</th></tr>{''.join(rows)}</table>"
    )


def sparkline(trend: CaseTrend, name: str) -> str:
    """One metric of the case as % of its reference, bucket medians over the window, red ticks at
    change points; '-' where the case has none (kernel time: a CPU case, a verl case). Kernel time
    beside step time: on a host-bound case a GPU-side step shows there when the host's noise hides
    it in the step."""
    if name not in trend.metrics:
        return "-"
    metric = trend.metrics[name]
    points = [
        (epoch(r.started), metric.percent(r.values[name]))
        for r in trend.runs
        if name in r.values and on_line(r)
    ]
    if not points:
        return "-"
    t0, t1 = points[0][0], points[-1][0]
    span_t = (t1 - t0) or 1.0
    buckets: dict[int, list[float]] = {}
    for t, p in points:
        buckets.setdefault(int((t - t0) / span_t * (SPARK_BUCKETS - 1)), []).append(p)
    medians = {b: sorted(v)[len(v) // 2] for b, v in buckets.items()}
    half = max(2.0, 150 * metric.tolerance, *(abs(p - 100) for p in medians.values()))
    coords = " ".join(
        f"{b * SPARK_W / (SPARK_BUCKETS - 1):.0f},{SPARK_H / 2 - (p - 100) / half * (SPARK_H / 2 - 2):.0f}"
        for b, p in sorted(medians.items())
    )
    ticks = "".join(
        f"<line x1='{x:.0f}' x2='{x:.0f}' y1='0' y2='{SPARK_H}' stroke='{COLOURS['regressed']}'/>"
        for x in ((epoch(trend.runs[i].started) - t0) / span_t * SPARK_W for i, _ in metric.change_points)
    )
    return (
        f"<svg class='spark' width='{SPARK_W}' height='{SPARK_H}' viewBox='0 0 {SPARK_W} {SPARK_H}'>"
        f"<line x1='0' x2='{SPARK_W}' y1='{SPARK_H / 2}' y2='{SPARK_H / 2}' stroke='#cdc'/>{ticks}"
        f"<polyline fill='none' stroke='{COLOURS['pass']}' stroke-width='1.2' points='{coords}'/></svg>"
    )
