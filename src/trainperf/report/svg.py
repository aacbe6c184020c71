"""Inline SVG plots for the HTML report, drawn in Python (no scripts, no external files).

Three shapes cover every plot: lines over a shared x axis (memory, power, throughput),
horizontal stacked bars (busy/idle, phases) and ratios with intervals grouped by case (baseline,
compare, A/B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 40
CHAR_W = 6.2
"""Width of one character of the 10 px labels, generous for system-ui (a label is never cut)."""


@dataclass(slots=True)
class Line:
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False


@dataclass(slots=True)
class Mark:
    """A vertical marker (an OOM cliff) or a single crossed point (an OOM probe)."""

    x: float
    label: str
    y: float | None = None


@dataclass(slots=True)
class Bar:
    label: str
    parts: list[tuple[str, float]] = field(default_factory=list)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten apart) from low to high, about ``count`` of them."""
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * step:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


TITLE_FONT = 13.0
SMALLEST_TITLE_FONT = 9.0
CHAR_EM = 0.62
"""A bold sans-serif character's mean width in ems: what a title's width is judged by."""


def fitted_title(title: str, width: float = WIDTH - 16) -> tuple[str, float]:
    """The title as drawn and its font size: smaller down to ``SMALLEST_TITLE_FONT`` until it fits
    ``width``, then shortened in the middle (the whole title stays the plot's label and tooltip)."""
    size = min(TITLE_FONT, width / max(1, len(title) * CHAR_EM))
    if size >= SMALLEST_TITLE_FONT:
        return title, size
    room = int(width / (SMALLEST_TITLE_FONT * CHAR_EM))
    head = (room - 3) // 2
    return title[:head] + "..." + title[len(title) - (room - 3 - head) :], SMALLEST_TITLE_FONT


def _frame(title: str, height: int = HEIGHT) -> list[str]:
    attributes = f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img"'
    shown, size = fitted_title(title)
    return [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" {attributes} aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        (
            f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="{size:.1f}" '
            f'font-weight="bold">{escape(shown)}</text>'
        ),
    ]


@dataclass(frozen=True, slots=True)
class _Plot:
    """A line chart's data ranges and the plot area they map onto."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = WIDTH - LEFT - RIGHT
    height: int = HEIGHT - TOP - BOTTOM

    @classmethod
    def spanning(cls, points: Sequence[tuple[float, float]]) -> _Plot:
        """From zero (or the lowest value) to 5% above the highest; a flat range is widened by one."""
        x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
        y0, y1 = min(0.0, min(p[1] for p in points)), max(p[1] for p in points)
        return cls(x0, x1 if x1 > x0 else x0 + 1, y0, y1 * 1.05 if y1 > y0 else y0 + 1)

    def sx(self, x: float) -> float:
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * self.width

    def sy(self, y: float) -> float:
        return TOP + self.height - (y - self.y0) / (self.y1 - self.y0) * self.height


def line_chart(
    title: str, x_label: str, y_label: str, lines: Sequence[Line], marks: Sequence[Mark] = ()
) -> str:
    points = [p for line in lines for p in line.points] + [
        (m.x, m.y if m.y is not None else 0.0) for m in marks
    ]
    if not points:
        return ""
    plot = _Plot.spanning(points)
    out = _frame(title)
    out += _axes(plot, x_label, y_label)
    for i, line in enumerate(lines):
        out += _series(plot, line, i)
    for mark in marks:
        out += _mark(plot, mark)
    out.append("</svg>")
    return "\n".join(out)


def _axes(plot: _Plot, x_label: str, y_label: str) -> list[str]:
    """The plot's border, its horizontal grid lines, the ticks' values and both axes' labels."""
    sx, sy, plot_w, plot_h = plot.sx, plot.sy, plot.width, plot.height
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for tick in nice_ticks(plot.y0, plot.y1):
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{sy(tick):.1f}" y2="{sy(tick):.1f}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{LEFT - 4}" y="{sy(tick) + 4:.1f}" text-anchor="end" '
            f'font-size="10">{_fmt(tick)}</text>'
        )
    for tick in nice_ticks(plot.x0, plot.x1):
        out.append(
            f'<text x="{sx(tick):.1f}" y="{TOP + plot_h + 14}" text-anchor="middle" '
            f'font-size="10">{_fmt(tick)}</text>'
        )
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle" '
        f'font-size="11">{escape(x_label)}</text>'
    )
    out.append(
        f'<text x="12" y="{TOP + plot_h / 2}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 12 {TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    return out


def _series(plot: _Plot, line: Line, index: int) -> list[str]:
    """One line in the palette's ``index``-th colour, with dots where it has few points, and its label."""
    sx, sy = plot.sx, plot.sy
    color = PALETTE[index % len(PALETTE)]
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(line.points))
    dash = ' stroke-dasharray="5 3"' if line.dashed else ""
    out = [
        f'<polyline class="series" fill="none" stroke="{color}" stroke-width="1.6"{dash} points="{path}"/>'
    ]
    if len(line.points) <= 20:
        out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"/>' for x, y in line.points]
    out.append(
        f'<text x="{LEFT + 6}" y="{TOP + 14 + 13 * index}" font-size="10" '
        f'fill="{color}">{escape(line.label)}</text>'
    )
    return out


