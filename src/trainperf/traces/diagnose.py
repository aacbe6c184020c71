"""The diagnosis of a confirmed regression: the baseline's profile summary against a profiled run of
the regressed case (``traces.profile``), told apart into one nature (pure, no I/O):

- ``composite``: a fused kernel (or a whole group, such as attention) vanished while several new or
  grown kernels (elementwise, matmul, softmax) took its place: the fused op was replaced by its
  composite. Checked first: a composite usually also holds more memory (its intermediates), and the
  memory growth is then named as its consequence;
- ``memory``: a memory metric regressed; which allocator blocks are new or larger;
- ``host``: the time the device sat idle (waiting on the host's launches, or on a synchronisation;
  time outside any operator on the CPU class) grew while device busy time did not grow as much;
- ``device``: extra work in one group (attention, GEMM, ...), the largest grown group named.

A change in the device's idle time counts when it is at least ``NOISE_FRACTION`` of the baseline's
profiled window (and ``NOISE_MS``), a change in its work when it is at least that fraction of the
baseline's busy time: a window mostly spent on the host (a verl update stage of half a million
small kernels, under the profiler's own cost per launch) must not hide a change in the work.
"""

from __future__ import annotations

from typing import Any

from trainperf.traces.profile import TOP_KERNELS

NOISE_FRACTION = 0.02
NOISE_MS = 0.05
GONE_FRACTION = 0.1
"""A group has vanished when it keeps less than this fraction of its baseline time."""
GONE_MIN_SHARE = 0.005
"""...and took at least this share of the baseline's busy time: a whole group does not vanish by noise."""
COMPOSITE_MIN_GROWN = 2
"""Kernels new or grown, each by ``COMPOSITE_PART`` of the vanished time, that a composite shows."""
COMPOSITE_PART = 0.25
SIZEABLE_FRACTION = 0.05
UNIFORM_NOTE_SCALE = 1.5
"""A uniform growth above this is said in the line (every group slower alike)."""
UNIFORM_AGREEMENT = 0.25
"""Groups grew alike when most of their ratios lie within this fraction of the median ratio."""
MIB = 2**20


def _threshold(baseline: dict[str, Any]) -> float:
    """Noise in the device's idle time: a fraction of the baseline's profiled window."""
    return max(NOISE_MS, NOISE_FRACTION * float(baseline.get("step_ms") or 0.0))


def _work_threshold(baseline: dict[str, Any]) -> float:
    """Noise in the device's work: a fraction of the baseline's busy time (its window where none)."""
    busy = float(baseline.get("busy_ms") or 0.0)
    return max(NOISE_MS, NOISE_FRACTION * busy) if busy > 0 else _threshold(baseline)


