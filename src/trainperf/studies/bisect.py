"""A bisection over a package's versions: the first one whose cases regressed (or changed), each step
an interleaved A/B (``studies.ab``) of GOOD against the probed version; ``trainperf bisect`` (the
CLI) only parses its request and prints its result.

Environments: ``trainperf.families.candidates`` (layered over the suite's interpreter, cached);
search: ``trainperf.plan.bisect`` (at most ceil(log2 n) + 1 environments for n versions, plus one
per version stepped over). Before anything is measured, both ends must run: a GOOD that cannot
run is said first, in one line naming the package and the cause, and the oldest version that runs
becomes GOOD (or the bisection stops); likewise BAD, from the newest. A probed version that cannot
run is stepped over, never judged good; every conclusion rests on measured pairs. The steps are
written to ``bisect.json`` as the search stops, whatever stops it, and a later run of the same
request goes on from them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

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
from trainperf.plan.bisect import (
    Bisection,
    Judgement,
    bisect,
    max_environments,
    recorded_steps,
    versions_between,
)
from trainperf.studies.bisect_record import BisectIdentity, BisectRecord, BisectStep

Say = Callable[[str], None]
StepJudge = Callable[["BisectRequest", Path, Path, str, Path], Judgement]
"""One A/B step: (request, GOOD's python, the probed version's python, the version, its folder) to
its judgement; ``Unjudged`` where a busy host left it without one (``trainperf bisect``'s, which
judges through the project's tolerances)."""
StepExplain = Callable[["BisectRequest", Path, Path, str], dict[str, str]]
"""The release found, explained: (request, GOOD's python, its python, the version) to each moved
case's line from one profiled run a side (``studies.ab_explain``)."""


@dataclass(frozen=True, slots=True)
class BisectRequest:
    """What a bisection is asked: the package, its ends, the cases and how each step judges."""

    package: str
    good: str
    bad: str
    """The ends that run here (``runnable_ends``); ``requested`` holds those asked for."""
    requested: tuple[str, str]
    selection: list[str]
    rounds: int
    look_for: str
    """``regression`` or ``change`` (an improvement too)."""
    output: Path


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


def versions_of(request: BisectRequest, options: CandidateOptions) -> list[str]:
    if options.wheelhouse is not None:
        available = wheelhouse_versions(options.wheelhouse, request.package)
    else:
        available = index_versions(options.base_python, request.package)
    return versions_between(available, request.good, request.bad, request.package)


class Builder:
    """Candidates by version, built once; a broken one is remembered with its cause."""

    def __init__(self, package: str, options: CandidateOptions, say: Say) -> None:
        self.package, self.options, self.say = package, options, say
        self.built: dict[str, Candidate] = {}
        self.broken: dict[str, BrokenEnvironment] = {}

    def __call__(self, version: str) -> Candidate | BrokenEnvironment:
        if version not in self.built and version not in self.broken:
            try:
                pins = {normalise(self.package): version}
                self.built[version] = ensure_candidate(self.options, pins, say=self.say)
            except BrokenEnvironment as exc:
                self.broken[version] = exc
        return self.built.get(version) or self.broken[version]

    @functools.cached_property
    def beside(self) -> str:
        """The base's key packages, which a broken version could not run beside (read once)."""
        base = installed_versions(self.options.base_python)
        return ", ".join(f"{n} {base[n]}" for n in STACK_IMPORTS if n in base and n != self.package)


def first_runnable(indices: range, versions: list[str], build: Builder, end: str, say: Say) -> int | None:
    """The first index in ``indices`` whose version runs; each one passed over is said at once."""
    for index in indices:
        built = build(versions[index])
        if isinstance(built, Candidate):
            return index
        say(f"{end} {build.package} {versions[index]} cannot run here beside {build.beside}: {built.cause}")
    return None


def runnable_ends(versions: list[str], build: Builder, say: Say) -> list[str]:
    """The range trimmed to ends that run: the oldest runnable version becomes GOOD, the newest BAD,
    each move said in one line with the cause; one line and a stop when fewer than two run."""
    package = build.package
    low = first_runnable(range(len(versions)), versions, build, "GOOD", say)
    if low is None:
        raise TrainperfError(
            f"no version of {package} from {versions[0]} to {versions[-1]} runs here; nothing measured"
        )
    if low > 0:
        say(f"GOOD is now {package} {versions[low]}, the oldest version of the range that runs")
    high = first_runnable(range(len(versions) - 1, low - 1, -1), versions, build, "BAD", say)
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


def measured_step(
    ab_step: StepJudge, request: BisectRequest, good_python: Path, python: Path, version: str, say: Say
) -> Judgement:
    """An A/B step, measured once more when a busy host left it unjudged; ``Unjudged`` when the
    second attempt was contaminated too."""
    try:
        return ab_step(request, good_python, python, version, request.output)
    except Unjudged as busy:
        say(f"{version}: not judged, the host was busy ({busy}); measuring the step again")
        return ab_step(request, good_python, python, version, request.output / "again")


def identity(request: BisectRequest) -> BisectIdentity:
    """What makes two runs the same bisection, so that the later one may reuse the earlier's steps."""
    return BisectIdentity(
        request.package, request.good, request.bad, tuple(request.selection), request.rounds, request.look_for
    )


def earlier_steps(request: BisectRequest, say: Say) -> dict[str, Judgement]:
    path = request.output / "bisect.json"
    try:
        record = BisectRecord.from_dict(json.loads(path.read_text())) if path.is_file() else None
    except (OSError, ValueError):
        return {}
    same = record is not None and record.identity == identity(request)
    steps = recorded_steps(step.judgement() for step in record.steps) if record is not None and same else {}
    if steps:
        say(f"going on from {path}: {len(steps)} step(s) measured earlier ({', '.join(steps)})")
    return steps


def write_record(
    request: BisectRequest, result: Bisection, build: Builder, explained: dict[str, str] | None = None
) -> None:
    record = BisectRecord(
        created=datetime.now().astimezone().isoformat(timespec="seconds"),
        package=request.package,
        requested=request.requested,
        good=request.good,
        bad=request.bad,
        selection=tuple(request.selection),
        rounds=request.rounds,
        look_for=request.look_for,
        versions=tuple(result.versions),
        first_bad=result.first_bad,
        explained=explained or {},
        unresolved=tuple(result.unresolved),
        environments=result.environments,
        steps=tuple(BisectStep.of(step) for step in result.steps),
        broken={version: exc.cause for version, exc in sorted(build.broken.items())},
        moved={version: tuple(c.moved) for version, c in sorted(build.built.items())},
    )
    (request.output / "bisect.json").write_text(json.dumps(record.to_dict(), indent=1) + "\n")


def run(
    request: BisectRequest,
    options: CandidateOptions,
    ab_step: StepJudge,
    say: Say,
    into: Bisection,
    explain: StepExplain | None = None,
) -> tuple[int, BisectRequest]:
    """The bisection, into ``into`` (its versions, the ends that run, and its steps as they are
    judged, so that a caller stopped by ``KeyboardInterrupt`` or ``Unjudged`` still has them); the
    bound on environments and the request with the ends that run. The steps measured so far are
    written to ``bisect.json`` whatever stops it."""
    build = Builder(request.package, options, say)
    versions = runnable_ends(versions_of(request, options), build, say)
    into.versions = list(versions)
    request = dataclasses.replace(request, good=versions[0], bad=versions[-1])
    bound = max_environments(len(versions))
    say(
        f"{request.package}: {len(versions)} versions {', '.join(versions)}; at most {bound} "
        "environments measured"
    )
    good = build(request.good)
    assert isinstance(good, Candidate)  # runnable_ends kept only ends that run
    earlier = earlier_steps(request, say)

    def judge(version: str) -> Judgement:
        if version in earlier:
            step = earlier[version]
        elif isinstance(built := build(version), BrokenEnvironment):
            step = Judgement(version, False, None, str(built), broken=True)
        else:
            step = measured_step(ab_step, request, good.python, built.python, version, say)
        say(step_line(len(into.steps) + 1, step, request.good, request.look_for))
        return step

    explained: dict[str, str] = {}
    try:
        bisect(versions, judge, into=into)
        found = build(into.first_bad) if explain is not None and into.first_bad else None
        if explain is not None and into.first_bad and isinstance(found, Candidate):
            say(f"explaining {request.package} {into.first_bad}: one profiled run a side of what moved")
            explained = explain(request, good.python, found.python, into.first_bad)
    finally:
        write_record(request, into, build, explained)
    return bound, request
