"""A family's own timing tolerances over the class's, where its cases spread wider (no I/O).

The registry's tolerances were set from the hf cases: kernel time at 1.5 times the widest spread of
one step across GPUs of a class (steps mostly of GEMMs), step time at 3% on one runner. A family whose
figures spread wider by their nature declares its own, measured the same way
(``Family.tolerances``): verl's PPO step is mostly elementwise work bound by the GPU's memory (0.83%
over three H200 machines), and its host work runs in Ray workers whose host moved its step time by
+11.2% on one runner between two sessions ten minutes apart, its kernels unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from trainperf.judge.metric_types import Metric, Part


@dataclass(frozen=True, slots=True)
class FamilyTolerances:
    kernel: float | None = None
    """For timing figures of the GPU's work (kernel time); None: the class's."""
    host: float | None = None
    """For timing figures the host takes part in (step time, throughput, phases, host time); None: the
    class's."""

    def scaled(self, scale: float) -> FamilyTolerances:
        """Scaled like the class scales its timing tolerances."""
        return FamilyTolerances(
            self.kernel * scale if self.kernel is not None else None,
            self.host * scale if self.host is not None else None,
        )


def with_family_tolerances(
    metrics: Mapping[str, Metric],
    family: FamilyTolerances,
    *,
    class_metrics: Mapping[str, Metric],
    configured: Collection[str],
) -> dict[str, Metric]:
    """The metrics with each timing tolerance widened to the family's for its part, where it is still
    the class's: one set in pyproject.toml (``configured``) or learned from a runner's history stands,
    and a family's is never narrower."""
    widened = dict(metrics)
    for name, metric in metrics.items():
        wanted = family.kernel if metric.part is Part.DEVICE else family.host
        of_class = class_metrics.get(name)
        if wanted is None or not metric.timing or name in configured or of_class is None:
            continue
        if metric.tolerance == of_class.tolerance and wanted > metric.tolerance:
            widened[name] = dataclasses.replace(metric, tolerance=wanted)
    return widened
