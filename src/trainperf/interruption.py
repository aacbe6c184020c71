"""What a cut run leaves behind, said where the user looks.

A run stopped half-way (Ctrl-C, a CI job's time limit sending SIGINT, ``timeout --signal=INT``)
keeps every finished case's result, and the running child's files stay on disk; but pytest's
summary lists only the finished cases, so the cut case would vanish from view. The runner
records which child was running and how far it got, and the summary names it with the way on
(``--perf-resume``). Once that case has a result in the folder (a resumed run finished it), the
record no longer applies and is not shown.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from trainperf.workloads.protocol import write_json_atomic

INTERRUPTED_FILE = "interrupted.json"


@dataclass(frozen=True, slots=True)
class Interruption:
    case_id: str
    label: str
    """The child as the progress lines name it (``CASE run 1/3``)."""
    child_dir: str
    """The interrupted child's folder, relative to the run folder."""
    steps_done: int
    steps_requested: int


def record(run_dir: Path, interruption: Interruption) -> None:
    write_json_atomic(run_dir / INTERRUPTED_FILE, asdict(interruption))


def pending(run_dir: Path) -> Interruption | None:
    """The interruption recorded in ``run_dir``, unless its case has a result there since."""
    try:
        data = json.loads((run_dir / INTERRUPTED_FILE).read_text())
        interruption = Interruption(**data)
    except (OSError, ValueError, TypeError):
        return None
    if (run_dir / "results" / f"{interruption.case_id}.json").is_file():
        return None
    return interruption


def describe(run_dir: Path, interruption: Interruption) -> str:
    return (
        f"trainperf: interrupted during {interruption.label} after {interruption.steps_done}/"
        f"{interruption.steps_requested} steps (its files: {run_dir / interruption.child_dir}); "
        f"finished cases are kept: run again with --perf-resume {run_dir} to judge them and re-run the rest"
    )
