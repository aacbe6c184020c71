"""How far host-dependent timing moves between fresh processes of one runner, and the tolerance that
follows from it (no I/O).

Host time gates only against the same runner's own reference. On a cloud virtual machine that is not
enough: its processes each run at a host speed of their own. On one H200 runner, with nothing changed,
five fresh processes of TRL GRPO read their step at 3.04 to 4.00 s against a baseline whose own two runs
read 3.36 and 3.99 s, while their kernel time held within 0.15%; QLoRA short read 1.12 to 1.28 s against
1.20 and 1.57 s, and one of those runs was called "improved -17.8%, p=0"
(docs/measurements/2026-11-29-h200-same-runner/). A step's samples share their process's host speed, so
a test over steps takes a whole process's move for a significant one. The runner has shown how far its
processes move in the reference's own runs: a move no wider than that is a level it has already
produced under the reference's conditions, not a change. Such a metric's tolerance is therefore never
narrower than the widest move of one reference run from the median of the others. The verdict says so,
with the figure, so that a user sees what this runner can tell apart.

The GPU's kernel time is not widened: it repeats within a fraction of a percent from process to process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from trainperf.judge import stats
from trainperf.judge.metrics import (
    SAMPLES_PER_HOUR,
    STEP_TIME,
    THROUGHPUT_PER_GPU,
    TOKENS_PER_S,
    Metric,
    Part,
    resolve_metric,
)
from trainperf.result import CaseResult

MIN_RUNS = 2
"""Two runs are the least that show a move between processes (the baseline file's default)."""
RATES_OF_THE_STEP = (TOKENS_PER_S, SAMPLES_PER_HOUR, THROUGHPUT_PER_GPU)
"""The step's own time counted as work per second or hour: a runner whose steps moved 14% moved these
as much, though a run's level of a rate (over batches of different lengths) can read a narrower move.
On one H200 runner (2026-11-29) an unchanged run read step -11.0% (a pass under its runs' 14.3%)
and tokens/s +12.4%, "improved" under tokens/s's own 10.3%: one measurement, two verdicts. A rate's
floor is never narrower than step time's."""


def widest_run_move(per_run: Sequence[float]) -> float | None:
    """The largest relative move of one run's value from the median of the other runs; None with fewer
    than ``MIN_RUNS`` runs."""
    if len(per_run) < MIN_RUNS:
        return None
    moves = []
    for index, value in enumerate(per_run):
        others = stats.median([*per_run[:index], *per_run[index + 1 :]])
        if others:
            moves.append(abs(value / others - 1))
    return max(moves, default=None)


def depends_on_host(metric: Metric) -> bool:
    """A timing figure the host's speed is in: host time and the wall-clock figures that hold it."""
    return metric.timing and metric.part is not Part.DEVICE


def with_host_run_floor(metrics: Mapping[str, Metric], reference: CaseResult) -> dict[str, Metric]:
    """The metrics with each host-dependent timing tolerance widened, where it is narrower, to the widest
    move between the reference's own runs; each widened metric carries a note that says so."""
    widened = dict(metrics)
    moves = _widest_moves(metrics, reference)
    step_move = moves.get(STEP_TIME)
    for name, (metric, runs, widest) in moves.items():
        via = ""
        if name in RATES_OF_THE_STEP and step_move is not None and step_move[2] > widest:
            runs, widest, via = step_move[1], step_move[2], " in step time"
        if widest <= metric.tolerance:
            continue
        note = (
            f"tolerance {metric.tolerance:.1%} -> {widest:.1%}: this runner's {runs} "
            f"reference runs moved {widest:.1%} from one another{via}"
        )
        widened[name] = dataclasses.replace(metric, name=name, tolerance=widest, tolerance_note=note)
    return widened


def _widest_moves(
    metrics: Mapping[str, Metric], reference: CaseResult
) -> dict[str, tuple[Metric, int, float]]:
    """Per host-dependent timing figure of the reference: its metric, its runs and their widest move."""
    moves = {}
    for name, value in reference.metrics.items():
        metric = resolve_metric(dict(metrics), name)
        if metric is None or not depends_on_host(metric) or not value.per_run:
            continue
        widest = widest_run_move(list(value.per_run))
        if widest is not None:
            moves[name] = (metric, len(value.per_run), widest)
    return moves
