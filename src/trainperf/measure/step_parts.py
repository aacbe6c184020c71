"""A run's steps split into their two parts: the GPU's kernel time and the host's share (no I/O).

The child records the device's busy time over a window of early steps (``workloads.kernel_clock``),
which are not timed: the recording slows the host. Kernel time is each window step's busy time, kept
with the step's key so that it is judged step by step against the reference's same batches. The host's
share is the run's median timed step less its median window kernel time: the time a step's GPU had
nothing to run, waiting for the host's Python, launches, data or allocator. It is exact where every
step does the same work (fixed lengths) and the run's typical figure where batch lengths vary; it is
shown beside the verdict, and host-bound changes are gated through step time on the runner's own
reference (``judge.verdict``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainperf.judge import stats
from trainperf.result import KernelSummary
from trainperf.run_record import KernelShare, RunRecord
from trainperf.traces.kernel_steps import KernelTimes

MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class StepParts:
    """The window's kernel time per step (with its keys), the host's share of a timed step, each
    group's GPU time per step and the top kernels."""

    kernel_ms: list[float]
    keys: list[str]
    host_ms: float
    groups_ms: dict[str, float] = field(default_factory=dict)
    """Mean GPU time per window step by group (GEMM, attention, ...)."""
    top: list[KernelShare] = field(default_factory=list)
    """The kernels that took the most GPU time, per step."""
    clock: str = ""
    """How the child read the records (``cupti``, ``profiler``)."""
    clock_note: str = ""
    """Why not as asked, or how the records had to be converted; '' where neither."""
    read_back_s: float = 0.0
    roles_ms: dict[str, float] = field(default_factory=dict)
    """Mean kernel time per window step by the role of the process that ran it (verl's ``rollout`` and
    ``training``); empty for a child's own kernels."""

    @property
    def kernel_median(self) -> float:
        return stats.median(self.kernel_ms)


def step_parts(
    steady: Sequence[dict[str, Any]], window: Sequence[dict[str, Any]], record: dict[str, Any] | None
) -> tuple[StepParts | None, str]:
    """The parts of a run, or None and why not (no GPU, no record, a window step without one)."""
    kernels = KernelTimes.from_dict(record)
    if kernels is None:
        return None, ""
    if kernels.error and not kernels.steps:
        return None, kernels.error
    by_step = kernels.by_step()
    missing = [int(step["step"]) for step in window if int(step["step"]) not in by_step]
    if missing or not window or not steady:
        shown = ", ".join(map(str, missing)) or "-"
        return None, f"kernel time not recorded for window step(s) {shown}"
    kernel = [by_step[int(step["step"])].busy_ms for step in window]
    keys = [f"{int(step['step'])}:{int(step['tokens'])}" for step in window]
    timed_ms = stats.median([float(step["duration_s"]) * MS_PER_S for step in steady])
    groups: dict[str, float] = defaultdict(float)
    roles: dict[str, float] = defaultdict(float)
    for step in window:
        for group, ms in by_step[int(step["step"])].groups_ms.items():
            groups[group] += ms / len(window)
        for role, ms in by_step[int(step["step"])].parts_ms.items():
            roles[role] += ms / len(window)
    per = max(1, kernels.top_steps)
    top = [KernelShare(k.name, k.group, round(k.total_ms / per, 4), k.count / per) for k in kernels.top]
    ordered = dict(sorted(((g, round(ms, 4)) for g, ms in groups.items()), key=lambda kv: -kv[1]))
    host = max(0.0, timed_ms - stats.median(kernel))
    by_role = {role: round(ms, 4) for role, ms in sorted(roles.items())}
    return StepParts(
        kernel, keys, host, ordered, top, kernels.clock, kernels.clock_note, kernels.read_back_s, by_role
    ), ""


def pool_kernels(runs: Sequence[RunRecord]) -> KernelSummary | None:
    """A result's kernel summary from its runs' records: each group's median over the runs that have
    one, the last such run's top kernels; None where no run recorded kernel time."""
    recorded = [run for run in runs if run.kernel_groups_ms]
    if not recorded:
        return None
    groups = _medians([run.kernel_groups_ms or {} for run in recorded])
    roles = _medians([run.kernel_roles_ms for run in recorded if run.kernel_roles_ms])
    top = list(recorded[-1].kernel_top or [])
    return KernelSummary(groups_ms=groups, top=top, runs=len(recorded), roles_ms=roles)


def _medians(per_run: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each name's median over the runs (0 where a run lacks it), the largest first."""
    names = sorted({name for run in per_run for name in run})
    medians = {name: round(stats.median([float(run.get(name, 0.0)) for run in per_run]), 4) for name in names}
    return dict(sorted(medians.items(), key=lambda kv: -kv[1]))
