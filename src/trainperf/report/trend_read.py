"""What the dashboard reads beside the results history: a stored run's result file and run folder
where they are now, and what its result file says of its verdict.

The history itself is read through ``HistoryStore.stored_runs`` (every stored result, kept out of
the series or not, so that each stored run is drawn and none is silently dropped). Result files
are read only for the few runs the first page explains (their reason and diagnosis).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trainperf.ground.folder import RunFolder
from trainperf.store.records import StoredRun
from trainperf.stored_verdict import StoredVerdict


def result_file(run: StoredRun, runs_root: Path | None) -> Path | None:
    """The run's result file where it is now: as stored, in its run folder, or in a folder of the
    same name under ``runs_root`` (run folders archived away from where they ran)."""
    candidates = []
    if run.result_path:
        candidates.append(Path(run.result_path))
    if run.run_dir:
        candidates.append(RunFolder(Path(run.run_dir)).result_path(run.case_id))
        if runs_root is not None:
            candidates.append(RunFolder(runs_root / Path(run.run_dir).name).result_path(run.case_id))
    return next((path for path in candidates if path.is_file()), None)


def run_folder(run_dir: str | None, runs_root: Path | None) -> Path | None:
    """A run folder where it is now (as stored, else by name under ``runs_root``), or None."""
    if not run_dir:
        return None
    for folder in (Path(run_dir), *([runs_root / Path(run_dir).name] if runs_root else [])):
        if folder.is_dir():
            return folder
    return None


@dataclass(frozen=True, slots=True)
class Explanation:
    """What a run's result file says of its verdict: the reason and the diagnosis line."""

    reason: str = ""
    diagnosis: str = ""
    found: bool = False
    """Whether the result file was found (a passing run has no reason to give)."""


def explanation(run: StoredRun, runs_root: Path | None) -> Explanation:
    """The verdict's reason and diagnosis line from the result file; empty where it is not found or
    not readable (the stored verdict and message still stand)."""
    path = result_file(run, runs_root)
    if path is None:
        return Explanation()
    try:
        verdict = StoredVerdict.from_dict(json.loads(path.read_text()).get("verdict"))
    except (OSError, ValueError, TypeError):
        return Explanation()
    line = (verdict.diagnosis.line if verdict.diagnosis else None) or ""
    return Explanation(verdict.reason, line.removeprefix("diagnosis: "), True)
