"""A case's metric over time as inline SVG: % of its reference level, the tolerance band, each
segment's median between change points, environment changes, and every stored run's verdict.

Drawn in Python like the run report's plots (``svg.py``): the site is static files with no
library to fetch. The line is one polyline; only runs that are not a plain pass get a marker
element of their own (a year of nightly runs stays a few kilobytes per plot); the page's script
finds the run under the pointer for its tooltip and link.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape

from trainperf.report.svg import CHAR_W, nice_ticks
from trainperf.report.trend_model import LINE_KINDS, RED, CaseTrend, MetricTrend

WIDTH, HEIGHT = 600, 210
LEFT, RIGHT, TOP, BOTTOM = 50, 14, 34, 30
MIN_HALF_SPAN = 2.0
"""The y axis covers at least +-2% (or 1.5 tolerances) around 100%: 1% of noise never fills a plot."""
CLAMP = (40.0, 250.0)
"""Values beyond are drawn at the edge (a run that took 10x as long would flatten all else)."""
COLOURS = {
    "regressed": "#d62728",
    "improved": "#2ca02c",
    "noisy": "#e08a00",
    "contaminated": "#777777",
    "planted": "#8e44ad",
    "failed": "#d62728",
    "skipped": "#aaaaaa",
    "pass": "#3a6fb0",
}
ENV_LABELS_UP_TO = 3
"""Environment changes are named on the plot up to this many (more would overlap; each has a tooltip)."""
DOTS_UP_TO = 60
"""A series with at most this many runs on its line gets a dot per run, not only the line."""


@dataclass(frozen=True, slots=True)
class Frame:
    """Time and % ranges and the plot area they map onto."""

    t0: float
    t1: float
    y0: float
    y1: float

    def x(self, t: float) -> float:
        return LEFT + (t - self.t0) / (self.t1 - self.t0) * (WIDTH - LEFT - RIGHT)

    def y(self, percent: float) -> float:
        clamped = min(max(percent, self.y0), self.y1)
        return TOP + (self.y1 - clamped) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)


def run_xs(trend: CaseTrend) -> list[float]:
    """Each run's x on the page's plots (one time axis per case)."""
    frame = _time_frame(trend.times)
    return [frame.x(t) for t in trend.times]


def _time_frame(times: Sequence[float], y0: float = 0.0, y1: float = 1.0) -> Frame:
    t0, t1 = min(times), max(times)
    pad = (t1 - t0) * 0.02 or 1800.0
    return Frame(t0 - pad, t1 + pad, y0, y1)


def trend_plot(trend: CaseTrend, metric: MetricTrend, title: str) -> str:
    """The plot of one metric of a case: an empty string where it has no value."""
    times, name = trend.times, metric.metric
    factor = 100.0 / metric.reference if metric.reference else 0.0
    percents = {i: run.values[name] * factor for i, run in enumerate(trend.runs) if name in run.values}
    if not percents:
        return ""
    frame = _percent_frame(_time_frame(times), metric, percents.values())
    reference = f"100% = {_fmt(metric.reference)}"
    learned = " (learned from the runner's history)" if metric.tolerance_note.startswith("learned") else ""
    band = f", tolerance \u00b1{metric.tolerance:.1%}{learned}" if metric.tolerance else ""
    # Each run's value for the tooltip: 4 significant digits, whole numbers from 1000.
    values = [run.values.get(name) for run in trend.runs]
    shown = ",".join(["" if v is None else f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}" for v in values])
    parts = [
        (
            f"<svg class='plot trend' width='{WIDTH}' height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}' "
            f"role='img' aria-label='{escape(title)}' data-metric='{escape(metric.metric)}' data-v='{shown}'>"
        ),
        f"<text x='{LEFT}' y='14' font-size='12' font-weight='bold'>{escape(title)}</text>",
        f"<text x='{LEFT}' y='27' font-size='10' fill='#555'>{escape(reference + band)}</text>",
    ]
    parts += _band_and_axes(frame, metric)
    parts += _environment(frame, trend, metric, times)
    parts += _line(frame, trend, metric, times, percents)
    parts += _levels(frame, trend, metric, times)  # over the line: a level reads through the noise
    parts += _markers(frame, trend, metric, times, percents)
    parts.append("</svg>")
    return "".join(parts)


def _percent_frame(times: Frame, metric: MetricTrend, percents: Iterable[float]) -> Frame:
    values = list(percents)
    clamped = (min(max(min(values), CLAMP[0]), CLAMP[1]), min(max(max(values), CLAMP[0]), CLAMP[1]))
    half = max(MIN_HALF_SPAN, 150 * metric.tolerance)
    low, high = min(100 - half, clamped[0]), max(100 + half, clamped[1])
    pad = (high - low) * 0.06
    return Frame(times.t0, times.t1, low - pad, high + pad)


def _band_and_axes(frame: Frame, metric: MetricTrend) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    out = []
    if metric.tolerance:
        top, low = frame.y(100 + 100 * metric.tolerance), frame.y(100 - 100 * metric.tolerance)
        out.append(
            f"<rect class='band' x='{LEFT}' y='{top:.0f}' width='{right - LEFT}' "
            f"height='{max(1.0, low - top):.0f}' fill='#e3f1e3'/>"
        )
    for tick in nice_ticks(frame.y0, frame.y1, 4):
        y = frame.y(tick)
        out.append(f"<line x1='{LEFT}' x2='{right}' y1='{y:.0f}' y2='{y:.0f}' stroke='#eee'/>")
        out.append(f"<text x='{LEFT - 4}' y='{y + 3:.0f}' text-anchor='end' font-size='10'>{tick:g}%</text>")
    hundred = frame.y(100)
    out.append(
        f"<line x1='{LEFT}' x2='{right}' y1='{hundred:.0f}' y2='{hundred:.0f}' stroke='#9a9' "
        "stroke-dasharray='4 3'/>"
    )
    out.append(
        f"<rect x='{LEFT}' y='{TOP}' width='{right - LEFT}' height='{bottom - TOP}' fill='none' "
        "stroke='#999'/>"
    )
    for t, label in time_ticks(frame.t0, frame.t1):
        x = frame.x(t)
        out.append(f"<line x1='{x:.0f}' x2='{x:.0f}' y1='{bottom}' y2='{bottom + 4}' stroke='#999'/>")
        out.append(
            f"<text x='{x:.0f}' y='{bottom + 15}' text-anchor='middle' font-size='10'>{escape(label)}</text>"
        )
    return out


def _between(times: Sequence[float], index: int) -> float:
    return (times[index - 1] + times[index]) / 2 if index > 0 else times[index]


def _environment(frame: Frame, trend: CaseTrend, metric: MetricTrend, times: Sequence[float]) -> list[str]:
    out = []
    for index, changed in metric.environment.items():
        x = frame.x(_between(times, index))
        what = ", ".join(f"{k} {a} -> {b}" for k, a, b in changed)
        when = trend.runs[index].started[:16].replace("T", " ")
        out.append(
            f"<line class='env' x1='{x:.1f}' x2='{x:.1f}' y1='{TOP}' y2='{HEIGHT - BOTTOM}' stroke='#15c' "
            f"stroke-dasharray='2 3'><title>environment from {escape(when)}: "
            f"{escape(what)}</title></line>"
        )
        if len(metric.environment) <= ENV_LABELS_UP_TO:
            key, _, after = changed[0]
            label = f"{key} {after}"[:28]
            right = x + 3 + CHAR_W * len(label) <= WIDTH - RIGHT
            anchor, shift = ("start", 3) if right else ("end", -3)
            out.append(
                f"<text x='{x + shift:.1f}' y='{HEIGHT - BOTTOM - 4}' text-anchor='{anchor}' font-size='9' "
                f"fill='#15c'>{escape(label)}</text>"
            )
    return out


def _levels(frame: Frame, trend: CaseTrend, metric: MetricTrend, times: Sequence[float]) -> list[str]:
    """Each segment's median as a level, and each change point as a red line with its size."""
    out = []
    for segment in metric.segments:
        x0, x1 = frame.x(times[segment.first]), frame.x(times[segment.last])
        y = frame.y(metric.percent(segment.median))
        out.append(
            f"<line class='level' x1='{x0:.1f}' x2='{max(x1, x0 + 2):.1f}' y1='{y:.1f}' y2='{y:.1f}' "
            f"stroke='#111' stroke-width='2.5'><title>median {_fmt(segment.median)} "
            f"({metric.percent(segment.median):.1f}%)</title></line>"
        )
    for index, cp in metric.change_points:
        run = trend.runs[index]
        x = frame.x(_between(times, index))
        size = f"{(cp.ratio - 1) * 100:+.1f}%"
        anchor = "end" if x > WIDTH - 80 else "start"
        shift = -3 if anchor == "end" else 3
        out.append(
            f"<line class='cp' x1='{x:.1f}' x2='{x:.1f}' y1='{TOP}' y2='{HEIGHT - BOTTOM}' stroke='#d62728' "
            f"stroke-width='1.5'><title>change point {size}: median {_fmt(cp.before)} -> {_fmt(cp.after)} "
            f"from {escape(run.started[:16].replace('T', ' '))} {escape(run.commit_short)}</title></line>"
            f"<text x='{x + shift:.1f}' y='{TOP + 11}' text-anchor='{anchor}' font-size='10' "
            f"font-weight='bold' fill='#d62728'>{size} {escape(run.started[5:10])}</text>"
        )
        if run.commit_short and len(metric.change_points) <= ENV_LABELS_UP_TO:
            # The first commit at the new level, on the time axis under its date: where to start
            # looking, without pointing at the run.
            out.append(
                f"<text class='commit' x='{x + shift:.1f}' y='{HEIGHT - 3}' text-anchor='{anchor}' "
                f"font-size='9' fill='#d62728'>{escape(run.commit_short)}</text>"
            )
    return out


