"""trainperf ab: environment checks, pooling of rounds, and a real A/A run on the CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.cli import main
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult, MetricValue
from trainperf.studies.ab import pool_case


def test_a_path_that_is_not_a_python_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ab", "--env-a", str(tmp_path / "nope"), "--env-b", sys.executable, "--", "-m", "cpu"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--env-a" in err and "is not a Python interpreter" in err and len(err.strip().splitlines()) == 1


def test_a_python_without_the_training_stack_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As B it is the study's verdict (broken-environment, status 1); as A it stops the study in one
    line (status 2): nothing can be judged against it."""
    bare = shutil.which("python3") if not shutil.which("python3", path="/usr/bin") else "/usr/bin/python3"
    probe = subprocess.run([bare, "-c", "import torch"], capture_output=True, check=False) if bare else None
    if bare is None or probe is None or probe.returncode == 0:
        pytest.skip("no interpreter without torch on this machine")
    out_b, out_a = str(tmp_path / "b"), str(tmp_path / "a")
    assert main(["ab", "--env-a", sys.executable, "--env-b", bare, "--output", out_b, "--", "-m", "cpu"]) == 1
    out = capsys.readouterr().out
    assert f"environment B: broken-environment: --env-b {bare}: import torch: ModuleNotFoundError" in out
    assert main(["ab", "--env-a", bare, "--env-b", sys.executable, "--output", out_a, "--", "-m", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "trainperf: error: environment A cannot run, nothing was measured"
    )


def test_rounds_pool_into_one_result_per_case() -> None:
    def result(samples: list[float]) -> CaseResult:
        keys = [f"{i}:100" for i in range(len(samples))]
        metric = MetricValue(sorted(samples)[len(samples) // 2], "s", samples, [samples[0]], keys)
        return CaseResult(
            case_id="c", case={}, gpu_class="cpu", outcome="ok", metrics={"step_time_s": metric}, runs=[{}]
        )

    pooled = pool_case([result([1.0, 1.1, 1.2]), result([2.0, 2.1, 2.2])])
    step = pooled.metrics["step_time_s"]
    assert step.samples == [1.0, 1.1, 1.2, 2.0, 2.1, 2.2] and step.keys is not None and len(step.keys) == 6
    assert step.per_run == [1.0, 2.0] and len(pooled.runs) == 2 and step.value == pytest.approx(1.6)


def test_a_over_a_on_the_cpu_passes(tmp_path: Path) -> None:
    """The same environment twice, two rounds interleaved: one tiny case per side, judged B against
    A. It passes; its rounds are recorded in the study's own store, never in the runner's history."""
    history = tmp_path / "runner-history.sqlite"
    completed = subprocess.run(
        [
            sys.executable, "-m", "trainperf.cli", "ab", "--env-a", sys.executable, "--env-b", sys.executable,
            "--rounds", "2", "--output", str(tmp_path / "study"), "--",
            "perf_tests/test_sft_hf.py", "-m", "cpu", "-k", "qwen3_tiny and lora and short and not qlora",
            "--perf-steps", "10",
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "TRAINPERF_STORE": f"sqlite:///{history}"},
    )  # fmt: skip
    output = completed.stdout[-2000:] + completed.stderr[-2000:]
    # Interleaved rounds spread a loaded host's drift over both sides, and the CPU class's timing
    # tolerance is wide: the same environment twice must not read as a regression.
    assert "1 cases compared" in completed.stdout and "nothing failing" in completed.stdout, output
    study = tmp_path / "study"
    record = json.loads((study / "ab.json").read_text())
    case = record["comparison"]["cases"][0]
    if "host CPU:" in case["reason"]:  # the watch found the host crowded in a round: not judged
        assert case["verdict"] == "contaminated" and not case["fails"], case
        assert completed.returncode == 3 and record["verdict"] == "not-judged", output
        assert "not judged: 1 case(s) contaminated" in completed.stdout
    else:
        assert completed.returncode == 0 and record["verdict"] == "passes", output
        assert case["verdict"] in ("pass", "noisy"), case
    rounds = sorted(p.name for p in study.iterdir() if p.name.startswith("round"))
    assert rounds == ["round1-A", "round1-B", "round2-A", "round2-B"]
    assert (study / "study.sqlite").is_file() and not history.exists()


def test_a_relative_interpreter_is_made_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children start in their own run folder: a relative --perf-python must not break them."""
    from trainperf.ground.settings import resolve

    monkeypatch.chdir(REPO_ROOT)
    relative = (
        Path(sys.executable).relative_to(REPO_ROOT)
        if Path(sys.executable).is_relative_to(REPO_ROOT)
        else None
    )
    if relative is None:
        pytest.skip("the test interpreter is outside the repository")
    settings = resolve({"python": str(relative)}, lambda name: None, REPO_ROOT)
    assert settings.python == str(REPO_ROOT / relative)
