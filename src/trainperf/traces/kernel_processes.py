"""Kernel time of a framework whose kernels run in processes of its own (verl's Ray workers and rollout
engines): each process's records cut into steps at the driver's step edges, then pooled per GPU
(pure: no torch, no I/O).

In one child (``workloads.kernel_clock``) a marker kernel cuts the device's timeline at each
synchronised step edge. verl's steps are driven from another process, whose workers return their
results before the driver logs the step: every kernel of step k has ended when the driver logs it,
and step k+1's first kernel starts after that. So the driver's log time of each step (host wall
clock, ns) is an exact edge for every process of the host, once each process has put its CUPTI
timestamps on that clock (``convert_to_wall``). Step k is ``[edge(k-1), edge(k))``.

A GPU's kernel time for a step is the sum over the processes that ran on it: verl's training worker
and its rollout engine share a GPU and take turns (generation, then the updates), so their unions do
not overlap. A step's figure is the sum over every process of the run divided by the case's GPUs: a
per-GPU figure, whichever processes see which GPUs (a rollout engine's tensor-parallel workers may see
several). Each process's role (``rollout`` or ``training``) keeps its own part, which is how the
step's phases split.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainperf.traces.kernel_steps import (
    DeviceActivity,
    KernelTimes,
    StepKernels,
    TopKernel,
    summarise_step,
    top_kernels,
)

ROLLOUT, TRAINING = "rollout", "training"
ENGINE_TITLES = ("vllm", "sglang")
"""Process titles of a rollout engine (``VLLM::EngineCore``, ``VLLM::Worker_TP0``, ``sglang::scheduler``);
verl's own workers are titled ``ray::WorkerDict...``."""
CLOCK_RATE_LIMIT = 0.05
"""How far CUPTI's clock may run from the host's over a window before its ticks are taken for another
unit and rescaled (``kernel_steps.CLOCK_RATIO_LIMIT`` says why a clock can)."""


def role_of(title: str) -> str:
    lowered = title.lower()
    return ROLLOUT if any(name in lowered for name in ENGINE_TITLES) else TRAINING


def convert_to_wall(
    activities: Sequence[DeviceActivity], first: tuple[int, int], last: tuple[int, int]
) -> tuple[list[DeviceActivity], str]:
    """The records on the host's wall clock, from two (CUPTI timestamp, wall ns) pairs read together at
    the recording's start and end; a note where CUPTI's clock ran at another rate and was rescaled."""
    (cupti_0, wall_0), (cupti_1, wall_1) = first, last
    rate = (cupti_1 - cupti_0) / (wall_1 - wall_0) if wall_1 > wall_0 and cupti_1 > cupti_0 else 1.0
    note = ""
    if abs(rate - 1) > CLOCK_RATE_LIMIT:
        note = f"CUPTI's clock ran x{rate:.4f} the host's over the window: rescaled to nanoseconds"
    else:
        rate = 1.0

    def wall(ns: int) -> int:
        return wall_1 - round((cupti_1 - ns) / rate)

    converted = [DeviceActivity(a.name, a.kind, wall(a.start_ns), wall(a.end_ns)) for a in activities]
    return converted, note


def steps_by_edges(
    activities: Sequence[DeviceActivity], edges_ns: dict[int, int], first: int, last: int
) -> tuple[list[list[DeviceActivity]], int]:
    """The activities of steps ``first`` to ``last`` (step k: from edge k-1 to edge k), and how many
    fell outside them (a kernel of another step, or between steps)."""
    bounds = [edges_ns[step] for step in range(first - 1, last + 1)]
    per_step: list[list[DeviceActivity]] = [[] for _ in range(first, last + 1)]
    outside = 0
    for activity in activities:
        index = bisect_right(bounds, activity.start_ns) - 1
        if 0 <= index < len(per_step):
            per_step[index].append(activity)
        else:
            outside += 1
    return per_step, outside