def _line(
    frame: Frame, trend: CaseTrend, metric: MetricTrend, times: Sequence[float], percents: dict[int, float]
) -> list[str]:
    kinds = trend.kinds
    on_line = [i for i in percents if kinds[i] in LINE_KINDS]
    # Inlined Frame.x and Frame.y: a year of runs is ~25,000 points per site.
    x_scale = (WIDTH - LEFT - RIGHT) / (frame.t1 - frame.t0)
    y_scale = (HEIGHT - TOP - BOTTOM) / (frame.y1 - frame.y0)
    t0, low, high = frame.t0, frame.y0, frame.y1
    coords = " ".join(
        [
            f"{LEFT + (times[i] - t0) * x_scale:.0f},{TOP + (high - min(max(p, low), high)) * y_scale:.0f}"
            for i in on_line
            for p in (percents[i],)
        ]
    )
    out = [f"<polyline fill='none' stroke='{COLOURS['pass']}' stroke-width='1' points='{coords}'/>"]
    if len(on_line) <= DOTS_UP_TO:
        out += [
            f"<circle cx='{frame.x(times[i]):.1f}' cy='{frame.y(percents[i]):.1f}' r='2' "
            f"fill='{COLOURS['pass']}'/>"
            for i in on_line
            if kinds[i] == "pass"
        ]
    return out


