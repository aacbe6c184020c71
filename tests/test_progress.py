"""The session's progress line: cases done of the total, elapsed, and the pace's estimate of what is
left, spread over the workers (fake clock: no timing in the test)."""

from __future__ import annotations

import dataclasses

import pytest

from trainperf.report.progress import SessionProgress, clock
from trainperf.report.terminal import case_label


def test_each_ended_case_says_k_of_n_elapsed_and_what_is_left_at_the_pace_over_the_workers() -> None:
    progress = SessionProgress(total=5, workers=2, started=1000.0)
    assert progress.start_line() == "[trainperf] session: 5 case(s) to run on 2 workers"
    first = progress.ended("sft_hf-qwen3_8b-lora-short-b4", "passed", 120.0, now=1120.0)
    # 4 left at 120 s each, over 2 workers: 4 min
    assert first == (
        "[trainperf] case 1/5 done: sft_hf-qwen3_8b-lora-short-b4 passed (2m00s); 2m00s in, ~4m00s left "
        "at this pace [1 passed]"
    )
    progress.ended("a", "failed", 60.0, now=1130.0)
    progress.ended("b", "skipped", 0.0, now=1130.0)
    fourth = progress.ended("c", "passed", 180.0, now=1300.0)
    assert "~2m00s left" in fourth  # one left at the mean of the three that ran (120 s): a skip took none
    last = progress.ended("d", "passed", 90.0, now=1400.0)
    assert last.endswith("6m40s in [1 failed, 3 passed, 1 skipped]") and "left" not in last


def test_cases_skipped_before_the_start_are_said_apart_and_not_counted_ahead() -> None:
    progress = SessionProgress(total=4, skipped_at_start={"needs 2 GPUs; this session sees 1": 2})
    assert progress.start_line() == (
        "[trainperf] session: 4 case(s) to run; 2 skipped (needs 2 GPUs; this session sees 1)"
    )
    first = progress.ended("a", "passed", 60.0, now=progress.started + 60)
    assert "case 1/4 done" in first and "~3m00s left" in first


def test_a_case_needing_more_gpus_than_the_host_shows_is_marked_skipped_at_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainperf.case import Case
    from trainperf.ground.settings import resolve
    from trainperf.measure.detection import Detection
    from trainperf.measure.hardware import load_classes
    from trainperf.paths import REPO_ROOT
    from trainperf.run.session import SessionState, skip_unplaceable

    class Item:
        def __init__(self, case: Case) -> None:
            self.callspec = type("CallSpec", (), {"params": {"case": case}})()
            self.marks: list[pytest.Mark] = []

        def add_marker(self, mark: pytest.MarkDecorator) -> None:
            self.marks.append(mark.mark)

    base = Case(family="sft_hf", model="qwen3_8b", method="lora", profile="short", batch_size=4)
    one, two = Item(base), Item(dataclasses.replace(base, gpus=2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    gpu = Detection(load_classes()["h100"], "0", None, False)
    state = SessionState(resolve({}, lambda _name: None, REPO_ROOT), REPO_ROOT, gpu, "h100")
    skip_unplaceable(state, [one, two])
    assert one.marks == [] and [m.kwargs["reason"] for m in two.marks] == [
        "needs 2 GPUs; this session sees 1"
    ]
    assert state.unplaced == {two.callspec.params["case"].id: "needs 2 GPUs; this session sees 1"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    three = Item(dataclasses.replace(base, gpus=2))
    skip_unplaceable(state, [three])
    assert three.marks == []
    cpu = SessionState(state.settings, REPO_ROOT, Detection(load_classes()["cpu"], None, None, False), "cpu")
    on_cpu = Item(dataclasses.replace(base, gpus=2))
    skip_unplaceable(cpu, [on_cpu])
    assert on_cpu.marks == []  # the cpu class places nothing


def test_clock_and_case_labels() -> None:
    assert [clock(s) for s in (4.4, 59.6, 723, 3725)] == ["4s", "1m00s", "12m03s", "1h02m"]
    assert case_label("perf_tests/test_sft.py::test_case[sft_hf-qwen3_tiny-lora-short-b4]") == (
        "sft_hf-qwen3_tiny-lora-short-b4"
    )
    assert case_label("tests/test_x.py::test_plain") is None
    assert case_label("tests/test_tiers.py::test_a_bad_night[27/11/2026]") is None  # not a case


def test_a_session_without_xdist_loads_the_progress_lines() -> None:
    # xdist's hooks are optional: without xdist an unknown hook would stop every session at start.
    import subprocess
    import sys

    from trainperf.paths import REPO_ROOT

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-p", "no:xdist", "--collect-only", "-q"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "PluginValidationError" not in done.stdout + done.stderr
