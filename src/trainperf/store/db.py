"""The results store's database: where it is, its schema and version, and one-line errors.

Two back ends through SQLAlchemy Core: a SQLite file (the default, one runner) and PostgreSQL
(a fleet of runners writing to one place, through psycopg 3). The URL is read straight down:
``--perf-store`` / ``--store`` > ``TRAINPERF_STORE`` > ini ``perf_store`` > the default file.

The default file lives in the per-user data directory (``~/.local/share/trainperf/history.sqlite``
on Linux, via platformdirs): a nightly runner keeps it between runs, where the checkout and its
``reports/`` are wiped by CI and ``/tmp`` by a reboot.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from trainperf.errors import TrainperfError
from trainperf.redact import redact_text

SCHEMA_VERSION = 2
STORE_ENV = "TRAINPERF_STORE"
DEFAULT_LOCK_TIMEOUT_S = 30.0
# Any constant: the PostgreSQL advisory lock that serialises schema creation across runners.
SCHEMA_LOCK_ID = 0x7472_6E70
READ_ONLY = "trainperf_read_only"

metadata = sa.MetaData()

schema_info = sa.Table(
    "trainperf_schema",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.String(64), nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_key", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("started", sa.String(32), nullable=False),
    sa.Column("ended", sa.String(32)),
    sa.Column("gpu_class", sa.String(32)),
    sa.Column("runner", sa.String(200), nullable=False),
    sa.Column("runner_env", sa.String(16), nullable=False),
    sa.Column("host", sa.String(200)),
    sa.Column("gpu_name", sa.String(200)),
    sa.Column("gpu_uuid", sa.String(200)),
    sa.Column("driver", sa.String(64)),
    sa.Column("cuda_driver", sa.String(64)),
    sa.Column("cpu_model", sa.String(200)),
    sa.Column("power_limit_w", sa.Float),
    sa.Column("commit_id", sa.String(64)),
    sa.Column("fingerprint", sa.JSON),
    sa.Column("run_dir", sa.Text),
    sa.Column("argv", sa.JSON),
)
sa.Index("runs_started", runs.c.started)

cases = sa.Table(
    "cases",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("result_key", sa.String(64), nullable=False, unique=True),
    sa.Column("case_id", sa.String(300), nullable=False),
    sa.Column("variant", sa.String(32), nullable=False, default=""),
    sa.Column("seq", sa.Integer, nullable=False, default=0),
    sa.Column("created", sa.String(32), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("verdict", sa.String(32)),
    sa.Column("judged_against", sa.Text),
    sa.Column("accepted", sa.Boolean, nullable=False),
    sa.Column("planted", sa.Float, nullable=False, default=0.0),
    sa.Column("emulated", sa.String(32)),
    sa.Column("config_hash", sa.String(16)),
    sa.Column("effective_config", sa.JSON),
    sa.Column("fingerprint", sa.JSON),
    sa.Column("step_times", sa.JSON),
    sa.Column("steps", sa.Integer),
    # The steps the case's runs were told to run: a planned run (--perf-plan-steps) measures fewer,
    # and its tokens/s and energy per token cover its first steps, so a series breaks where it changes.
    sa.Column("result_path", sa.Text),
    sa.Column("message", sa.Text),
)
sa.Index("cases_case_created", cases.c.case_id, cases.c.created)
sa.Index("cases_run", cases.c.run_id)

metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("case_row", sa.Integer, sa.ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(16)),
    sa.Column("count", sa.Integer),
    sa.Column("median", sa.Float),
    sa.Column("mean", sa.Float),
    sa.Column("minimum", sa.Float),
    sa.Column("p10", sa.Float),
    sa.Column("p90", sa.Float),
    sa.Column("robust_cv", sa.Float),
    sa.Column("ci_low", sa.Float),
    sa.Column("ci_high", sa.Float),
    sa.Column("detail", sa.JSON(none_as_null=True)),
    # {"samples": [...], "keys": [...], "per_run": [...]}, only where a metric has samples or several
    # runs: most figures are one number, and a year of nightly history is ~300,000 metric rows.
)


class StoreError(TrainperfError):
    """The store cannot be used: unreachable, newer schema, corrupt, locked. One line."""


class StoreBusy(StoreError):
    """A SQLite writer did not get the lock in time; the run folder stays for a later ingest."""


def default_store_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("trainperf", appauthor=False)) / "history.sqlite"


def resolve_url(cli: str | None = None, ini: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The store URL by precedence: command line > ``TRAINPERF_STORE`` > ini > the default file."""
    environ = os.environ if env is None else env
    for value in (cli, environ.get(STORE_ENV), ini):
        if value:
            return normalise_url(value)
    return normalise_url(str(default_store_path()))


def normalise_url(text: str) -> str:
    """``sqlite:///PATH`` and ``postgresql://...`` as given (psycopg 3 as the driver); a bare path
    is a SQLite file."""
    text = text.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if text.startswith(("postgresql+", "sqlite:")):
        return text
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"store URL scheme '{scheme}' is not supported: use sqlite:///PATH or postgresql://user@host:port/db"
        )
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def shown(url: str) -> str:
    """The URL without its password, fit for a message (``trainperf.redact``'s rule, as every record)."""
    return redact_text(url)


@dataclass(slots=True)
class Store:
    """An open store: its engine and URL. Writes go through ``writing()``, reads through ``reading()``."""

    engine: Engine
    url: str

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        with _translated(self.url), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with _translated(self.url), self.engine.connect().execution_options(**{READ_ONLY: True}) as conn:
            yield conn

    def close(self) -> None:
        self.engine.dispose()


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


@contextmanager
def _translated(url: str) -> Iterator[None]:
    """Database errors as one line naming the fix."""
    try:
        yield
    except exc.OperationalError as error:
        raise _operational(url, error) from None
    except exc.DatabaseError as error:
        detail = redact_text(str(error.orig or error).splitlines()[0])
        if "not a database" in detail or "malformed" in detail:
            raise _unreadable(url, detail) from None
        raise StoreError(f"results store {shown(url)}: {detail}") from None


def _operational(url: str, error: exc.OperationalError) -> StoreError:
    # A driver's message may quote the connection string it was given.
    detail = redact_text(str(error.orig or error).strip().splitlines()[0])
    if "database is locked" in detail:
        return StoreBusy(f"results store {shown(url)} stayed locked by another writer: {detail}")
    if "not a database" in detail or "malformed" in detail:
        return _unreadable(url, detail)
    if url.startswith("sqlite:"):
        return StoreError(
            f"cannot open the results store {shown(url)} ({detail}): check the path and its permissions"
        )
    return StoreError(
        f"cannot reach the results store {shown(url)} ({detail}): "
        "check the server, or the URL's host and port"
    )


def _unreadable(url: str, detail: str) -> StoreError:
    return StoreError(
        f"{shown(url)} is not a readable SQLite database ({detail}): "
        "move it away and re-ingest the run folders"
    )
