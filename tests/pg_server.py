"""A real PostgreSQL server for the store's tests: one per test session, in a temporary folder.

Started with the Debian package's ``initdb`` and ``pg_ctl`` (``apt-get install postgresql``;
``.ci/run`` installs it). PostgreSQL refuses to run as root, so under root the server runs as the
``postgres`` user that package creates. Without the binaries the tests skip with the reason,
except under CI (``CI=true``), where they fail: CI must never be where they silently skip.
Import the fixtures into a test module: ``from pg_server import pg_url, postgres_server``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from ports import free_port
from required import missing

SERVICE_USER = "postgres"


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _missing(reason: str) -> NoReturn:
    missing("the PostgreSQL tests", reason)


def _as_service_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", SERVICE_USER, "--", *command]


class PostgresMissing(RuntimeError):
    """PostgreSQL cannot be started here; the message says why."""


@dataclass(frozen=True)
class PgServer:
    """A running test server: its URL, and its stop and start for an outage drill."""

    url: str
    bin_dir: Path
    data: Path
    log: Path
    options: str

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / "pg_ctl"), "-D", str(self.data), *args]
        return subprocess.run(_as_service_user(command), capture_output=True, text=True, check=False)

    def start(self) -> None:
        started = self._ctl("-l", str(self.log), "-o", self.options, "-w", "start")
        if started.returncode != 0:
            raise PostgresMissing(f"pg_ctl start failed: {started.stderr.strip()[-300:]}")

    def stop(self) -> None:
        """Stop at once, as a crash or a lost host would: open connections are cut."""
        self._ctl("-m", "immediate", "-w", "stop")


@contextmanager
def stoppable_postgres() -> Iterator[PgServer]:
    """A fresh server in a temporary folder (user ``trainperf``, trust auth, loopback only), stopped
    and removed after; the drill may stop and start it in between."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        raise PostgresMissing("PostgreSQL is not installed (apt-get install -y postgresql)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        raise PostgresMissing("running as root without runuser: PostgreSQL cannot be started as root")
    folder = Path(tempfile.mkdtemp(prefix="trainperf-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, SERVICE_USER)
    data, port = folder / "data", free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    server = PgServer(
        f"postgresql://trainperf@127.0.0.1:{port}/postgres", bin_dir, data, folder / "server.log", options
    )
    try:
        done = subprocess.run(
            _as_service_user(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-A",
                    "trust",
                    "-U",
                    "trainperf",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise PostgresMissing(f"initdb failed: {done.stderr.strip()[-300:]}")
        server.start()
        yield server
    finally:
        if data.is_dir():
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def running_postgres() -> Iterator[str]:
    """A fresh server (``stoppable_postgres``); yields the URL of its ``postgres`` database and stops it
    after. Also used by benchmarks/."""
    with stoppable_postgres() as server:
        yield server.url


def new_database(server_url: str) -> str:
    """A new, empty database on the server; its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of the session's server's ``postgres`` database."""
    try:
        with running_postgres() as url:
            yield url
    except PostgresMissing as missing:
        _missing(str(missing))


@pytest.fixture()
def pg_url(postgres_server: str) -> str:
    """A new, empty database on the session's server, for one test."""
    return new_database(postgres_server)
