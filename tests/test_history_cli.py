"""``trainperf history`` as a user reads it: too few runs, contaminated-only cases, each metric's own
verdict, a recent step, and a pipe closed early."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from store_data import make_result, nightly, write_run_folder
from test_store_cli import call

from trainperf.errors import TrainperfError
from trainperf.stored_verdict import StoredMetricVerdict

CASE = "sft_hf-qwen3_8b-lora-maxlen-b4"
SRC = Path(__file__).resolve().parent.parent / "src"


def _store(tmp_path: Path, results_by_day: dict[int, list]) -> str:
    for day, results in results_by_day.items():
        write_run_folder(tmp_path / "reports" / f"n{day:03d}", nightly(day), results)
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert call("ingest", str(tmp_path / "reports"), "--store", url, "--quiet") == 0
    return url


def test_too_few_runs_say_how_many_there_are_and_how_many_a_change_point_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _store(tmp_path, {d: [make_result(CASE, nightly(d), 0.5, seed=d)] for d in range(4)})
    capsys.readouterr()
    assert call("history", CASE, "--store", url) == 0
    out = capsys.readouterr().out
    assert "4 run(s), too few to look for change points (needs at least 6: 3 on each side)" in out
    assert "change point(s)" not in out
    assert call("history", CASE, "--store", url, "--json") == 0
    assert json.loads(capsys.readouterr().out)["runs_for_a_change_point"] == 6


def test_a_case_with_only_contaminated_runs_is_reported_as_such(tmp_path: Path) -> None:
    url = _store(tmp_path, {0: [make_result(CASE, nightly(0), 0.5, verdict="contaminated")]})
    with pytest.raises(TrainperfError) as caught:
        call("history", CASE, "--store", url)
    message = str(caught.value)
    assert f"{CASE} has 1 stored result(s), none in its series (1 contaminated" in message
    assert "did you mean" not in message and "no stored result" not in message
    assert str(tmp_path / "reports" / "n000") in message  # where to look


def test_contaminated_runs_beside_a_series_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {d: [make_result(CASE, nightly(d), 0.5, seed=d)] for d in range(6)}
    runs[6] = [make_result(CASE, nightly(6), 0.7, verdict="contaminated")]
    url = _store(tmp_path, runs)
    capsys.readouterr()
    assert call("history", CASE, "--store", url) == 0
    assert "left out of the series: 1 contaminated" in capsys.readouterr().out


def _memory_regression(day: int) -> object:
    result = make_result(CASE, nightly(day), 0.5, seed=day, verdict="regressed")
    result.verdict.metrics = [
        StoredMetricVerdict("step_time_s", "pass"),
        StoredMetricVerdict("peak_allocated_gib", "regressed"),
    ]
    return result


def test_the_verdict_column_is_the_shown_metrics_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _store(tmp_path, {0: [_memory_regression(0)]})
    capsys.readouterr()
    assert call("history", CASE, "--store", url) == 0
    step_line = capsys.readouterr().out.splitlines()[-1]
    assert " pass " in step_line and "regressed" not in step_line
    assert call("history", CASE, "--store", url, "--metric", "peak_allocated_gib") == 0
    assert " regressed " in capsys.readouterr().out.splitlines()[-1]
    # A result stored before the metric's verdict was kept: read from its result file.
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        db.execute("UPDATE metrics SET detail = NULL")
    assert call("history", CASE, "--store", url, "--json") == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["metric_verdict"] == "pass" and run["verdict"] == "regressed"


def test_a_10_percent_step_three_runs_old_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {d: [make_result(CASE, nightly(d), 0.5 * (1.10 if d >= 30 else 1.0), seed=d)] for d in range(33)}
    url = _store(tmp_path, runs)
    capsys.readouterr()
    assert call("history", CASE, "--store", url, "--json") == 0
    (found,) = json.loads(capsys.readouterr().out)["change_points"]
    assert found["started"] == nightly(30) and found["change"] == pytest.approx(0.10, abs=0.01)
    assert found["p_value"] < 0.001


def test_a_pipe_closed_early_ends_without_a_traceback(tmp_path: Path) -> None:
    url = _store(tmp_path, {d: [make_result(CASE, nightly(d), 0.5, seed=d)] for d in range(8)})
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for command in (["history", CASE], ["export", "--format", "openmetrics", "--run", "all"]):
        reader = subprocess.Popen(
            [sys.executable, "-m", "trainperf.cli", *command, "--store", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.close()  # the reader has gone before the first line is written
        stderr = reader.stderr.read().decode()
        assert reader.wait(timeout=60) == 141, stderr
        assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
