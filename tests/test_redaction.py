"""A store password never lands in a run folder, an artifact, a log or the store's rows.

The rule itself (``trainperf.redact``), then the fault drill: a real PostgreSQL role with a
real password (scram-sha-256, checked by the server), given to two shards of a tiny CPU nightly,
once on the command line (``--perf-store``) and once in ``TRAINPERF_STORE``; the shards are merged,
ingested, exported and their reports rebuilt, and every file those wrote, everything they printed
and every row of the store is searched for the password."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_drill import FIRST, SECOND, Drill, one_line_error
from pg_server import postgres_server  # noqa: F401 - the session's server, a fixture

from trainperf.case_record import CaseRecord
from trainperf.redact import MASK, is_credential_name, redact_argv, redact_text, redacted


@pytest.mark.parametrize(
    ("given", "recorded"),
    [
        ("postgresql://ci:s3cretPW@127.0.0.1:5432/trainperf", "postgresql://ci:***@127.0.0.1:5432/trainperf"),
        ("--perf-store=postgres://ci:p@ss/w0rd@db/x", "--perf-store=postgres://ci:***@db/x"),
        ("postgresql://db/x?sslmode=require&password=pw1", "postgresql://db/x?sslmode=require&password=***"),
        ("host=db password='a b' dbname=x", "host=db password=*** dbname=x"),
        ("PGPASSWORD=pw2", "PGPASSWORD=***"),
        ("WANDB_API_KEY=k1", "WANDB_API_KEY=***"),
        ("HF_TOKEN=t1", "HF_TOKEN=***"),
        # What carries no credential stays as given: a record must still say what ran.
        ("postgresql://ci@db:5432/trainperf", "postgresql://ci@db:5432/trainperf"),
        ("sqlite:////var/lib/trainperf/history.sqlite", "sqlite:////var/lib/trainperf/history.sqlite"),
        ("rollout.max_new_tokens=64", "rollout.max_new_tokens=64"),
        ("PGPASSFILE=/etc/trainperf/pgpass", "PGPASSFILE=/etc/trainperf/pgpass"),
    ],
)
def test_the_rule_masks_credentials_and_keeps_the_rest(given: str, recorded: str) -> None:
    assert redact_text(given) == recorded


def test_an_option_that_names_a_credential_masks_its_value() -> None:
    argv = ["pytest", "--password", "pw3", "--api-key=k2", "-k", "lora", "--perf-steps", "3"]
    assert redact_argv(argv) == [
        "pytest",
        "--password",
        MASK,
        f"--api-key={MASK}",
        "-k",
        "lora",
        "--perf-steps",
        "3",
    ]
    assert redacted({"store": "postgresql://a:pw4@h/d", "client_secret": "s1", "tokens": 5}) == {
        "store": f"postgresql://a:{MASK}@h/d",
        "client_secret": MASK,
        "tokens": 5,
    }
    assert not is_credential_name("max_new_tokens") and is_credential_name("PGPASSWORD")


def test_a_baseline_file_names_its_command_line_without_the_password(tmp_path: Path) -> None:
    from trainperf.result import CaseResult
    from trainperf.store.baselines import BaselineStore

    result = CaseResult(
        case_id="sft_hf-qwen3_tiny-lora-short-b4", case=CaseRecord(), gpu_class="cpu", outcome="ok"
    )
    source = "20261125-120000-cpu: pytest perf_tests -m cpu --perf-store postgresql://ci:pw5@db/x"
    path = BaselineStore(tmp_path).save(result, source)
    assert "pw5" not in path.read_text()
    assert BaselineStore(tmp_path).load("cpu", result.case_id).source == source.replace("pw5", MASK)  # type: ignore[union-attr]


def test_a_training_child_is_not_given_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainperf.launch.launcher import child_env

    monkeypatch.setenv("TRAINPERF_STORE", "postgresql://ci:pw6@db/x")
    monkeypatch.setenv("PGPASSWORD", "pw7")
    monkeypatch.setenv("PGPASSFILE", "/home/ci/.pgpass")
    env = child_env(None)
    assert "TRAINPERF_STORE" not in env and "pw6" not in json.dumps(env)
    assert "PGPASSWORD" not in env and "PGPASSFILE" not in env and "pw7" not in json.dumps(env)


@dataclass(frozen=True)
class SecretStore:
    """A database owned by a role whose password the server checks."""

    url: str
    password: str
    admin_url: str


def _connects(url: str) -> bool:
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.fixture
def secret_store(postgres_server: str) -> Iterator[SecretStore]:  # noqa: F811 - the fixture above
    """A role with a password on the session's server; its connections over TCP must give it
    (scram-sha-256, ahead of the server's trust lines), so the password is a real one."""
    import psycopg

    role, password = f"ci_{uuid.uuid4().hex[:8]}", f"planted{uuid.uuid4().hex}"
    base, _database = postgres_server.rsplit("/", 1)
    address = base.split("@", 1)[1]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.execute(f"CREATE DATABASE {role} OWNER {role}")
        hba = Path(str(conn.execute("SHOW hba_file").fetchone()[0]))  # type: ignore[index]
        original = hba.read_text()
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n{original}")
        conn.execute("SELECT pg_reload_conf()")
    url = f"postgresql://{role}:{password}@{address}/{role}"
    wrong = url.replace(password, "wrong")
    deadline = time.monotonic() + 10
    while _connects(wrong) and time.monotonic() < deadline:
        time.sleep(0.1)  # the reload is read by the server's next connection
    try:
        assert not _connects(wrong), "the server accepted a wrong password: the planted one is not checked"
        assert _connects(url)
        yield SecretStore(url, password, f"{base}/{role}")
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            hba.write_text(original)
            conn.execute("SELECT pg_reload_conf()")


def test_a_refused_password_is_not_in_the_message(secret_store: SecretStore) -> None:
    from trainperf.store.db import StoreError, open_store

    refused = secret_store.url.replace(secret_store.password, "refused" + secret_store.password[-8:])
    with pytest.raises(StoreError) as caught:
        open_store(refused)
    message = str(caught.value)
    assert "refused" not in message and secret_store.password[-8:] not in message
    assert f":{MASK}@" in message and "\n" not in message


def test_the_password_can_come_from_a_password_file_or_a_service_file(
    secret_store: SecretStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ways docs/history.md gives to keep the password off the command line, against the server."""
    from trainperf.store.db import StoreError, open_store

    address, database = secret_store.url.split("@", 1)[1].split("/", 1)
    host, port = address.split(":")
    role = secret_store.url.split("//", 1)[1].split(":", 1)[0]
    without = f"postgresql://{role}@{address}/{database}"
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "absent"))
    with pytest.raises(StoreError):
        open_store(without)  # no password anywhere: the server refuses
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{host}:{port}:{database}:{role}:{secret_store.password}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    open_store(without).close()
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[trainperf]\nhost={host}\nport={port}\ndbname={database}\nuser={role}\n")
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    open_store("postgresql:///?service=trainperf").close()


def _trainperf(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainperf.cli", *args],
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _files_with(secret: bytes, *roots: Path, since: float = 0.0) -> tuple[int, list[str]]:
    """How many files under ``roots`` (written since ``since``) were searched; those holding ``secret``."""
    searched, found = 0, []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_mtime >= since:
                searched += 1
                if secret in path.read_bytes():
                    found.append(str(path))
    return searched, found


def _rows_with(secret: str, admin_url: str) -> tuple[int, list[str]]:
    """How many rows the store holds, and those (as text) holding ``secret``: every table."""
    import psycopg

    rows, found = 0, []
    with psycopg.connect(admin_url) as conn:
        tables = [
            t
            for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
        ]
        for table in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{table}" t').fetchall():
                rows += 1
                found += [f"{table}: {text[:120]}"] if secret in text else []
    return rows, found


def test_a_planted_store_password_is_in_no_file_log_or_row(tmp_path: Path, secret_store: SecretStore) -> None:
    started = time.time()
    url, secret = secret_store.url, secret_store.password
    drill = Drill(tmp_path)
    common = ("--perf-steps", "3", "--perf-update-baselines", "--perf-baseline-repeats", "1")
    # Shard 1 gives the password on the command line, shard 2 in the environment (as a CI secret).
    by_argv = drill.run("--perf-shard", "1/2", "--perf-store", url, "--perf-baselines", "baselines-1",
                        "--junitxml", "junit-1.xml", *common)  # fmt: skip
    drill.env = {"TRAINPERF_STORE": url}
    by_env = drill.run(
        "--perf-shard", "2/2", "--perf-baselines", "baselines-2", "--junitxml", "junit-2.xml", *common
    )
    logs = [by_argv.stdout + by_argv.stderr, by_env.stdout + by_env.stderr]
    assert by_argv.returncode == 0 and by_env.returncode == 0, logs
    shards = sorted(p for p in (tmp_path / "reports").iterdir() if p.is_dir())
    assert len(shards) == 2, shards

    commands = [
        ("merge", *map(str, shards), "--output", "merged", "--store", url),
        ("ingest", *map(str, shards), "merged", "--store", url),
        ("export", "--format", "openmetrics", "--run", "all", "--output", "exported", "--store", url),
        ("report", "merged"),
        ("report", str(shards[0])),
    ]
    for command in commands:
        done = _trainperf(tmp_path, *command)
        logs.append(done.stdout + done.stderr)
        assert done.returncode == 0 and one_line_error(logs[-1]), logs[-1]
    bmf = ("export", "--format", "bmf", "--run", "all", "--output", "exported/bmf")
    exported = _trainperf(tmp_path, *bmf, env={"TRAINPERF_STORE": url})
    logs.append(exported.stdout + exported.stderr)
    assert exported.returncode == 0, logs[-1]

    cache = Path(os.environ["TRAINPERF_CACHE_DIR"])
    searched, files = _files_with(
        secret.encode(), tmp_path, *([cache] if cache.is_dir() else []), since=started
    )
    rows, stored = _rows_with(secret, secret_store.admin_url)
    printed = [log[max(0, log.find(secret) - 80) :][:200] for log in logs if secret in log]
    assert (files, stored, printed) == ([], [], []), (files, stored, printed)

    # What was recorded still says what ran and where, without the password.
    records = [json.loads((shard / "run.json").read_text())["sessions"][0] for shard in shards]
    assert f"{url.split(':')[0]}:{url.split(':')[1]}:{MASK}@" in " ".join(records[0]["argv"])
    assert f":{MASK}@" in records[1]["settings"]["store"]
    merged = json.loads((tmp_path / "merged" / "benchmark.json").read_text())
    assert {b["name"] for b in merged["benchmarks"]} == {FIRST, SECOND}
    assert rows >= 3 + 2, "the store holds the two shards, the nightly and their cases"
    _note_row(searched, rows, time.time() - started)


def _note_row(files: int, rows: int, seconds: float) -> None:
    """The fault matrix's row, when ``TRAINPERF_FAULT_MATRIX`` names its figures file."""
    target = os.environ.get("TRAINPERF_FAULT_MATRIX")
    if target:
        figures = {
            "row": "store password planted in --perf-store and TRAINPERF_STORE",
            "fault": "store password in --perf-store and TRAINPERF_STORE",
            "exit_status": 0,
            "processes_left": "-",  # not counted here: the other rows of the matrix do
            "run_s": round(seconds, 1),
            "user_sees": f"postgresql+psycopg://ci:{MASK}@...; the password in none of {files} files, "
            f"{rows} store rows and every log",
        }
        with open(target, "a") as handle:
            handle.write(json.dumps(figures) + "\n")
