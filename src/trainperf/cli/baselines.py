"""``trainperf baselines``: the stored baselines of each GPU class, as tables; ``--stale``: which of
them predate what the suite now reads from a baseline, and the command that re-takes them."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.paths import PUBLISHED_DIR
from trainperf.report.table import render_text
from trainperf.report.terminal import terminal_width
from trainperf.result import CaseResult
from trainperf.store.results import load_result


def cmd_baselines(args: argparse.Namespace) -> int:
    root = Path(args.baselines)
    if not root.is_dir():
        raise TrainperfError(
            f"no baselines folder at {root}: give the folder that holds <class>/ (--baselines)"
        )
    # baselines/published/ holds reference points of another schema, not a GPU class's baselines.
    stored = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != PUBLISHED_DIR)
    if args.gpu_class and args.gpu_class not in stored:
        raise TrainperfError(
            f"no baselines of class '{args.gpu_class}' under {root}: "
            f"give one of {', '.join(stored) or '(none)'}"
        )
    classes = [args.gpu_class] if args.gpu_class else stored
    for gpu_class in classes:
        results = [load_result(path) for path in sorted((root / gpu_class).glob("*.json"))]
        if not results:
            continue
        if args.stale:
            _print_stale(gpu_class, results)
            continue
        print(f"== {gpu_class} ({len(results)} baselines)")
        print(render_text(results, terminal_width()))
        # A cliff's result is its largest fit, which the table's per-step columns cannot show.
        for result in results:
            if result.cliff:
                confirmed = ", confirmed" if result.cliff.confirmed else ""
                print(f"{result.case_id}: {result.cliff.summary or '-'}{confirmed}")
    return 0


def _print_stale(gpu_class: str, results: list[CaseResult]) -> None:
    from trainperf.plan.retake import GAPS, retake_command, stale_baselines

    stale = stale_baselines(results)
    print(f"== {gpu_class}: {len(stale)} of {len(results)} baselines lack a figure the suite now reads")
    for gap in GAPS:
        count = sum(gap.name in gaps for gaps in stale.values())
        if count:
            print(f"  {count:3d} without a {gap.name}: {gap.lacks}")
    for case_id, gaps in stale.items():
        print(f"  {case_id}: {', '.join(gaps)}")
    if stale:
        print(f"re-take on a {gpu_class} runner: {retake_command(gpu_class, list(stale))}")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    baselines = sub.add_parser("baselines", help="list stored baselines")
    baselines.add_argument("--baselines", default="baselines")
    baselines.add_argument("--gpu-class", default=None)
    baselines.add_argument(
        "--stale",
        action="store_true",
        help="list the baselines that lack a figure the suite now reads (profile summary, memory-peak "
        "step, wall time, CPU identity), what goes without it, and the command that re-takes them",
    )
    baselines.set_defaults(func=cmd_baselines)