@dataclass(slots=True)
class ProcessKernels:
    """One process's device work over the window, per step."""

    pid: int
    title: str
    gpu: str
    """The GPU it ran on (its UUID), or ``pid:<pid>`` where it saw several: for a reader of the
    process's record (the pooling divides by the case's GPUs)."""
    steps: list[StepKernels] = field(default_factory=list)
    top: list[TopKernel] = field(default_factory=list)
    records: int = 0
    outside: int = 0
    """Records outside the window's steps (read, not counted)."""
    read_back_s: float = 0.0
    error: str = ""
    note: str = ""

    @property
    def role(self) -> str:
        return role_of(self.title)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessKernels:
        """A process's record; raises ``ValueError`` (``TypeError`` included) on a malformed one."""
        try:
            return cls(
                pid=int(data["pid"]),
                title=str(data.get("title") or ""),
                gpu=str(data.get("gpu") or ""),
                steps=[StepKernels(**step) for step in data.get("steps") or []],
                top=[TopKernel(**kernel) for kernel in data.get("top") or []],
                records=int(data.get("records") or 0),
                outside=int(data.get("outside") or 0),
                read_back_s=float(data.get("read_back_s") or 0.0),
                error=str(data.get("error") or ""),
                note=str(data.get("note") or ""),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"unreadable process kernel record: {exc}") from exc


def process_kernels(
    activities: Sequence[DeviceActivity], edges_ns: dict[int, int], first: int, last: int
) -> tuple[list[StepKernels], list[TopKernel], int]:
    """One process's steps and top kernels (over every window step: the window starts after warm-up)."""
    per_step, outside = steps_by_edges(activities, edges_ns, first, last)
    steps = [summarise_step(first + offset, acts) for offset, acts in enumerate(per_step)]
    return steps, top_kernels(per_step), outside


def pool_processes(
    processes: Sequence[ProcessKernels], first: int, last: int, gpus: int, roles: Sequence[str] = ()
) -> KernelTimes:
    """The case's kernel time per step and GPU: the sum over its processes over the case's ``gpus``. A
    process without every window step, or a role in ``roles`` that no process recorded (an engine whose
    processes never imported the hook), makes the figure partial, so no step is given (``error`` says
    what is missing)."""
    recorded = [p for p in processes if not p.error]
    wanted = list(range(first, last + 1))
    errors = [f"pid {p.pid} ({p.title or '?'}): {p.error}" for p in processes if p.error]
    if recorded:
        errors += [
            f"no {role} process recorded kernels" for role in roles if role not in {p.role for p in recorded}
        ]
    short = [p for p in recorded if [s.step for s in p.steps] != wanted]
    errors += [f"pid {p.pid} ({p.title or '?'}) recorded steps {[s.step for s in p.steps]}" for p in short]
    notes = sorted({p.note for p in recorded if p.note})
    read_back = max((p.read_back_s for p in recorded), default=0.0)
    if errors or not recorded:
        error = "; ".join(errors) or "no process of the run recorded kernels"
        return KernelTimes(
            error=f"kernel time not recorded: {error}"[:600], clock="cupti", read_back_s=read_back
        )
    gpus = max(1, gpus)
    steps = [_pooled_step(step, [p.steps[step - first] for p in recorded], recorded, gpus) for step in wanted]
    return KernelTimes(
        steps=steps,
        top=_pooled_top(recorded, gpus),
        top_steps=len(wanted),
        clock="cupti",
        clock_note="; ".join(notes),
        read_back_s=read_back,
    )


def _pooled_step(
    step: int, parts: list[StepKernels], processes: list[ProcessKernels], gpus: int
) -> StepKernels:
    groups: dict[str, float] = defaultdict(float)
    roles: dict[str, float] = defaultdict(float)
    for part, process in zip(parts, processes, strict=True):
        roles[process.role] += part.busy_ms / gpus
        for group, ms in part.groups_ms.items():
            groups[group] += ms / gpus
    return StepKernels(
        step=step,
        busy_ms=round(sum(part.busy_ms for part in parts) / gpus, 4),
        groups_ms={name: round(ms, 4) for name, ms in sorted(groups.items(), key=lambda kv: -kv[1])},
        kernels=sum(part.kernels for part in parts),
        parts_ms={role: round(ms, 4) for role, ms in sorted(roles.items())},
    )


def _pooled_top(processes: list[ProcessKernels], gpus: int) -> list[TopKernel]:
    """The top kernels over every process, per GPU."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for process in processes:
        for kernel in process.top:
            entry = totals[(kernel.name, kernel.group)]
            entry[0] += kernel.total_ms / gpus
            entry[1] += kernel.count / gpus
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])
    limit = max((len(p.top) for p in processes), default=0)
    return [
        TopKernel(name, group, round(ms, 4), round(count)) for (name, group), (ms, count) in ranked[:limit]
    ]
