"""The results history's series reads: every stored result of the nightly cases with the metrics
asked for (``trainperf history``, the dashboard), the results the series leave out, and each
result's own verdict on a metric.

One query reads the results (``_results``); a case's series is what remains of it without the
results kept out (``StoredRun.in_series``), and the dashboard draws them all.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.store.reads import IDENTITY, result_select
from trainperf.store.records import LeftOut, MetricVerdict, Point, StoredRun
from trainperf.store.schema import cases, metrics, runs
from trainperf.store.sql import SqlStoreBase

# A result's columns after its ``IDENTITY``: the rest of a series ``Point``'s, in its order, then
# the rest of a ``StoredRun``'s.
POINT_COLUMNS = (
    cases.c.created,
    cases.c.outcome,
    cases.c.verdict,
    runs.c.run_dir,
    # As text: the cases of one run share their fingerprint, decoded once (``_decoded``).
    sa.cast(cases.c.fingerprint, sa.Text),
    cases.c.steps,
)
RUN_COLUMNS = (
    cases.c.planted,
    runs.c.commit_id,
    cases.c.judged_against,
    cases.c.message,
    cases.c.result_path,
)


class SqlSeriesReads(SqlStoreBase):
    """The series reads of ``HistoryStore`` (``store/interface.py`` says what each returns)."""

    def stored_runs(
        self, metric_names: Sequence[str], *, since: str | None = None, case_id: str | None = None
    ) -> list[StoredRun]:
        with self.reading() as conn:
            return _results(conn, list(metric_names), since, case_id)

    def history_points(self, metric_names: Sequence[str], case_id: str | None = None) -> list[Point]:
        return [run for run in self.stored_runs(metric_names, case_id=case_id) if run.in_series]

    def left_out(self, case_id: str) -> list[LeftOut]:
        return [
            LeftOut(
                run.created, run.runner, run.run_dir, "planted slowdown" if run.planted else "contaminated"
            )
            for run in self.stored_runs([], case_id=case_id)
            if not run.in_series
        ]

    def metric_verdicts(self, case_id: str, metric: str) -> list[MetricVerdict]:
        query = (
            sa.select(runs.c.run_key, cases.c.created, metrics.c.detail, cases.c.result_path)
            .join(runs, runs.c.id == cases.c.run_id)
            .join(metrics, metrics.c.case_row == cases.c.id)
            .where(cases.c.case_id == case_id, metrics.c.name == metric)
        )
        with self.reading() as conn:
            rows = list(conn.execute(query))
        return [
            MetricVerdict(run_key, created, detail.get("verdict"), True, result_path)
            if isinstance(detail, dict) and "verdict" in detail
            else MetricVerdict(run_key, created, None, False, result_path)
            for run_key, created, detail, result_path in rows
        ]


# The functional form, ``history_points(store, names)``, as the store's self-tests read.
history_points = SqlSeriesReads.history_points


def _results(conn: Connection, names: list[str], since: str | None, case_id: str | None) -> list[StoredRun]:
    """The nightly cases' results (of one case, or all; started at or after ``since``) with the
    named metrics, oldest first."""
    query = (
        result_select(*POINT_COLUMNS, *RUN_COLUMNS)
        .where(cases.c.variant == "")
        .order_by(runs.c.started, cases.c.seq, cases.c.id)
    )
    if since:
        query = query.where(runs.c.started >= since)
    if case_id is not None:
        query = query.where(cases.c.case_id == case_id)
    # Positional (the dashboard reads every result): the point's fields, its values (filled
    # below), then the rest of the stored run's.
    split = len(IDENTITY) + len(POINT_COLUMNS)
    by_row = {row[0]: StoredRun(*(*row[1:split], {}, *row[split:])) for row in conn.execute(query).all()}
    for case_row, name, value in _metric_rows(conn, names, case_id) if names else []:
        run = by_row.get(case_row)
        if run is not None:  # the rows of results not read above (variants, earlier runs)
            run.values[name] = value
    for run in by_row.values():
        run.planted = float(run.planted or 0.0)
        run.fingerprint = _decoded(run.fingerprint) if isinstance(run.fingerprint, str) else {}
    return list(by_row.values())


def _metric_rows(conn: Connection, names: list[str], case_id: str | None) -> list[Any]:
    """(case row, name, value) of the named metrics (of one case's results, or all)."""
    if case_id is not None or not all(re.fullmatch(r"\w+", name) for name in names):
        query = sa.select(metrics.c.case_row, metrics.c.name, metrics.c.value).where(
            metrics.c.name.in_(names)
        )
        if case_id is not None:
            query = query.join(cases, cases.c.id == metrics.c.case_row).where(cases.c.case_id == case_id)
        return list(conn.execute(query))
    return _all_metric_rows(conn, names)


def _all_metric_rows(conn: Connection, names: list[str]) -> list[Any]:
    """Every result's named metrics through the driver's own cursor: a year is ~250,000 rows, and
    SQLAlchemy's row objects took half the time of the whole read. The names are written into the
    statement as literals, so only plain words come here."""
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
