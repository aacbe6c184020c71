"""``trainperf bisect PACKAGE GOOD..BAD -- SELECTION``: the first version of a package whose cases
regressed, each step an interleaved A/B (``trainperf ab``) of GOOD against the probed version.

Environments: ``trainperf.families.candidates`` (layered over the suite's interpreter, cached);
search: ``trainperf.plan.bisect`` (at most ceil(log2 n) + 1 environments for n versions, plus one
per version stepped over). Before anything is measured, both ends must run: a GOOD that cannot
run is said first, in one line naming the package and the cause, and the oldest version that runs
becomes GOOD (or the bisection stops); likewise BAD, from the newest. A probed version that cannot
run is stepped over, never judged good; every conclusion rests on measured pairs.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from trainperf.cli.ab import add_candidate_options
from trainperf.errors import TrainperfError
from trainperf.families.candidates import (
    STACK_IMPORTS,
    BrokenEnvironment,
    Candidate,
    CandidateOptions,
    ensure_candidate,
    index_versions,
    installed_versions,
    wheelhouse_versions,
)
from trainperf.families.envs import normalise
from trainperf.judge.compare import Verdict
from trainperf.judge.metrics import STEP_TIME
from trainperf.plan.bisect import (
    Bisection,
    Judgement,
    bisect,
    max_environments,
    narrowed,
    parse_range,
    recorded_steps,
    versions_between,
)

NO_REGRESSION = "no regression between GOOD and BAD at this selection"
NO_CHANGE = "no change beyond tolerance between GOOD and BAD at this selection"
Say = Callable[[str], None]


def ab_step(
    args: argparse.Namespace, good_python: Path, python: Path, version: str, output: Path
) -> Judgement:
    """One A/B step: GOOD's environment (A) against the probed version's (B), interleaved, B judged
    against A as ``trainperf ab`` does. Bad when any case fails that judgement (an OOM included);
    broken when B crashed in a case that GOOD ran; GOOD failing to run a case stops the bisection."""
    from trainperf.cli.compare import comparison_of
    from trainperf.studies.ab import broken_cases, measured_sides

    good = f"GOOD {args.package} {args.good} (in the step against {version})"
    results_a, results_b = measured_sides(
        str(good_python), str(python), args.rounds, args.selection, output / version, good
    )
    broken = broken_cases(results_a, results_b)
    if broken:
        case, why = min(broken.items())
        return Judgement(version, False, None, f"broken-environment: {case} crashed: {why}", broken=True)
    comparison = comparison_of(
        results_a, results_b, f"{args.package} {args.good}", f"{args.package} {version}", strict=False
    )
    ratios = [m.ratio for case in comparison.cases if (m := case.metric(STEP_TIME)) and m.ratio]
    verdicts = ", ".join(f"{case.case_id} {case.verdict.verdict.value}" for case in comparison.cases)
    changed = any(
        case.fails or (args.look_for == "change" and case.verdict.verdict is Verdict.IMPROVED)
        for case in comparison.cases
    )
    busy = [case for case in comparison.cases if case.verdict.verdict is Verdict.CONTAMINATED]
    if busy and not changed:  # nothing failed, but a busy host's timing cannot say "good" either
        raise Unjudged(f"{busy[0].case_id}: {busy[0].verdict.reason}")
    moved = "; ".join(f"{case.case_id}: {case.kernels}" for case in comparison.cases if case.kernels)
    return Judgement(version, changed, max(ratios, default=None), verdicts, detail=moved)


class Unjudged(Exception):
    """A step whose rounds were contaminated (a busy host, a foreign process on the GPU) and that
    found nothing failing: its timing says neither good nor bad."""


def step_line(number: int, step: Judgement, good: str, look_for: str = "regression") -> str:
    if step.broken:
        return f"step {number}: {step.version}: cannot run, stepped over ({step.verdict})"
    ratio = f"step time x{step.ratio:.3f}" if step.ratio is not None else "no step-time ratio"
    if look_for == "change":
        judged = "changed" if step.bad else "as GOOD"
    else:
        judged = "bad" if step.bad else "good"
    return f"step {number}: {step.version} vs {good}: {ratio} ({step.verdict}) -> {judged}"


def _versions(args: argparse.Namespace, options: CandidateOptions) -> list[str]:
    if options.wheelhouse is not None:
        available = wheelhouse_versions(options.wheelhouse, args.package)
    else:
        available = index_versions(options.base_python, args.package)
    return versions_between(available, args.good, args.bad, args.package)


class Builder:
    """Candidates by version, built once; a broken one is remembered with its cause."""

    def __init__(self, args: argparse.Namespace, options: CandidateOptions, say: Say) -> None:
        self.args, self.options, self.say = args, options, say
        self.built: dict[str, Candidate] = {}
        self.broken: dict[str, BrokenEnvironment] = {}

    def __call__(self, version: str) -> Candidate | BrokenEnvironment:
        if version not in self.built and version not in self.broken:
            try:
                pins = {normalise(self.args.package): version}
                self.built[version] = ensure_candidate(self.options, pins, say=self.say)
            except BrokenEnvironment as exc:
                self.broken[version] = exc
        return self.built.get(version) or self.broken[version]

    @functools.cached_property
    def beside(self) -> str:
        """The base's key packages, which a broken version could not run beside (read once)."""
        base = installed_versions(self.options.base_python)
        return ", ".join(f"{n} {base[n]}" for n in STACK_IMPORTS if n in base and n != self.args.package)