TITLED_MARKERS = 60
"""The newest runs whose markers carry their own tooltip."""


def marker(kind: str, x: float, y: float, tip: str = "", judged_red: bool = False) -> str:
    """A run's verdict as a shape of its own (also used by the legend)."""
    colour = COLOURS[kind]
    hollow = f"fill='#fff' stroke='{colour}' stroke-width='1.6'"
    title = f"<title>{escape(tip)}</title>" if tip else ""
    if kind == "regressed":
        shape = f"<path d='M{x:.1f},{y - 5:.1f}l5,8.5h-10z' fill='{colour}'>{title}</path>"
    elif kind == "improved":
        shape = f"<path d='M{x:.1f},{y + 5:.1f}l5,-8.5h-10z' fill='{colour}'>{title}</path>"
    elif kind == "noisy":
        shape = f"<path d='M{x:.1f},{y - 5:.1f}l5,5l-5,5l-5,-5z' {hollow}>{title}</path>"
    elif kind == "planted":
        fill = f"fill='{colour}'" if judged_red else hollow
        shape = f"<rect x='{x - 4:.1f}' y='{y - 4:.1f}' width='8' height='8' {fill}>{title}</rect>"
    elif kind in ("contaminated", "failed", "skipped"):
        cross = f"M{x - 4:.1f},{y - 4:.1f}l8,8m0,-8l-8,8"
        shape = f"<path d='{cross}' stroke='{colour}' stroke-width='2.2'>{title}</path>"
    else:
        shape = f"<circle cx='{x:.1f}' cy='{y:.1f}' r='3' fill='{colour}'>{title}</circle>"
    return f"<g class='mark {kind}'>{shape}</g>"


