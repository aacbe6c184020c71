"""Host time compared where the host ran at full speed on both sides (no I/O).

A cloud host flips between spells of two speeds every few seconds: on one H200 (2026-11-29) the probe
at each step's edge read about 5.8 ops/us in fast spells and 3.3 in slow ones, within one run, and a
run's median step is the mix of its spells. Every step's edge timed the host (``HOST_SPEED``'s
per-step samples); a step counts at full speed where its probe read at least ``FULL_SPEED_SHARE`` of
the host's full speed (a high quantile of both sides' probes). Judged over those steps alone, host time
compares like with like: the probe picks the steps, it never divides a figure. On another H200 that
day (``benchmarks/host_spells_replay.py``, docs/measurements/2026-11-29-h200-upgrades), two unchanged
runs read -1.6% apart over their full-speed steps (`pass`; all steps: -4.6%, `noisy`), and a run with
+50 ms of Python a step against either of them `regressed` in 3 of 4 pairs (+9.4% to +19.4%; the
fourth +5.3%, `noisy`), where the whole run's speed as the trigger had shown 3 of the 4, not judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainperf.judge import stats
from trainperf.judge.host_runs import depends_on_host
from trainperf.judge.metrics import HOST_SPEED, STEP_TIME, Metric, resolve_metric
from trainperf.result import CaseResult, MetricValue

FULL_SPEED_SHARE = 0.80
"""A step's probe at 80% of the host's full speed or more counts as a fast spell: the two spells
measured sat about 1.8x apart, and the fast one's own steps within 15% of each other."""
FULL_SPEED_QUANTILE = 0.90
"""The host's full speed: this quantile of both sides' probes (the fastest tenth is the host at its
undisturbed speed; the very fastest probe alone could be one lucky reading)."""
MIN_FULL_SPEED_STEPS = 8
"""Steps both sides ran at full speed needed to judge over them (the paired test's own minimum)."""
MIN_RUN_FULL_SPEED_STEPS = 4
"""A run's level over its full-speed steps needs this many of them; a run with fewer says more about
its few batches than about its process, and is left out of the run-to-run figures."""


@dataclass(frozen=True, slots=True)
class FullSpeedSteps:
    """Both sides with their host-dependent figures' per-step samples cut to the steps the host ran at
    full speed, and how many that left."""

    result: CaseResult
    reference: CaseResult
    threshold: float
    """Ops/us at or above which a step's probe counts as full speed."""
    kept: tuple[int, int]
    """Run-steps kept: the result's, the reference's."""
    total: tuple[int, int]
    metrics: tuple[str, ...]
    """The figures whose samples were cut."""

    def note(self) -> str:
        return (
            f"over the steps at the host's full speed on both sides ({self.kept[0]} of {self.total[0]} "
            f"and {self.kept[1]} of {self.total[1]} run-steps, probe >= {self.threshold:.2f} ops/us)"
        )


def _aligned(value: MetricValue | None, speeds: MetricValue) -> bool:
    """Whether ``value``'s samples are the same steps as the probes' (sample i is probe i's step)."""
    return (
        value is not None
        and value.samples is not None
        and value.keys is not None
        and speeds.keys is not None
        and value.keys == speeds.keys
        and len(value.samples) == len(value.keys)
    )


def _host_dependent(metrics: Mapping[str, Metric], name: str) -> bool:
    metric = resolve_metric(dict(metrics), name)
    return metric is not None and depends_on_host(metric)


def run_segments(keys: Sequence[str]) -> list[tuple[int, int]]:
    """(start, end) of each run's samples in a figure pooled over runs: a run measures each batch once,
    so a run's samples end where a key comes again."""
    bounds, seen, start = [], set[str](), 0
    for index, key in enumerate(keys):
        if key in seen:
            bounds.append((start, index))
            seen, start = set(), index
        seen.add(key)
    return [*bounds, (start, len(keys))] if keys else []


def _run_levels(samples: Sequence[float], keys: Sequence[str], keep: Sequence[bool]) -> list[float] | None:
    """Each run's median over its full-speed steps (runs with at least ``MIN_RUN_FULL_SPEED_STEPS``):
    how far the runner's processes move once the host's spells are taken out."""
    levels = []
    for start, end in run_segments(keys):
        kept = [s for s, k in zip(samples[start:end], keep[start:end], strict=True) if k]
        if len(kept) >= MIN_RUN_FULL_SPEED_STEPS:
            levels.append(stats.median(kept))
    return levels or None


def _cut(value: MetricValue, keep: list[bool]) -> MetricValue:
    """The figure over the kept steps: its samples, and its runs' levels over them (what the runner's
    own run-to-run floor is measured from, ``host_runs.with_host_run_floor``)."""
    assert value.samples is not None and value.keys is not None
    samples = [s for s, k in zip(value.samples, keep, strict=True) if k]
    keys = [key for key, k in zip(value.keys, keep, strict=True) if k]
    return dataclasses.replace(
        value, samples=samples, keys=keys, per_run=_run_levels(value.samples, value.keys, keep)
    )


def full_speed_steps(
    result: CaseResult, reference: CaseResult, metrics: Mapping[str, Metric]
) -> FullSpeedSteps | None:
    """Both sides cut to the steps their host ran at full speed, where both timed the host at every
    step and at least ``MIN_FULL_SPEED_STEPS`` such steps are the same batches on both; else None."""
    mine, theirs = result.metrics.get(HOST_SPEED), reference.metrics.get(HOST_SPEED)
    if mine is None or theirs is None or not mine.samples or not theirs.samples:
        return None
    names = tuple(
        name
        for name in sorted(result.metrics.keys() & reference.metrics.keys())
        if _host_dependent(metrics, name)
        and _aligned(result.metrics[name], mine)
        and _aligned(reference.metrics[name], theirs)
    )
    if STEP_TIME not in names:
        return None
    threshold = FULL_SPEED_SHARE * stats.quantile([*mine.samples, *theirs.samples], FULL_SPEED_QUANTILE)
    keep_mine = [speed >= threshold for speed in mine.samples]
    keep_theirs = [speed >= threshold for speed in theirs.samples]
    assert mine.keys is not None and theirs.keys is not None
    shared = {k for k, kept in zip(mine.keys, keep_mine) if kept} & {
        k for k, kept in zip(theirs.keys, keep_theirs) if kept
    }
    if len(shared) < MIN_FULL_SPEED_STEPS:
        return None
    return FullSpeedSteps(
        dataclasses.replace(
            result, metrics={**result.metrics, **{n: _cut(result.metrics[n], keep_mine) for n in names}}
        ),
        dataclasses.replace(
            reference,
            metrics={**reference.metrics, **{n: _cut(reference.metrics[n], keep_theirs) for n in names}},
        ),
        threshold,
        (sum(keep_mine), sum(keep_theirs)),
        (len(keep_mine), len(keep_theirs)),
        names,
    )
