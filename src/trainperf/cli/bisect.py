"""``trainperf bisect PACKAGE GOOD..BAD -- SELECTION``: the first version of a package whose cases
regressed, each step an interleaved A/B (``trainperf ab``) of GOOD against the probed version. The
study is ``studies.bisect``; this module parses its request, judges each step through the project's
tolerances (``ab_step``) and prints the result.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from trainperf.cli.ab import add_candidate_options
from trainperf.errors import TrainperfError
from trainperf.families.candidates import CandidateOptions
from trainperf.judge.compare import Verdict
from trainperf.judge.metrics import STEP_TIME
from trainperf.plan.bisect import Bisection, Judgement, narrowed, parse_range
from trainperf.studies.bisect import BisectRequest, Say, Unjudged, run, step_line

NO_REGRESSION = "no regression between GOOD and BAD at this selection"
NO_CHANGE = "no change beyond tolerance between GOOD and BAD at this selection"
__all__ = ["NO_CHANGE", "NO_REGRESSION", "Unjudged", "ab_step", "add_parser", "cmd_bisect"]


def ab_step(request: BisectRequest, good_python: Path, python: Path, version: str, output: Path) -> Judgement:
    """One A/B step: GOOD's environment (A) against the probed version's (B), interleaved, B judged
    against A as ``trainperf ab`` does. Bad when any case fails that judgement (an OOM included);
    broken when B crashed in a case that GOOD ran; GOOD failing to run a case stops the bisection."""
    from trainperf.cli.compare import comparison_of
    from trainperf.studies.ab import broken_cases, measured_sides

    good = f"GOOD {request.package} {request.good} (in the step against {version})"
    results_a, results_b = measured_sides(
        str(good_python), str(python), request.rounds, request.selection, output / version, good
    )
    broken = broken_cases(results_a, results_b)
    if broken:
        case, why = min(broken.items())
        return Judgement(version, False, None, f"broken-environment: {case} crashed: {why}", broken=True)
    comparison = comparison_of(
        results_a,
        results_b,
        f"{request.package} {request.good}",
        f"{request.package} {version}",
        strict=False,
    )
    ratios = [m.ratio for case in comparison.cases if (m := case.metric(STEP_TIME)) and m.ratio]
    verdicts = ", ".join(f"{case.case_id} {case.verdict.verdict.value}" for case in comparison.cases)
    changed = any(
        case.fails or (request.look_for == "change" and case.verdict.verdict is Verdict.IMPROVED)
        for case in comparison.cases
    )
    busy = [case for case in comparison.cases if case.verdict.verdict is Verdict.CONTAMINATED]
    if busy and not changed:  # nothing failed, but a busy host's timing cannot say "good" either
        raise Unjudged(f"{busy[0].case_id}: {busy[0].verdict.reason}")
    moved = "; ".join(f"{case.case_id}: {case.kernels}" for case in comparison.cases if case.kernels)
    return Judgement(version, changed, max(ratios, default=None), verdicts, detail=moved)


def explain_step(request: BisectRequest, good_python: Path, python: Path, version: str) -> dict[str, str]:
    """The release the bisection found, explained as ``trainperf ab`` explains a study: its step's
    moved cases from the step's kernel records, or profiled once a side (GOOD, then the release)
    beside that step's rounds where those cannot say."""
    from trainperf.cli.ab import verdicts_of
    from trainperf.cli.compare import comparison_of
    from trainperf.studies.ab import pooled_sides, rounds_in
    from trainperf.studies.ab_explain import explain_moved, explain_round, profiled_now

    folder = request.output / version
    labels = (f"{request.package} {request.good}", f"{request.package} {version}")
    try:
        sides = pooled_sides(*rounds_in(folder))
    except (OSError, ValueError, TrainperfError) as exc:  # its rounds are gone: nothing to narrow to
        return {"(all)": f"not explained: the step's rounds could not be read ({exc})"}
    comparison = comparison_of(*sides, *labels, strict=False)

    def profile(cases: list[str]) -> tuple[Path, Path]:
        return explain_round((str(good_python), str(python)), request.selection, cases, folder)

    return explain_moved(verdicts_of(comparison), profiled_now(profile))


