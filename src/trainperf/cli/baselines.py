"""``trainperf baselines``: the stored baselines of each GPU class, as tables."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.paths import PUBLISHED_DIR
from trainperf.report.table import render_text
from trainperf.store.results import load_result


def cmd_baselines(args: argparse.Namespace) -> int:
    root = Path(args.baselines)
    # baselines/published/ holds reference points of another schema, not a GPU class's baselines.
    classes = (
        [args.gpu_class]
        if args.gpu_class
        else sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != PUBLISHED_DIR)
    )
    for gpu_class in classes:
        results = [load_result(path) for path in sorted((root / gpu_class).glob("*.json"))]
        if not results:
            continue
        print(f"== {gpu_class} ({len(results)} baselines)")
        print(render_text(results))
        # A cliff's result is its largest fit, which the table's per-step columns cannot show.
        for result in results:
            if result.cliff:
                confirmed = ", confirmed" if result.cliff.get("confirmed") else ""
                print(f"{result.case_id}: {result.cliff.get('summary', '-')}{confirmed}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    baselines = sub.add_parser("baselines", help="list stored baselines")
    baselines.add_argument("--baselines", default="baselines")
    baselines.add_argument("--gpu-class", default=None)
    baselines.set_defaults(func=cmd_baselines)
