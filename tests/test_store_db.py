"""The store's database: URL precedence, default place, schema version, and bad stores as one line."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import sqlalchemy as sa
from pg_server import pg_url, postgres_server  # noqa: F401

from trainperf.store.db import SCHEMA_VERSION, open_store, schema_info
from trainperf.store.interface import StoreError, default_store_path, resolve_url


def test_url_precedence_reads_straight_down(tmp_path: Path) -> None:
    env = {"TRAINPERF_STORE": f"sqlite:///{tmp_path}/env.sqlite"}
    assert (
        resolve_url("postgresql://ci@db:5432/trainperf", "x.sqlite", env)
        == "postgresql+psycopg://ci@db:5432/trainperf"
    )
    assert resolve_url(None, f"{tmp_path}/ini.sqlite", env) == env["TRAINPERF_STORE"]
    assert resolve_url(None, f"{tmp_path}/ini.sqlite", {}) == f"sqlite:///{tmp_path}/ini.sqlite"
    assert resolve_url(None, None, {}) == f"sqlite:///{default_store_path()}"
    assert default_store_path().name == "history.sqlite" and "trainperf" in default_store_path().parts


def test_unknown_scheme_is_one_line() -> None:
    with pytest.raises(StoreError, match="mysql.*not supported.*sqlite:///PATH"):
        resolve_url("mysql://db/x", None, {})


def test_a_malformed_port_is_one_line_without_the_password() -> None:
    with pytest.raises(StoreError) as raised:
        resolve_url("postgresql://ci:s3cret@db:notaport/tp", None, {})
    message = str(raised.value)
    assert "does not parse" in message and "its port a number" in message and "s3cret" not in message
    assert "\n" not in message


def test_new_sqlite_store_records_its_schema_version(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    with store.reading() as conn:
        assert conn.execute(sa.select(schema_info.c.value)).scalar() == str(SCHEMA_VERSION)
    store.close()
    open_store(str(tmp_path / "h.sqlite")).close()  # reopening an existing store is fine


def _bump_version(url: str) -> None:
    store = open_store(url)
    with store.writing() as conn:
        conn.execute(schema_info.update().values(value=str(SCHEMA_VERSION + 1)))
    store.close()


def test_a_newer_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    url = str(tmp_path / "h.sqlite")
    _bump_version(url)
    with pytest.raises(
        StoreError, match=rf"schema version {SCHEMA_VERSION + 1}.*upgrade trainperf \(nothing was written\)"
    ) as err:
        open_store(url)
    assert "\n" not in str(err.value)


def test_a_corrupt_sqlite_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not a readable SQLite database.*move it away") as err:
        open_store(str(path))
    assert "\n" not in str(err.value)


def test_an_unreachable_postgresql_is_one_line() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    with pytest.raises(
        StoreError, match=rf"cannot reach the results store postgresql\+psycopg://ci@127.0.0.1:{port}/x"
    ) as err:
        open_store(f"postgresql://ci@127.0.0.1:{port}/x", lock_timeout_s=2)
    assert "\n" not in str(err.value)


def test_postgresql_store_is_created_and_refuses_a_newer_schema(pg_url: str) -> None:  # noqa: F811
    store = open_store(pg_url)
    with store.reading() as conn:
        assert conn.execute(sa.select(schema_info.c.value)).scalar() == str(SCHEMA_VERSION)
    store.close()
    _bump_version(pg_url)
    with pytest.raises(StoreError, match="upgrade trainperf"):
        open_store(pg_url)
