"""The results history's write side: a run and its cases, written idempotently.

A run is written as each case ends (``record_case``), and again, idempotently, by ``trainperf
ingest``: a run is keyed by when and where it started, a case result by its case, creation time
and machine (``store/records.py``), so the same result reached twice (the live write, then its run
folder) is stored once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.judge import stats
from trainperf.judge.changepoints import median_interval
from trainperf.judge.metrics import STEP_TIME
from trainperf.redact import redact_argv, redacted
from trainperf.result import CaseResult, MetricValue, requested_steps
from trainperf.store.records import CaseItem, RunInfo, accepted, config_hash, result_key, runner_env
from trainperf.store.schema import cases, metrics, runs
from trainperf.store.sql import SqlStoreBase

SUMMARY_COLUMNS = ("count", "median", "mean", "minimum", "p10", "p90", "robust_cv", "ci_low", "ci_high")


class SqlWrites(SqlStoreBase):
    """The writes of ``HistoryStore`` (``store/interface.py`` says what each does), each one transaction."""

    def record_case(self, run: RunInfo, result: CaseResult, result_path: str | None = None) -> bool:
        return self.write_cases(run, [CaseItem(result, result_path)]) == 1

    def write_run(self, run: RunInfo) -> None:
        with self.writing() as conn:
            _write_run(conn, run)

    def write_cases(self, run: RunInfo, items: Sequence[CaseItem]) -> int:
        with self.writing() as conn:
            return _write_cases(conn, _write_run(conn, run), items)

    def stored_case_count(self, run_key: str) -> int:
        query = (
            sa.select(sa.func.count(cases.c.id))
            .join(runs, runs.c.id == cases.c.run_id)
            .where(runs.c.run_key == run_key)
        )
        with self.reading() as conn:
            return int(conn.execute(query).scalar() or 0)


# The functional form, ``record_case(store, run, result)``, as the store's self-tests write.
record_case = SqlWrites.record_case


def _write_run(conn: Connection, run: RunInfo) -> int:
    """The run's row id, inserting the run when it is new; a known run gets its end time updated."""
    fp = run.fingerprint
    values = {
        "run_key": run.run_key,
        "kind": run.kind,
        "started": run.started,
        "ended": run.ended,
        "gpu_class": run.gpu_class,
        "runner": run.runner,
        "runner_env": runner_env(fp),
        "host": fp.get("hostname"),
        "gpu_name": fp.get("gpu_name"),
        "gpu_uuid": fp.get("gpu_uuid"),
        "driver": fp.get("driver"),
        "cuda_driver": fp.get("cuda_driver"),
        "cpu_model": fp.get("cpu_model"),
        "power_limit_w": fp.get("power_limit_w"),
        "commit_id": run.commit,
        "fingerprint": redacted(fp),
        "run_dir": run.run_dir,
        # Every run row passes here (a live session, an ingest of an older folder, a merge).
        "argv": redact_argv(run.argv) if run.argv is not None else None,
    }
    conn.execute(_insert(conn, runs).values(**values).on_conflict_do_nothing(index_elements=["run_key"]))
    row = conn.execute(sa.select(runs.c.id, runs.c.ended).where(runs.c.run_key == run.run_key)).one()
    if run.ended and (row.ended or "") < run.ended:
        conn.execute(runs.update().where(runs.c.id == row.id).values(ended=run.ended))
    return int(row.id)


def _write_cases(conn: Connection, run_row: int, items: Sequence[CaseItem]) -> int:
    """Insert the case results not stored yet, and their metrics, in two batched statements.
    Results already there (by key) are skipped; the number inserted is returned."""
    rows = {}
    for item in items:
        result, key = item.result, result_key(item.result, item.variant)
        rows[key] = (
            item,
            {
                "run_id": run_row,
                "result_key": key,
                "case_id": result.case_id,
                "variant": item.variant,
                "seq": item.seq,
                "created": result.created,
                "outcome": result.outcome,
                # Not judged is null in the history, as it always was.
                "verdict": result.verdict.verdict or None,
                "judged_against": result.verdict.judged_against or result.verdict.reason or None,
                "accepted": accepted(result),
                "planted": result.planted_slowdown,
                "emulated": result.emulated,
                "config_hash": config_hash(result.effective_config.to_dict()),
                "effective_config": result.effective_config.to_dict(),
                "fingerprint": result.fingerprint.to_dict(),
                "step_times": _step_times(result),
                "steps": requested_steps(result),
                "result_path": item.result_path,
                "message": result.message,
            },
        )
    if not rows:
        return 0
    known = set(
        conn.execute(sa.select(cases.c.result_key).where(cases.c.result_key.in_(list(rows)))).scalars()
    )
    new = [values for key, (_item, values) in rows.items() if key not in known]
    if not new:
        return 0
    statement = (
        _insert(conn, cases)
        .on_conflict_do_nothing(index_elements=["result_key"])
        .returning(cases.c.id, cases.c.result_key)
    )
    inserted = conn.execute(statement, new).all()
    metric_rows = [
        metric_row(case_row, name, value, verdict=_own_verdicts(rows[key][0].result).get(name))
        for case_row, key in inserted
        for name, value in rows[key][0].result.metrics.items()
    ]
    if metric_rows:
        _insert_rows(conn, metrics, metric_rows)
    return len(inserted)


def _insert_rows(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """A plain DB-API executemany: a year of history is ~300,000 metric rows, and SQLAlchemy's
    per-row parameter processing took most of the ingest time. JSON columns are encoded here."""
    names = list(rows[0])
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    json_columns = {c.name for c in table.columns if isinstance(c.type, sa.JSON)}
    encoded = [
        tuple(json.dumps(row[n]) if n in json_columns and row[n] is not None else row[n] for n in names)
        for row in rows
    ]
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
    conn.exec_driver_sql(sql, encoded)


def _step_times(result: CaseResult) -> list[float] | None:
    step = result.metrics.get(STEP_TIME)
    return list(step.samples) if step is not None and step.samples else None


def _own_verdicts(result: CaseResult) -> dict[str, str]:
    """Each judged metric's own verdict (a memory-only regression leaves step time ``pass``)."""
    return {m.metric: m.verdict for m in result.verdict.metrics if m.verdict}


def metric_row(case_row: int, name: str, value: MetricValue, verdict: str | None = None) -> dict[str, Any]:
    """A metric with its sample summary, 95% interval of the median (where it has samples) and
    its own verdict (None where it was not judged)."""
    # The verdict is kept even when None (not judged): a reader then knows it was looked for.
    detail: dict[str, Any] = {"verdict": verdict}
    if value.samples or (value.per_run and len(value.per_run) > 1):
        detail.update(samples=value.samples, keys=value.keys, per_run=value.per_run)
    row: dict[str, Any] = {
        "case_row": case_row,
        "name": name,
        "value": value.value,
        "unit": value.unit,
        "detail": detail,
        **dict.fromkeys(SUMMARY_COLUMNS),
    }
    if value.samples:
        summary = stats.summarize(value.samples)
        low, high = median_interval(value.samples)
        row.update(
            count=summary.count,
            median=summary.median,
            mean=summary.mean,
            minimum=summary.minimum,
            p10=summary.p10,
            p90=summary.p90,
            robust_cv=summary.robust_cv,
            ci_low=low,
            ci_high=high,
        )
    return row


def _insert(conn: Connection, table: sa.Table) -> Any:
    """The back end's INSERT, which has ON CONFLICT DO NOTHING: concurrent writers of one row
    store it once."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert(table) if conn.dialect.name == "postgresql" else sqlite.insert(table)
