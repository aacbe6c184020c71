"""The SQL results store: SQLAlchemy Core over a SQLite file or PostgreSQL, behind ``HistoryStore``.

Two back ends: a SQLite file (the default, one runner) and PostgreSQL (a fleet of runners writing
to one place, through psycopg 3). This module opens one (``open_store``), creates its schema
(``store/schema.py``) on first use and migrates an older one; ``Store`` is the connection
(``store/sql.py``) with the writes (``store/history_writes.py``) and the reads (``store/reads.py``,
``store/series_reads.py``) the interface names (``store/interface.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from trainperf.store.history_writes import SqlWrites
from trainperf.store.reads import SqlCaseReads
from trainperf.store.schema import SCHEMA_VERSION, cases, metadata, schema_info
from trainperf.store.series_reads import SqlSeriesReads
from trainperf.store.sql import READ_ONLY
from trainperf.store.url import DEFAULT_LOCK_TIMEOUT_S, StoreError, normalise_url, shown

# Any constant: the PostgreSQL advisory lock that serialises schema creation across runners.
SCHEMA_LOCK_ID = 0x7472_6E70


class Store(SqlWrites, SqlCaseReads, SqlSeriesReads):
    """The SQL store: a ``HistoryStore`` (``store/interface.py``) over its engine."""


def open_store(url: str, *, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S, create: bool = True) -> Store:
    """Connect, create the schema on first use or migrate an older one; one line for any failure."""
    url = normalise_url(url)
    engine = _engine(url, lock_timeout_s, create)
    store = Store(engine, url)
    try:
        with store.writing() as conn:
            _ensure_schema(conn, url)
    except BaseException:
        engine.dispose()
        raise
    return store


def _engine(url: str, lock_timeout_s: float, create: bool) -> Engine:
    if url.startswith("sqlite:"):
        database = sa.engine.make_url(url).database
        if database and database != ":memory:":
            path = Path(database)
            if not path.exists() and not create:
                raise StoreError(
                    f"no results store at {path}: run `trainperf ingest RUN_DIR --store {url}` first"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": lock_timeout_s}, poolclass=sa.pool.NullPool)
        _sqlite_locking(engine)
        return engine
    return sa.create_engine(
        url, connect_args={"connect_timeout": max(1, int(lock_timeout_s))}, pool_pre_ping=True
    )


def _sqlite_locking(engine: Engine) -> None:
    """WAL lets readers run beside the one writer; BEGIN IMMEDIATE takes the write lock at the
    start of a transaction, so two writers queue (up to the timeout) instead of deadlocking."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE")


def _ensure_schema(conn: Connection, url: str) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:id)"), {"id": SCHEMA_LOCK_ID})
    if not sa.inspect(conn).has_table(schema_info.name):
        metadata.create_all(conn)
        conn.execute(schema_info.insert().values(name="version", value=str(SCHEMA_VERSION)))
        return
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"the results store at {shown(url)} has schema version {found}, "
            f"this trainperf knows {SCHEMA_VERSION}: upgrade trainperf (nothing was written)"
        )
    for version in range(found, SCHEMA_VERSION):
        MIGRATIONS[version](conn)
        conn.execute(
            schema_info.update().where(schema_info.c.name == "version").values(value=str(version + 1))
        )


def schema_version(conn: Connection) -> int:
    value = conn.execute(sa.select(schema_info.c.value).where(schema_info.c.name == "version")).scalar()
    return int(value) if value is not None else 0


MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    # version N -> N+1. Version 0: a schema table without a version row (an interrupted first use).
    0: lambda conn: metadata.create_all(conn),
    1: lambda conn: _add_column(conn, cases.name, "steps", "INTEGER"),
}


def _add_column(conn: Connection, table: str, column: str, sql_type: str) -> None:
    """A column added to a table of an older store (none where version 0's create_all made it).
    Results stored before it hold NULL there."""
    if column not in {found["name"] for found in sa.inspect(conn).get_columns(table)}:
        conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))
