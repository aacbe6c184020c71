"""Energy between wall-clock times from a board's NVML samples (no I/O): its cumulative counter where
it has one, else the integral of sampled power; over one window or over the spans of some steps."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from trainperf.measure.nvml import Sample


def _interpolate(samples: Sequence[Sample], t: float, attribute: str) -> float | None:
    points = [(s.t, getattr(s, attribute)) for s in samples if getattr(s, attribute) is not None]
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, v0), (t1, v1) in pairwise(points):
        if t0 <= t <= t1:
            return float(v0) if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return float(points[-1][1])


def counter_energy_j(samples: Sequence[Sample], start: float, end: float) -> float | None:
    """Energy between two wall-clock times from the board's cumulative counter (interpolated)."""
    e0 = _interpolate(samples, start, "energy_mj")
    e1 = _interpolate(samples, end, "energy_mj")
    return (e1 - e0) / 1000.0 if e0 is not None and e1 is not None and e1 >= e0 else None


def power_integral_j(samples: Sequence[Sample], start: float, end: float) -> float | None:
    """Energy between two wall-clock times as the trapezoid integral of the sampled power."""
    inside = [s for s in samples if start <= s.t <= end and s.power_w is not None]
    if len(inside) < 2:
        return None
    return sum((b.t - a.t) * ((a.power_w or 0.0) + (b.power_w or 0.0)) / 2 for a, b in pairwise(inside))


def window_energy_j(samples: Sequence[Sample], start: float, end: float) -> tuple[float | None, str]:
    """Energy between two wall-clock times, and how it was obtained: the counter where the board
    has one, else the integral of sampled power."""
    counted = counter_energy_j(samples, start, end)
    if counted is not None:
        return counted, "nvml_energy_counter"
    integrated = power_integral_j(samples, start, end)
    if integrated is not None:
        return integrated, "power_integral"
    return None, "unavailable"


def step_intervals(edges: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """The wall-clock span of each step after ``edges[0]`` (which closes the step before): from its own
    left edge where the child recorded it (``t_start``), else from the previous step's end. Steps left
    out of the timing (a kernel window's) fall between two spans, never inside one."""
    return [
        (float(step.get("t_start", before["t_end"])), float(step["t_end"]))
        for before, step in pairwise(edges)
    ]


def per_step_energy_per_token(samples: Sequence[Sample], edges: Sequence[dict[str, Any]]) -> list[float]:
    """Energy per token of each step after ``edges[0]``, over its own span."""
    values = []
    for (start, end), step in zip(step_intervals(edges), edges[1:]):
        energy, method = window_energy_j(samples, start, end)
        if energy is None or method != "nvml_energy_counter" or not step["tokens"]:
            return []
        values.append(energy / step["tokens"])
    return values


def spans_energy_j(
    samples: Sequence[Sample], spans: Sequence[tuple[float, float]]
) -> tuple[float | None, str]:
    """Energy over some spans of wall-clock time, and how it was obtained (the least exact method of
    any span): a window interrupted by untimed steps is measured span by span."""
    if not spans:
        return None, "unavailable"
    total, methods = 0.0, set()
    for start, end in spans:
        energy, method = window_energy_j(samples, start, end)
        if energy is None:
            return None, "unavailable"
        total += energy
        methods.add(method)
    return total, "power_integral" if "power_integral" in methods else "nvml_energy_counter"
