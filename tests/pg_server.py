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
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVICE_USER = "postgres"


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_service_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", SERVICE_USER, "--", *command]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a fresh server's ``postgres`` database (user ``trainperf``, trust auth, loopback only)."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        _missing("PostgreSQL is not installed (apt-get install -y postgresql)")
    assert bin_dir is not None
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        _missing("running as root without runuser: PostgreSQL cannot be started as root")
    folder = Path(tempfile.mkdtemp(prefix="trainperf-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, SERVICE_USER)
    data, port = folder / "data", _free_port()
    log = folder / "server.log"
    done = subprocess.run(_as_service_user([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "trainperf",
                                            "--no-sync", "-E", "UTF8"]), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        _missing(f"initdb failed: {done.stderr.strip()[-300:]}")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    started = subprocess.run(_as_service_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
                                               "-w", "start"]), capture_output=True, text=True, check=False)
    if started.returncode != 0:
        _missing(f"pg_ctl start failed: {started.stderr.strip()[-300:]} {log.read_text()[-300:] if log.exists() else ''}")
    try:
        yield f"postgresql://trainperf@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_service_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def pg_url(postgres_server: str) -> str:
    """A new, empty database on the session's server, for one test."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"
