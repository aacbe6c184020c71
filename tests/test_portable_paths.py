"""Results record paths relative to their run folder or the project, never the machine's layout;
readers take the absolute paths older results recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainperf.ground.settings import resolve
from trainperf.paths import portable, portable_argv
from trainperf.run.context import _recorded_settings
from trainperf.workloads.protocol import ChildSpec


def test_paths_inside_the_run_folder_or_the_project_become_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "reports" / "20260101-000000-cpu"
    assert portable(run_dir / "cases" / "c" / "r1", run_dir) == "cases/c/r1"
    assert portable(tmp_path / "baselines", run_dir) == "baselines"
    assert portable("/opt/torch/.venv/bin/python3", run_dir) == "/opt/torch/.venv/bin/python3"
    assert portable("already/relative") == "already/relative"
    # A sibling whose name starts like the project's is not inside it.
    assert portable(f"{tmp_path}-other/x") == f"{tmp_path}-other/x"


def test_a_command_line_names_pytest_and_project_paths_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [
        "pytest",
        f"{tmp_path}/perf_tests",
        "-k",
        "a and b",
    ]
    assert portable_argv(argv) == ["pytest", "perf_tests", "-k", "a and b"]
    assert portable_argv(["/venv/bin/pytest", f"--basetemp={tmp_path}/t"]) == ["pytest", "--basetemp=t"]
    store = f"sqlite:///{tmp_path}/h.sqlite"
    assert portable_argv(["pytest", "--perf-store", store, f"--perf-store={store}"]) == [
        "pytest",
        "--perf-store",
        "sqlite:///h.sqlite",
        "--perf-store=sqlite:///h.sqlite",
    ]
    assert portable_argv(["pytest", "--perf-store=postgresql://ci:s3cret@db:5432/perf"]) == [
        "pytest",
        "--perf-store=postgresql://ci:***@db:5432/perf",
    ]


def test_the_recorded_settings_name_nothing_of_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = resolve({"store": f"sqlite:///{tmp_path}/h.sqlite"}, lambda name: None, tmp_path)
    recorded = _recorded_settings(settings, tmp_path / "reports" / "run")
    assert (recorded["output"], recorded["baselines"], recorded["store"]) == (
        "reports",
        "baselines",
        "sqlite:///h.sqlite",
    )
    pointed = resolve({"env": f"unsloth={tmp_path}/.venvs/u/bin/python"}, lambda name: None, tmp_path)
    assert _recorded_settings(pointed, tmp_path / "reports" / "run")["env"] == "unsloth=.venvs/u/bin/python"
    secret = resolve({"store": "postgresql://ci:s3cret@db:5432/perf"}, lambda name: None, tmp_path)
    assert "s3cret" not in json.dumps(_recorded_settings(secret, tmp_path))


def test_a_spec_names_its_folders_relative_to_itself_and_reads_old_absolute_ones(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    out_dir = run_dir / "cases" / "c" / "r1"
    out_dir.mkdir(parents=True)
    trace = {"trace_dir": str(run_dir / "traces" / "c"), "worker": "r1"}
    spec = ChildSpec(case={}, steps=3, out_dir=str(out_dir), trace=trace)
    spec.write(out_dir / "spec.json")
    written = json.loads((out_dir / "spec.json").read_text())
    assert (written["out_dir"], written["trace"]["trace_dir"]) == (
        ".",
        os.path.join("..", "..", "..", "traces", "c"),
    )
    assert ChildSpec.read(out_dir / "spec.json") == spec
    # The run folder copied elsewhere still reads with its own folders.
    moved = tmp_path / "copy"
    run_dir.rename(moved)
    again = ChildSpec.read(moved / "cases" / "c" / "r1" / "spec.json")
    assert again.out_dir == str(moved / "cases" / "c" / "r1")
    # A spec written before recorded absolute folders; they are read as they are.
    (moved / "old.json").write_text(json.dumps({**written, "out_dir": "/elsewhere/r1"}))
    assert ChildSpec.read(moved / "old.json").out_dir == "/elsewhere/r1"
