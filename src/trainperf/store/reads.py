"""The results history's reads of cases and runs: a case's stored results, a run's cases, the list
of runs, a class's timeline; and the one query every read of stored results starts from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.judge.metrics import STEP_TIME
from trainperf.result import MetricValue
from trainperf.store.records import EVERY_RESULT, ResultFilter, StoredCase, TimelineRow
from trainperf.store.schema import cases, metrics, runs
from trainperf.store.sql import SqlStoreBase

# A stored result's row id, its run's key, start, runner and machine, and its case id: the columns
# every read of stored results starts with (``result_select``).
IDENTITY = (cases.c.id, runs.c.run_key, runs.c.started, runs.c.runner, runs.c.runner_env, cases.c.case_id)


def result_select(*columns: Any) -> sa.Select[Any]:
    """Stored case results with their run: ``IDENTITY``, then ``columns`` (a read's own, of either table)."""
    return sa.select(*IDENTITY, *columns).join(runs, runs.c.id == cases.c.run_id)


class SqlCaseReads(SqlStoreBase):
    """The reads of cases and runs of ``HistoryStore`` (``store/interface.py`` says what each returns)."""

    def stored_cases(self, case_id: str, which: ResultFilter = EVERY_RESULT) -> list[StoredCase]:
        query = (
            _case_query()
            .where(cases.c.case_id == case_id, cases.c.variant.in_(list(which.variants)))
            .order_by(runs.c.started.desc(), cases.c.seq.desc(), cases.c.id.desc())
        )
        if which.runner is not None:
            query = query.where(runs.c.runner == which.runner)
        if which.accepted_only:
            query = query.where(cases.c.accepted.is_(True))
        if which.last is not None:
            query = query.limit(which.last)
        with self.reading() as conn:
            found = [StoredCase(*row) for row in conn.execute(query)]
            _attach_metrics(conn, found, which.with_metrics)
        found.reverse()
        return found

    def run_cases(self, run_key: str) -> list[StoredCase]:
        with self.reading() as conn:
            found = [
                StoredCase(*row)
                for row in conn.execute(
                    _case_query().where(runs.c.run_key == run_key).order_by(cases.c.seq, cases.c.id)
                )
            ]
            _attach_metrics(conn, found, None)
        return found

    def list_runs(self) -> list[dict[str, Any]]:
        query = sa.select(
            runs.c.run_key,
            runs.c.kind,
            runs.c.started,
            runs.c.runner,
            runs.c.gpu_class,
            runs.c.run_dir,
            runs.c.fingerprint,
        ).order_by(runs.c.started, runs.c.id)
        with self.reading() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def class_timeline(self, gpu_class: str, *, before: str, last_runs: int = 30) -> list[TimelineRow]:
        recent = (
            sa.select(runs.c.id)
            .where(
                runs.c.gpu_class == gpu_class, runs.c.started < before, runs.c.kind.in_(["pytest", "cliff"])
            )
            .order_by(runs.c.started.desc(), runs.c.id.desc())
            .limit(last_runs)
            .subquery()
        )
        step = metrics.alias("step")
        query = (
            sa.select(runs.c.id, runs.c.started, runs.c.ended, cases.c.case_id, cases.c.created, step.c.value)
            .join(runs, runs.c.id == cases.c.run_id)
            .join(recent, recent.c.id == runs.c.id)
            .outerjoin(step, sa.and_(step.c.case_row == cases.c.id, step.c.name == STEP_TIME))
            .where(cases.c.variant == "")
            .order_by(runs.c.started, runs.c.id, cases.c.created, cases.c.seq)
        )
        with self.reading() as conn:
            return [TimelineRow(*row) for row in conn.execute(query)]

    def class_verdicts(self, gpu_class: str, *, before: str) -> list[tuple[str, str, str]]:
        query = (
            sa.select(cases.c.case_id, cases.c.created, cases.c.verdict)
            .join(runs, runs.c.id == cases.c.run_id)
            .where(
                runs.c.gpu_class == gpu_class,
                runs.c.started < before,
                runs.c.kind.in_(["pytest", "cliff"]),
                cases.c.variant == "",
                cases.c.planted == 0,
                cases.c.emulated.is_(None),
            )
            .order_by(cases.c.created, cases.c.id)
        )
        with self.reading() as conn:
            return [
                (str(case), str(created), str(verdict or ""))
                for case, created, verdict in conn.execute(query)
            ]

    def case_ids(self) -> list[str]:
        with self.reading() as conn:
            return [row[0] for row in conn.execute(sa.select(cases.c.case_id).distinct())]


# The functional forms, ``list_runs(store)`` and so on, as the store's self-tests read.
run_cases = SqlCaseReads.run_cases
list_runs = SqlCaseReads.list_runs
class_timeline = SqlCaseReads.class_timeline


def stored_cases(store: SqlCaseReads, case_id: str, **which: Any) -> list[StoredCase]:
    """``store.stored_cases`` with the filter's fields as keywords, as the store's self-tests read."""
    return store.stored_cases(case_id, ResultFilter(**which))


def _case_query() -> sa.Select[Any]:
    return result_select(
        cases.c.variant,
        cases.c.outcome,
        cases.c.verdict,
        cases.c.accepted,
        runs.c.run_dir,
        cases.c.result_path,
        cases.c.fingerprint,
        cases.c.effective_config,
    )


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
