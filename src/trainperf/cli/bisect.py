"""``trainperf bisect PACKAGE GOOD..BAD -- SELECTION``: the first version of a package whose cases
regressed, each step an interleaved A/B (``trainperf ab``) of GOOD against the probed version.

Environments: ``trainperf.families.version_envs`` (layered over the suite's interpreter, cached);
search: ``trainperf.plan.bisect`` (at most ceil(log2 n) + 1 environments for n versions).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.families.version_envs import (
    BISECT_VENVS,
    VersionEnvOptions,
    ensure_env,
    index_versions,
    wheelhouse_versions,
)
from trainperf.measure.hardware import load_classes
from trainperf.plan.bisect import (
    Bisection,
    Judgement,
    bisect,
    max_environments,
    parse_range,
    versions_between,
)

NO_REGRESSION = "no regression between GOOD and BAD at this selection"


def ab_step(
    args: argparse.Namespace, good_python: Path, python: Path, version: str, output: Path
) -> Judgement:
    """One A/B step: GOOD's environment (A) against the probed version's (B), interleaved, B judged
    against A as ``trainperf ab`` does; bad when any case of the selection fails that judgement."""
    from trainperf.judge.metrics import tolerances_from_pyproject
    from trainperf.report.compare_runs import compare_runs
    from trainperf.run.ab import pool_rounds, run_rounds
    from trainperf.run.folder import RunFolder

    folders_a, folders_b = run_rounds(
        str(good_python), str(python), args.rounds, args.selection, output / version
    )
    comparison = compare_runs(
        pool_rounds([RunFolder.open(f).results() for f in folders_a]),
        pool_rounds([RunFolder.open(f).results() for f in folders_b]),
        classes=load_classes(),
        tolerances=tolerances_from_pyproject(Path.cwd()),
        label_a=f"{args.package} {args.good}",
        label_b=f"{args.package} {version}",
    )
    ratios = [m.ratio for case in comparison.cases if (m := case.metric("step_time_s")) and m.ratio]
    verdicts = ", ".join(f"{case.case_id} {case.verdict.verdict.value}" for case in comparison.cases)
    return Judgement(
        version, any(case.fails for case in comparison.cases), max(ratios, default=None), verdicts
    )


def step_line(number: int, step: Judgement, good: str) -> str:
    ratio = f"step time x{step.ratio:.3f}" if step.ratio is not None else "no step-time ratio"
    judged = "bad" if step.bad else "good"
    return f"step {number}: {step.version} vs {good}: {ratio} ({step.verdict}) -> {judged}"


def _versions(args: argparse.Namespace, options: VersionEnvOptions) -> list[str]:
    if options.wheelhouse is not None:
        available = wheelhouse_versions(options.wheelhouse, args.package)
    else:
        available = index_versions(options.base_python, args.package)
    return versions_between(available, args.good, args.bad, args.package)


def _write(output: Path, args: argparse.Namespace, result: Bisection) -> None:
    steps = [
        {"version": s.version, "bad": s.bad, "ratio": s.ratio, "verdict": s.verdict} for s in result.steps
    ]
    record = {
        "package": args.package,
        "versions": result.versions,
        "first_bad": result.first_bad,
        "environments": result.environments,
        "steps": steps,
    }
    (output / "bisect.json").write_text(json.dumps(record, indent=1) + "\n")


def cmd_bisect(args: argparse.Namespace) -> int:
    split_selection(args)
    if not args.selection:
        raise TrainperfError(
            "give the cases to run after the versions, e.g. trainperf bisect transformers 4.56.0..4.57.1 -- "
            "-m h100 -k maxlen"
        )
    args.good, args.bad = parse_range(args.range)
    options = VersionEnvOptions(
        base_python=args.base_python or sys.executable,
        wheelhouse=Path(args.wheelhouse).absolute() if args.wheelhouse else None,
        root=Path(args.envs).absolute() if args.envs else BISECT_VENVS,
    )
    versions = _versions(args, options)
    output = Path(args.output or f"reports/bisect-{datetime.now().strftime('%Y%m%d-%H%M%S')}").absolute()
    output.mkdir(parents=True, exist_ok=True)
    bound = max_environments(len(versions))
    say: Callable[[str], None] = lambda line: print(f"[trainperf bisect] {line}", flush=True)
    say(
        f"{args.package}: {len(versions)} versions {', '.join(versions)}; at most {bound} environments "
        "measured"
    )
    good_python = ensure_env(options, args.package, args.good, say=say)

    def judge(version: str) -> Judgement:
        python = ensure_env(options, args.package, version, say=say)
        step = ab_step(args, good_python, python, version, output)
        say(step_line(len(result.steps) + 1, step, args.good))
        return step

    result = Bisection(versions)
    result = bisect(versions, judge, into=result)
    _write(output, args, result)
    print("\n".join(step_line(n, step, args.good) for n, step in enumerate(result.steps, 1)))
    print(f"{result.environments} environments measured (at most {bound} for {len(versions)} versions)")
    if result.first_bad is None:
        raise TrainperfError(
            f"{NO_REGRESSION}: {args.package} {args.bad} was judged not worse than {args.good}"
        )
    print(f"first bad version: {args.package} {result.first_bad}")
    return 0


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wheelhouse", default=None, help="install offline from this folder of wheels")
    parser.add_argument(
        "--base-python",
        default=None,
        help="interpreter whose environment each version is layered over (default: this)",
    )
    parser.add_argument(
        "--envs", default=None, help="folder of the cached environments (default .venvs/bisect)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="A/B rounds per step (default 2)")
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