def _mark(plot: _Plot, mark: Mark) -> list[str]:
    """A mark without a value is a dashed vertical line at its x; one with a value, a cross at its point."""
    label = escape(mark.label)
    if mark.y is None:
        x = plot.sx(mark.x)
        line = (
            f'<line class="mark" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" '
            f'y2="{TOP + plot.height}" stroke="#d62728" stroke-dasharray="4 3"/>'
        )
        return [line, f'<text x="{x + 3:.1f}" y="{TOP + 12}" font-size="10" fill="#d62728">{label}</text>']
    cx, cy = plot.sx(mark.x), plot.sy(mark.y)
    cross = (
        '<path class="mark" '
        f'd="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}'
        f'M{cx - 4:.1f},{cy + 4:.1f}L{cx + 4:.1f},{cy - 4:.1f}" stroke="#d62728" stroke-width="2"/>'
    )
    return [cross, _mark_label(cx, cy, mark.label)]


def _mark_label(cx: float, cy: float, label: str) -> str:
    """A crossed point's label: right of the cross, or left of it where it would leave the frame."""
    right = cx + 6 + CHAR_W * len(label) <= WIDTH
    x, anchor = (cx + 6, "start") if right else (cx - 6, "end")
    return (
        f'<text x="{x:.1f}" y="{cy - 6:.1f}" text-anchor="{anchor}" font-size="10" '
        f'fill="#d62728">{escape(label)}</text>'
    )


def stacked_bars(title: str, unit: str, bars: Sequence[Bar], normalise: bool = False) -> str:
    """One horizontal bar per row, split into named parts; ``normalise`` draws shares of 100%."""
    if not bars:
        return ""
    names = list(dict.fromkeys(name for bar in bars for name, _ in bar.parts))
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    label_w, row_h = 230, 22
    height = TOP + row_h * len(bars) + 30 + 14 * _legend_rows(names, float(label_w))
    plot_w = WIDTH - label_w - RIGHT
    longest = max((sum(v for _, v in bar.parts) for bar in bars), default=1.0) or 1.0
    out = _frame(title, height)
    for row, bar in enumerate(bars):
        y = TOP + row * row_h
        total = sum(v for _, v in bar.parts) or 1.0
        scale = plot_w / (total if normalise else longest)
        out.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" '
            f'font-size="10">{escape(bar.label[:40])}</text>'
        )
        x = float(label_w)
        for name, value in bar.parts:
            width = max(0.0, value * scale)
            shown = f"{value / total:.0%}" if normalise else f"{_fmt(value)} {unit}"
            out.append(
                f'<rect class="bar" x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{row_h - 6}" '
                f'fill="{colors[name]}">'
                f"<title>{escape(name)}: {escape(shown)}</title></rect>"
            )
            x += width
    out += _legend(names, colors, float(label_w), TOP + row_h * len(bars) + 18)
    out.append("</svg>")
    return "\n".join(out)