def _first_runnable(indices: range, versions: list[str], build: Builder, end: str, say: Say) -> int | None:
    """The first index in ``indices`` whose version runs; each one passed over is said at once."""
    for index in indices:
        built = build(versions[index])
        if isinstance(built, Candidate):
            return index
        say(
            f"{end} {build.args.package} {versions[index]} cannot run here beside {build.beside}: "
            f"{built.cause}"
        )
    return None


def runnable_ends(versions: list[str], build: Builder, say: Say) -> list[str]:
    """The range trimmed to ends that run: the oldest runnable version becomes GOOD, the newest BAD,
    each move said in one line with the cause; one line and a stop when fewer than two run."""
    package = build.args.package
    low = _first_runnable(range(len(versions)), versions, build, "GOOD", say)
    if low is None:
        raise TrainperfError(
            f"no version of {package} from {versions[0]} to {versions[-1]} runs here; nothing measured"
        )
    if low > 0:
        say(f"GOOD is now {package} {versions[low]}, the oldest version of the range that runs")
    high = _first_runnable(range(len(versions) - 1, low - 1, -1), versions, build, "BAD", say)
    assert high is not None  # versions[low] runs
    if high == low:
        raise TrainperfError(
            f"of {package} {versions[0]}..{versions[-1]} only {versions[low]} runs here: nothing to bisect"
        )
    if high < len(versions) - 1:
        say(
            f"BAD is now {package} {versions[high]}, the newest that runs; {versions[high + 1]} is the first "
            "version after it that cannot run (an upgrade past it breaks these cases here)"
        )
    return versions[low : high + 1]


def _write(output: Path, args: argparse.Namespace, result: Bisection, build: Builder) -> None:
    steps = [
        {
            "version": s.version,
            "bad": s.bad,
            "broken": s.broken,
            "ratio": s.ratio,
            "verdict": s.verdict,
            "kernels": s.detail,
        }
        for s in result.steps
    ]
    record: dict[str, Any] = {
        "kind": "bisect",
        "created": datetime.now().astimezone().isoformat(timespec="seconds"),
        "package": args.package,
        "range": [args.requested_good, args.requested_bad],
        "good": args.good,
        "bad": args.bad,
        "selection": args.selection,
        "rounds": args.rounds,
        "look_for": args.look_for,
        "versions": result.versions,
        "first_bad": result.first_bad,
        "unresolved": result.unresolved,
        "environments": result.environments,
        "steps": steps,
        "broken": {version: exc.cause for version, exc in sorted(build.broken.items())},
        "moved": {version: [list(m) for m in c.moved] for version, c in sorted(build.built.items())},
    }
    (output / "bisect.json").write_text(json.dumps(record, indent=1) + "\n")


def _options(args: argparse.Namespace) -> CandidateOptions:
    from trainperf.studies.ab_sides import CandidateSettings

    return CandidateSettings(args.base_python, args.wheelhouse, args.envs, args.allow_conflicts).options()


