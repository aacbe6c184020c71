"""GPU kernel time per training step, from the device's activity records (pure: no torch, no I/O).

The child (``workloads.kernel_clock``) records every kernel, memcpy and memset the GPU ran over its
steps, through CUPTI, and a marker kernel at each synchronised step edge. Here those records are cut
at the markers into steps: step k is everything the device ran between the marker of edge k-1 and
the marker of edge k. Every kernel of a step has ended before its edge (the edge is a device-wide
synchronisation) and the next step's kernels are launched after the marker, so the cut is exact
whatever the streams.

A step's *kernel time* is the union of its activity intervals (streams that overlap count once): the
time the GPU had work. It is set by the GPU, its clocks and the software, not by the host, so it
transfers across machines of a class; the rest of the step (step time minus kernel time) is the host's
share. Communication kernels (NCCL's all-reduce...) are left out of it: such a kernel starts when its
rank gets there and spins until the slowest peer arrives, so its duration holds the other ranks' host
time (a 2-GPU LoRA step on an H100 host: 1,907 ms of all-reduce in one window step, 235 ms in the
next, 2 ms on the other rank). Their time stays in the step's ``communication`` group, shown. Per group
(GEMM, attention, ...) the durations are summed, as profilers report them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from trainperf.traces.analysis import merge
from trainperf.traces.categories import categorise, short_name
from trainperf.traces.profile import GROUP_OF

MARKER_KERNEL = "spin_kernel"
"""The kernel ``torch.cuda._sleep(0)`` launches: nothing in a training step launches it, so it marks
the step edges on the device's own timeline."""
MEMORY_KINDS = ("gpu_memcpy", "gpu_memset")
COMMUNICATION = "communication"
"""The group whose kernels wait for peers: kept in the groups, left out of kernel time."""
NS_PER_MS = 1e6
TOP_KERNELS = 20
FIRST_STEP_SKIPPED = 1
"""The top kernels leave out the first step: its allocation, autotuning and compilation are warm-up."""
WINDOW_START = 3
"""The kernel window's first step: after the first two (allocation, first-time kernels), and early, so
that a planned shorter run (``--perf-plan-steps``) records the same batches as its full-length baseline."""
DEFAULT_WINDOW = 2
KERNEL_CLOCKS = ("auto", "cupti", "profiler")
"""How a child may read its kernel records (``--perf-kernel-clock``; ``workloads.kernel_clock``)."""
MIN_TIMED_STEPS = 5
"""A run keeps at least this many timed steps outside the kernel window and a trace's profiled steps."""


