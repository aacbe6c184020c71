"""How a run folder's session ended, for the cases it selected and never reached (pure: its session
records and the cut it recorded in, one record out).

Each session records the cases it selected (``SESSION_SELECTED``) when it opens its run folder, and
its end when it finishes (``RunFolder.update_session``): when, after how long, and whether a Ctrl-C or a
time limit's SIGINT stopped it. A session killed outright (``kill -9``, a runner torn down) records
no end. A merge words it per shard, a session's own page for itself; both count the same causes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainperf.ground.folder import (
    SESSION_ELAPSED,
    SESSION_ENDED,
    SESSION_INTERRUPTED,
    SESSION_SELECTED,
    SESSION_UNPLACED,
)
from trainperf.launch.interruption import Interruption

INTERRUPTED_END = "interrupted"
NORMAL_END = "ended"
NO_END = "no end"


@dataclass(frozen=True, slots=True)
class SessionEnd:
    kind: str
    """``INTERRUPTED_END``, ``NORMAL_END`` or ``NO_END``."""
    elapsed_s: float | None
    cut: str
    """The child a stop cut (``CASE run 1/3``), "" where none was."""

    def how(self) -> str:
        """``was interrupted after 500 s during CASE run 1/1, before it``, for a case it did not reach."""
        after = f" after {self.elapsed_s:.0f} s" if self.elapsed_s is not None else ""
        if self.kind == INTERRUPTED_END:
            return f"was interrupted{after}{f' during {self.cut}' if self.cut else ''}, before it"
        if self.kind == NORMAL_END:
            return f"ended{after} without running it (deselected or skipped)"
        return "recorded no end (killed, or written by a trainperf that did not record one)"


def session_end(sessions: Sequence[dict[str, Any]], cut: Interruption | None) -> SessionEnd:
    """How the latest of ``sessions`` ended; a recorded cut means it was stopped, whatever else."""
    last = sessions[-1] if sessions else {}
    elapsed = last.get(SESSION_ELAPSED)
    seconds = float(elapsed) if isinstance(elapsed, int | float) else None
    label = cut.label if cut is not None else ""
    if last.get(SESSION_INTERRUPTED) or cut is not None:
        return SessionEnd(INTERRUPTED_END, seconds, label)
    if last.get(SESSION_ENDED):
        return SessionEnd(NORMAL_END, seconds, label)
    return SessionEnd(NO_END, seconds, label)


def selected_cases(sessions: Sequence[dict[str, Any]]) -> set[str]:
    """Every case the sessions selected (a resumed run's sessions select the same ones)."""
    return {str(case) for session in sessions for case in session.get(SESSION_SELECTED) or []}


def unplaced_cases(sessions: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every case the sessions skipped at the start (``SESSION_UNPLACED``), with why."""
    found: dict[str, str] = {}
    for session in sessions:
        unplaced = session.get(SESSION_UNPLACED)
        if isinstance(unplaced, dict):
            found.update({str(key): str(why) for key, why in unplaced.items()})
    return found
