"""A run's steady steps split into their two parts: the GPU's kernel time and the host's time (no I/O).

The child reports the device's busy time per step (``traces.kernel_steps``); a step's host time is its
wall time less that: the time the GPU had nothing to run, waiting for the host's Python, launches, data
or allocator. Both are kept per step with the step's key, so that each is judged step by step against
the reference's same batches like step time is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainperf.judge import stats
from trainperf.result import KernelShare, KernelSummary
from trainperf.traces.kernel_steps import KernelTimes

MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class StepParts:
    """The steady steps' kernel and host time, each step's device time by group, the top kernels."""

    kernel_ms: list[float]
    host_ms: list[float]
    groups_ms: dict[str, float] = field(default_factory=dict)
    """Mean device time per steady step by group (GEMM, attention, ...)."""
    top: list[dict[str, Any]] = field(default_factory=list)
    """The kernels that took the most device time, per step."""

    @property
    def kernel_median(self) -> float:
        return stats.median(self.kernel_ms)

    @property
    def host_median(self) -> float:
        return stats.median(self.host_ms)


def step_parts(
    steady: Sequence[dict[str, Any]], record: dict[str, Any] | None
) -> tuple[StepParts | None, str]:
    """The parts of the steady steps, or None and why not (no GPU, no record, a step without one)."""
    kernels = KernelTimes.from_dict(record)
    if kernels is None:
        return None, ""
    if kernels.error and not kernels.steps:
        return None, kernels.error
    by_step = kernels.by_step()
    missing = [int(step["step"]) for step in steady if int(step["step"]) not in by_step]
    if missing or not steady:
        shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
        return None, f"kernel time not recorded for steady step(s) {shown or '-'}"
    kernel = [by_step[int(step["step"])].busy_ms for step in steady]
    host = [max(0.0, float(step["duration_s"]) * MS_PER_S - ms) for step, ms in zip(steady, kernel)]
    groups: dict[str, float] = defaultdict(float)
    for step in steady:
        for group, ms in by_step[int(step["step"])].groups_ms.items():
            groups[group] += ms / len(steady)
    per = max(1, kernels.top_steps)
    top = [
        {"name": k.name, "group": k.group, "ms": round(k.total_ms / per, 4), "count": k.count / per}
        for k in kernels.top
    ]
    ordered = dict(sorted(((g, round(ms, 4)) for g, ms in groups.items()), key=lambda kv: -kv[1]))
    return StepParts(kernel, host, ordered, top), ""


def pool_kernels(runs: Sequence[dict[str, Any]]) -> KernelSummary | None:
    """A result's kernel summary from its runs' records: each group's median over the runs that have
    one, the last such run's top kernels; None where no run recorded kernel time."""
    recorded = [run for run in runs if run.get("kernel_groups_ms")]
    if not recorded:
        return None
    names = sorted({group for run in recorded for group in run["kernel_groups_ms"]})
    groups = {
        name: round(stats.median([float(run["kernel_groups_ms"].get(name, 0.0)) for run in recorded]), 4)
        for name in names
    }
    top = [KernelShare(**entry) for entry in recorded[-1].get("kernel_top") or []]
    ordered = dict(sorted(groups.items(), key=lambda kv: -kv[1]))
    return KernelSummary(groups_ms=ordered, top=top, runs=len(recorded))
