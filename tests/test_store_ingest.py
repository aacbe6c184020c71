"""Ingesting run folders: idempotent, the real measurements included, bad folders as one line."""

from __future__ import annotations

import json
import multiprocessing
import tarfile
from pathlib import Path

import pytest
from pg_server import pg_url, postgres_server  # noqa: F401
from store_data import make_result, nightly, write_run_folder

from trainperf.errors import TrainperfError
from trainperf.recording.ingest import find_runs, ingest
from trainperf.store.db import open_store
from trainperf.store.reads import list_runs, stored_cases

MEASUREMENTS = Path(__file__).resolve().parent.parent / "docs" / "measurements"
CASES = ("sft_hf-qwen3_8b-lora-short-b4", "sft_hf-qwen3_8b-lora-maxlen-b4")


def _runs(root: Path, count: int, first_day: int = 0) -> list[Path]:
    return [
        write_run_folder(
            root / f"run{day}", nightly(day), [make_result(c, nightly(day), 0.5, seed=day) for c in CASES]
        )
        for day in range(first_day, first_day + count)
    ]


def test_ingesting_a_run_twice_adds_nothing(tmp_path: Path) -> None:
    _runs(tmp_path / "reports", 3)
    store = open_store(str(tmp_path / "h.sqlite"))
    first = ingest(store, [tmp_path / "reports"], say=lambda _: None)
    again = ingest(store, [tmp_path / "reports" / "run1"], say=lambda _: None)
    assert (first.runs_seen, first.cases_added, first.cases_known) == (3, 6, 0)
    assert (again.cases_added, again.cases_known) == (0, 2)
    assert len(list_runs(store)) == 3 and len(stored_cases(store, CASES[0])) == 3


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "notes.json").write_text("{}")
    with pytest.raises(TrainperfError, match="is not a run folder .* name a folder under reports/"):
        find_runs(tmp_path / "empty")
    with pytest.raises(TrainperfError, match="is not a folder"):
        find_runs(tmp_path / "missing")


def _unpacked_measurements(root: Path) -> Path:
    """docs/measurements with each folder's raw.tar.xz unpacked (its run folders), as its README says."""
    for archive in sorted(MEASUREMENTS.glob("*/raw.tar.xz")):
        with tarfile.open(archive) as packed:
            packed.extractall(root / archive.parent.name, filter="data")
    return root


def test_the_committed_gpu_measurements_ingest_once(tmp_path: Path) -> None:
    measurements = _unpacked_measurements(tmp_path / "measurements")
    store = open_store(str(tmp_path / "h.sqlite"))
    first = ingest(store, [measurements], say=lambda _: None)
    assert first.runs_seen >= 9 and first.cases_added >= 70 and not first.skipped
    kinds = {run["kind"] for run in list_runs(store)}
    assert {"pytest", "fidelity", "cliff"} <= kinds
    maxlen = stored_cases(store, "sft_hf-qwen3_8b-lora-maxlen-b4", with_metrics=["step_time_s"])
    assert maxlen and all(c.metrics["step_time_s"].unit == "s" for c in maxlen)
    assert ingest(store, [measurements], say=lambda _: None).cases_added == 0


def _ingest_worker(url: str, folders: list[str]) -> int:
    store = open_store(url, lock_timeout_s=60)
    try:
        return ingest(store, [Path(f) for f in folders], say=lambda _: None).cases_added
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_concurrent_writers_lose_and_double_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A scaled-down benchmarks/history_concurrency.py: 4 processes x 4 runs, two of them shared."""
    url = str(tmp_path / "h.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    folders = [[str(p) for p in _runs(tmp_path / f"w{w}", 4, first_day=10 * w)] for w in range(4)]
    folders[1] += folders[0][:2]  # the same run ingested by two writers at once is stored once
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        added = pool.starmap(_ingest_worker, [(url, f) for f in folders])
    store = open_store(url)
    assert sum(added) == 32 and len(list_runs(store)) == 16
    assert len(stored_cases(store, CASES[1])) == 16
    store.close()


def test_a_writer_that_cannot_get_the_sqlite_lock_says_so_and_leaves_the_run(tmp_path: Path) -> None:
    import sqlite3

    _runs(tmp_path / "reports", 1)
    path = tmp_path / "h.sqlite"
    store = open_store(str(path), lock_timeout_s=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    lines: list[str] = []
    try:
        report = ingest(store, [tmp_path / "reports"], say=lines.append)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert report.deferred == [tmp_path / "reports" / "run0"] and report.cases_added == 0
    assert len(lines) == 1 and "stayed locked" in lines[0] and "trainperf ingest" in lines[0]
    assert ingest(open_store(str(path)), [tmp_path / "reports"], say=lambda _: None).cases_added == 2


def test_each_folder_says_why_nothing_was_added_and_the_rest_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_store_cli import call

    reports = tmp_path / "reports"
    write_run_folder(reports / "good", nightly(1), [make_result(CASES[0], nightly(1), 0.5)])
    (reports / "no-results").mkdir(parents=True)  # a session that ended before its first case
    (reports / "no-results" / "run.json").write_text(json.dumps({"sessions": [{"started": nightly(2)}]}))
    (reports / "not-a-run").mkdir()
    (reports / "damaged").mkdir()
    (reports / "damaged" / "run.json").write_text("{")
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    folders = [str(reports / name) for name in ("not-a-run", "damaged", "no-results", "good")]
    assert call("ingest", *folders, "--store", url) == 1
    out, err = capsys.readouterr()
    assert (
        f"{reports / 'no-results'}: 0 added, 0 already stored (no results/*.json: the run recorded no case"
        in out
    )
    assert f"{reports / 'good'}: 1 added" in out
    assert "2 run(s): 1 case result(s) added, 0 already stored; 1 run(s) with no case result; " in out
    assert "2 folder(s) not ingested" in out
    assert f"not ingested: {reports / 'not-a-run'} is not a run folder" in err
    assert f"not ingested: {reports / 'damaged' / 'run.json'} is not a readable run record" in err
    # Every folder stored (an empty run is no failure): 0; no folder named held a run: 2.
    assert call("ingest", folders[2], folders[3], "--store", url, "--quiet") == 0
    assert call("ingest", folders[0], "--store", url, "--quiet") == 2


def test_a_run_folders_result_that_is_not_a_case_result_is_said_and_fails_the_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder's results/ holds case results only: a JSON list there (a damaged or foreign file)
    is listed as skipped and the command exits non-zero, not "0 added" and 0."""
    from test_store_cli import call

    run = write_run_folder(tmp_path / "reports" / "run", nightly(1), [make_result(CASES[0], nightly(1), 0.5)])
    (run / "results" / "stray.json").write_text("[1, 2, 3]")
    assert call("ingest", str(run), "--store", f"sqlite:///{tmp_path / 'h.sqlite'}") == 1
    out, _ = capsys.readouterr()
    assert "stray.json: not a case result (a JSON list, no case_id)" in out
    assert "1 case result(s) added" in out
