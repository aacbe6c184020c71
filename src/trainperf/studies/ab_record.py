"""An A/B study's records as its folder keeps them: ``ab.json`` (the study, its sides and B's verdict
against A, what ``trainperf report upgrades`` reads) and ``request.json`` (what the study was asked
to measure, which ``--resume`` must find again).

Each key is written only where the study had it (a study whose B cannot run has no comparison, one
judged before ``--explain`` existed no ``explained``), so every key not recorded is None here and
not written back: a stored study reads back unchanged, and renders as it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainperf.jsonio import stored_text
from trainperf.studies.comparison_record import ComparedCase, Comparison
from trainperf.studies.precision import Precision

STUDY_KIND = "ab"
BROKEN = "broken-environment"
"""The verdict of a study whose B cannot run (``broken``), and a case's when B crashed in it."""
VERDICT_KEYS = ("verdict", "a_not_run", "broken_cases", "comparison", "precision")
"""The judged part of the record, what ``trainperf ab --json`` prints."""

Moved = tuple[str, str | None, str | None]
"""A package other than the pins whose version differs from the base: (name, base, candidate)."""


@dataclass(frozen=True, slots=True)
class SideRecord:
    """One side of a study: its interpreter and versions once it ran; before that (or where the side
    could not run), only the pins it was asked for."""

    python: str | None = None
    """The interpreter, as results record paths (``paths.portable``)."""
    description: str | None = None
    """Key versions of an existing interpreter, or a candidate's pins and what else moved."""
    pins: dict[str, str] | None = None
    moved: tuple[Moved, ...] | None = None
    conflicts: tuple[str, ...] | None = None
    """pip's declared conflicts in a candidate measured anyway."""

    @property
    def pins_label(self) -> str:
        """The pins as a table names a side (``peft 0.18.0``); "" where there are none."""
        return " ".join(f"{name} {version}" for name, version in (self.pins or {}).items())

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "python": self.python,
            "description": self.description,
            "pins": dict(self.pins) if self.pins is not None else None,
            "moved": [list(m) for m in self.moved] if self.moved is not None else None,
            "conflicts": list(self.conflicts) if self.conflicts is not None else None,
        }
        return {key: value for key, value in stored.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Any) -> SideRecord | None:
        if not isinstance(data, dict):
            return None
        pins, moved, conflicts = data.get("pins"), data.get("moved"), data.get("conflicts")
        return cls(
            python=stored_text(data.get("python")),
            description=stored_text(data.get("description")),
            pins={str(k): str(v) for k, v in pins.items()} if isinstance(pins, dict) else None,
            moved=tuple(moved_of(m) for m in moved) if isinstance(moved, list) else None,
            conflicts=tuple(str(c) for c in conflicts) if isinstance(conflicts, list) else None,
        )


def moved_of(stored: Any) -> Moved:
    """A moved package as stored, ``[name, base, candidate]`` (a version is null where absent)."""
    name, base, candidate = stored
    return str(name), stored_text(base), stored_text(candidate)


@dataclass(frozen=True, slots=True)
class BrokenSide:
    """The side that cannot run beside the stack, the package that broke it and why."""

    side: str
    """``a`` or ``b``."""
    package: str
    cause: str

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "package": self.package, "cause": self.cause}

    @classmethod
    def from_dict(cls, data: Any) -> BrokenSide | None:
        if not isinstance(data, dict):
            return None
        return cls(str(data.get("side", "b")), str(data.get("package", "")), str(data.get("cause", "")))


