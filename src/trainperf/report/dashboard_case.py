"""A case's page of the trend site: per runner, its change points and every metric over time.

Each plot is drawn by ``trend_svg``; the page carries its runs once (date, commit, verdict, link)
for a small script that shows the run under the pointer and opens its run folder on a click.
Runs that are not a plain pass are also listed in a table, so nothing depends on the script.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from trainperf.judge.metrics import STEP_TIME
from trainperf.paths import PAGE_FILE
from trainperf.report.trend_model import CaseTrend, environment_at, kind_of
from trainperf.report.trend_read import run_folder
from trainperf.report.trend_svg import COLOURS, WIDTH, marker, run_xs, trend_plot
from trainperf.store.records import StoredRun

FLAGGED_ROWS = 40
"""The newest runs that are not a plain pass listed under a case's plots."""
KINDS = (
    ("regressed", "regressed (or outcome/config changed)"),
    ("noisy", "noisy"),
    ("contaminated", "contaminated (GPU or host shared; off the line)"),
    ("planted", "planted slowdown, a check of the gate (off the line; filled: judged regressed)"),
    ("failed", "failed (no value; on the bottom edge)"),
    ("skipped", "skipped, with its reason (no value; on the bottom edge)"),
    ("improved", "improved"),
)
TOOLTIP = """
(function () {
  var tip = document.getElementById('tip'), total = 0;
  document.querySelectorAll('section.runner').forEach(function (section) {
    var data = JSON.parse(section.querySelector('script.runs').textContent);
    total += data.r.length;
    function nearest(svg, event) {
      var box = svg.getBoundingClientRect(), x = (event.clientX - box.left) * WIDTH_PX / box.width, best = 0;
      data.x.forEach(function (value, i) {
        if (Math.abs(value - x) < Math.abs(data.x[best] - x)) { best = i; }
      });
      return best;
    }
    section.querySelectorAll('svg.trend').forEach(function (svg) {
      var values = svg.getAttribute('data-v').split(',');
      svg.addEventListener('mousemove', function (event) {
        var i = nearest(svg, event), run = data.r[i];
        tip.textContent = run[0] + ' ' + run[1] + ' ' + run[2] + ': ' + (values[i] || 'no value');
        tip.style.left = (event.clientX + 12) + 'px'; tip.style.top = (event.clientY + 12) + 'px';
        tip.style.display = 'block';
      });
      svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
      svg.addEventListener('click', function (event) {
        var link = data.r[nearest(svg, event)][3];
        if (link) { window.location.href = data.p + link + data.s; }
      });
    });
  });
  document.documentElement.setAttribute('data-runs', String(total));
})();
""".replace("WIDTH_PX", str(WIDTH))


@dataclass(frozen=True, slots=True)
class Links:
    """Where a run's report is seen from one folder of the site."""

    page_dir: Path
    reports_url: str | None = None
    runs_root: Path | None = None

    def run(self, run: StoredRun) -> str:
        return _report_link(run.run_dir, _resolved(self.page_dir), self.reports_url, self.runs_root)


@functools.lru_cache(maxsize=64)
def _resolved(folder: Path) -> str:
    return str(folder.resolve())


@functools.lru_cache(maxsize=8192)
def _report_link(run_dir: str | None, pages: str, reports_url: str | None, runs_root: Path | None) -> str:
    """Under ``reports_url`` by the run folder's name; else the folder where it is now (as stored
    or under ``runs_root``), relative to the page."""
    if not run_dir:
        return ""
    if reports_url:
        return f"{reports_url.rstrip('/')}/{Path(run_dir).name}/{PAGE_FILE}"
    folder = run_folder(run_dir, runs_root) or Path(run_dir)
    return os.path.relpath(folder / PAGE_FILE, pages)


def shown_time(started: str) -> str:
    """``2026-07-20 02:00``: a stored start to the minute, as the plots' axes read (UTC)."""
    return started[:16].replace("T", " ")


def kind_chip(run: StoredRun) -> str:
    kind = kind_of(run)
    text = run.verdict or kind if kind not in ("failed", "planted") else kind
    if kind == "planted":
        text = f"{run.verdict} (planted +{run.planted:.0%})"
    if kind == "failed":
        text = f"failed: {run.outcome}"
    if kind == "skipped":
        text = "skipped"
    return f"<span class='chip' style='background:{COLOURS[kind]}'>{escape(text)}</span>"


def legend() -> str:
    items = [
        f"<svg width='14' height='14' viewBox='0 0 14 14'>{marker(kind, 7, 7)}</svg> {escape(text)}"
        for kind, text in KINDS
    ]
    line = (
        f"<svg width='22' height='10'><line x1='0' x2='22' y1='5' y2='5' stroke='{COLOURS['pass']}'/></svg> "
        "pass (the line)"
    )
    return f"<p class='legend'>{line} &nbsp; {' &nbsp; '.join(items)}</p>"


