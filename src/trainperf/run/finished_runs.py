"""A case's finished runs, kept as each ends, so that a cut case loses none of them.

A case of three runs cut in its third (a CI time limit, Ctrl-C, a night's wall-clock limit) has
two runs that ended well; they used to live only in the parent's memory and went with it. Each
run that ends well is written to ``cases/<case>/finished-runs.json`` (atomically, with what pooling
needs: the run's record and its measurement) before the next starts. ``--perf-resume`` then goes on
from them and runs only what is missing; the summary and ``trainperf merge`` list the cut case as
interrupted with its kept runs. The file goes once the case's result is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.ground.folder import RunFolder
from trainperf.jsonio import write_json_atomic
from trainperf.measure.measurement import RunMeasurement
from trainperf.result import CaseResult

MEASUREMENT = "measurement"
CONFIRMATION = "confirmation"
KEPT_PURPOSES = (MEASUREMENT, CONFIRMATION)
"""The runs that pool into a case's result; a cliff's probes are kept by the search's own record."""


@dataclass(slots=True)
class FinishedRuns:
    """The case's result so far (its runs that ended well, in order) and each run's measurement."""

    steps: int
    """The steps each run was asked for: runs of another length do not pool with a resumed one's."""
    result: CaseResult
    measurements: list[RunMeasurement] = field(default_factory=list)

    def count(self, purpose: str) -> int:
        return sum(1 for run in self.result.runs if (run.purpose or MEASUREMENT) == purpose)

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "result": self.result.to_dict(),
            "runs": len(self.result.runs),
            "measurements": [m.to_dict() for m in self.measurements],
        }


def keep(folder: RunFolder, finished: FinishedRuns) -> None:
    """Write the case's finished runs, replacing the record of fewer."""
    path = folder.finished_runs_path(finished.result.case_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, finished.to_dict())


def load(folder: RunFolder, case_id: str, steps: int) -> tuple[FinishedRuns | None, str | None]:
    """The kept runs of a case, and a line when some exist but cannot be used (unreadable, or of
    another step count); (None, None) when there are none."""
    path = folder.finished_runs_path(case_id)
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text())
        finished = FinishedRuns(
            steps=int(data["steps"]),
            result=CaseResult.from_dict(data["result"], origin=str(path)),
            measurements=[RunMeasurement.from_dict(m) for m in data["measurements"]],
        )
    except (OSError, ValueError, TypeError, KeyError, TrainperfError) as exc:
        return None, f"its kept runs ({path}) are unreadable ({exc}); running them again"
    if finished.steps != steps or len(finished.result.runs) != len(finished.measurements):
        return None, f"its kept runs ran {finished.steps} steps, this run asks {steps}; running them again"
    return finished, None


def drop(folder: RunFolder, case_id: str) -> None:
    """The case has its result: its kept runs are in it."""
    folder.finished_runs_path(case_id).unlink(missing_ok=True)
