"""The children's bytecode cache, where the runner writes none (run.bytecode)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.run.bytecode import NO_BYTECODE, PREFIX, SWITCH, with_bytecode_cache
from trainperf.run.launcher import child_env


@pytest.mark.parametrize(
    ("runner", "cached"),
    [
        ({NO_BYTECODE: "1"}, True),
        ({}, False),  # the runner writes bytecode beside its packages already
        ({NO_BYTECODE: ""}, False),  # empty is unset, for Python too
        ({NO_BYTECODE: "1", PREFIX: "/elsewhere"}, False),  # the runner's own prefix
        ({NO_BYTECODE: "1", SWITCH: "off"}, False),
    ],
)
def test_the_cache_is_used_only_where_the_runner_writes_no_bytecode(
    runner: dict[str, str], cached: bool, tmp_path: Path
) -> None:
    given = {"PATH": "/bin", **runner}
    env = with_bytecode_cache(given, tmp_path)
    if cached:
        assert env == {"PATH": "/bin", PREFIX: str(tmp_path)}
    else:
        assert env == given


def _import_in_child(env: dict[str, str], source: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import planted_module; print(planted_module.VALUE)"],
        env={**env, "PYTHONPATH": f"{source}:{env['PYTHONPATH']}"},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_child_writes_its_bytecode_to_the_cache_and_never_runs_it_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NO_BYTECODE, "1")
    monkeypatch.delenv(PREFIX, raising=False)
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "site"
    source.mkdir()
    (source / "planted_module.py").write_text("VALUE = 1\n")
    env = child_env(None)
    assert _import_in_child(env, source) == "1"
    cached = list((tmp_path / "cache" / "bytecode").rglob("planted_module*.pyc"))
    assert len(cached) == 1, "the child wrote no bytecode into the suite's cache"
    assert not (source / "__pycache__").exists(), "the runner's own folder was written to"
    # An upgraded package: Python checks the source's size and time, and compiles it again.
    (source / "planted_module.py").write_text("VALUE = 'upgraded'\n")
    assert _import_in_child(env, source) == "upgraded"
