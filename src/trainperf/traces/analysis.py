"""What a profiler trace says about where a step's time went (pure JSON parsing, no torch, no pandas).

GPU traces: the busy fraction of the device over the profiled steps (all streams merged), the
idle time split into *host-bound* gaps (the next kernel's launch call started on the CPU only
after the GPU had gone idle: the GPU waited on the host) and other gaps (synchronisation,
dependencies, the step's tail), time by kernel category, the top kernels and the launch
overhead (CUDA runtime/driver API time per kernel). CPU-only traces: the same questions for
the main thread (busy fraction, operator self time by category, top operators).

A small parser rather than HolisticTraceAnalysis: HTA needs pandas and declares jupyterlab,
loads whole traces into data frames, and expects a distributed trace layout; the figures here
are a few merges of sorted intervals, testable on hand-made fixtures.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trainperf.traces.categories import categorise, short_name
from trainperf.traces.kineto import (
    GPU_ANNOTATION,
    GPU_CATEGORIES,
    OPTIMIZER_PREFIX,
    RUNTIME_CATEGORIES,
    STEP_PREFIX,
    Event,
    events,
)

TOP_N = 20
MS = 1000.0  # trace times are microseconds
AUTOGRAD_NODE = re.compile(r"Backward\d*$|^autograd::")
"""CPU events that are autograd's bookkeeping around operators, not operators themselves."""


def merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals as sorted, disjoint intervals."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def clip(intervals: Sequence[tuple[float, float]], low: float, high: float) -> list[tuple[float, float]]:
    return [(max(s, low), min(e, high)) for s, e in intervals if e > low and s < high]


class _Spans:
    """Membership of a time in any of some disjoint spans (optimizer regions), by bisection."""

    def __init__(self, spans: Iterable[tuple[float, float]]) -> None:
        self.spans = merge(spans)
        self.starts = [s for s, _ in self.spans]

    def __contains__(self, t: float) -> bool:
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.spans[i][1]


def analyse(trace: dict[str, Any]) -> dict[str, Any]:
    """The summary of one trace: GPU figures when it holds GPU activity, else the CPU equivalent."""
    found = events(trace)
    # Host-side annotations only: CUDA traces repeat them on the GPU rows (``gpu_user_annotation``).
    host = [e for e in found if e.cat != GPU_ANNOTATION]
    steps = [e for e in host if e.name.startswith(STEP_PREFIX)]
    if steps:
        window = (min(e.start for e in steps), max(e.end for e in steps))
    elif found:
        window = (min(e.start for e in found), max(e.end for e in found))
    else:
        window = (0.0, 0.0)
    optimizer = _Spans((e.start, e.end) for e in host if e.name.startswith(OPTIMIZER_PREFIX))
    gpu = [e for e in found if e.cat in GPU_CATEGORIES and e.end > window[0] and e.start < window[1]]
    summary = _gpu(found, gpu, window, optimizer) if gpu else _cpu(found, steps, window, optimizer)
    summary["steps"] = max(1, len(steps))
    summary["window_ms"] = (window[1] - window[0]) / MS
    return summary


def _top(
    totals: dict[str, list[float]], category_of: dict[str, str], total_ms: float
) -> list[dict[str, Any]]:
    ranked = sorted(totals.items(), key=lambda item: -sum(item[1]))[:TOP_N]
    return [
        {
            "name": short_name(name),
            "category": category_of[name],
            "count": len(times),
            "total_ms": sum(times) / MS,
            "share": (sum(times) / MS) / total_ms if total_ms else 0.0,
        }
        for name, times in ranked
    ]


def _gpu(
    found: Sequence[Event], gpu: Sequence[Event], window: tuple[float, float], optimizer: _Spans
) -> dict[str, Any]:
    runtime = [e for e in found if e.cat in RUNTIME_CATEGORIES and window[0] <= e.start < window[1]]
    launch_of: dict[int | None, Event] = {e.correlation: e for e in runtime if e.correlation is not None}
    busy = clip(merge((e.start, e.end) for e in gpu), *window)
    busy_us = sum(e - s for s, e in busy)
    idle = _idle_gaps(gpu, busy, window, launch_of)
    categories, totals, category_of = _gpu_categories(gpu, launch_of, optimizer)
    window_us = window[1] - window[0]
    return {
        "kind": "gpu",
        "busy_ms": busy_us / MS,
        "busy_fraction": busy_us / window_us if window_us else 0.0,
        "idle_host_bound_ms": idle.host_bound_us / MS,
        "idle_other_ms": idle.other_us / MS,
        "gaps": idle.gaps,
        "host_bound_gaps": idle.host_bound_gaps,
        "categories_ms": dict(sorted(categories.items(), key=lambda kv: -kv[1])),
        "top": _top(totals, category_of, sum(e.dur for e in gpu) / MS),
        "launch": _launch_overhead(gpu, runtime),
    }


@dataclass(slots=True)
class _IdleGaps:
    """The GPU's idle gaps in the window: those that waited on the host's launch call, and the rest."""

    host_bound_us: float = 0.0
    other_us: float = 0.0
    host_bound_gaps: int = 0
    gaps: int = 0


