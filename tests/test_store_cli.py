"""The history, ingest, export and dashboard commands, through their ``run(args)``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from store_data import make_result, nightly, write_run_folder

from trainperf.errors import TrainperfError

SRC = Path(__file__).resolve().parent.parent / "src" / "trainperf" / "cli"
CASE = "sft_hf-qwen3_8b-lora-maxlen-b4"


def command(name: str) -> ModuleType:
    """``trainperf.cli.<name>``; loaded from its file while ``trainperf.cli`` is still a single module."""
    try:
        return importlib.import_module(f"trainperf.cli.{name}")
    except ModuleNotFoundError:
        spec = importlib.util.spec_from_file_location(f"trainperf_cli_{name}", SRC / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def call(name: str, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="trainperf")
    command(name).add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([name, *argv])
    return int(args.func(args))


@pytest.fixture()
def store_url(tmp_path: Path) -> str:
    for day in range(20):
        step = 0.5 * (1.04 if day >= 10 else 1.0)
        write_run_folder(
            tmp_path / "reports" / f"n{day:02d}",
            nightly(day),
            [make_result(CASE, nightly(day), step, seed=day)],
        )
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert call("ingest", str(tmp_path / "reports"), "--store", url, "--quiet") == 0
    return url


def test_history_json_lists_the_runs_oldest_first_with_the_change_point(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert call("history", CASE, "--store", store_url, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    starts = [run["started"] for run in data["runs"]]
    assert len(starts) == 20 and starts == sorted(starts)
    assert [cp["started"] for cp in data["change_points"]] == [nightly(10)]
    assert data["change_points"][0]["change"] == pytest.approx(0.04, abs=0.01)


def test_history_text_and_an_unknown_case(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert call("history", CASE, "--store", store_url) == 0
    out = capsys.readouterr().out
    assert "---- change point +4" in out and "no environment change" in out
    with pytest.raises(
        TrainperfError, match="no stored result of case 'sft_hf-qwen3_8b-lora-maxlen'.*did you mean"
    ):
        call("history", CASE[:-3], "--store", store_url)


def test_export_writes_bmf_and_one_openmetrics_file_per_run(store_url: str, tmp_path: Path) -> None:
    assert (
        call("export", "--format", "bmf", "--store", store_url, "--output", str(tmp_path / "bmf.json")) == 0
    )
    assert list(json.loads((tmp_path / "bmf.json").read_text())) == [CASE]
    assert (
        call(
            "export",
            "--format",
            "openmetrics",
            "--run",
            "all",
            "--store",
            store_url,
            "--output",
            str(tmp_path / "om"),
        )
        == 0
    )
    assert len(list((tmp_path / "om").glob("*.om"))) == 20


def test_dashboard_and_a_missing_store(store_url: str, tmp_path: Path) -> None:
    assert call("dashboard", "--store", store_url, "--output", str(tmp_path / "site")) == 0
    assert (tmp_path / "site" / "cases" / f"{CASE}.html").is_file()
    with pytest.raises(TrainperfError, match="no results store at .*trainperf ingest RUN_DIR"):
        call("history", CASE, "--store", str(tmp_path / "none.sqlite"))


def test_the_command_parser_leaves_the_store_unimported() -> None:
    """Every ``trainperf`` command builds the whole parser: the store's SQLAlchemy (and the change
    points' numpy) load only when a history command runs."""
    code = (
        "import sys; from trainperf.cli.parser import build_parser; build_parser(); "
        "print(sorted(m for m in ('sqlalchemy', 'numpy', 'trainperf.store.db') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
