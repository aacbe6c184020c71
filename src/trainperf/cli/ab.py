"""``trainperf ab``: cases run under two Python environments interleaved, B judged against A.

Either side is an existing interpreter (``--env-a/--env-b``) or a candidate built from the base
environment with pins changed (``--pin-a/--pin-b``, see ``trainperf.families.candidates``). The
study's folder keeps the rounds, their own results store, ``ab.txt`` and ``ab.json`` (what
``trainperf report upgrades`` reads). Exit status: 0 B not worse, 1 B regressed, changed or cannot
run (``broken-environment``), 2 nothing could be judged (bad input, A cannot run), 3 a case not
judged (its rounds contaminated, or A cannot run it; ``--strict`` makes a contaminated case fail).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from trainperf.errors import TrainperfError
from trainperf.families.candidates import BrokenEnvironment, parse_pins
from trainperf.judge.compare import Verdict
from trainperf.paths import portable, portable_argv
from trainperf.studies.ab_record import BROKEN, ABRecord, AskedSide, BrokenSide, SideRecord, StudyRequest
from trainperf.studies.comparison_record import Comparison

if TYPE_CHECKING:
    from trainperf.judge.compare import CaseVerdict
    from trainperf.report.compare_runs import RunComparison
    from trainperf.result import CaseResult


def _say(line: str) -> None:
    print(f"[trainperf ab] {line}", flush=True)


def _write(output: Path, text: str, record: ABRecord) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / "ab.txt").write_text(text + "\n")
    (output / "ab.json").write_text(json.dumps(record.to_dict(), indent=1) + "\n")


def _study_record(args: argparse.Namespace, pytest_args: list[str]) -> ABRecord:
    """The study before its sides are known to run: each side is the pins it was asked for."""
    a, b = (SideRecord(pins=parse_pins(getattr(args, f"pin_{side}"))) for side in ("a", "b"))
    return ABRecord(
        created=datetime.now().astimezone().isoformat(timespec="seconds"),
        rounds=args.rounds,
        selection=tuple(portable_argv(["pytest", *pytest_args])[1:]),
        a=a,
        b=b,
    )


def cmd_ab(args: argparse.Namespace) -> int:
    from trainperf.studies.ab_sides import CandidateSettings, prepare_side, side_requests

    pytest_args = [a for a in args.pytest_args if a != "--"]
    if args.judge_only:
        if not args.output:
            raise TrainperfError("--judge-only judges a study's rounds again: give its folder with --output")
        return _judge_again(args, Path(args.output).absolute(), _study_record(args, pytest_args))
    if not pytest_args:
        raise TrainperfError(
            "give the cases to run after the options, e.g. trainperf ab --pin-b transformers==5.24.0 -- "
            "-m h100 -k lora"
        )
    output = Path(args.output or f"reports/ab-{datetime.now().strftime('%Y%m%d-%H%M%S')}").absolute()
    settings = CandidateSettings(args.base_python, args.wheelhouse, args.envs, args.allow_conflicts)
    request_a, request_b = side_requests(args)
    record = _study_record(args, pytest_args)
    base = portable(os.path.abspath(args.base_python)) if args.base_python else None
    asked = StudyRequest(
        record.selection,
        base,
        _asked(request_a.python, request_a.pins),
        _asked(request_b.python, request_b.pins),
    )
    kept = ([], []) if args.prepare_only else _kept_rounds(args, output, asked)
    try:
        side_a = prepare_side(request_a, settings, say=_say)
    except BrokenEnvironment as exc:
        # Kept as a study of its own: an older end that cannot run beside today's stack is a finding.
        broken = BrokenSide("a", exc.package, exc.cause)
        _write(output, f"environment A: {BROKEN}: {exc.package}: {exc.cause}",
               replace(record, verdict=BROKEN, broken=broken))  # fmt: skip
        raise TrainperfError(f"environment A cannot run, nothing was measured: {exc}") from exc
    print(f"environment A: {side_a.python}: {side_a.description}")
    record = replace(record, a=side_a.record())
    try:
        side_b = prepare_side(request_b, settings, say=_say)
    except BrokenEnvironment as exc:
        return _b_cannot_run(output, record, exc)
    print(f"environment B: {side_b.python}: {side_b.description}")
    record = replace(record, b=side_b.record())
    if args.prepare_only:
        _say("both environments run; nothing measured (--prepare-only): the study measures at once when run")
        return 0
    return _measure(args, output, (side_a.python, side_b.python), pytest_args, record, kept)


def _b_cannot_run(output: Path, record: ABRecord, exc: BrokenEnvironment) -> int:
    """B's environment cannot run: that is the study's verdict (exit 1), written as one."""
    text = f"environment B: {BROKEN}: {exc.package}: {exc.cause}\nnothing measured: B cannot run the cases"
    print(text)
    _write(output, text, replace(record, verdict=BROKEN, broken=BrokenSide("b", exc.package, exc.cause)))
    return 1


def _measure(
    args: argparse.Namespace, output: Path, pythons: tuple[str, str], pytest_args: list[str],
    record: ABRecord, kept: tuple[list[Path], list[Path]],
) -> int:  # fmt: skip
    from trainperf.studies.ab import RoundPlan, measure_rounds, pooled_sides

    labels = (args.label_a or portable(pythons[0]), args.label_b or portable(pythons[1]))
    plan = RoundPlan(args.rounds, args.max_rounds or max(args.rounds, DEFAULT_MAX_ROUNDS), args.until_within)

    def judge_so_far(folders_a: list[Path], folders_b: list[Path]) -> dict[str, CaseVerdict] | None:
        return verdicts_of(_comparison(args, *pooled_sides(folders_a, folders_b), labels))

    folders_a, folders_b = measure_rounds(*pythons, plan, pytest_args, output, judge_so_far, kept)
    record = replace(record, rounds=len(folders_a))
    results_a, results_b = pooled_sides(folders_a, folders_b)
    if args.explain:
        explained = _explain(args, output, pythons, pytest_args, (results_a, results_b), labels)
        record = replace(record, explained=explained)
    return _judge(args, output, results_a, results_b, labels, record)


def _explain(
    args: argparse.Namespace, output: Path, pythons: tuple[str, str], pytest_args: list[str],
    sides: tuple[list[CaseResult], list[CaseResult]], labels: tuple[str, str],
) -> dict[str, str]:  # fmt: skip
    """What moved in each case that moved: from the rounds' kernel records, or one profiled run a side
    where they cannot say (``studies.ab_explain``)."""
    from trainperf.studies.ab_explain import explain_moved, explain_round, profiled_now

    def profile(cases: list[str]) -> tuple[Path, Path]:
        return explain_round(pythons, pytest_args, cases, output)

    return explain_moved(verdicts_of(_comparison(args, *sides, labels)), profiled_now(profile))


def _asked(python: str | None, pins: tuple[str, ...]) -> AskedSide:
    """A side as the command asked for it, what ``--resume`` must find again (a path inside the
    project relative to it, as results record paths)."""
    return AskedSide(portable(os.path.abspath(python)) if python else None, tuple(sorted(pins)))


DEFAULT_MAX_ROUNDS = 8
"""With ``--until-within``: on an H200, 2026-11-27, a round of a 20-step 8B LoRA case took about
1.5 min (both sides), so eight rounds bound a study to about 12 minutes."""
REQUEST = "request.json"
"""What a study was asked to measure (selection, both interpreters), written before its first
round: ``--resume`` continues only the same study."""


def _kept_rounds(
    args: argparse.Namespace, output: Path, request: StudyRequest
) -> tuple[list[Path], list[Path]]:
    """The rounds ``--resume`` keeps; a folder already holding rounds without it is one line (its
    measurements are never mixed with or buried under another study's)."""
    from trainperf.studies.ab import completed_rounds, holds_rounds

    has_rounds = holds_rounds(output)
    if has_rounds and not args.resume:
        raise TrainperfError(
            f"{output} holds a study's rounds already: --resume continues it, or give another --output"
        )
    written = output / REQUEST
    if has_rounds and written.is_file() and json.loads(written.read_text()) != request.to_dict():
        raise TrainperfError(
            f"{output} holds a study of another selection or other environments ({written}): "
            "resume it with the same ones, or give another --output"
        )
    output.mkdir(parents=True, exist_ok=True)
    written.write_text(json.dumps(request.to_dict(), indent=1) + "\n")
    kept = completed_rounds(output) if has_rounds else ([], [])
    if has_rounds:
        _say(f"resuming {output}: {len(kept[0])} round(s) measured on both sides are kept")
    return kept


def verdicts_of(comparison: RunComparison | None) -> dict[str, CaseVerdict] | None:
    """B's verdict against A by case, what a study's precision is read from."""
    return {case.case_id: case.verdict for case in comparison.cases} if comparison else None


def _comparison(
    args: argparse.Namespace,
    results_a: list[CaseResult],
    results_b: list[CaseResult],
    labels: tuple[str, str],
) -> RunComparison | None:
    """B judged against A on the cases A measured; None when A measured none of them."""
    from trainperf.cli.compare import comparison_of
    from trainperf.studies.ab import unmeasured_cases

    a_not_run = unmeasured_cases(results_a)
    judged_a = [r for r in results_a if r.case_id not in a_not_run]
    judged_b = [r for r in results_b if r.case_id not in a_not_run]
    return comparison_of(judged_a, judged_b, *labels, args.strict) if judged_a and judged_b else None


def _judge(
    args: argparse.Namespace, output: Path, results_a: list[CaseResult], results_b: list[CaseResult],
    labels: tuple[str, str], record: ABRecord,
) -> int:  # fmt: skip
    """B judged against A on the cases A measured; a case A could not run is not judged (its cause
    kept in ``ab.json``'s ``a_not_run``), and the B side's measurements stay in the study."""
    from trainperf.report.compare_runs import render
    from trainperf.studies.ab import broken_cases, unmeasured_cases
    from trainperf.studies.precision import least_precise, precision_line

    a_not_run = unmeasured_cases(results_a)
    lines = [f"{case}: not judged (A cannot run it: {why})" for case, why in sorted(a_not_run.items())]
    judged = replace(record, verdict="not-judged", a_not_run=a_not_run)
    status = NOT_JUDGED
    text = "\n".join(lines)
    comparison = _comparison(args, results_a, results_b, labels)
    if comparison is not None:
        precision = least_precise(verdicts_of(comparison))
        text = (
            render(comparison)
            + "\n"
            + precision_line(precision, record.rounds, args.until_within)
            + ("\n" + text if text else "")
        )
        status = comparison.exit_status
        broken = broken_cases(results_a, results_b)  # only cases A ran: none of a_not_run
        text += "".join(f"\n{case}: {BROKEN} (B crashed: {why})" for case, why in sorted(broken.items()))
        status = 1 if broken else status
        if status == 0 and (busy := not_judged(comparison)):
            text, status = text + "\n" + busy, NOT_JUDGED
        status = NOT_JUDGED if status == 0 and a_not_run else status
        text += "".join(f"\n{case}: {line}" for case, line in sorted((record.explained or {}).items()))
        verdict = BROKEN if broken else {0: "passes", 1: "fails", NOT_JUDGED: "not-judged"}[status]
        stored = Comparison.from_dict(comparison.to_dict())
        judged = replace(judged, verdict=verdict, broken_cases=broken, comparison=stored, precision=precision)
    if not args.json:
        print(text)
    _write(output, text, judged)
    if args.json:
        print(json.dumps(judged.verdict_dict(), indent=1))
    return status


def _judge_again(args: argparse.Namespace, output: Path, record: ABRecord) -> int:
    """``--judge-only``: the rounds already in ``output`` judged again (new tolerances, statistics
    or labels), nothing measured; the study's own record is kept where it has one."""
    from trainperf.studies.ab import pooled_sides, rounds_in, started_at
    from trainperf.studies.ab_explain import explained_again

    previous = output / "ab.json"
    stored = json.loads(previous.read_text()) if previous.is_file() else None
    kept = ABRecord.from_dict(stored) if stored else None
    folders_a, folders_b = rounds_in(output)
    if kept is not None:  # what ran is kept; its verdict is judged again
        record = ABRecord(
            kept.kind, kept.created, kept.rounds, kept.selection, kept.a, kept.b, explained=kept.explained
        )
    else:  # the study stopped before its record: dated by its first round
        record = replace(record, created=started_at(folders_a[0]) or record.created)
    now = datetime.now().astimezone().isoformat(timespec="seconds")
    record = replace(record, rounds=min(len(folders_a), len(folders_b)), judged=now)
    results_a, results_b = pooled_sides(folders_a, folders_b)
    compared = (kept.comparison if kept is not None else None) or Comparison()
    labels = (
        args.label_a or compared.run_a or (record.a.pins_label if record.a else "") or "A",
        args.label_b or compared.run_b or (record.b.pins_label if record.b else "") or "B",
    )
    if args.explain:  # what moved, said again under today's rules from what the study kept
        verdicts = verdicts_of(_comparison(args, results_a, results_b, labels))
        record = replace(record, explained=explained_again(verdicts, output, record.explained) or None)
    return _judge(args, output, results_a, results_b, labels, record)


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


def _add_round_options(ab: argparse.ArgumentParser) -> None:
    """How many rounds a study measures."""
    ab.add_argument(
        "--rounds", type=int, default=3, help="A/B rounds (default 3; the fewest with --until-within)"
    )
    ab.add_argument(
        "--until-within",
        type=float,
        default=None,
        metavar="PCT",
        help="add rounds (a pair at a time) until every judged case's step-time interval is within ±PCT%% "
        "(e.g. 1), up to --max-rounds",
    )
    ab.add_argument(
        "--max-rounds",
        type=int,
        default=None,
        help=f"the most rounds --until-within may run (default {DEFAULT_MAX_ROUNDS}, or --rounds if more)",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ab = sub.add_parser(
        "ab",
        help="run cases under two Python environments interleaved A B, B A, ...; exit 1 when B regressed or "
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
    _add_round_options(ab)
    ab.add_argument(
        "--explain",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the rounds, what moved in every case that moved, by kernel group and kernel: from the "
        "rounds' kernel records, or one profiled run a side where they cannot say (no kernel time, or the "
        "host's time concluded); with --judge-only, said again from what the study kept (default on)",
    )
    ab.add_argument(
        "--prepare-only",
        action="store_true",
        help="build and check both environments (candidates are cached), measure nothing: the study's "
        "GPU time is then its rounds alone",
    )
    ab.add_argument(
        "--resume",
        action="store_true",
        help="continue the study in --output: its rounds measured on both sides are kept, the rest run",
    )
    ab.add_argument("--output", default=None, help="folder for the rounds (default reports/ab-<time>)")
    ab.add_argument("--json", action="store_true")
    ab.add_argument("--strict", action="store_true", help="noisy and contaminated cases fail too")
    ab.add_argument(
        "--judge-only",
        action="store_true",
        help="judge the rounds already in --output again (after a change of tolerances or statistics), "
        "measuring nothing",
    )
    ab.add_argument("pytest_args", nargs=argparse.REMAINDER, help="the pytest selection, after --")
    ab.set_defaults(func=cmd_ab)
