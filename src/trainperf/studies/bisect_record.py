"""A bisection's record as its folder keeps it (``bisect.json``): what was asked, the versions and the
ends that run, each judged step, and what was found; ``trainperf report upgrades`` renders it, and a
later run of the same request goes on from its steps.

A step recorded before steps kept what moved in the kernels has no ``kernels``, and a bisection
recorded before releases were explained no ``explained``: those read as None and are not written
back, so a stored bisection reads back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainperf.jsonio import stored_number_or_none, stored_text
from trainperf.plan.bisect import Judgement
from trainperf.studies.ab_record import Moved, moved_of

BISECT_KIND = "bisect"


@dataclass(frozen=True, slots=True)
class BisectStep:
    """One judged step as recorded: the probed version against GOOD."""

    version: str
    bad: bool
    broken: bool
    """The version could not be measured (``verdict`` says why): neither good nor bad."""
    ratio: float | None
    verdict: str
    kernels: str | None = None
    """What moved inside the kernel time of the cases whose kernel time moved."""

    @classmethod
    def of(cls, step: Judgement) -> BisectStep:
        return cls(step.version, step.bad, step.broken, step.ratio, step.verdict, kernels=step.detail)

    def judgement(self) -> Judgement:
        """The step as the search judged it."""
        return Judgement(
            self.version, self.bad, self.ratio, self.verdict, detail=self.kernels or "", broken=self.broken
        )

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "version": self.version,
            "bad": self.bad,
            "broken": self.broken,
            "ratio": self.ratio,
            "verdict": self.verdict,
        }
        return stored if self.kernels is None else {**stored, "kernels": self.kernels}

    @classmethod
    def from_dict(cls, data: Any) -> BisectStep:
        return cls(
            version=str(data["version"]),
            bad=bool(data.get("bad")),
            broken=bool(data.get("broken")),
            ratio=stored_number_or_none(data.get("ratio")),
            verdict=str(data.get("verdict", "")),
            kernels=stored_text(data.get("kernels")),
        )


@dataclass(frozen=True, slots=True)
class BisectIdentity:
    """What makes two runs the same bisection, so that the later one may reuse the earlier's steps."""

    package: str
    good: str
    bad: str
    selection: tuple[str, ...]
    rounds: int
    look_for: str


@dataclass(frozen=True, slots=True)
class BisectRecord:
    """A bisection as ``bisect.json`` keeps it, written as the search stops, whatever stops it."""

    created: str
    package: str
    requested: tuple[str, str]
    """The ends asked for (stored as ``range``); ``good`` and ``bad`` are the ends that run."""
    good: str
    bad: str
    selection: tuple[str, ...]
    rounds: int
    look_for: str
    """``regression`` or ``change`` (an improvement too)."""
    versions: tuple[str, ...]
    first_bad: str | None
    """None: no version up to BAD was judged worse than GOOD (written as null)."""
    unresolved: tuple[str, ...]
    environments: int
    steps: tuple[BisectStep, ...]
    broken: dict[str, str]
    """Each version that cannot run here, with its cause."""
    moved: dict[str, tuple[Moved, ...]]
    """Each built version's packages other than the pin whose version differs from the base."""
    explained: dict[str, str] | None = None
    """The release found, explained: each moved case's line from one profiled run a side."""
    kind: str = BISECT_KIND

    @property
    def identity(self) -> BisectIdentity:
        return BisectIdentity(self.package, self.good, self.bad, self.selection, self.rounds, self.look_for)

    def to_dict(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "kind": self.kind,
            "created": self.created,
            "package": self.package,
            "range": list(self.requested),
            "good": self.good,
            "bad": self.bad,
            "selection": list(self.selection),
            "rounds": self.rounds,
            "look_for": self.look_for,
            "versions": list(self.versions),
            "first_bad": self.first_bad,
        }
        if self.explained is not None:
            stored["explained"] = dict(self.explained)
        return stored | {
            "unresolved": list(self.unresolved),
            "environments": self.environments,
            "steps": [step.to_dict() for step in self.steps],
            "broken": dict(self.broken),
            "moved": {version: [list(m) for m in moved] for version, moved in self.moved.items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> BisectRecord | None:
        """The bisection, or None where the file holds none (or one too damaged to go on from)."""
        if not isinstance(data, dict):
            return None
        try:
            low, high = data["range"]
            explained = data.get("explained")
            return cls(
                created=str(data.get("created") or ""),
                package=str(data["package"]),
                requested=(str(low), str(high)),
                good=str(data["good"]),
                bad=str(data["bad"]),
                selection=tuple(str(s) for s in data.get("selection") or []),
                rounds=int(data["rounds"]),
                look_for=str(data.get("look_for", "regression")),
                versions=tuple(str(v) for v in data.get("versions") or []),
                first_bad=stored_text(data.get("first_bad")),
                unresolved=tuple(str(v) for v in data.get("unresolved") or []),
                environments=int(data.get("environments") or 0),
                steps=tuple(BisectStep.from_dict(step) for step in data.get("steps") or []),
                broken={str(v): str(cause) for v, cause in (data.get("broken") or {}).items()},
                moved={str(v): tuple(moved_of(m) for m in ms) for v, ms in (data.get("moved") or {}).items()},
                explained=(
                    {str(k): str(v) for k, v in explained.items()} if isinstance(explained, dict) else None
                ),
                kind=str(data.get("kind", BISECT_KIND)),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None
