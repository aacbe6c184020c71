"""A run cut half-way (Ctrl-C, a CI time limit's SIGINT) names the case it cut and how to go on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.ground.folder import RunFolder
from trainperf.ground.settings import resolve
from trainperf.launch import interruption
from trainperf.launch.launcher import ChildLauncher
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.run.case_runner import CaseRunner
from trainperf.run.cliff import run_cliff
from trainperf.run.context import open_run
from trainperf.workloads.protocol import read_steps

CASE = Case(
    family="sft_hf", model="qwen3_tiny", method="lora", profile="short", batch_size=4, gpu_classes=("cpu",)
)


def test_steps_on_disk_counts_whole_lines_only(tmp_path: Path) -> None:
    # The runner counts a cut child's steps with the protocol's own reader.
    steps = tmp_path / "steps.jsonl"
    assert len(read_steps(steps)) == 0
    steps.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "dura')
    assert len(read_steps(steps)) == 2


def test_the_runner_records_the_cut_child_and_the_record_lapses_once_the_case_has_a_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = resolve(
        {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines")},
        lambda _n: None,
        tmp_path,
    )
    context = open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path)
    context.say = lambda _line: None

    def cut_after_two_steps(command: list[str], *, log_dir: Path, **_kw: Any) -> None:
        (log_dir / "steps.jsonl").write_text(
            '{"step": 1, "duration_s": 3.0}\n{"step": 2, "duration_s": 5.0}\n'
        )
        raise KeyboardInterrupt

    monkeypatch.setattr("trainperf.launch.process.run_child", cut_after_two_steps)
    with pytest.raises(KeyboardInterrupt):
        ChildLauncher(context).run(CASE, 12, repeat=0, total=3)
    cut = interruption.pending(context.run_dir)
    assert cut is not None and cut.ran_s is not None and cut.ran_s >= 0
    # 10 steps left at the median of the two done (4 s)
    assert cut == interruption.Interruption(
        CASE.id, f"{CASE.id} run 1/3", f"cases/{CASE.id}/r1", 2, 12, cut.ran_s, 40.0,
        measured="step 2 measured 5 s (not judged)",
    )  # fmt: skip
    line = interruption.describe(context.run_dir, cut)
    assert f"interrupted during {CASE.id} run 1/3 after 2/12 steps, " in line
    assert "at its pace it needed about 40s more" in line
    assert f"--perf-resume={context.run_dir}" in line

    (context.run_dir / "results").mkdir(exist_ok=True)
    (context.run_dir / "results" / f"{CASE.id}.json").write_text("{}")  # a resumed run finished it
    assert interruption.pending(context.run_dir) is None


def test_a_cut_cliff_probe_lapses_once_the_resumed_search_has_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe has no result of its own in the folder: the record waits for the search's. Seen on
    an H100: a resumed search finished, and its summary still said it was cut in the probe."""
    cli: dict[str, Any] = {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines")}
    context = open_run(
        resolve(cli, lambda _n: None, tmp_path), Detection(load_classes()["cpu"], None, None, False), tmp_path
    )
    context.say = lambda _line: None

    def cut_at_once(command: list[str], **_kw: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("trainperf.launch.process.run_child", cut_at_once)
    with pytest.raises(KeyboardInterrupt):
        run_cliff(CaseRunner(context), CASE, "batch_size", 1, 8)
    cliff_id = f"{CASE.id}-cliff-batch_size"
    cut = interruption.pending(context.run_dir)
    assert cut is not None and cut.settled_by == cliff_id and cut.case_id != cliff_id  # the probe's own id

    (context.run_dir / "results" / f"{cut.case_id}.json").write_text("{}")  # not what settles it
    assert interruption.pending(context.run_dir) is not None
    (context.run_dir / "results" / f"{cliff_id}.json").write_text("{}")  # the resumed search finished
    assert interruption.pending(context.run_dir) is None


def test_a_record_of_an_older_run_without_the_pace_still_reads(tmp_path: Path) -> None:
    old = {
        "case_id": "c",
        "label": "c run 1/1",
        "child_dir": "cases/c/r1",
        "steps_done": 3,
        "steps_requested": 9,
    }
    RunFolder(tmp_path).interruption_path.write_text(json.dumps(old))
    cut = interruption.pending(tmp_path)
    assert cut is not None and "after 3/9 steps (its files" in interruption.describe(tmp_path, cut)


def test_a_corrupt_record_is_ignored(tmp_path: Path) -> None:
    RunFolder(tmp_path).interruption_path.write_text("{not json")
    assert interruption.pending(tmp_path) is None
    RunFolder(tmp_path).interruption_path.write_text(json.dumps({"case_id": "x"}))
    assert interruption.pending(tmp_path) is None


CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.ground.catalogue import params

KNOBS = {"family": "sft_hf", "model": "qwen3_tiny", "method": "lora", "profile": "short", "batch_size": 4}
CASES = [Case(**KNOBS, gpu_classes=("cpu",)), Case(**{**KNOBS, "batch_size": 2}, gpu_classes=("cpu",))]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""


def _processes_mentioning(text: str) -> list[int]:
    """Pids whose command line mentions ``text`` (Linux /proc), e.g. a run folder's spec file."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def like_a_ci_step(command: list[str]) -> list[str]:
    """The command started with SIGINT ignored, as a non-interactive shell starts a background job
    and CI runners start their steps: the run must still stop on SIGINT (it once trained on)."""
    return ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stop_during_real_training_steps_kills_the_child_and_is_named_in_the_summary(
    tmp_path: Path, stop: int
) -> None:
    # SIGINT: Ctrl-C, `timeout --signal=INT`. SIGTERM: `timeout`'s default, a CI runner cancelling
    # a job; without a handler the parent died at once and the child trained on in its own session.
    (tmp_path / "test_catalogue.py").write_text(CATALOGUE)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "cpu",
        "-q",
        "test_catalogue.py",
        "--perf-steps",
        "2000",
        "--perf-progress-interval",
        "1",
        "--perf-output",
        "reports",
        "--perf-baselines",
        "baselines",
    ]
    (tmp_path / "baselines").mkdir()
    process = subprocess.Popen(
        like_a_ci_step(command), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 240
    for line in process.stdout:
        seen.append(line)
        if "run 1/" in line and "step " in line and "/2000" in line:  # real steps are landing
            break
        assert time.monotonic() < deadline, "".join(seen[-20:])
    else:
        pytest.fail("the run ended before its steps began: " + "".join(seen[-20:]))
    os.kill(process.pid, stop)
    rest, _ = process.communicate(timeout=120)
    output = "".join(seen) + rest
    assert f"interrupted during {CASE.id} run 1/" in output, output[-3000:]
    assert "--perf-resume" in output
    run_dir = next((tmp_path / "reports").iterdir())
    record = json.loads(RunFolder(run_dir).interruption_path.read_text())
    assert 1 <= record["steps_done"] < 2000
    steps_file = run_dir / record["child_dir"] / "steps.jsonl"
    assert len(read_steps(steps_file)) >= record["steps_done"]  # the files stayed
    # The session's record says it was stopped, and after how long: what a merge says of its other cases.
    ended = RunFolder(run_dir).session_records()[-1]
    assert ended["interrupted"] is True and 0 < ended["elapsed_s"] < 300 and ended["ended"]
    # The case the stop never reached is counted, and why, not left off the page.
    assert len(ended["selected"]) == 2
    assert (
        "2 case(s): 0 judged, 1 interrupted, 1 not run (1 the session was interrupted)"
        in (run_dir / "summary.md").read_text()
    )
    leftover = _processes_mentioning(str(run_dir / record["child_dir"]))
    for pid in leftover:  # never leave an orphan training on the test machine
        os.kill(pid, signal.SIGKILL)
    assert leftover == []  # no child left training


def test_a_run_folder_taken_for_pytests_rootdir_is_refused_with_the_form_that_works(tmp_path: Path) -> None:
    """`--perf-resume DIR` as two words makes pytest read DIR as a test path and root itself there: the
    baselines would be looked for inside the run folder and every case would read `new`. Refused."""
    run_dir = tmp_path / "reports" / "20261127-171138-cpu"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}")
    with pytest.raises(TrainperfError, match=f"give it as --perf-resume={run_dir} "):
        resolve({"resume": str(run_dir)}, lambda _name: None, run_dir)
    assert resolve({"resume": str(run_dir)}, lambda _name: None, tmp_path).resume == run_dir


def test_a_cut_runs_steady_steps_are_said_not_judged() -> None:
    # 2 H200s, 2026-11-28: E1's micro-batch-16 run, cut at step 3 of 10 (verl's own step times).
    steps = [
        {"step": k + 1, "duration_s": d, "tokens": 524_288} for k, d in enumerate((132.93, 116.46, 116.22))
    ]
    line = interruption.measured_so_far(steps)
    assert line == "steps 2-3 measured a median 116.3 s a step, 4,507 tokens/s (not judged)"
    assert interruption.measured_so_far(steps[:1]) is None  # warm-up only: nothing steady yet
    no_tokens = [{"step": 1, "duration_s": 2.0}, {"step": 2, "duration_s": 1.0}]
    assert interruption.measured_so_far(no_tokens) == "step 2 measured 1 s (not judged)"
    cut = interruption.Interruption("c", "c run 1/1", "cases/c/r1", 3, 10, ran_s=540.0, measured=line)
    assert f"540s in; {line} (its files" in interruption.describe(Path("/runs/x"), cut)