def case_page(trends: Sequence[CaseTrend], links: Links, labels: dict[str, str]) -> str:
    case_id = trends[0].case_id
    sections = [_runner_section(trend, links, labels) for trend in trends]
    return (
        f"<p><a href='../{PAGE_FILE}'>all cases</a></p><h1>{escape(case_id)}</h1>{legend()}"
        f"<p class='legend'>Each plot: % of the level before its first change point (100%), the green band "
        "the tolerance the gate applied to the latest run, black lines the median of each segment between "
        "change points (red lines: their size and date, their first commit under the axis), blue dashes "
        "environment changes. Point at a run for its date, commit and value; click to open its run "
        f"folder.</p>{''.join(sections)}"
        "<div id='tip'></div>"
        f"<script>{TOOLTIP}</script>"
    )


def _runner_section(trend: CaseTrend, links: Links, labels: dict[str, str]) -> str:
    counts = ", ".join(f"{n} {kind}" for kind, n in trend.counts().most_common())
    plots = [
        trend_plot(trend, trend.metrics[name], labels.get(name, name))
        for name in labels
        if name in trend.metrics
    ]
    data = _runs_json(trend, links)
    return (
        f"<section class='runner'><h2>runner {escape(trend.runner)}: "
        f"{len(trend.runs)} stored runs ({escape(counts)})</h2>"
        f"{_change_list(trend, labels)}<div class='plots'>{''.join(plots)}</div>{_flagged_runs(trend, links)}"
        f"<script type='application/json' class='runs'>{data}</script></section>"
    )


def _runs_json(trend: CaseTrend, links: Links) -> str:
    """The runs once per page: x on the plots, date, commit, verdict and link (prefix and suffix
    shared, so a year of runs stays small)."""
    hrefs = [links.run(run) for run in trend.runs]
    present = [h for h in hrefs if h]
    prefix = os.path.commonprefix(present) if present else ""
    suffix = os.path.commonprefix([h[::-1] for h in present])[::-1] if present else ""
    suffix = suffix if all(len(h) >= len(prefix) + len(suffix) for h in present) else ""
    rows = [
        [
            shown_time(run.started),
            run.commit_short,
            run.verdict or kind_of(run),
            h[len(prefix) : len(h) - len(suffix)] if h else "",
        ]
        for run, h in zip(trend.runs, hrefs)
    ]
    data = {"x": [round(x, 1) for x in run_xs(trend)], "r": rows, "p": prefix, "s": suffix}
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def _change_list(trend: CaseTrend, labels: dict[str, str]) -> str:
    items = []
    for name, metric in trend.metrics.items():
        for index, cp in metric.change_points:
            run = trend.runs[index]
            changed = environment_at(trend, index)
            what = ", ".join(f"{k} {a} -> {b}" for k, a, b in changed) or "no environment change"
            items.append(
                f"<li><b class='bad'>{escape(labels.get(name, name))} {(cp.ratio - 1) * 100:+.1f}%</b> from "
                f"{escape(shown_time(run.started))} {escape(run.commit_short)} (median {cp.before:.4g} -> "
                f"{cp.after:.4g}): <span class='env'>{escape(what)}</span></li>"
            )
    return f"<ul>{''.join(items)}</ul>" if items else "<p class='muted'>No change point in the window.</p>"


def _flagged_runs(trend: CaseTrend, links: Links) -> str:
    rows = []
    for run in trend.runs:
        if kind_of(run) == "pass":
            continue
        value = run.values.get(STEP_TIME)
        metric = trend.metrics.get(STEP_TIME)
        shown = f"{value:.4g} s ({metric.percent(value):.1f}%)" if value is not None and metric else "-"
        href = links.run(run)
        link = f"<a href='{escape(href)}'>run folder</a>" if href else "-"
        rows.append(
            f"<tr><td class='nowrap'>{escape(shown_time(run.started))}</td>"
            f"<td>{escape(run.commit_short)}</td><td>{kind_chip(run)}</td>"
            f"<td class='nowrap'>{escape(shown)}</td><td>{link}</td></tr>"
        )
    if not rows:
        return "<p class='muted'>Every stored run of this case passed.</p>"
    # A case red for months would list every night: the newest are the ones an on-call engineer
    # reads, and the plot above marks every run.
    newest, older = rows[-FLAGGED_ROWS:][::-1], max(0, len(rows) - FLAGGED_ROWS)
    more = f"<p class='muted'>and {older} older ones, marked on the plot</p>" if older else ""
    return (
        f"<h3>Runs that are not a plain pass ({len(rows)}, newest first)</h3><table><tr><th>started</th>"
        f"<th>commit</th><th>verdict</th><th>step time</th><th>run</th></tr>{''.join(newest)}</table>{more}"
    )
