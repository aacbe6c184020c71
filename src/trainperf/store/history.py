"""The results history's write side: identify a run and its runner, write the run and its cases.

A run is written as each case ends (``record_case``), and again, idempotently, by ``trainperf
ingest``: a run is keyed by when and where it started, a case result by its case, creation time
and machine, so the same result reached twice (the live write, then its run folder) is stored once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.judge import stats
from trainperf.judge.changepoints import median_interval
from trainperf.redact import redact_argv, redacted
from trainperf.result import CaseResult, MetricValue, requested_steps
from trainperf.store.db import Store, cases, metrics, runs

RUNNER_ENV = "TRAINPERF_RUNNER"
# The machine under a runner label: a change of any of these is an environment change, never pooled.
HARDWARE_KEYS = ("gpu_name", "gpu_uuid", "driver", "cuda_driver", "cpu_model", "power_limit_w")
# Verdicts that keep a run out of the history baseline: a regression must not become the new normal.
REJECTED_VERDICTS = ("regressed", "outcome-changed", "config-changed", "contaminated")
SUMMARY_COLUMNS = ("count", "median", "mean", "minimum", "p10", "p90", "robust_cv", "ci_low", "ci_high")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as the store keeps it (a pytest session, ``trainperf ab``, fidelity, a cliff search)."""

    run_key: str
    kind: str
    started: str
    fingerprint: dict[str, Any]
    runner: str
    gpu_class: str | None = None
    ended: str | None = None
    commit: str | None = None
    run_dir: str | None = None
    argv: list[str] | None = None


def runner_label(
    fingerprint: dict[str, Any], explicit: str | None = None, env: dict[str, str] | None = None
) -> str:
    """The runner's identity: ``--perf-runner`` > ``TRAINPERF_RUNNER`` > host and GPU UUID."""
    environ = os.environ if env is None else env
    label = explicit or environ.get(RUNNER_ENV)
    if label:
        return label
    return f"{fingerprint.get('hostname') or 'unknown-host'}/{fingerprint.get('gpu_uuid') or 'cpu'}"


def runner_env(fingerprint: dict[str, Any]) -> str:
    """A short hash of the hardware and driver under a runner label."""
    return _digest(json.dumps({k: fingerprint.get(k) for k in HARDWARE_KEYS}, sort_keys=True))[:16]


def config_hash(effective_config: dict[str, Any]) -> str:
    return _digest(json.dumps(effective_config, sort_keys=True, default=str))[:16]


def result_key(result: CaseResult, variant: str = "") -> str:
    fp = result.fingerprint
    return _digest(f"{result.case_id}|{variant}|{result.created}|{fp.get('hostname')}|{fp.get('gpu_uuid')}")


def run_key(started: str, fingerprint: dict[str, Any], extra: str = "") -> str:
    return _digest(f"{started}|{fingerprint.get('hostname')}|{fingerprint.get('gpu_uuid')}|{extra}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def accepted(result: CaseResult) -> bool:
    """Whether a result may stand in a history baseline: it ran, untouched, and was not judged worse."""
    return (
        result.outcome == "ok"
        and not result.planted_slowdown
        and not result.planted  # a --perf-plant regression is a drill, never the runner's normal
        and not result.emulated
        and result.verdict.get("verdict") not in REJECTED_VERDICTS
    )


def record_case(store: Store, run: RunInfo, result: CaseResult, result_path: str | None = None) -> bool:
    """Write one finished case (and its run on first use). True when it was new to the store."""
    with store.writing() as conn:
        run_row = write_run(conn, run)
        return write_case(conn, run_row, result, result_path=result_path)


def write_run(conn: Connection, run: RunInfo) -> int:
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


@dataclass(slots=True)
class CaseItem:
    """A case result to store, with where its file is and its place in the run."""

    result: CaseResult
    result_path: str | None = None
    variant: str = ""
    seq: int = 0


def write_case(conn: Connection, run_row: int, result: CaseResult, *, result_path: str | None = None) -> bool:
    """Insert one case result and its metrics; False (and nothing written) when it is already stored."""
    return write_cases(conn, run_row, [CaseItem(result, result_path)]) == 1


def write_cases(conn: Connection, run_row: int, items: Sequence[CaseItem]) -> int:
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
                "verdict": result.verdict.get("verdict"),
                "judged_against": result.verdict.get("judged_against") or result.verdict.get("reason"),
                "accepted": accepted(result),
                "planted": result.planted_slowdown,
                "emulated": result.emulated,
                "config_hash": config_hash(result.effective_config),
                "effective_config": result.effective_config,
                "fingerprint": result.fingerprint,
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
        metric_row(case_row, name, value, verdict=metric_verdicts(rows[key][0].result).get(name))
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


def stored_case_count(conn: Connection, key: str) -> int:
    """How many case results the run with this key has in the store (0 for an unknown run)."""
    query = (
        sa.select(sa.func.count(cases.c.id))
        .join(runs, runs.c.id == cases.c.run_id)
        .where(runs.c.run_key == key)
    )
    return int(conn.execute(query).scalar() or 0)


def _step_times(result: CaseResult) -> list[float] | None:
    step = result.metrics.get("step_time_s")
    return list(step.samples) if step is not None and step.samples else None


def metric_verdicts(result: CaseResult) -> dict[str, str]:
    """Each judged metric's own verdict (a memory-only regression leaves step time ``pass``)."""
    judged = result.verdict.get("metrics") or []
    return {m["metric"]: str(m["verdict"]) for m in judged if isinstance(m, dict) and m.get("verdict")}


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
