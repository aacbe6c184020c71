"""What a metric is: its kind, the part of the machine it depends on, how its runs pool, its good
direction and its tolerance (the types of ``judge.metrics``'s one registry)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Direction(str, Enum):
    LOWER = "lower"
    HIGHER = "higher"


class Kind(str, Enum):
    """What a metric measures; code that treats a group alike asks the registry for a kind."""

    TIMING = "timing"
    THROUGHPUT = "throughput"
    MEMORY = "memory"
    """GPU memory, whose peak step a run records (``measure.measurement.memory_peak_step``)."""
    HOST_MEMORY = "host_memory"
    ENERGY = "energy"
    POWER = "power"
    UTILISATION = "utilisation"
    """Where a profiled step's time goes: the device busy, or waiting on the host."""
    SPEED = "speed"
    """How fast the machine ran, beside the case: the host's speed index, the GPU's clock."""
    CLIFF = "cliff"


class Part(str, Enum):
    """Which part of the machine a timing figure depends on, and so where it compares.

    A step's time has two parts with different physics. The GPU's kernels are set by the GPU model,
    its clocks and the software: they transfer across machines of a class. The host's share (Python,
    launches, data, the allocator) is set by the host's CPU, its turbo and its neighbours: it compares
    on the same runner only. Wall-clock figures hold both."""

    DEVICE = "device"
    HOST = "host"
    WHOLE = "whole"


class Pooling(str, Enum):
    """How the fresh runs of a case make one value (``measure.measurement.pool_runs``)."""

    MEDIAN_OF_RUNS = "median_of_runs"
    MEDIAN_OF_STEPS = "median_of_steps"
    """The median of every run's per-step samples pooled (the median of the runs where none)."""
    STEP_TIME_QUARTILE = "step_time_quartile"
    """The lower quartile of every run's step times pooled (the median of the runs where none)."""
    MAX_OF_RUNS = "max_of_runs"


class Across(str, Enum):
    """How a case over several GPUs combines a figure sampled on each (``measure.multi_gpu``)."""

    SUM = "sum"
    """What the job draws (power, energy)."""
    MAX = "max"
    """What has to fit on one card (device memory), or the highest reading."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    name: str
    kind: Kind
    unit: str
    column: str
    """Its short title: a column of the summary table."""
    label: str
    """Its long title with the unit: the dashboard's plots."""
    direction: Direction
    tolerance: float
    """Relative change (fraction of the baseline) that counts as a change."""
    pooling: Pooling = Pooling.MEDIAN_OF_RUNS
    abs_tolerance: float = 0.0
    """Changes smaller than this, in the metric's unit, never count (memory jitter, say)."""
    timing: bool = False
    """Depends on speed: not gated when timing is not comparable (other CPU, emulated class)."""
    part: Part = Part.WHOLE
    """For a timing metric, the part of the machine it depends on (``Part``): where it compares."""
    gated: bool = True
    """Informational metrics are reported next to the verdict but never fail a case."""
    across_gpus: Across | None = None
    """Set for a figure NVML samples on each GPU: it is device-wide (another process's use on the
    GPU is in it), and a multi-GPU case combines its GPUs so. None: the case's own processes."""
    description: str = ""
    tolerance_note: str = ""
    """Why the tolerance differs from the configured one for this verdict (the runner's own run-to-run
    move, ``judge.host_runs``): said beside the metric's verdict."""

    @property
    def device_wide(self) -> bool:
        return self.across_gpus is not None
