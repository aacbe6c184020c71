"""``trainperf estimate``: the memory estimate next to every measured baseline, and its error."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.paths import PUBLISHED_DIR
from trainperf.store.results import load_result


def cmd_estimate(args: argparse.Namespace) -> int:
    """The memory estimate next to every measured baseline, and its error: how far to trust it."""
    from trainperf.case import Case
    from trainperf.families import family_of

    root = Path(args.baselines)
    errors = []
    print(f"{'class':6s} {'case':36s} {'estimate GiB':>12s} {'measured GiB':>12s} {'error':>7s}")
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name == PUBLISHED_DIR:  # reference points, not measured baselines
            continue
        baseline = load_result(path)
        measured = baseline.metrics.get("peak_allocated_gib")
        steps = next(
            (run.get("steps_requested") for run in baseline.runs if run.get("steps_requested")), None
        )
        if measured is None or not steps:
            continue
        case = Case.from_dict(baseline.case)
        estimated = family_of(case.family).memory_estimate(case, int(steps))
        if estimated is None:
            continue
        error = estimated.total_gib / measured.value - 1
        errors.append(abs(error))
        print(
            f"{baseline.gpu_class:6s} {baseline.case_id:36s} {estimated.total_gib:12.2f} {measured.value:12.2f} {error:+7.1%}"
        )
    if not errors:
        raise TrainperfError(f"no measured GPU baseline under {root} to check the estimate against")
    print(f"{len(errors)} cases: mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    estimate = sub.add_parser(
        "estimate", help="memory estimate against every measured baseline, with its error"
    )
    estimate.add_argument("--baselines", default="baselines")
    estimate.set_defaults(func=cmd_estimate)
