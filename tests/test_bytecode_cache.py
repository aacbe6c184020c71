"""The children's bytecode cache, where the runner writes none (launch.bytecode)."""

from __future__ import annotations

import importlib
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.launch import bytecode
from trainperf.launch.bytecode import NO_BYTECODE, PREFIX, SWITCH, ships_bytecode, with_bytecode_cache
from trainperf.launch.launcher import child_env


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runner's stack without compiled files: the module the cache is decided on."""
    folder = tmp_path / "stack"
    (folder / "planted_stack").mkdir(parents=True)
    (folder / "planted_stack" / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    monkeypatch.setattr(bytecode, "STACK_MODULE", "planted_stack")
    return folder


def test_a_module_ships_bytecode_only_with_its_compiled_file(stack: Path) -> None:
    assert not ships_bytecode("planted_stack")
    py_compile.compile(str(stack / "planted_stack" / "__init__.py"))
    assert ships_bytecode("planted_stack")
    assert ships_bytecode("no_such_module_anywhere")  # nothing to judge: the runner is left alone


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
    runner: dict[str, str], cached: bool, stack: Path, tmp_path: Path
) -> None:
    given = {"PATH": "/bin", **runner}
    env = with_bytecode_cache(given, tmp_path)
    if cached:
        assert env == {"PATH": "/bin", PREFIX: str(tmp_path)}
    else:
        assert env == given


def test_a_runner_that_ships_bytecode_is_left_alone(stack: Path, tmp_path: Path) -> None:
    py_compile.compile(str(stack / "planted_stack" / "__init__.py"))
    given = {NO_BYTECODE: "1"}
    assert with_bytecode_cache(given, tmp_path) == given


def _import_in_child(env: dict[str, str], source: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import planted_module; print(planted_module.VALUE)"],
        env={**env, "PYTHONPATH": f"{source}:{env['PYTHONPATH']}"},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_child_writes_its_bytecode_to_the_cache_and_never_runs_it_stale(
    stack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
