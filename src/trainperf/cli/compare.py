"""``trainperf compare``: run B judged case by case against run A."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainperf.ground.folder import RunFolder
from trainperf.measure.hardware import load_classes
from trainperf.report.compare_runs import RunComparison
from trainperf.result import CaseResult


def comparison_of(
    results_a: list[CaseResult], results_b: list[CaseResult], label_a: str, label_b: str, strict: bool
) -> RunComparison:
    """B judged case by case against A with this project's tolerances."""
    from trainperf.judge.metrics import tolerances_from_pyproject
    from trainperf.report.compare_runs import compare_runs

    return compare_runs(
        results_a,
        results_b,
        classes=load_classes(),
        tolerances=tolerances_from_pyproject(Path.cwd()),
        strict=strict,
        label_a=label_a,
        label_b=label_b,
    )


def judge_b_against_a(
    results_a: list[CaseResult],
    results_b: list[CaseResult],
    label_a: str,
    label_b: str,
    args: argparse.Namespace,
) -> tuple[str, int]:
    """B judged case by case against A with this project's tolerances: the text to print, the exit status."""
    from trainperf.report.compare_runs import render

    comparison = comparison_of(results_a, results_b, label_a, label_b, args.strict)
    text = json.dumps(comparison.to_dict(), indent=1) if args.json else render(comparison)
    return text, comparison.exit_status


def cmd_compare(args: argparse.Namespace) -> int:
    """Run B judged case by case against run A (before/after an upgrade); 1 when any case failed."""
    text, status = judge_b_against_a(
        RunFolder.open(Path(args.run_a)).results(),
        RunFolder.open(Path(args.run_b)).results(),
        args.run_a,
        args.run_b,
        args,
    )
    print(text)
    return status


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = sub.add_parser(
        "compare", help="judge run B against run A case by case (exit 1 when any case regressed or changed)"
    )
    compare.add_argument("run_a", metavar="RUN_A", help="reports/<run> playing the baseline (before)")
    compare.add_argument("run_b", metavar="RUN_B", help="reports/<run> judged against it (after)")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.add_argument("--strict", action="store_true", help="noisy and contaminated cases fail too")
    compare.set_defaults(func=cmd_compare)
