"""trainperf ab: environment checks, pooling of rounds, and a real A/A run on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainperf.case_record import CaseRecord
from trainperf.cli import main
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult, MetricValue
from trainperf.run_record import RunRecord
from trainperf.studies.ab import pool_case, round_order, rounds_in, started_at


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
    # A fresh venv without site packages: an interpreter without the training stack on any machine.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")
    assert subprocess.run([bare, "-c", "import torch"], capture_output=True, check=False).returncode != 0
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
            case_id="c",
            case=CaseRecord(),
            gpu_class="cpu",
            outcome="ok",
            metrics={"step_time_s": metric},
            runs=[RunRecord()],
        )

    pooled = pool_case([result([1.0, 1.1, 1.2]), result([2.0, 2.1, 2.2])])
    step = pooled.metrics["step_time_s"]
    assert step.samples == [1.0, 1.1, 1.2, 2.0, 2.1, 2.2] and step.keys is not None and len(step.keys) == 6
    assert step.per_run == [1.0, 2.0] and len(pooled.runs) == 2 and step.value == pytest.approx(1.6)


def _ab_on_the_cpu(study: Path, history: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "trainperf.cli", "ab", "--env-a", sys.executable, "--env-b", sys.executable,
            "--output", str(study), *options, "--", *A_A_SELECTION,
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "TRAINPERF_STORE": f"sqlite:///{history}"},
    )  # fmt: skip


A_A_SELECTION = (
    "perf_tests/test_sft_hf.py", "-m", "cpu", "-k", "qwen3_tiny and lora and short and not qlora",
    "--perf-steps", "10",
)  # fmt: skip


def test_a_over_a_on_the_cpu_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same environment twice, two rounds interleaved: one tiny case per side, judged B against
    A. It passes; its rounds are recorded in the study's own store, never in the runner's history.
    The study is measured as one interrupted after its first round and resumed."""
    history = tmp_path / "runner-history.sqlite"
    study = tmp_path / "study"
    first = _ab_on_the_cpu(study, history, "--rounds", "1")
    assert first.returncode in (0, 3) and "precision: " in first.stdout, first.stderr[-2000:]
    assert sorted(p.name for p in study.glob("round*")) == ["round1-A", "round1-B"]
    # Measured rounds are never mixed with or buried under a new study's: one line, nothing run.
    again = ["ab", "--env-a", sys.executable, "--env-b", sys.executable, "--output", str(study)]
    assert main([*again, "--", *A_A_SELECTION]) == 2
    assert "holds a study's rounds already: --resume continues it" in capsys.readouterr().err
    assert main([*again, "--resume", "--", *A_A_SELECTION[:-1], "12"]) == 2
    assert "holds a study of another selection or other environments" in capsys.readouterr().err
    completed = _ab_on_the_cpu(study, history, "--rounds", "2", "--resume")
    assert "resuming" in completed.stdout and "1 round(s) measured on both sides are kept" in completed.stdout
    assert "round 1/" not in completed.stdout and "round 2/2, environment B" in completed.stdout
    output = completed.stdout[-2000:] + completed.stderr[-2000:]
    # Interleaved rounds spread a loaded host's drift over both sides, and the CPU class's timing
    # tolerance is wide: the same environment twice must not read as a regression.
    assert "1 cases compared" in completed.stdout and "nothing failing" in completed.stdout, output
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
    # The order turns every other round (A B, B A), so a steady drift is not charged to B.
    folders_a, folders_b = rounds_in(study)
    started = [
        started_at(folders_a[0]),
        started_at(folders_b[0]),
        started_at(folders_b[1]),
        started_at(folders_a[1]),
    ]
    assert None not in started and started == sorted(started), started
    # Judged again from its rounds, measuring nothing: the same verdict, the study's record kept.
    assert main(["ab", "--judge-only", "--output", str(study), "--"]) == completed.returncode
    again = json.loads((study / "ab.json").read_text())
    assert again["verdict"] == record["verdict"] and again["a"] == record["a"] and "judged" in again
    assert again["comparison"]["cases"][0]["verdict"] == case["verdict"]
    assert again["comparison"]["run_a"] == record["comparison"]["run_a"]  # its labels kept too


def test_a_relative_interpreter_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Children start in their own run folder: a relative --perf-python must not break them."""
    from trainperf.ground.settings import resolve

    # A project whose interpreter is inside it (a venv in the checkout), given relative to its root.
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.chdir(tmp_path)
    settings = resolve({"python": "venv/bin/python"}, lambda name: None, tmp_path)
    assert settings.python == str(tmp_path / "venv" / "bin" / "python")  # the venv's, not its target


def test_rounds_turn_their_order_every_other_round() -> None:
    assert [[label for label, _ in round_order(i, "a", "b")] for i in (1, 2, 3)] == [
        ["A", "B"],
        ["B", "A"],
        ["A", "B"],
    ]


def _result(case_id: str, outcome: str = "ok", message: str = "") -> CaseResult:
    samples = [1.0 + 0.001 * (i % 3) for i in range(12)]
    keys = [f"{i}:100" for i in range(12)]
    metric = MetricValue(1.001, "s", samples, [1.001], keys)
    metrics = {"step_time_s": metric} if outcome == "ok" else {}
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(),
        gpu_class="cpu",
        outcome=outcome,
        message=message,
        metrics=metrics,
        runs=[RunRecord()],
    )


def test_a_case_a_cannot_run_is_not_judged_and_the_rest_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crashed in one case (a hook that refuses A's version, say): that case is not judged and says
    why, the other is judged, status 3 (not judged), and the record keeps both: nothing is lost."""
    from argparse import Namespace

    from trainperf.cli.ab import NOT_JUDGED, _judge
    from trainperf.studies.ab_record import ABRecord

    results_a = [
        _result("x", "crash", "Traceback...\nTrainperfError: trl 1.0.0 lacks _generate"),
        _result("y"),
    ]
    results_b = [_result("x"), _result("y")]
    args = Namespace(json=False, strict=False, until_within=None)
    status = _judge(args, tmp_path, results_a, results_b, ("trl 1.0.0", "trl 1.16.0"), ABRecord(rounds=1))
    assert status == NOT_JUDGED
    record = json.loads((tmp_path / "ab.json").read_text())
    assert record["verdict"] == "not-judged"
    assert record["a_not_run"] == {"x": "TrainperfError: trl 1.0.0 lacks _generate"}
    assert [c["case_id"] for c in record["comparison"]["cases"]] == ["y"]
    assert (
        "x: not judged (A cannot run it: TrainperfError: trl 1.0.0 lacks _generate)"
        in capsys.readouterr().out
    )
    # Every case A cannot run: nothing to compare, still a record and the same status.
    assert _judge(args, tmp_path, results_a[:1], results_b[:1], ("a", "b"), ABRecord(rounds=1)) == NOT_JUDGED
    assert "comparison" not in json.loads((tmp_path / "ab.json").read_text())


def test_prepare_only_checks_both_environments_and_measures_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Environments built and checked before the GPU is taken: the study's GPU time is its rounds."""
    study = tmp_path / "study"
    command = ["ab", "--env-a", sys.executable, "--env-b", sys.executable, "--prepare-only"]
    assert main([*command, "--output", str(study), "--", *A_A_SELECTION]) == 0
    printed = capsys.readouterr().out
    assert "environment A: " in printed and "environment B: " in printed and "nothing measured" in printed
    assert not study.exists()
