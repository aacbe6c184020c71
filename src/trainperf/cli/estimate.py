"""``trainperf estimate``: the memory estimate next to every measured baseline, and its error."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.paths import PUBLISHED_DIR
from trainperf.store.results import load_result


def cmd_estimate(args: argparse.Namespace) -> int:
    """The memory estimate next to every measured baseline, and its error: how far to trust it."""
    from trainperf.case import Outcome
    from trainperf.families import family_of
    from trainperf.measure.hardware import load_classes
    from trainperf.plan.estimate import EstimateCheck, error_summary

    root = Path(args.baselines)
    classes = load_classes()
    checks = []
    print(f"{'class':6s} {'case':36s} {'estimate GiB':>12s} {'measured GiB':>12s} {'error':>7s}")
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name == PUBLISHED_DIR:  # reference points, not measured baselines
            continue
        baseline = load_result(path)
        measured = baseline.metrics.get("peak_allocated_gib")
        steps = next((run.steps_requested for run in baseline.runs if run.steps_requested), None)
        if measured is None or not steps:
            continue
        case = baseline.case.as_case()
        estimated = family_of(case.family).memory_estimate(case, int(steps))
        if estimated is None:
            continue
        gpu = classes.get(baseline.gpu_class)
        lower_bound = baseline.outcome == Outcome.OOM.value  # what it held when it ran out
        check = EstimateCheck(
            estimated.total_gib, measured.value, lower_bound, gpu.memory_gib if gpu else None
        )
        checks.append(check)
        shown = f"{'>=' if lower_bound else ''}{measured.value:.2f}"
        print(
            f"{baseline.gpu_class:6s} {baseline.case_id:36s} {estimated.total_gib:12.2f} "
            f"{shown:>12s} {check.verdict()}"
        )
    if not checks:
        raise TrainperfError(f"no measured GPU baseline under {root} to check the estimate against")
    print(error_summary(checks))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    estimate = sub.add_parser(
        "estimate", help="memory estimate against every measured baseline, with its error"
    )
    estimate.add_argument("--baselines", default="baselines")
    estimate.set_defaults(func=cmd_estimate)
