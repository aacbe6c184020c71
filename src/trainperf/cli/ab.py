"""``trainperf ab``: cases run under two Python environments interleaved, B judged against A."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from trainperf.cli.compare import judge_b_against_a
from trainperf.errors import TrainperfError
from trainperf.run.folder import RunFolder


def cmd_ab(args: argparse.Namespace) -> int:
    from datetime import datetime

    from trainperf.run.ab import check_environment, pool_rounds, run_rounds

    args.env_a, args.env_b = os.path.abspath(args.env_a), os.path.abspath(args.env_b)
    for label, python in (("a", args.env_a), ("b", args.env_b)):
        print(f"environment {label.upper()}: {python}: {check_environment(python, label)}")
    pytest_args = [a for a in args.pytest_args if a != "--"]
    if not pytest_args:
        raise TrainperfError(
            "give the cases to run after the options, e.g. trainperf ab --env-a A --env-b B -- -m h100 -k lora"
        )
    output = Path(args.output or f"reports/ab-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    folders_a, folders_b = run_rounds(args.env_a, args.env_b, args.rounds, pytest_args, output)
    text, status = judge_b_against_a(
        pool_rounds([RunFolder.open(f).results() for f in folders_a]), pool_rounds([RunFolder.open(f).results() for f in folders_b]),
        args.env_a, args.env_b, args,
    )  # fmt: skip
    print(text)
    (output / ("ab.json" if args.json else "ab.txt")).write_text(text + "\n")
    return status


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ab = sub.add_parser(
        "ab", help="run cases under two Python environments interleaved A B A B; exit 1 when B regressed"
    )
    ab.add_argument("--env-a", required=True, help="Python interpreter of environment A (before)")
    ab.add_argument("--env-b", required=True, help="Python interpreter of environment B (after)")
    ab.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    ab.add_argument("--output", default=None, help="folder for the rounds (default reports/ab-<time>)")
    ab.add_argument("--json", action="store_true")
    ab.add_argument("--strict", action="store_true", help="noisy cases fail too")
    ab.add_argument("pytest_args", nargs=argparse.REMAINDER, help="the pytest selection, after --")
    ab.set_defaults(func=cmd_ab)
