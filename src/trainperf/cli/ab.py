"""``trainperf ab``: cases run under two Python environments interleaved, B judged against A.

Either side is an existing interpreter (``--env-a/--env-b``) or a candidate built from the base
environment with pins changed (``--pin-a/--pin-b``, see ``trainperf.families.candidates``). The
study's folder keeps the rounds, their own results store, ``ab.txt`` and ``ab.json`` (what
``trainperf report upgrades`` reads). Exit status: 0 B not worse, 1 B regressed, changed or cannot
run (``broken-environment``), 2 nothing could be judged (bad input, A cannot run).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainperf.errors import TrainperfError
from trainperf.families.candidates import BrokenEnvironment, parse_pins
from trainperf.judge.compare import Verdict
from trainperf.paths import portable, portable_argv

if TYPE_CHECKING:
    from trainperf.report.compare_runs import RunComparison

BROKEN = "broken-environment"


def _say(line: str) -> None:
    print(f"[trainperf ab] {line}", flush=True)


def _write(output: Path, text: str, record: dict[str, Any]) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / "ab.txt").write_text(text + "\n")
    (output / "ab.json").write_text(json.dumps(record, indent=1) + "\n")


def _study_record(args: argparse.Namespace, sides: dict[str, Any], pytest_args: list[str]) -> dict[str, Any]:
    return {
        "kind": "ab",
        "created": datetime.now().astimezone().isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "selection": portable_argv(["pytest", *pytest_args])[1:],
        "a": sides.get("a"),
        "b": sides.get("b"),
    }


def cmd_ab(args: argparse.Namespace) -> int:
    from trainperf.studies.ab_sides import CandidateSettings, prepare_side, side_requests

    pytest_args = [a for a in args.pytest_args if a != "--"]
    if not pytest_args:
        raise TrainperfError(
            "give the cases to run after the options, e.g. trainperf ab --pin-b transformers==5.24.0 -- "
            "-m h100 -k lora"
        )
    output = Path(args.output or f"reports/ab-{datetime.now().strftime('%Y%m%d-%H%M%S')}").absolute()
    settings = CandidateSettings(args.base_python, args.wheelhouse, args.envs, args.allow_conflicts)
    request_a, request_b = side_requests(args)
    record = _study_record(args, {"a": {"pins": parse_pins(request_a.pins)}}, pytest_args)
    record["b"] = {"pins": parse_pins(request_b.pins)}
    try:
        side_a = prepare_side(request_a, settings, say=_say)
    except BrokenEnvironment as exc:
        # Kept as a study of its own: an older end that cannot run beside today's stack is a finding.
        broken = {"side": "a", "package": exc.package, "cause": exc.cause}
        _write(output, f"environment A: {BROKEN}: {exc.package}: {exc.cause}", {**record, "verdict": BROKEN,
               "broken": broken})  # fmt: skip
        raise TrainperfError(f"environment A cannot run, nothing was measured: {exc}") from exc
    print(f"environment A: {side_a.python}: {side_a.description}")
    record["a"] = side_a.to_dict()
    try:
        side_b = prepare_side(request_b, settings, say=_say)
    except BrokenEnvironment as exc:
        text = (
            f"environment B: {BROKEN}: {exc.package}: {exc.cause}\nnothing measured: B cannot run the cases"
        )
        print(text)
        _write(
            output,
            text,
            {
                **record,
                "verdict": BROKEN,
                "broken": {"side": "b", "package": exc.package, "cause": exc.cause},
            },
        )
        return 1
    print(f"environment B: {side_b.python}: {side_b.description}")
    record["b"] = side_b.to_dict()
    return _measure(args, output, side_a.python, side_b.python, pytest_args, record)


def _measure(
    args: argparse.Namespace, output: Path, python_a: str, python_b: str, pytest_args: list[str],
    record: dict[str, Any],
) -> int:  # fmt: skip
    from trainperf.cli.compare import comparison_of
    from trainperf.report.compare_runs import render
    from trainperf.studies.ab import broken_cases, measured_sides

    results_a, results_b = measured_sides(
        python_a, python_b, args.rounds, pytest_args, output, "environment A"
    )
    comparison = comparison_of(
        results_a,
        results_b,
        args.label_a or portable(python_a),
        args.label_b or portable(python_b),
        args.strict,
    )
    text, status = render(comparison), comparison.exit_status
    broken = broken_cases(results_a, results_b)
    if broken:
        text += "\n" + "\n".join(
            f"{case}: {BROKEN} (B crashed: {why})" for case, why in sorted(broken.items())
        )
        status = 1
    if status == 0 and (busy := not_judged(comparison)):
        text += "\n" + busy
        status = NOT_JUDGED
    if not args.json:
        print(text)
    verdict = BROKEN if broken else {0: "passes", 1: "fails", NOT_JUDGED: "not-judged"}[status]
    summary = {"verdict": verdict, "broken_cases": broken, "comparison": comparison.to_dict()}
    _write(output, text, {**record, **summary})
    if args.json:
        print(json.dumps(summary, indent=1))
    return status


NOT_JUDGED = 3
"""``trainperf ab``'s status when nothing failed but a case's rounds were contaminated: a study is
run to answer, and a busy host's timing answers neither way (an upgrade check must not go green)."""


def not_judged(comparison: RunComparison) -> str:
    """The line for cases whose timing a busy host left unjudged, or "" when there are none."""
    busy = [case for case in comparison.cases if case.verdict.verdict is Verdict.CONTAMINATED]
    if not busy:
        return ""
    return (
        f"not judged: {len(busy)} case(s) contaminated ({busy[0].case_id}: {busy[0].timing_note}); "
        "run the study again where the host is quiet"
    )


def add_candidate_options(parser: argparse.ArgumentParser) -> None:
    """Where candidates come from: shared by ``ab`` and ``bisect``."""
    parser.add_argument(
        "--base-python", default=None, help="environment the candidates are built over (default: this one)"
    )
    parser.add_argument(
        "--wheelhouse", default=None, help="build candidates offline from this folder of wheels"
    )
    parser.add_argument(
        "--envs", default=None, help="folder of the cached candidate environments (default .venvs/candidates)"
    )
    parser.add_argument(
        "--allow-conflicts",
        action="store_true",
        help="measure a candidate even when pip declares a conflict with its pins",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ab = sub.add_parser(
        "ab",
        help="run cases under two Python environments interleaved A B A B; exit 1 when B regressed or "
        "cannot run",
    )
    ab.add_argument(
        "--env-a", default=None, help="interpreter of environment A (default: the base environment)"
    )
    ab.add_argument("--env-b", default=None, help="interpreter of environment B")
    ab.add_argument(
        "--pin-a", action="append", default=[], help="A is the base with NAME==VERSION (repeatable)"
    )
    ab.add_argument(
        "--pin-b", action="append", default=[], help="B is the base with NAME==VERSION (repeatable)"
    )
    ab.add_argument("--label-a", default=None, help="A's name in the table (default: its interpreter)")
    ab.add_argument("--label-b", default=None, help="B's name in the table (default: its interpreter)")
    add_candidate_options(ab)
    ab.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    ab.add_argument("--output", default=None, help="folder for the rounds (default reports/ab-<time>)")
    ab.add_argument("--json", action="store_true")
    ab.add_argument("--strict", action="store_true", help="noisy and contaminated cases fail too")
    ab.add_argument("pytest_args", nargs=argparse.REMAINDER, help="the pytest selection, after --")
    ab.set_defaults(func=cmd_ab)