def _idle_gaps(
    gpu: Sequence[Event],
    busy: Sequence[tuple[float, float]],
    window: tuple[float, float],
    launch_of: dict[int | None, Event],
) -> _IdleGaps:
    """A gap is host-bound when the launch call of the kernel that ends it started after the GPU went idle."""
    # The GPU event that ends each gap: the first one starting where a busy interval starts.
    first_at: dict[float, Event] = {}
    for event in gpu:
        first_at.setdefault(event.start, event)
    idle = _IdleGaps()
    previous_end = window[0]
    for start, end in [*busy, (window[1], window[1])]:
        gap = start - previous_end
        if gap > 0:
            idle.gaps += 1
            nxt = first_at.get(start) if start < window[1] else None
            launch = launch_of.get(nxt.correlation) if nxt is not None else None
            if launch is not None and launch.start >= previous_end:
                idle.host_bound_us += gap
                idle.host_bound_gaps += 1
            else:
                idle.other_us += gap
        previous_end = max(previous_end, end)
    return idle


def _gpu_categories(
    gpu: Sequence[Event], launch_of: dict[int | None, Event], optimizer: _Spans
) -> tuple[dict[str, float], dict[str, list[float]], dict[str, str]]:
    """GPU time by category (copies and sets are memory; kernels launched inside the optimizer's
    region are optimizer), each event's durations by name, and the category of each name."""
    categories: dict[str, float] = defaultdict(float)
    totals: dict[str, list[float]] = defaultdict(list)
    category_of: dict[str, str] = {}
    for event in gpu:
        launch = launch_of.get(event.correlation)
        if event.cat != "kernel":
            category = "memory"
        elif launch is not None and launch.start in optimizer:
            category = "optimizer"
        else:
            category = categorise(event.name)
        categories[category] += event.dur / MS
        totals[event.name].append(event.dur)
        category_of.setdefault(event.name, category)
    return categories, totals, category_of


def _launch_overhead(gpu: Sequence[Event], runtime: Sequence[Event]) -> dict[str, Any]:
    """CUDA runtime and driver API time per kernel, and the mean launch call."""
    kernels = sum(1 for e in gpu if e.cat == "kernel")
    launches = [e for e in runtime if "launch" in e.name.lower()]
    runtime_ms = sum(e.dur for e in runtime) / MS
    return {
        "kernels": kernels,
        "launch_calls": len(launches),
        "runtime_api_ms": runtime_ms,
        "runtime_us_per_kernel": runtime_ms * MS / kernels if kernels else 0.0,
        "launch_call_mean_us": sum(e.dur for e in launches) / len(launches) if launches else 0.0,
    }


def _main_thread(found: Sequence[Event], steps: Sequence[Event]) -> tuple[Any, Any]:
    if steps:
        return steps[0].pid, steps[0].tid
    load: dict[tuple[Any, Any], float] = defaultdict(float)
    for event in found:
        if event.cat == "cpu_op":
            load[(event.pid, event.tid)] += event.dur
    return max(load, key=load.__getitem__) if load else (None, None)


def _cpu(
    found: Sequence[Event], steps: Sequence[Event], window: tuple[float, float], optimizer: _Spans
) -> dict[str, Any]:
    """The main thread's operators: busy = the union of its operators; categories from self time."""
    main = _main_thread(found, steps)
    ops = [
        e
        for e in found
        if e.cat == "cpu_op" and (e.pid, e.tid) == main and e.end > window[0] and e.start < window[1]
    ]
    busy = clip(merge((e.start, e.end) for e in ops), *window)
    busy_us = sum(e - s for s, e in busy)
    # Self time: an operator's duration less its direct children's (events nest on one thread).
    self_us = {id(e): e.dur for e in ops}
    stack: list[Event] = []
    for event in ops:
        while stack and stack[-1].end <= event.start:
            stack.pop()
        if stack:
            self_us[id(stack[-1])] -= min(event.dur, stack[-1].end - event.start)
        stack.append(event)
    categories: dict[str, float] = defaultdict(float)
    totals: dict[str, list[float]] = defaultdict(list)
    category_of: dict[str, str] = {}
    engine_us = 0.0
    for event in ops:
        own = max(0.0, self_us[id(event)])
        if AUTOGRAD_NODE.search(event.name):
            # An autograd node's own time, outside the operators it calls, is the engine's and the
            # Python it runs (a checkpoint's recompute, a hook): host-side time, not operator work.
            # Kept apart from the categories; ``busy`` stays the union of events (what profiler
            # viewers call CPU execution), and the profile summary moves it to host-side time.
            engine_us += own
            continue
        category = "optimizer" if event.start in optimizer else categorise(event.name)
        categories[category] += own / MS
        totals[event.name].append(own)
        category_of.setdefault(event.name, category)
    window_us = window[1] - window[0]
    return {
        "kind": "cpu",
        "busy_ms": busy_us / MS,
        "busy_fraction": busy_us / window_us if window_us else 0.0,
        "idle_ms": (window_us - busy_us) / MS,
        "autograd_engine_ms": engine_us / MS,
        "categories_ms": dict(sorted(categories.items(), key=lambda kv: -kv[1])),
        "top": _top(totals, category_of, sum(max(0.0, v) for v in self_us.values()) / MS),
    }


def per_step(summary: dict[str, Any], key: str) -> float:
    """A summary figure per profiled step (traces of different lengths compare per step)."""
    return float(summary.get(key) or 0.0) / max(1, int(summary.get("steps") or 1))