def _markers(
    frame: Frame, trend: CaseTrend, metric: MetricTrend, times: Sequence[float], percents: dict[int, float]
) -> list[str]:
    out = []
    flagged = [i for i, kind in enumerate(trend.kinds) if kind != "pass"]
    # Each marker carries its tooltip; past the newest TITLED_MARKERS a case red for months would
    # spend most of its page on them, and the page's script shows any run's on hover anyway.
    titled = set(flagged[-TITLED_MARKERS:])
    for i, run in enumerate(trend.runs):
        kind = trend.kinds[i]
        if kind == "pass":
            continue
        x = frame.x(times[i])
        if i in percents:
            value = run.values[metric.metric]
            said = f"{run.verdict or kind}: {_fmt(value)} ({percents[i]:.1f}%)"
            tip = f"{run.started[:16].replace('T', ' ')} {run.commit_short} {said}"
            y = frame.y(percents[i])
        else:
            tip = f"{run.started[:16].replace('T', ' ')} {run.commit_short} outcome {run.outcome}: no value"
            y = HEIGHT - BOTTOM
        if run.planted:
            tip += f" (planted +{run.planted:.0%} slowdown, verdict {run.verdict})"
        drawn = kind_on_metric(kind, metric, percents.get(i))
        if drawn != kind:
            tip += f" (the case {kind}; this metric did not move that way)"
        out.append(marker(drawn, x, y, tip if i in titled else "", judged_red=run.verdict in RED))
    return out


def kind_on_metric(kind: str, metric: MetricTrend, percent: float | None) -> str:
    """The run's mark on one metric's plot: a case regressed (or improved) is drawn so on the
    metrics that moved that way beyond their tolerance, and as a plain point on the others, so that
    memory that fell or throughput that rose is never drawn red beside the step time that regressed."""
    if kind not in ("regressed", "improved") or percent is None:
        return kind
    change = percent / 100 - 1
    beyond = abs(change) > metric.tolerance and metric.lower_is_better is not None
    if beyond and metric.adverse(change) == (kind == "regressed"):
        return kind
    return "pass"


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


TIME_STEPS = (
    60,
    300,
    900,
    1800,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    2 * 86400,
    7 * 86400,
    14 * 86400,
)
MONTH_STEPS = (1, 2, 3, 6, 12)


def time_ticks(t0: float, t1: float, most: int = 7) -> list[tuple[float, str]]:
    """Round times between ``t0`` and ``t1`` (UTC) and their labels: clock times within a day,
    dates over weeks, months over a year."""
    span = t1 - t0
    step = next((s for s in TIME_STEPS if span / s <= most), None)
    if step is None:
        return _month_ticks(t0, t1, most)
    first = (int(t0) // step + 1) * step
    ticks = [float(t) for t in range(first, int(t1) + 1, step)]
    fmt = "%H:%M" if step < 86400 else "%m-%d"
    labels = [datetime.fromtimestamp(t, timezone.utc).strftime(fmt) for t in ticks]
    if ticks and step < 86400:  # the day once, on the first tick of a clock-time axis
        labels[0] = datetime.fromtimestamp(ticks[0], timezone.utc).strftime("%m-%d %H:%M")
    return list(zip(ticks, labels))


def _month_ticks(t0: float, t1: float, most: int) -> list[tuple[float, str]]:
    start = datetime.fromtimestamp(t0, timezone.utc)
    months = int((t1 - t0) / (30.4 * 86400)) + 1
    every = next((m for m in MONTH_STEPS if months / m <= most), 12)
    ticks: list[tuple[float, str]] = []
    year, month = start.year, start.month + 1
    while True:
        if month > 12:
            year, month = year + 1, month - 12
        moment = datetime(year, month, 1, tzinfo=timezone.utc)
        if moment.timestamp() > t1:
            return ticks
        if (month - 1) % every == 0:
            label = (
                f"{calendar.month_abbr[month]} {year}"
                if month == 1 or not ticks
                else calendar.month_abbr[month]
            )
            ticks.append((moment.timestamp(), label))
        month += 1
