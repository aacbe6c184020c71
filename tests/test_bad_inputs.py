"""Bad inputs that were accepted without a word, or answered with a traceback, found by
``benchmarks/bad_inputs.py``: each now one line that says what to give instead."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from trainperf.cli import main
from trainperf.paths import REPO_ROOT
from trainperf.run.session import unknown_markers


def _probe_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bad_inputs", REPO_ROOT / "benchmarks" / "bad_inputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bad_inputs"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_probe_tells_a_clear_refusal_from_a_silent_accept_a_traceback_and_a_leak() -> None:
    classify = _probe_module().classify
    clear = classify("p", 4, "ERROR: --perf-repeats='0' is not valid: ... (must be >= 1)\n", 1.0)
    assert clear.verdict == "clear" and clear.line.startswith("ERROR: --perf-repeats")
    assert classify("p", 0, "1 passed in 9s", 9.0).verdict == "silent"
    assert classify("p", 5, "73 deselected", 1.0).verdict == "silent"  # pytest's "no tests"
    assert classify("p", None, "", 300.0).verdict == "silent"  # ran past the probe's limit
    assert (
        classify("p", 1, "Traceback (most recent call last):\n  ...\nOSError: x", 1.0).verdict == "traceback"
    )
    assert classify("p", 2, "trainperf: error: something failed", 1.0).verdict == "unclear"
    assert classify("p", 2, "trainperf: error: bad url postgresql://u:s3cret@h/db", 1.0).verdict == "leak"


def test_an_unregistered_marker_in_m_is_named_with_the_classes() -> None:
    registered = ["cpu: cases of the cpu class", "h100: ...", "slow(reason): ..."]
    assert unknown_markers("cpu and not slow", registered) is None
    assert unknown_markers("skipif or h100", registered) is None
    said = unknown_markers("h10 or cpu", registered)
    assert said is not None and said.startswith("-m 'h10 or cpu' names no registered marker 'h10'")
    assert "the GPU classes are cpu, h100, h200, maxq" in said


def test_pytest_m_with_a_typo_is_refused_before_every_case_is_deselected() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-p", "no:cacheprovider", "-q", "-m", "h10"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    assert "ERROR: -m 'h10' names no registered marker 'h10'" in done.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["baselines", "--gpu-class", "tpu9"],
            "no baselines of class 'tpu9' under baselines: give one of cpu",
        ),
        (["baselines", "--baselines", "/nonexistent/b"], "no baselines folder at /nonexistent/b"),
        (["env", "--gpu-class", "tpu9", "list"], "unknown GPU class 'tpu9' (--gpu-class); known: cpu"),
    ],
)
def test_cli_refuses_an_unknown_class_or_folder_in_one_line(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_path_the_cli_cannot_write_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert main(["ingest", str(tmp_path), "--store", store, "--quiet"]) in (0, 2)  # the store exists now
    capsys.readouterr()
    assert main(["dashboard", "--store", store, "--output", str(blocker / "site")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trainperf: error: ") and "a-file/site" in err and err.count("\n") == 1
    assert "give a path that exists and this user can write" in err
