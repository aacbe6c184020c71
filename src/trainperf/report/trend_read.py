"""The dashboard's read of the results history: every stored result, kept or not by the history.

``trainperf history`` leaves contaminated and planted runs out of its series; the dashboard reads
them too, so that each stored run is drawn (apart, with its verdict) and none is silently dropped.
Result files are read only for the few runs the first page explains (their reason and diagnosis).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.ground.folder import RunFolder
from trainperf.store.db import Store, cases, metrics, runs


@dataclass(slots=True)
class StoredRun:
    """One stored result of a case (one point of its trend), with what the gate said of it."""

    run_key: str
    started: str
    runner: str
    runner_env: str
    case_id: str
    created: str
    outcome: str
    verdict: str | None
    planted: float
    commit: str | None
    judged_against: str | None
    message: str | None
    run_dir: str | None
    result_path: str | None
    fingerprint: dict[str, Any]
    steps: int | None
    values: dict[str, float] = field(default_factory=dict)
    kind: str = ""
    """How it is drawn (``trend_model.kind_of``), worked out once."""

    @property
    def commit_short(self) -> str:
        return (self.commit or "")[:8]


def read_runs(store: Store, metric_names: list[str], since: str | None = None) -> list[StoredRun]:
    """Every stored result of the nightly cases (A/B arms and other variants are experiments, not
    history) started at or after ``since``, with the named metrics, oldest first."""
    query = (
        sa.select(
            cases.c.id,
            runs.c.run_key,
            runs.c.started,
            runs.c.runner,
            runs.c.runner_env,
            cases.c.case_id,
            cases.c.created,
            cases.c.outcome,
            cases.c.verdict,
            cases.c.planted,
            runs.c.commit_id,
            cases.c.judged_against,
            cases.c.message,
            runs.c.run_dir,
            cases.c.result_path,
            # As text: the cases of one run share their fingerprint, decoded once (``_decoded``).
            sa.cast(cases.c.fingerprint, sa.Text),
            cases.c.steps,
        )
        .join(runs, runs.c.id == cases.c.run_id)
        .where(cases.c.variant == "")
        .order_by(runs.c.started, cases.c.seq, cases.c.id)
    )
    if since:
        query = query.where(runs.c.started >= since)
    with store.reading() as conn:
        by_row = {row[0]: StoredRun(*list(row[1:])) for row in conn.execute(query).all()}
        for case_row, name, value in _metric_rows(conn, metric_names):
            run = by_row.get(case_row)
            if run is not None:  # the rows of results not read above (variants, earlier runs)
                run.values[name] = value
    for run in by_row.values():
        run.planted = float(run.planted or 0.0)
        run.fingerprint = _decoded(run.fingerprint) if isinstance(run.fingerprint, str) else {}
    return list(by_row.values())


def _metric_rows(conn: Connection, names: list[str]) -> list[Any]:
    """(case row, name, value) of the named metrics, through the driver's own cursor: a year is
    ~250,000 rows, and SQLAlchemy's row objects took half the time of the whole read. The names
    are the dashboard's own, written into the statement as literals (checked to be plain words)."""
    if not all(re.fullmatch(r"\w+", name) for name in names):
        raise ValueError(f"metric names must be plain words: {names}")
    listed = ", ".join(f"'{name}'" for name in names)
    driver = conn.connection.dbapi_connection
    assert driver is not None  # an open connection of the store
    cursor = driver.cursor()
    try:
        cursor.execute(f"SELECT case_row, name, value FROM {metrics.name} WHERE name IN ({listed})")
        return list(cursor.fetchall())
    finally:
        cursor.close()


@functools.lru_cache(maxsize=4096)
def _decoded(text: str) -> dict[str, Any]:
    """A stored fingerprint; equal texts give the one dict (never changed by its readers)."""
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


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
        verdict = json.loads(path.read_text()).get("verdict") or {}
    except (OSError, ValueError):
        return Explanation()
    diagnosis = verdict.get("diagnosis") or {}
    line = diagnosis.get("line", "") if isinstance(diagnosis, dict) else ""
    return Explanation(str(verdict.get("reason") or ""), str(line).removeprefix("diagnosis: "), True)
