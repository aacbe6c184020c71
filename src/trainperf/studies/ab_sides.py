"""The two sides of an A/B (``trainperf ab``): each an existing interpreter or a candidate built from
the base environment with some pins changed, and shown to run before anything is measured.

A side that cannot run is a ``BrokenEnvironment``. For A (the reference) that stops the study:
nothing can be judged against it. For B it is the study's verdict, ``broken-environment``: the
upgrade cannot run these cases here, which fails an upgrade check as a regression would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.families.candidates import (
    CANDIDATE_VENVS,
    Candidate,
    CandidateOptions,
    ensure_candidate,
    parse_pins,
)
from trainperf.paths import portable
from trainperf.studies.ab import check_environment
from trainperf.studies.ab_record import SideRecord


@dataclass(frozen=True, slots=True)
class SideRequest:
    label: str
    """``a`` or ``b``."""
    python: str | None = None
    """``--env-a/--env-b``: an existing interpreter."""
    pins: tuple[str, ...] = ()
    """``--pin-a/--pin-b``: a candidate over the base environment."""


@dataclass(frozen=True, slots=True)
class Side:
    label: str
    python: str
    description: str
    """Key versions of an existing interpreter, or a candidate's pins and what else moved."""
    candidate: Candidate | None = None

    def record(self) -> SideRecord:
        """The side as the study's record keeps it: a candidate's pins and what else moved too."""
        if self.candidate is None:
            return SideRecord(portable(self.python), self.description)
        return SideRecord(
            portable(self.python),
            self.description,
            pins=dict(self.candidate.pins),
            moved=tuple(self.candidate.moved),
            conflicts=tuple(self.candidate.conflicts),
        )


@dataclass(frozen=True, slots=True)
class CandidateSettings:
    base_python: str | None = None
    """Default: the interpreter running the suite."""
    wheelhouse: str | None = None
    envs: str | None = None
    allow_conflicts: bool = False

    def options(self) -> CandidateOptions:
        return CandidateOptions(
            base_python=os.path.abspath(self.base_python or sys.executable),
            wheelhouse=Path(self.wheelhouse).absolute() if self.wheelhouse else None,
            root=Path(self.envs).absolute() if self.envs else CANDIDATE_VENVS,
            allow_conflicts=self.allow_conflicts,
        )


def prepare_side(
    request: SideRequest, settings: CandidateSettings, say: Callable[[str], None] = print
) -> Side:
    """The side's interpreter, shown to run; raises ``BrokenEnvironment`` when it cannot."""
    flag = f"--env-{request.label}"
    if request.python and request.pins:
        raise TrainperfError(
            f"give {flag} or --pin-{request.label}, not both: a pinned side is built over --base-python"
        )
    if request.pins:
        candidate = ensure_candidate(settings.options(), parse_pins(request.pins), say=say)
        return Side(request.label, str(candidate.python), candidate.describe(), candidate)
    python = os.path.abspath(request.python or settings.base_python or sys.executable)
    return Side(request.label, python, check_environment(python, request.label))


def side_requests(args: Any) -> tuple[SideRequest, SideRequest]:
    """The two requests from ``trainperf ab``'s options; B must differ from A in something."""
    a = SideRequest("a", args.env_a, tuple(args.pin_a))
    b = SideRequest("b", args.env_b, tuple(args.pin_b))
    if not b.python and not b.pins:
        raise TrainperfError(
            "give environment B: --env-b PYTHON, or --pin-b NAME==VERSION to build it from the base "
            "environment (e.g. --pin-b transformers==5.24.0)"
        )
    return a, b
