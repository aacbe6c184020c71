"""The trace diff of a slower run against its baseline's trace summary: where did the time go?

Per profiled step, the step's time is GPU busy + host-bound idle + other idle (GPU traces) or
main-thread busy + idle (CPU traces). The component that grew most names the slowdown:
``host-bound`` (the GPU waited on the CPU: launch overhead, Python, data loading, a
``CUDA_LAUNCH_BLOCKING`` run), ``GPU-bound`` (kernels took longer), or ``idle`` (other gaps:
synchronisation, dependencies). Categories whose time per step grew are listed largest first.
"""

from __future__ import annotations

from typing import Any

from trainperf.diagnosis_record import GrownCategory, TraceDiff
from trainperf.traces.analysis import per_step

GROWTH_MIN_FRACTION = 0.02
"""A category is listed as grown when it added at least this fraction of the baseline's step."""


def _components(summary: dict[str, Any]) -> dict[str, float]:
    if summary.get("kind") == "gpu":
        keys = {"GPU busy": "busy_ms", "host-bound idle": "idle_host_bound_ms", "other idle": "idle_other_ms"}
    else:
        keys = {"CPU busy": "busy_ms", "CPU idle": "idle_ms"}
    return {label: per_step(summary, key) for label, key in keys.items()}


def trace_diff(baseline: dict[str, Any], current: dict[str, Any]) -> TraceDiff | None:
    """Per-step changes and the verdict; None when the two traces cannot be compared."""
    if baseline.get("kind") != current.get("kind"):
        return None
    base_step, cur_step = per_step(baseline, "window_ms"), per_step(current, "window_ms")
    base_parts, cur_parts = _components(baseline), _components(current)
    deltas = {label: cur_parts[label] - base_parts[label] for label in base_parts}
    threshold = GROWTH_MIN_FRACTION * base_step
    steps_b, steps_c = max(1, int(baseline.get("steps") or 1)), max(1, int(current.get("steps") or 1))
    grown = []
    for name in sorted(set(baseline.get("categories_ms", {})) | set(current.get("categories_ms", {}))):
        before = float(baseline.get("categories_ms", {}).get(name, 0.0)) / steps_b
        after = float(current.get("categories_ms", {}).get(name, 0.0)) / steps_c
        if after - before > threshold:
            grown.append(GrownCategory(name, before, after, after - before))
    grown.sort(key=lambda g: -g.delta_ms)
    return TraceDiff(
        kind=current["kind"],
        step_ms=(base_step, cur_step),
        busy_fraction=(baseline.get("busy_fraction"), current.get("busy_fraction")),
        components_ms={label: (base_parts[label], cur_parts[label]) for label in base_parts},
        grown=tuple(grown),
        verdict=_verdict(cur_step - base_step, deltas, current["kind"]),
    )


def _verdict(step_delta: float, deltas: dict[str, float], kind: str) -> str:
    if step_delta <= 0:
        return "no slowdown in the profiled steps"
    largest = max(deltas, key=deltas.__getitem__)
    if kind == "gpu":
        return {"GPU busy": "GPU-bound", "host-bound idle": "host-bound", "other idle": "idle"}[largest]
    return "CPU-bound" if largest == "CPU busy" else "idle"


def describe(diff: TraceDiff | None) -> list[str]:
    """Lines for the failure detail and the summary (none without a diff)."""
    if diff is None:
        return []
    base_step, cur_step = diff.step_ms
    parts = ", ".join(
        f"{label} {after - before:+.2f} ms" for label, (before, after) in diff.components_ms.items()
    )
    before_busy, after_busy = diff.busy_fraction
    verdict = diff.verdict if diff.verdict.startswith("no ") else f"{diff.verdict} slowdown"
    head = f"trace diff: {verdict}: step {base_step:.2f} -> {cur_step:.2f} ms per profiled step ({parts})"
    lines = [f"{head}; busy {before_busy:.0%} -> {after_busy:.0%}"]
    if diff.grown:
        lines.append(
            "    grew: "
            + ", ".join(f"{g.category} {g.baseline_ms:.2f} -> {g.current_ms:.2f} ms" for g in diff.grown)
        )
    return lines
