"""Bisection of package versions: the first version between GOOD and BAD whose cases regressed.

Pure: the versions are a sorted list and the judgement is a callable (``trainperf bisect`` runs
an interleaved A/B of GOOD against the probed version), so the search is tested with a fake.

GOOD is measured in every A/B step, so its environment counts once; each probe adds one. The
search never spends a probe on confirming BAD up front: it looks for the first bad index in
``1..n-1`` *or* "none" (no regression at all), which are n outcomes, so ``ceil(log2 n)`` probes
decide it and at most ``ceil(log2 n) + 1`` environments are measured for n versions from GOOD
to BAD inclusive. "None" can only come out once BAD itself was probed and judged not worse
than GOOD: that is the "no regression between GOOD and BAD" answer, not a guess.

A probed version that cannot run (a ``broken`` judgement: it does not install or import, or its
cases crashed) is stepped over, as ``git bisect skip`` does: the nearest untried version inside
the open interval is probed instead. When every version left there is broken, the answer is a
range (``unresolved``): the first bad version is one of them or the known bad one above.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from packaging.version import InvalidVersion, Version

from trainperf.errors import TrainperfError


@dataclass(frozen=True, slots=True)
class Judgement:
    """One A/B step: the probed version against GOOD."""

    version: str
    bad: bool
    ratio: float | None
    """The case's step-time ratio, probed / GOOD (the worst over the selection's cases)."""
    verdict: str
    detail: str = ""
    """What moved inside the kernel time of the cases whose kernel time moved (an A/B step)."""
    broken: bool = False
    """The probed version could not be measured (``verdict`` says why): neither good nor bad."""


@dataclass(slots=True)
class Bisection:
    versions: list[str]
    steps: list[Judgement] = field(default_factory=list)
    first_bad: str | None = None
    """None: no version up to BAD was judged worse than GOOD."""
    unresolved: list[str] = field(default_factory=list)
    """Broken versions just below ``first_bad`` (or BAD): the first bad one may be any of them."""

    @property
    def skipped(self) -> list[str]:
        """Versions probed and found unable to run."""
        return [step.version for step in self.steps if step.broken]

    @property
    def environments(self) -> int:
        """Environments measured: GOOD's, plus one per probed version."""
        return 1 + len({step.version for step in self.steps})


def max_environments(count: int) -> int:
    """The bound for ``count`` versions from GOOD to BAD inclusive: ceil(log2 n) + 1."""
    return math.ceil(math.log2(count)) + 1


def parse_range(text: str) -> tuple[str, str]:
    """``GOOD..BAD`` as its two versions; one line naming the form otherwise."""
    good, sep, bad = text.partition("..")
    if not sep or not good.strip() or not bad.strip():
        raise TrainperfError(f"give the versions as GOOD..BAD (e.g. 4.56.0..4.57.1), got {text!r}")
    return good.strip(), bad.strip()


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion as exc:
        raise TrainperfError(f"{text!r} is not a version (PEP 440), e.g. 4.57.1") from exc


def versions_between(available: Sequence[str], good: str, bad: str, package: str) -> list[str]:
    """GOOD, the versions after it and BAD, sorted; pre-releases only when GOOD or BAD is one."""
    low, high = _version(good), _version(bad)
    if high <= low:
        raise TrainperfError(
            f"{package}: BAD {bad} is not newer than GOOD {good}; give GOOD..BAD oldest first"
        )
    pre = low.is_prerelease or high.is_prerelease
    chosen: dict[Version, str] = {}
    for text in available:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if low <= version <= high and (pre or not version.is_prerelease):
            chosen.setdefault(version, text)
    for end, text in ((low, good), (high, bad)):
        if end not in chosen:
            raise TrainperfError(f"{package} {text} is not among the available versions; choose one of them")
    ordered = [chosen[v] for v in sorted(chosen)]
    if len(ordered) < 3:
        raise TrainperfError(
            f"{package}: no versions between {good} and {bad} to bisect; {bad} is the first after {good}, "
            "so it introduced the change"
        )
    return ordered


def bisect(
    versions: Sequence[str], judge: Callable[[str], Judgement], into: Bisection | None = None
) -> Bisection:
    """The first bad version of ``versions`` (GOOD first, BAD last), judging each probe by ``judge``;
    ``into`` receives the steps as they are judged (a caller can show their count)."""
    result = into if into is not None else Bisection(list(versions))
    low, high = 0, len(versions)  # low: known good (GOOD); high: first known bad, len = "none"
    broken: set[int] = set()
    while (middle := _next_probe(low, high, len(versions), broken)) is not None:
        step = judge(versions[middle])
        result.steps.append(step)
        if step.broken:
            broken.add(middle)
        elif step.bad:
            high = middle
        else:
            low = middle
    result.first_bad = versions[high] if high < len(versions) else None
    result.unresolved = [versions[i] for i in sorted(broken) if low < i < high]
    return result


def _next_probe(low: int, high: int, count: int, broken: set[int]) -> int | None:
    """The untried index nearest the middle of (low, high); BAD (count - 1) counts when high is "none"."""
    upper = min(high, count)
    untried = [i for i in range(low + 1, upper) if i not in broken]
    if not untried:
        return None
    middle = (low + high) // 2
    return min(untried, key=lambda i: (abs(i - middle), i))


def narrowed(versions: Sequence[str], steps: Sequence[Judgement]) -> tuple[str, str | None]:
    """The interval the steps so far leave: the newest version judged good (GOOD if none) and the
    oldest judged bad (None: none yet). What an interrupted bisection reports."""
    index = {version: i for i, version in enumerate(versions)}
    goods = [index[s.version] for s in steps if not s.bad and not s.broken and s.version in index]
    bads = [index[s.version] for s in steps if s.bad and s.version in index]
    return versions[max(goods, default=0)], versions[min(bads)] if bads else None


def recorded_steps(steps: Iterable[Judgement]) -> dict[str, Judgement]:
    """The measured steps of an earlier run of the same bisection (its ``bisect.json``), by version,
    to be reused; a broken step is tried again, the environment may be fixed since."""
    return {
        step.version: replace(step, verdict=f"{step.verdict} (measured earlier)")
        for step in steps
        if not step.broken
    }
