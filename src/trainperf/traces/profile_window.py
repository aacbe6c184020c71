"""Which steps a child profiles, where the trace goes and how large it may be (no torch here).

The profiled window is the *last* steps of the run: ``warmup`` profiler warm-up steps, then
``active`` recorded steps. Those steps are marked ``profiled`` in ``steps.jsonl`` and left out of
every timing metric (``measure.measurement``); putting them last means the profiler's start-up lands in a
marked step and the trace export after the final edge lands in no measured step at all. Profiling
extra steps after the measured ones instead would change the work per run (more steps, a longer
dataset) and so the meaning of a case's step count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from trainperf.workloads.protocol import rank_file

TRACE_SUFFIX = ".pt.trace.json.gz"
"""The TensorBoard profiler plugin's file pattern (``<worker>.pt.trace.json.gz``); Perfetto opens it too."""
DEFAULT_WARMUP = 1
DEFAULT_ACTIVE = 3
MIN_MEASURED_STEPS = 3
"""A trace never takes a run's steady state below this many unprofiled steps."""
DEFAULT_CAP_MB = 64.0
"""Compressed size above which a trace is analysed and then deleted (the figures stay in the result)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TracePlan:
    """What the parent asks a child to profile; travels in the child's spec as ``trace``."""

    trace_dir: str
    """``<run>/traces/<case-id>``: the TensorBoard plugin's run folder."""
    worker: str
    """File stem: ``<worker>.pt.trace.json.gz`` (the run's folder name, ``r1``)."""
    total_steps: int
    warmup: int = DEFAULT_WARMUP
    active: int = DEFAULT_ACTIVE
    cap_mb: float = DEFAULT_CAP_MB

    @property
    def first_profiled_step(self) -> int:
        """1-based step number of the first marked step (the profiler's warm-up)."""
        return self.total_steps - self.warmup - self.active + 1

    @property
    def wait(self) -> int:
        """Steps before the profiler wakes (``torch.profiler.schedule``'s ``wait``)."""
        return self.first_profiled_step - 1

    def profiled(self, step: int) -> bool:
        return step >= self.first_profiled_step

    @property
    def path(self) -> Path:
        return Path(self.trace_dir) / f"{self.worker}{TRACE_SUFFIX}"

    def for_rank(self, rank: int) -> TracePlan:
        """Rank ``rank``'s plan in a multi-GPU child: every rank profiles, each into its own file
        (``r2.rank1.pt.trace.json.gz``; rank 0 keeps the plain name, the trace the parent analyses).
        Two ranks exporting to one name race on its temporary file and one loses its trace."""
        return replace(self, worker=rank_file(self.worker, rank))

    def rank_paths(self) -> list[Path]:
        """The other ranks' trace files of this run, as they were written."""
        return sorted(Path(self.trace_dir).glob(f"{self.worker}.rank*{TRACE_SUFFIX}"))

    def to_spec(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_spec(cls, data: dict[str, Any] | None) -> TracePlan | None:
        return cls(**data) if data else None


def plan_trace(
    trace_dir: Path,
    worker: str,
    total_steps: int,
    cap_mb: float = DEFAULT_CAP_MB,
    *,
    window: tuple[int, int] | None = None,
) -> TracePlan | str:
    """The plan for a run of ``total_steps``, or why it cannot be traced (too few steps).
    ``window``: (warm-up, active) steps of a framework's own profiler, taken as they are (verl's:
    the last step alone); else the suite's schedule, its active steps fewer where the run is short."""
    warmup, active = window or (DEFAULT_WARMUP, DEFAULT_ACTIVE)
    while window is None and active > 1 and total_steps - warmup - active < MIN_MEASURED_STEPS:
        active -= 1
    if total_steps - warmup - active < MIN_MEASURED_STEPS:
        needed = MIN_MEASURED_STEPS + warmup + active
        return (
            f"not traced: {total_steps} steps leave too few to measure (a trace needs at least {needed}; "
            "--perf-steps)"
        )
    return TracePlan(
        trace_dir=str(trace_dir),
        worker=worker,
        total_steps=total_steps,
        warmup=warmup,
        active=active,
        cap_mb=cap_mb,
    )