def _kernels(profile: dict[str, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for kernel in profile.get("top_kernels") or []:
        found[kernel["name"]] = found.get(kernel["name"], 0.0) + float(kernel["ms"])
    return found


def _kernel_changes(baseline: dict[str, Any], current: dict[str, Any], threshold: float) -> dict[str, Any]:
    """Kernels of the baseline's top list gone from the current one, kernels new or grown beyond
    ``threshold``, the groups that vanished (``_vanished_groups``), the time that vanished
    (``gone_ms``) and the kernels that grew in its place (``in_place``: each by a part of it).

    A kernel counts as gone only when its baseline time would still have placed it in the current
    top list: one pushed out of a full list by others that grew has not vanished."""
    before, after = _kernels(baseline), _kernels(current)
    floor = min(after.values()) if len(after) >= TOP_KERNELS else 0.0
    vanished = [
        (name, ms)
        for name, ms in sorted(before.items(), key=lambda kv: -kv[1])
        if name not in after and ms > max(floor, NOISE_MS)
    ]
    grown = sorted(
        (
            (name, before.get(name, 0.0), ms)
            for name, ms in after.items()
            if ms - before.get(name, 0.0) > threshold
        ),
        key=lambda item: -(item[2] - item[1]),
    )
    gone_groups = _vanished_groups(baseline, current)
    before_groups = baseline.get("device_ms") or {}
    gone_ms = max(
        sum(ms for _, ms in vanished), sum(float(before_groups.get(name, 0.0)) for name in gone_groups)
    )
    in_place = [
        (name, before.get(name, 0.0), ms)
        for name, ms in after.items()
        if ms - before.get(name, 0.0) > max(NOISE_MS, COMPOSITE_PART * gone_ms)
    ]
    return {
        "vanished": vanished,
        "grown": grown,
        "gone_groups": gone_groups,
        "gone_ms": gone_ms,
        "in_place": sorted(in_place, key=lambda item: -(item[2] - item[1])),
    }


def _vanished_groups(baseline: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Groups that took a share of the baseline's busy time and kept almost none of it."""
    before, after = baseline.get("device_ms") or {}, current.get("device_ms") or {}
    floor = max(NOISE_MS, GONE_MIN_SHARE * float(baseline.get("busy_ms") or 0.0))
    return [
        name
        for name, ms in before.items()
        if float(ms) >= floor and float(after.get(name, 0.0)) < GONE_FRACTION * float(ms)
    ]


def uniform_scale(baseline: dict[str, Any], current: dict[str, Any]) -> float:
    """How much every sizeable group grew alike (a slower or contended host, a lower clock): the median
    ratio of the groups that took at least ``SIZEABLE_FRACTION`` of the baseline's busy time, never
    below 1, and 1 when the groups did not grow alike (most ratios within ``UNIFORM_AGREEMENT`` of the
    median). The group that grew beyond it is the one that changed."""
    before, after = baseline.get("device_ms") or {}, current.get("device_ms") or {}
    busy = sum(float(ms) for ms in before.values())
    ratios = sorted(
        float(after.get(name, 0.0)) / float(ms)
        for name, ms in before.items()
        if busy and float(ms) >= SIZEABLE_FRACTION * busy
    )
    if len(ratios) < 3:
        return 1.0
    median = ratios[len(ratios) // 2]
    alike = sum(1 for ratio in ratios if abs(ratio / median - 1) <= UNIFORM_AGREEMENT) if median else 0
    return max(1.0, median) if alike * 2 > len(ratios) else 1.0


def _group_deltas(
    baseline: dict[str, Any], current: dict[str, Any], scale: float = 1.0
) -> list[tuple[str, float, float]]:
    """(group, before, after), the group that grew most beyond the uniform ``scale`` first."""
    before, after = baseline.get("device_ms") or {}, current.get("device_ms") or {}
    rows = [(name, float(before.get(name, 0.0)), float(after.get(name, 0.0))) for name in {*before, *after}]
    return sorted(rows, key=lambda row: (-(row[2] - row[1] * scale), row[0]))


def _memory_part(baseline: dict[str, Any], current: dict[str, Any]) -> str:
    before, after = baseline.get("memory") or {}, current.get("memory") or {}
    if "peak_allocated_b" not in after or "peak_allocated_b" not in before:
        why = after.get("n/a") or before.get("n/a") or "no allocator summary on one side"
        return f"allocator blocks n/a ({why})"
    peak_b, peak_a = before["peak_allocated_b"] / MIB, after["peak_allocated_b"] / MIB
    sizes_before = [block["size_b"] for block in before.get("blocks") or []]
    grown = []
    for block in after.get("blocks") or []:
        if block["size_b"] in sizes_before:
            sizes_before.remove(block["size_b"])
        else:
            where = f" at {block['frame']}" if block.get("frame") else ""
            grown.append(f"{block['size_b'] / MIB:.0f} MiB{where}")
    text = f"peak allocated {peak_a - peak_b:+.0f} MiB ({peak_b:.0f} -> {peak_a:.0f})"
    return text + (f"; new large blocks: {', '.join(grown[:3])}" if grown else "")


def _idle_ms(profile: dict[str, Any]) -> float:
    """The step's time with the device idle: waiting on the host's launches or on a synchronisation."""
    return float(profile.get("host_side_ms", 0.0)) + float(profile.get("idle_other_ms", 0.0))


def _is_composite(changes: dict[str, Any], work_threshold: float) -> bool:
    """Fused kernels (or a whole group) vanished, and at least two kernels grew in their place,
    together costing more than they did by the noise threshold: a slower composite."""
    vanished_ms = sum(ms for _, ms in changes["vanished"])
    gone = vanished_ms >= work_threshold or bool(changes["gone_groups"])
    in_place = changes["in_place"]
    added = sum(now - was for _, was, now in in_place)
    return gone and len(in_place) >= COMPOSITE_MIN_GROWN and added >= changes["gone_ms"] + work_threshold


def _nature(
    baseline: dict[str, Any],
    current: dict[str, Any],
    memory: bool,
    changes: dict[str, Any],
    thresholds: tuple[float, float],
) -> str:
    """``thresholds``: noise in the idle time, noise in the work (``_threshold``, ``_work_threshold``)."""
    idle_threshold, work_threshold = thresholds
    if _is_composite(changes, work_threshold):
        return "composite"
    if memory:
        return "memory"
    idle = _idle_ms(current) - _idle_ms(baseline)
    busy = float(current.get("busy_ms", 0.0)) - float(baseline.get("busy_ms", 0.0))
    if idle > idle_threshold and idle >= busy:
        return "host"
    groups = _group_deltas(baseline, current, uniform_scale(baseline, current))
    if groups and groups[0][2] - groups[0][1] > work_threshold:
        return "device"
    return "unclear"


def diagnose(baseline: dict[str, Any], current: dict[str, Any], *, memory: bool = False) -> dict[str, Any]:
    """The nature of the regression and its ``diagnosis:`` line. ``memory``: a memory metric regressed."""
    threshold, work_threshold = _threshold(baseline), _work_threshold(baseline)
    changes = _kernel_changes(baseline, current, work_threshold)
    nature = _nature(baseline, current, memory, changes, (threshold, work_threshold))
    scale = uniform_scale(baseline, current)
    groups = _group_deltas(baseline, current, scale)
    parts = []
    if nature == "composite":
        parts.append(_composite_part(baseline, current, changes))
    if memory and nature in ("memory", "composite"):
        parts.append(_memory_part(baseline, current))
    grown = [(n, b, a) for n, b, a in groups if a - b > work_threshold]
    if grown:
        (name, before, after), rest = grown[0], grown[1:3]
        text = f"{name} {after - before:+.1f} ms/step ({before:.1f} -> {after:.1f})"
        parts.append(", ".join([text, *(f"{n} {a - b:+.1f} ms" for n, b, a in rest)]))
    parts.append(_idle_part(baseline, current, threshold))
    if changes["grown"]:
        name, before, after = _top_grown(changes["grown"], current, grown[0][0] if grown else None)
        parts.append(f"top grown kernel: {name} {after - before:+.1f} ms ({before:.1f} -> {after:.1f})")
    window = current.get("scope") or "step"  # a verl run's profile covers one stage, not the step
    step = (
        f"{window} {float(baseline.get('step_ms', 0.0)):.1f} -> {float(current.get('step_ms', 0.0)):.1f} ms"
    )
    if scale > UNIFORM_NOTE_SCALE:
        parts.append(_uniform_part(nature, scale))
    line = f"diagnosis: {_headline(nature, grown, current)}: " + "; ".join(parts) + f" ({step} profiled)"
    return {
        "nature": nature,
        "line": line,
        "threshold_ms": threshold,
        "work_threshold_ms": work_threshold,
        "uniform_scale": scale,
    }


def _composite_part(baseline: dict[str, Any], current: dict[str, Any], changes: dict[str, Any]) -> str:
    """What vanished (a whole group and its fused kernels, else the largest vanished kernels) and what
    grew in its place."""
    before, after = baseline.get("device_ms") or {}, current.get("device_ms") or {}
    group_of = {kernel["name"]: kernel.get("group") for kernel in baseline.get("top_kernels") or []}
    groups = changes["gone_groups"]
    fused = [(n, ms) for n, ms in changes["vanished"] if group_of.get(n) in groups] or changes["vanished"]
    kernels = ", ".join(f"{name} ({ms:.1f} ms)" for name, ms in fused[:2])
    gone = "; ".join(
        f"{name} kernels {float(before[name]):.1f} -> {float(after.get(name, 0.0)):.1f} ms" for name in groups
    )
    gone = f"{gone} ({kernels})" if gone and kernels else gone or kernels
    came = ", ".join(f"{name} +{now - was:.1f} ms" for name, was, now in changes["in_place"][:3])
    return f"gone: {gone}; grew in place: {came}"


def _idle_part(baseline: dict[str, Any], current: dict[str, Any], threshold: float) -> str:
    """The device's idle time: waiting on the host's launches, and (when it changed) on the rest."""
    host_before, host_after = (
        float(baseline.get("host_side_ms", 0.0)),
        float(current.get("host_side_ms", 0.0)),
    )
    label = "host-side" if current.get("kind") == "gpu" else "outside any operator"
    text = f"{label} {host_after - host_before:+.1f} ms ({host_before:.1f} -> {host_after:.1f})"
    other_before, other_after = (
        float(baseline.get("idle_other_ms", 0.0)),
        float(current.get("idle_other_ms", 0.0)),
    )
    if abs(other_after - other_before) > threshold:
        text += f", idle on a synchronisation or dependency {other_after - other_before:+.1f} ms"
        text += f" ({other_before:.1f} -> {other_after:.1f})"
    return text


def _top_grown(
    grown: list[tuple[str, float, float]], current: dict[str, Any], group: str | None
) -> tuple[str, float, float]:
    """The kernel that grew most within the group that grew most, else the one that grew most."""
    group_of = {kernel["name"]: kernel.get("group") for kernel in current.get("top_kernels") or []}
    return next((item for item in grown if group_of.get(item[0]) == group), grown[0])


def _uniform_part(nature: str, scale: float) -> str:
    """Every group grew alike as well. Where the headline names its own cause, the growth is said as
    what the sizes above are measured beyond, so that the line names one cause, not two."""
    if nature in ("host", "unclear"):
        return f"every group x{scale:.1f} alike (a slower or contended host)"
    return f"sizes beyond the x{scale:.1f} every group grew alike (the run's host was slower too)"


def _headline(nature: str, grown: list[tuple[str, float, float]], current: dict[str, Any]) -> str:
    work = "GPU work" if current.get("kind") == "gpu" else "operator time"
    return {
        "memory": "memory regression",
        "composite": "a fused kernel replaced by a slower composite",
        "host": "host-side delay (the device waits on the host)"
        if current.get("kind") == "gpu"
        else "host-side delay (time outside any operator)",
        "device": f"extra {work} in {grown[0][0]}" if grown else f"extra {work}",
        "unclear": "no single cause in the profiled steps",
    }[nature]
