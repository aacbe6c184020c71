"""A family's own kernel-time tolerance over the class's (no I/O).

Kernel time's tolerance in the metric registry is 1.5 times the widest spread measured for the same
step across GPUs of one class, on the hf cases, whose steps are mostly GEMMs. A family whose kernels
are mostly bound by the GPU's memory spreads wider across GPUs of one kind (verl's PPO step: 0.83%
over three H200 machines), and declares its own (``Family.kernel_tolerance``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from trainperf.judge.metrics import KERNEL_TIME, Metric


def with_kernel_tolerance(
    metrics: Mapping[str, Metric],
    tolerance: float | None,
    *,
    class_metrics: Mapping[str, Metric],
    configured: Collection[str],
) -> dict[str, Metric]:
    """The metrics with kernel time's tolerance widened to ``tolerance`` (a family's own, scaled for
    the class) where it is still the class's default: one set in pyproject.toml (``configured``) or
    learned from a runner's history stands."""
    kernel, of_class = metrics.get(KERNEL_TIME), class_metrics.get(KERNEL_TIME)
    if tolerance is None or kernel is None or of_class is None or KERNEL_TIME in configured:
        return dict(metrics)
    if kernel.tolerance != of_class.tolerance or tolerance <= kernel.tolerance:
        return dict(metrics)
    return {**metrics, KERNEL_TIME: dataclasses.replace(kernel, tolerance=tolerance)}