@dataclass(frozen=True, slots=True)
class ABRecord:
    """A study as ``ab.json`` keeps it: what ran (rounds, selection, sides), what profiles explained,
    and B's verdict against A with the cases that were not judged and why."""

    kind: str = STUDY_KIND
    created: str = ""
    rounds: int = 0
    selection: tuple[str, ...] = ()
    a: SideRecord | None = None
    b: SideRecord | None = None
    explained: dict[str, str] | None = None
    """Each moved case's line from one profiled run a side (``--explain``)."""
    judged: str | None = None
    """When rounds measured earlier were judged again (``--judge-only``)."""
    verdict: str | None = None
    """``passes``, ``fails``, ``not-judged`` or ``broken-environment``; None before judging."""
    broken: BrokenSide | None = None
    a_not_run: dict[str, str] | None = None
    """Cases A could not run, each with its last line: not judged."""
    broken_cases: dict[str, str] | None = None
    """Cases A ran and B crashed in, each with B's last line."""
    comparison: Comparison | None = None
    """B judged against A as ``report.compare_runs`` writes a comparison (``comparison_record``)."""
    precision: Precision | None = None

    @property
    def compared_cases(self) -> tuple[ComparedCase, ...]:
        """B's cases judged against A's; none where B was not judged (or cannot run)."""
        return (self.comparison.cases if self.comparison is not None else None) or ()

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "kind": self.kind,
            "created": self.created,
            "rounds": self.rounds,
            "selection": list(self.selection),
            "a": self.a.to_dict() if self.a is not None else None,
            "b": self.b.to_dict() if self.b is not None else None,
            "explained": _copy(self.explained),
            "judged": self.judged,
            "verdict": self.verdict,
            "broken": self.broken.to_dict() if self.broken is not None else None,
            "a_not_run": _copy(self.a_not_run),
            "broken_cases": _copy(self.broken_cases),
            "comparison": self.comparison.to_dict() if self.comparison is not None else None,
            "precision": self.precision.to_dict() if self.precision is not None else None,
        }
        return {key: value for key, value in stored.items() if value is not None}

    def verdict_dict(self) -> dict[str, Any]:
        """The judged part alone (``VERDICT_KEYS``), in the record's order."""
        return {key: value for key, value in self.to_dict().items() if key in VERDICT_KEYS}

    @classmethod
    def from_dict(cls, data: Any) -> ABRecord | None:
        """The study, or None where the file holds none."""
        if not isinstance(data, dict):
            return None
        selection = data.get("selection")
        return cls(
            kind=str(data.get("kind", STUDY_KIND)),
            created=str(data.get("created") or ""),
            rounds=int(data.get("rounds") or 0),
            selection=tuple(str(s) for s in selection) if isinstance(selection, list) else (),
            a=SideRecord.from_dict(data.get("a")),
            b=SideRecord.from_dict(data.get("b")),
            explained=_texts(data.get("explained")),
            judged=stored_text(data.get("judged")),
            verdict=stored_text(data.get("verdict")),
            broken=BrokenSide.from_dict(data.get("broken")),
            a_not_run=_texts(data.get("a_not_run")),
            broken_cases=_texts(data.get("broken_cases")),
            comparison=Comparison.from_dict(data.get("comparison")),
            precision=Precision.from_dict(data.get("precision")),
        )


@dataclass(frozen=True, slots=True)
class AskedSide:
    """A side as the command asked for it: an interpreter (relative to the project inside it, as
    results record paths) or pins over the base."""

    python: str | None
    pins: tuple[str, ...]
    """As given (``NAME==VERSION``), sorted."""

    def to_dict(self) -> dict[str, Any]:
        return {"python": self.python, "pins": list(self.pins)}


@dataclass(frozen=True, slots=True)
class StudyRequest:
    """What a study was asked to measure (``request.json``), written before its first round:
    ``--resume`` continues only the same study."""

    selection: tuple[str, ...]
    base_python: str | None
    a: AskedSide
    b: AskedSide

    def to_dict(self) -> dict[str, Any]:
        return {
            "selection": list(self.selection),
            "base_python": self.base_python,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
        }


def _copy(texts: dict[str, str] | None) -> dict[str, str] | None:
    return dict(texts) if texts is not None else None


def _texts(data: Any) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
