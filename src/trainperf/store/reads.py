"""The results history's read side: a case's stored results, a run's cases, the list of runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.result import MetricValue
from trainperf.store.db import Store, cases, metrics, runs


@dataclass(slots=True)
class StoredCase:
    """A case result read back from the store, with its run's identity."""

    row: int
    run_key: str
    started: str
    runner: str
    runner_env: str
    case_id: str
    variant: str
    outcome: str
    verdict: str | None
    accepted: bool
    run_dir: str | None
    result_path: str | None
    fingerprint: dict[str, Any]
    effective_config: dict[str, Any]
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """95% interval of each metric's median, where it has samples."""


def stored_cases(
    store: Store,
    case_id: str,
    *,
    runner: str | None = None,
    accepted_only: bool = False,
    last: int | None = None,
    with_metrics: Sequence[str] | None = None,
    variants: Sequence[str] = ("",),
) -> list[StoredCase]:
    """The stored results of a case, oldest first (optionally of one runner, accepted only, the last N)."""
    query = (
        _case_query()
        .where(cases.c.case_id == case_id, cases.c.variant.in_(list(variants)))
        .order_by(runs.c.started.desc(), cases.c.seq.desc(), cases.c.id.desc())
    )
    if runner is not None:
        query = query.where(runs.c.runner == runner)
    if accepted_only:
        query = query.where(cases.c.accepted.is_(True))
    if last is not None:
        query = query.limit(last)
    with store.reading() as conn:
        found = [StoredCase(*row) for row in conn.execute(query)]
        _attach_metrics(conn, found, with_metrics)
    found.reverse()
    return found


def _case_query() -> sa.Select[Any]:
    return sa.select(
        cases.c.id,
        runs.c.run_key,
        runs.c.started,
        runs.c.runner,
        runs.c.runner_env,
        cases.c.case_id,
        cases.c.variant,
        cases.c.outcome,
        cases.c.verdict,
        cases.c.accepted,
        runs.c.run_dir,
        cases.c.result_path,
        cases.c.fingerprint,
        cases.c.effective_config,
    ).join(runs, runs.c.id == cases.c.run_id)


def run_cases(store: Store, key: str) -> list[StoredCase]:
    """Every case result of one run, in the order they ended."""
    with store.reading() as conn:
        found = [
            StoredCase(*row)
            for row in conn.execute(
                _case_query().where(runs.c.run_key == key).order_by(cases.c.seq, cases.c.id)
            )
        ]
        _attach_metrics(conn, found, None)
    return found


def list_runs(store: Store) -> list[dict[str, Any]]:
    """Every stored run, oldest first: key, kind, start, runner, class, folder and fingerprint."""
    query = sa.select(
        runs.c.run_key,
        runs.c.kind,
        runs.c.started,
        runs.c.runner,
        runs.c.gpu_class,
        runs.c.run_dir,
        runs.c.fingerprint,
    ).order_by(runs.c.started, runs.c.id)
    with store.reading() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def _attach_metrics(conn: Connection, found: list[StoredCase], names: Sequence[str] | None) -> None:
    by_row = {case.row: case for case in found}
    if not by_row:
        return
    query = sa.select(
        metrics.c.case_row,
        metrics.c.name,
        metrics.c.value,
        metrics.c.unit,
        metrics.c.detail,
        metrics.c.ci_low,
        metrics.c.ci_high,
    ).where(metrics.c.case_row.in_(list(by_row)))
    if names is not None:
        query = query.where(metrics.c.name.in_(list(names)))
    for row in conn.execute(query):
        case = by_row[row.case_row]
        detail = row.detail or {}
        case.metrics[row.name] = MetricValue(
            row.value,
            row.unit or "",
            detail.get("samples"),
            detail.get("per_run") or [row.value],
            detail.get("keys"),
        )
        if row.ci_low is not None and row.ci_high is not None:
            case.intervals[row.name] = (row.ci_low, row.ci_high)


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One stored case result placed in its run: when its run started and ended, when it started,
    and its step time (for change points)."""

    run_row: int
    run_started: str
    run_ended: str | None
    case_id: str
    created: str
    step_time_s: float | None


def class_timeline(store: Store, gpu_class: str, *, before: str, last_runs: int = 30) -> list[TimelineRow]:
    """The case results of a class's last ``last_runs`` runs (every runner) that started before
    ``before``, in run order and, within a run, in the order the cases started."""
    recent = (
        sa.select(runs.c.id)
        .where(runs.c.gpu_class == gpu_class, runs.c.started < before, runs.c.kind.in_(["pytest", "cliff"]))
        .order_by(runs.c.started.desc(), runs.c.id.desc())
        .limit(last_runs)
        .subquery()
    )
    step = metrics.alias("step")
    query = (
        sa.select(runs.c.id, runs.c.started, runs.c.ended, cases.c.case_id, cases.c.created, step.c.value)
        .join(runs, runs.c.id == cases.c.run_id)
        .join(recent, recent.c.id == runs.c.id)
        .outerjoin(step, sa.and_(step.c.case_row == cases.c.id, step.c.name == "step_time_s"))
        .where(cases.c.variant == "")
        .order_by(runs.c.started, runs.c.id, cases.c.created, cases.c.seq)
    )
    with store.reading() as conn:
        return [TimelineRow(*row) for row in conn.execute(query)]
