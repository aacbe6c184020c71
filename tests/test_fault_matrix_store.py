"""Fault-matrix row for the results store: a PostgreSQL server that goes down while a run is under way
must cost the run nothing (every case measured and judged, its folder complete, one line saying how to
load it later), and that line, taken once the server is back, must leave every case in the history
exactly once. A real server (``tests/pg_server.py``) and real runs of the tiny CPU cases, like the other
rows (``tests/test_fault_matrix.py``); the figures go to the same table."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_drill import (
    FIRST,
    SECOND,
    Drill,
    Row,
    kill_all,
    one_line_error,
    settle,
    stored_runs,
    tagged_by,
    wait_for,
)
from pg_server import PgServer, PostgresMissing, new_database, stoppable_postgres
from required import missing

from trainperf.store.db import open_store


@pytest.fixture
def server() -> Iterator[PgServer]:
    """A server of this row's own: the row stops it, which the session's shared one must never be."""
    try:
        with stoppable_postgres() as started:
            yield started
    except PostgresMissing as why:
        missing("the store-outage row", str(why))


def test_a_store_outage_mid_run_loses_nothing_and_its_ingest_line_completes_the_history(
    tmp_path: Path, server: PgServer, row: Row
) -> None:
    url = new_database(server.url)
    drill = Drill(tmp_path)
    process = drill.start("--perf-steps", "3", "--perf-store", url)
    try:
        wait_for(process, f"{SECOND} run 1/1: started")
        server.stop()
        rest, _ = process.communicate(timeout=300)
    except BaseException:
        kill_all(tagged_by(process.pid))  # the row failed on the way
        raise
    said = next((line.strip() for line in rest.splitlines() if "trainperf ingest" in line), "")
    row(fault="results store (PostgreSQL) stopped mid-run", exit_status=process.returncode, user_sees=said)
    kept = stored_runs(drill.run_dir())
    settle(drill, row, {FIRST: kept[FIRST]})  # recorded before the server went down
    assert process.returncode == 0, rest[-3000:]  # the store never decides a run's fate
    assert one_line_error(rest), rest[-3000:]
    assert sorted(kept) == sorted([FIRST, SECOND]), kept
    assert said and str(drill.run_dir()) in said, rest[-3000:]
    server.start()
    before = {case: len(open_store(url).stored_cases(case)) for case in (FIRST, SECOND)}
    printed = said[said.index("trainperf ingest") : said.index("--store URL")].split()
    command = [*printed, "--store", url]  # the line as printed, with the server's URL for URL
    loaded = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", *command[1:]], capture_output=True, text=True, check=False
    )
    after = {case: len(open_store(url).stored_cases(case)) for case in (FIRST, SECOND)}
    row(ingest_exit=loaded.returncode, stored_before_ingest=before, stored_after_ingest=after)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert before == {FIRST: 1, SECOND: 0}, before  # the first case was recorded before the outage
    assert after == {FIRST: 1, SECOND: 1}, after  # each case once: the first not twice