def kernel_window(total_steps: int, wanted: int, trace_first: int | None = None) -> tuple[int, int] | None:
    """The steps (first, last) whose device work a run records, or None: ``wanted`` steps from
    ``WINDOW_START``, at most one in ten of the run's (a TRL GRPO step of 226,000 kernels took 6.8 s to
    read back), fewer where the run would keep under ``MIN_TIMED_STEPS`` timed steps, and before a
    trace's profiled steps (``trace_first``; Kineto admits one profiler at a time)."""
    usable = (trace_first - 1) if trace_first else total_steps
    width = min(max(0, wanted), max(1, total_steps // 10))
    while width > 0 and usable - width < MIN_TIMED_STEPS:
        width -= 1
    last = WINDOW_START + width - 1
    if width < 1 or last > usable:
        return None
    return WINDOW_START, last


LAST_WINDOW_TIMED = 3
"""Timed steps a run of a family recorded in its own processes keeps between its warm-up step and its
window (``last_steps_window``)."""


def last_steps_window(total_steps: int, wanted: int) -> tuple[int, int] | None:
    """The window of a family whose kernels run in processes of its own (verl): its last steps, at most
    one in five and ``wanted``, fewer where the run would keep under ``LAST_WINDOW_TIMED`` timed steps
    after its first, or None. They are left out of the timing like any window (recording slowed a verl
    PPO step by 19-35% on an H200: ``docs/verdicts.md``), and at the run's end the records' read-back
    (5-12 s for 0.9 million kernels) delays no later step."""
    width = min(max(0, wanted), max(1, total_steps // 5))
    while width > 0 and total_steps - 1 - width < LAST_WINDOW_TIMED:
        width -= 1
    return (total_steps - width + 1, total_steps) if width >= 1 else None


@dataclass(frozen=True, slots=True)
class DeviceActivity:
    """One interval the GPU worked: a kernel, a memcpy or a memset (``kind`` as Kineto names it)."""

    name: str
    kind: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class StepKernels:
    """One step's device work."""

    step: int
    busy_ms: float
    """The union of the step's activity intervals but communication's: the time the GPU had work of its
    own, not waiting for a peer."""
    groups_ms: dict[str, float]
    """Summed durations per group (``traces.profile.GROUPS``); overlapping streams count twice here."""
    kernels: int
    parts_ms: dict[str, float] = field(default_factory=dict)
    """Where the step's kernels ran, by the role of their process (``rollout``, ``training``), per GPU:
    for a framework whose phases run in processes of their own (``traces.kernel_processes``); empty
    for a child's own kernels."""


@dataclass(frozen=True, slots=True)
class TopKernel:
    """A kernel's total over the recorded steps after the first (the first is warm-up)."""

    name: str
    group: str
    total_ms: float
    count: int


@dataclass(slots=True)
class KernelTimes:
    """What a child reports of its device work: per step, and the kernels that took the most time."""

    steps: list[StepKernels] = field(default_factory=list)
    top: list[TopKernel] = field(default_factory=list)
    top_steps: int = 0
    """How many steps ``top`` sums over."""
    error: str = ""
    """Why nothing (or not every step) was recorded: no CUPTI, markers missing, a profiler failure."""
    clock: str = ""
    """How the records were read: ``cupti`` (the Activity API directly) or ``profiler`` (PyTorch's)."""
    clock_note: str = ""
    """Why the clock is not the one asked for (``--perf-kernel-clock auto`` fell back), or ''."""
    read_back_s: float = 0.0
    """Wall time from the window's last edge to its figures: what the clock added to the run."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> KernelTimes | None:
        """A child's record, None where it has none; a malformed record reads as its error."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                steps=[StepKernels(**step) for step in data.get("steps") or []],
                top=[TopKernel(**kernel) for kernel in data.get("top") or []],
                top_steps=int(data.get("top_steps") or 0),
                error=str(data.get("error") or ""),
                clock=str(data.get("clock") or ""),
                clock_note=str(data.get("clock_note") or ""),
                read_back_s=float(data.get("read_back_s") or 0.0),
            )
        except (TypeError, ValueError) as exc:
            return cls(error=f"unreadable kernel-time record: {exc}")

    def by_step(self) -> dict[int, StepKernels]:
        return {step.step: step for step in self.steps}


@lru_cache(maxsize=65536)
def _group(name: str, kind: str) -> str:
    """The profile group of one activity: copies and sets are memory traffic, kernels by their name
    (a step launches thousands of kernels of a few hundred names: each name is matched once)."""
    category = "memory" if kind in MEMORY_KINDS else categorise(name)
    return GROUP_OF.get(category, "other")


def union_ms(intervals: Iterable[tuple[int, int]]) -> float:
    """The length of the union of ``[start, end)`` intervals in nanoseconds, as milliseconds."""
    return sum(end - start for start, end in merge(intervals)) / NS_PER_MS


CLOCK_RATIO_LIMIT = 0.05
"""How far the device's span between the first and last marker may stray from the host's between their
launches before the records are taken to count in other units than nanoseconds. Each marker runs a few
microseconds after its synchronised launch, so over a window of steps the two spans agree to about
1e-5; another profiler in the process can leave CUPTI's timestamps in its own clock's ticks (x2.10 on
an H100 host, after the PyTorch profiler had run)."""


def clock_ratio(activities: Sequence[DeviceActivity], host_marks_ns: Sequence[int]) -> float | None:
    """The records' clock over the host's between the first and the last step marker, None where
    there are too few markers to tell (the step split then says so)."""
    marks = sorted(a.start_ns for a in activities if MARKER_KERNEL in a.name)
    if len(marks) < 2 or len(host_marks_ns) < 2 or host_marks_ns[-1] <= host_marks_ns[0]:
        return None
    return (marks[-1] - marks[0]) / (host_marks_ns[-1] - host_marks_ns[0])


def in_nanoseconds(
    activities: Sequence[DeviceActivity], host_marks_ns: Sequence[int]
) -> tuple[Sequence[DeviceActivity], str]:
    """The records with nanosecond timestamps, and a note where they had to be converted: a clock that
    ran ``ratio`` times the host's between the markers is divided by it (its ticks are linear in time,
    as the PyTorch profiler's own conversion of them assumes)."""
    ratio = clock_ratio(activities, host_marks_ns)
    if ratio is None or abs(ratio - 1) <= CLOCK_RATIO_LIMIT:
        return activities, ""
    converted = [
        DeviceActivity(a.name, a.kind, round(a.start_ns / ratio), round(a.end_ns / ratio)) for a in activities
    ]
    return converted, (
        f"the records' clock ran x{ratio:.4f} the host's between the step markers (another profiler in "
        "this process set CUPTI's clock): converted to nanoseconds by that ratio"
    )


def split_steps(activities: Sequence[DeviceActivity]) -> tuple[list[list[DeviceActivity]], str]:
    """The activities between consecutive markers, one list per framed step, and an error where the
    markers do not frame any step."""
    # CUPTI names the marker with its namespace and signature (``at::cuda::...::spin_kernel(long)``).
    is_mark = {name: MARKER_KERNEL in name for name in {a.name for a in activities}}
    marks = sorted(a.start_ns for a in activities if is_mark[a.name])
    if len(marks) < 2:
        return [], (
            f"{len(marks)} step-edge marker(s) among {len(activities)} device activities: no step framed"
        )
    steps: list[list[DeviceActivity]] = [[] for _ in range(len(marks) - 1)]
    for activity in activities:
        if marks[0] <= activity.start_ns < marks[-1] and not is_mark[activity.name]:
            steps[bisect_right(marks, activity.start_ns) - 1].append(activity)
    return steps, ""


def summarise_step(step: int, activities: Sequence[DeviceActivity]) -> StepKernels:
    groups: dict[str, float] = defaultdict(float)
    own: list[tuple[int, int]] = []
    for activity in activities:
        group = _group(activity.name, activity.kind)
        groups[group] += (activity.end_ns - activity.start_ns) / NS_PER_MS
        if group != COMMUNICATION:
            own.append((activity.start_ns, activity.end_ns))
    return StepKernels(
        step=step,
        busy_ms=union_ms(own),
        groups_ms={name: round(ms, 4) for name, ms in sorted(groups.items(), key=lambda kv: -kv[1])},
        kernels=len(activities),
    )


def top_kernels(per_step: Sequence[Sequence[DeviceActivity]], limit: int = TOP_KERNELS) -> list[TopKernel]:
    """The kernels that took the most GPU time over the given steps, by their full name (shortened
    for the record); the group comes from the full name, whose template arguments tell a cast."""
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for activities in per_step:
        for activity in activities:
            entry = totals[(activity.name, activity.kind)]
            entry[0] += activity.end_ns - activity.start_ns
            entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:limit]
    return [
        TopKernel(short_name(name), _group(name, kind), round(ns / NS_PER_MS, 4), count)
        for (name, kind), (ns, count) in ranked
    ]


def kernel_times(activities: Sequence[DeviceActivity], first_step: int = 1) -> KernelTimes:
    """Per-step kernel time of a window whose first framed step is ``first_step``, and its top kernels
    (over every framed step but a run's first, which is warm-up)."""
    per_step, error = split_steps(activities)
    if error:
        return KernelTimes(error=error)
    steps = [summarise_step(first_step + offset, acts) for offset, acts in enumerate(per_step)]
    later = per_step[FIRST_STEP_SKIPPED:] if first_step == 1 else per_step
    return KernelTimes(steps=steps, top=top_kernels(later), top_steps=len(later))