def _conclude(args: argparse.Namespace, result: Bisection, bound: int) -> int:
    print("\n".join(step_line(n, step, args.good, args.look_for) for n, step in enumerate(result.steps, 1)))
    print(
        f"{result.environments} environments measured (at most {bound} for {len(result.versions)} versions)"
    )
    if result.unresolved:
        upper = result.first_bad or args.bad
        print(
            f"the first bad version is one of {', '.join(result.unresolved)} (which cannot run here) "
            f"or {upper}"
        )
    if result.first_bad is None:
        if args.look_for == "change":
            raise TrainperfError(
                f"{NO_CHANGE}: {args.package} {args.bad} was judged as {args.good} on every metric"
            )
        raise TrainperfError(
            f"{NO_REGRESSION}: {args.package} {args.bad} was judged not worse than {args.good}"
        )
    what = "first version with the change" if args.look_for == "change" else "first bad version"
    print(f"{what}: {args.package} {result.first_bad}")
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    split_selection(args)
    if not args.selection:
        raise TrainperfError(
            "give the cases to run after the versions, e.g. trainperf bisect transformers 4.56.0..4.57.1 -- "
            "-m h100 -k maxlen"
        )
    args.good, args.bad = args.requested_good, args.requested_bad = parse_range(args.range)
    options = _options(args)
    output = Path(args.output or f"reports/bisect-{datetime.now().strftime('%Y%m%d-%H%M%S')}").absolute()
    output.mkdir(parents=True, exist_ok=True)
    say: Say = lambda line: print(f"[trainperf bisect] {line}", flush=True)
    build = Builder(args, options, say)
    versions = runnable_ends(_versions(args, options), build, say)
    args.good, args.bad = versions[0], versions[-1]
    bound = max_environments(len(versions))
    say(
        f"{args.package}: {len(versions)} versions {', '.join(versions)}; at most {bound} environments "
        "measured"
    )
    good = build(args.good)
    assert isinstance(good, Candidate)  # runnable_ends kept only ends that run
    earlier = _earlier_steps(output, args, say)

    def judge(version: str) -> Judgement:
        if version in earlier:
            step = earlier[version]
        elif isinstance(built := build(version), BrokenEnvironment):
            step = Judgement(version, False, None, str(built), broken=True)
        else:
            step = _measured_step(args, good.python, built.python, version, output, say)
        say(step_line(len(result.steps) + 1, step, args.good, args.look_for))
        return step

    result = Bisection(versions)
    try:
        result = bisect(versions, judge, into=result)
    except KeyboardInterrupt:
        return _interrupted(args, result, output)
    except Unjudged as busy:
        return _interrupted(args, result, output, why=f"the host was busy ({busy})")
    finally:
        _write(output, args, result, build)  # the steps measured so far are kept, whatever stops it
    return _conclude(args, result, bound)


def _identity(args: argparse.Namespace) -> dict[str, object]:
    """What makes two runs the same bisection, so that the later one may reuse the earlier's steps."""
    return {
        "package": args.package,
        "good": args.good,
        "bad": args.bad,
        "selection": args.selection,
        "rounds": args.rounds,
        "look_for": args.look_for,
    }


def _earlier_steps(output: Path, args: argparse.Namespace, say: Say) -> dict[str, Judgement]:
    path = output / "bisect.json"
    try:
        record = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    steps = recorded_steps(record, _identity(args)) if isinstance(record, dict) else {}
    if steps:
        say(f"going on from {path}: {len(steps)} step(s) measured earlier ({', '.join(steps)})")
    return steps


def _measured_step(
    args: argparse.Namespace, good_python: Path, python: Path, version: str, output: Path, say: Say
) -> Judgement:
    """An A/B step, measured once more when a busy host left it unjudged; ``Unjudged`` when the
    second attempt was contaminated too."""
    try:
        return ab_step(args, good_python, python, version, output)
    except Unjudged as busy:
        say(f"{version}: not judged, the host was busy ({busy}); measuring the step again")
        return ab_step(args, good_python, python, version, output / "again")


def _interrupted(args: argparse.Namespace, result: Bisection, output: Path, why: str = "") -> int:
    """One line: where the first bad version lies so far, and how to go on. 130 for Ctrl-C, 3 for a
    step that a busy host left unjudged twice (run again where the host is quiet)."""
    last_good, first_bad = narrowed(result.versions, result.steps)
    where = f"between {last_good} and {first_bad or args.bad + ' (or none)'}"
    stopped = f"stopped at step {len(result.steps) + 1}: {why}" if why else "interrupted"
    print(
        f"trainperf bisect: {stopped}; after {len(result.steps)} judged step(s) the first "
        f"{'change' if args.look_for == 'change' else 'bad version'} lies {where}; the same command with "
        f"--output {output} goes on from there",
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
