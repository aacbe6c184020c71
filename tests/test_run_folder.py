"""The run folder's layout and loaders, as ``RunFolder`` names them (the reports and ingest rely on it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.errors import TrainperfError
from trainperf.ground.folder import RunFolder


def test_layout_of_a_run_folder(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.result_path("c") == tmp_path / "results" / "c.json"
    assert folder.session_path() == tmp_path / "run.json"
    assert folder.session_path("gw1") == tmp_path / "run.gw1.json"
    assert folder.trace_dir("c") == tmp_path / "traces" / "c"
    assert folder.interruption_path == tmp_path / "interrupted.json"
    assert (folder.summary_path, folder.page_path, folder.benchmark_path) == (
        tmp_path / "summary.md",
        tmp_path / "index.html",
        tmp_path / "benchmark.json",
    )


def test_sessions_are_appended_oldest_first_per_worker(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    assert folder.session_records() == []
    folder.record_session({"started": "a"})
    assert folder.record_session({"started": "b"}) == [{"started": "a"}, {"started": "b"}]
    folder.record_session({"started": "w"}, worker="gw0")
    assert folder.session_records() == [{"started": "a"}, {"started": "b"}]
    assert folder.session_records("gw0") == [{"started": "w"}]
    assert json.loads((tmp_path / "run.json").read_text())["sessions"][-1] == {"started": "b"}
    assert [p.name for p in folder.session_files()] == ["run.gw0.json", "run.json"]


def test_children_and_their_records(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    first = folder.new_child_dir("c", 0)
    (first / "spec.json").write_text("{}")
    again = folder.new_child_dir("c", 0)  # a confirmation never overwrites a child's files
    assert (first.name, again.name) == ("r1", "r2")
    (again / "steps.jsonl").write_text(json.dumps({"step": 1, "duration_s": 0.5}) + "\n")
    assert folder.probe_dirs("c") == [first, again]
    assert folder.child_dir("cases/c/r2") == again
    assert folder.child_steps(again) == [{"step": 1, "duration_s": 0.5}]
    assert folder.child_samples(again) == []  # a CPU child takes no NVML samples


def test_open_names_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(TrainperfError, match="not a run folder"):
        RunFolder.open(tmp_path)
    RunFolder(tmp_path).results_dir.mkdir()
    assert RunFolder.open(tmp_path).is_run()