def _legend_positions(names: Sequence[str], left: float) -> list[tuple[float, int]]:
    """(x, row) of each legend entry: entries flow left to right and wrap before the frame's edge."""
    positions, x, row = [], left, 0
    for name in names:
        width = 18 + CHAR_W * len(name)
        if x + width > WIDTH - RIGHT and x > left:
            x, row = left, row + 1
        positions.append((x, row))
        x += width
    return positions


def _legend_rows(names: Sequence[str], left: float) -> int:
    return 1 + max((row for _, row in _legend_positions(names, left)), default=0)


def _legend(names: Sequence[str], colors: dict[str, str], left: float, top: float) -> list[str]:
    out = []
    for name, (x, row) in zip(names, _legend_positions(names, left)):
        y = top + 14 * row
        out.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{colors[name]}"/>')
        out.append(f'<text x="{x + 13:.1f}" y="{y}" font-size="10">{escape(name)}</text>')
    return out


def grouped_ratio_chart(
    title: str, groups: Sequence[tuple[str, Sequence[tuple[str, float, tuple[float, float] | None, bool]]]]
) -> str:
    """Ratios (current / reference) with their 95% intervals, one group per case: the case id on a
    row of its own over the full width, its metrics' names beside their points, red where the change
    is for the worse (a ratio above 1 is worse for a time, better for a throughput: each row says).
    The frame widens to the longest label, so no case id or metric name is cut."""
    groups = [(name, list(rows)) for name, rows in groups if rows]
    if not groups:
        return ""
    values = [v for _, rows in groups for _, ratio, ci, _ in rows for v in (ratio, *(ci or ()))]
    low, high = min(min(values), 0.9), max(max(values), 1.1)
    label_w = max(140, int(CHAR_W * max(len(label) for _, rows in groups for label, *_ in rows)) + 16)
    width = max(WIDTH, int(CHAR_W * 1.1 * max(len(name) for name, _ in groups)) + 24, label_w + 240)
    row_h = 20
    height = TOP + row_h * sum(len(rows) + 1 for _, rows in groups) + 30
    plot_w = width - label_w - RIGHT

    def sx(x: float) -> float:
        return label_w + (x - low) / (high - low) * plot_w

    out = _wide_frame(title, width, height)
    out.append(
        f'<line x1="{sx(1):.1f}" x2="{sx(1):.1f}" y1="{TOP}" y2="{height - 24}" stroke="#999" '
        'stroke-dasharray="3 3"/>'
    )
    y = TOP + 10
    for name, rows in groups:
        out.append(
            f'<text class="group" x="6" y="{y + 4}" font-size="11" font-weight="bold">{escape(name)}</text>'
        )
        y += row_h
        for label, ratio, interval, worse in rows:
            out.append(
                f'<text x="{label_w - 6}" y="{y + 4}" text-anchor="end" font-size="10">{escape(label)}</text>'
            )
            if interval:
                out.append(
                    f'<line x1="{sx(interval[0]):.1f}" x2="{sx(interval[1]):.1f}" y1="{y}" y2="{y}" '
                    'stroke="#555" stroke-width="2"/>'
                )
            color = "#d62728" if worse else "#2ca02c"
            out.append(
                f'<circle class="ratio" cx="{sx(ratio):.1f}" cy="{y}" r="4" fill="{color}">'
                f"<title>{escape(name)} {escape(label)}: {ratio:.3f}</title></circle>"
            )
            y += row_h
    for tick in nice_ticks(low, high):
        out.append(
            f'<text x="{sx(tick):.1f}" y="{height - 10}" text-anchor="middle" '
            f'font-size="10">{tick:.2f}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _wide_frame(title: str, width: int, height: int) -> list[str]:
    """``_frame`` for a plot as wide as its labels need."""
    attributes = f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img"'
    return [
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" {attributes} aria-label="{escape(title)}">',
        (
            f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13" '
            f'font-weight="bold">{escape(title)}</text>'
        ),
    ]