def _conclude(request: BisectRequest, result: Bisection, bound: int) -> int:
    print(
        "\n".join(
            step_line(n, step, request.good, request.look_for) for n, step in enumerate(result.steps, 1)
        )
    )
    print(
        f"{result.environments} environments measured (at most {bound} for {len(result.versions)} versions)"
    )
    if result.unresolved:
        upper = result.first_bad or request.bad
        print(
            f"the first bad version is one of {', '.join(result.unresolved)} (which cannot run here) "
            f"or {upper}"
        )
    if result.first_bad is None:
        if request.look_for == "change":
            raise TrainperfError(
                f"{NO_CHANGE}: {request.package} {request.bad} was judged as {request.good} on every metric"
            )
        raise TrainperfError(
            f"{NO_REGRESSION}: {request.package} {request.bad} was judged not worse than {request.good}"
        )
    what = "first version with the change" if request.look_for == "change" else "first bad version"
    print(f"{what}: {request.package} {result.first_bad}")
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    split_selection(args)
    if not args.selection:
        raise TrainperfError(
            "give the cases to run after the versions, e.g. trainperf bisect transformers 4.56.0..4.57.1 -- "
            "-m h100 -k maxlen"
        )
    good, bad = parse_range(args.range)
    output = Path(args.output or f"reports/bisect-{datetime.now().strftime('%Y%m%d-%H%M%S')}").absolute()
    output.mkdir(parents=True, exist_ok=True)
    request = BisectRequest(
        args.package, good, bad, (good, bad), list(args.selection), args.rounds, args.look_for, output
    )
    say: Say = lambda line: print(f"[trainperf bisect] {line}", flush=True)
    result = Bisection([])
    try:
        # ab_step is looked up here, at the call: a test may stand in for the measured step.
        explain = explain_step if args.explain else None
        bound, request = run(request, _options(args), lambda *step: ab_step(*step), say, result, explain)
    except KeyboardInterrupt:
        return _interrupted(request, result)
    except Unjudged as busy:
        return _interrupted(request, result, why=f"the host was busy ({busy})")
    return _conclude(request, result, bound)


def _options(args: argparse.Namespace) -> CandidateOptions:
    from trainperf.studies.ab_sides import CandidateSettings

    return CandidateSettings(args.base_python, args.wheelhouse, args.envs, args.allow_conflicts).options()


def _interrupted(request: BisectRequest, result: Bisection, why: str = "") -> int:
    """One line: where the first bad version lies so far, and how to go on. 130 for Ctrl-C, 3 for a
    step that a busy host left unjudged twice (run again where the host is quiet)."""
    if not result.versions:  # stopped while the ends' environments were being built
        print(
            f"trainperf bisect: interrupted before its first step; nothing measured in {request.output}",
            file=sys.stderr,
        )
        return 130
    last_good, first_bad = narrowed(result.versions, result.steps)
    where = f"between {last_good} and {first_bad or result.versions[-1] + ' (or none)'}"
    stopped = f"stopped at step {len(result.steps) + 1}: {why}" if why else "interrupted"
    print(
        f"trainperf bisect: {stopped}; after {len(result.steps)} judged step(s) the first "
        f"{'change' if request.look_for == 'change' else 'bad version'} lies {where}; the same command with "
        f"--output {request.output} goes on from there",
        file=sys.stderr,
    )
    return 3 if why else 130


def _add_options(parser: argparse.ArgumentParser) -> None:
    add_candidate_options(parser)
    parser.add_argument("--rounds", type=int, default=2, help="A/B rounds per step (default 2)")
    parser.add_argument(
        "--look-for",
        choices=("regression", "change"),
        default="regression",
        help="what a step looks for: a regression (default), or any change beyond tolerance, an "
        "improvement too (which release made it)",
    )
    parser.add_argument(
        "--output", default=None, help="folder for the steps' rounds (default reports/bisect-<time>)"
    )
    parser.add_argument(
        "--explain",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="at the release found, one profiled run a side of every case that moved (default on)",
    )


def split_selection(args: argparse.Namespace) -> None:
    """Options written after GOOD..BAD land in the remainder with the selection: parse those before
    ``--`` as options, the rest is the pytest selection."""
    remainder = list(args.selection)
    cut = remainder.index("--") if "--" in remainder else 0
    options = argparse.ArgumentParser(prog="trainperf bisect", add_help=False)
    _add_options(options)
    parsed, unknown = options.parse_known_args(remainder[:cut])
    if unknown:
        raise TrainperfError(f"unknown option(s) {' '.join(unknown)} before --: see trainperf bisect --help")
    for name, value in vars(parsed).items():
        if value != options.get_default(name):
            setattr(args, name, value)
    args.selection = remainder[cut + 1 :] if "--" in remainder else remainder


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "bisect",
        help="find the first version of a package between GOOD and BAD whose cases regressed (A/B steps)",
    )
    parser.add_argument("package", help="the package to bisect (transformers, peft, trl, ...)")
    parser.add_argument(
        "range", metavar="GOOD..BAD", help="the last good and a bad version, e.g. 4.56.0..4.57.1"
    )
    _add_options(parser)
    parser.add_argument("selection", nargs=argparse.REMAINDER, help="[options] -- the pytest selection")
    parser.set_defaults(func=cmd_bisect)
