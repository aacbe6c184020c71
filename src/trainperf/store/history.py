"""The results history: write a run and its cases, read a case x metric series, pool a baseline.

A run is written as each case ends (``record_case``), and again, idempotently, by ``trainperf
ingest``: a run is keyed by when and where it started, a case result by its case, creation time
and machine, so the same result reached twice (the live write, then its run folder) is stored once.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from trainperf.judge import stats
from trainperf.judge.changepoints import median_interval
from trainperf.judge.fingerprint import environment_changes
from trainperf.result import CaseResult, MetricValue
from trainperf.store.db import Store, cases, metrics, runs

RUNNER_ENV = "TRAINPERF_RUNNER"
DEFAULT_HISTORY_RUNS = 10
# The machine under a runner label: a change of any of these is an environment change, never pooled.
HARDWARE_KEYS = ("gpu_name", "gpu_uuid", "driver", "cuda_driver", "cpu_model", "power_limit_w")
# Verdicts that keep a run out of the history baseline: a regression must not become the new normal.
REJECTED_VERDICTS = ("regressed", "outcome-changed", "config-changed")
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


def checkout_commit(root: Path) -> dict[str, Any]:
    """pytest-benchmark's ``commit_info`` for the checkout at ``root``; empty outside a git checkout."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        commit = git("rev-parse", "HEAD")
        if not commit:
            return {}
        return {
            "id": commit,
            "time": git("show", "-s", "--format=%cI", "HEAD"),
            "author_time": git("show", "-s", "--format=%aI", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "project": root.resolve().name,
            "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        }
    except (OSError, subprocess.SubprocessError):
        return {}


def accepted(result: CaseResult) -> bool:
    """Whether a result may stand in a history baseline: it ran, untouched, and was not judged worse."""
    return (
        result.outcome == "ok"
        and not result.planted_slowdown
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
        "fingerprint": fp,
        "run_dir": run.run_dir,
        "argv": run.argv,
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
        metric_row(case_row, name, value)
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


def metric_row(case_row: int, name: str, value: MetricValue) -> dict[str, Any]:
    """A metric with its sample summary and 95% interval of the median (where it has samples)."""
    detail = None
    if value.samples or (value.per_run and len(value.per_run) > 1):
        detail = {"samples": value.samples, "keys": value.keys, "per_run": value.per_run}
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
    """The back end's INSERT, which has ON CONFLICT DO NOTHING: concurrent writers of one row store it once."""
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert(table) if conn.dialect.name == "postgresql" else sqlite.insert(table)


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


def pooled_baseline(case_id: str, gpu_class: str, history: Sequence[StoredCase]) -> CaseResult:
    """One baseline from several accepted runs: each metric's samples and keys pooled (so the gate's
    paired per-step test sees each step once per run), its value the median of the runs' values."""
    latest = history[-1]
    pooled: dict[str, MetricValue] = {}
    for name in sorted({n for case in history for n in case.metrics}):
        values = [case.metrics[name] for case in history if name in case.metrics]
        samples = [s for v in values for s in (v.samples or [])]
        keys = [k for v in values for k in (v.keys or [])]
        pooled[name] = MetricValue(
            value=stats.median([v.value for v in values]),
            unit=values[-1].unit,
            samples=samples or None,
            per_run=[v.value for v in values],
            keys=keys if keys and len(keys) == len(samples) else None,
        )
    return CaseResult(
        case_id=case_id,
        case={},
        gpu_class=gpu_class,
        outcome="ok",
        metrics=pooled,
        effective_config=latest.effective_config,
        fingerprint=latest.fingerprint,
        source=f"history: {len(history)} accepted runs on runner {latest.runner}, {history[0].started} .. {latest.started}",
    )


def history_baseline(
    store: Store,
    case_id: str,
    runner: str,
    n: int = DEFAULT_HISTORY_RUNS,
    *,
    gpu_class: str = "",
    fingerprint: dict[str, Any] | None = None,
    min_runs: int = 1,
) -> tuple[CaseResult | None, str]:
    """The case's baseline pooled from its last ``n`` accepted runs on ``runner``, and what it is.

    With ``fingerprint`` (this run's), only runs on the same hardware and driver are pooled; when
    the runner's machine changed, the description says what changed. None (with the reason) when
    fewer than ``min_runs`` accepted runs remain: the caller falls back to the class's baseline."""
    history = stored_cases(store, case_id, runner=runner, accepted_only=True, last=n)
    note = ""
    if fingerprint is not None and history:
        current = runner_env(fingerprint)
        same = [case for case in history if case.runner_env == current]
        if len(same) < len(history):
            other = [case for case in history if case.runner_env != current][-1]
            changed = environment_changes(other.fingerprint, fingerprint)
            listed = ", ".join(
                f"{k} {a} -> {b}" for k, a, b in changed if k in HARDWARE_KEYS or k == "cuda_driver"
            )
            note = f"; environment changed under runner {runner} ({listed or 'hardware'}): earlier runs not pooled"
            history = same
    if len(history) < max(1, min_runs):
        have = f"{len(history)} accepted run{'s' if len(history) != 1 else ''}"
        return (
            None,
            f"{case_id} has {have} on runner {runner} (needs {max(1, min_runs)}){note}: judged against the class's baseline",
        )
    baseline = pooled_baseline(case_id, gpu_class, history)
    return (
        baseline,
        f"the last {len(history)} accepted runs on runner {runner} ({history[0].started} .. {history[-1].started}){note}",
    )


def choose_baseline(
    mode: str,
    store: Store | None,
    case_id: str,
    runner: str,
    class_baseline: CaseResult | None,
    *,
    n: int = DEFAULT_HISTORY_RUNS,
    gpu_class: str = "",
    fingerprint: dict[str, Any] | None = None,
) -> tuple[CaseResult | None, str]:
    """``--perf-baseline file|history|auto``: the baseline to judge against, and a line naming it.

    ``auto`` takes the runner's history once it holds ``n`` accepted runs, the class's file before that;
    ``history`` takes whatever accepted runs there are, and falls back to the file when there are none."""
    file_line = (
        f"the class's baseline file ({class_baseline.source or 'stored'})"
        if class_baseline
        else "no baseline"
    )
    if mode == "file" or store is None:
        return class_baseline, file_line
    need = n if mode == "auto" else 1
    pooled, described = history_baseline(
        store, case_id, runner, n, gpu_class=gpu_class, fingerprint=fingerprint, min_runs=need
    )
    if pooled is None:
        return class_baseline, f"{described} ({file_line})"
    return pooled, described
