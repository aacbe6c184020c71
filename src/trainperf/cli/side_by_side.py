"""``trainperf side-by-side``: HF LoRA, HF QLoRA and unsloth QLoRA side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.ground.folder import load_results


def cmd_side_by_side(args: argparse.Namespace) -> int:
    """HF LoRA / HF QLoRA / unsloth QLoRA of one GPU class, from run folders or a class's baselines."""
    from trainperf.report.side_by_side import render

    print(render(load_results([Path(run) for run in args.runs])))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    side = sub.add_parser(
        "side-by-side",
        help="HF LoRA, HF QLoRA and unsloth QLoRA per model and profile, with unsloth/HF ratios",
    )
    side.add_argument(
        "runs", nargs="+", metavar="RUN", help="reports/<run> folders or baselines/<class> (one GPU class)"
    )
    side.set_defaults(func=cmd_side_by_side)
