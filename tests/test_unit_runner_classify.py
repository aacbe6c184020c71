"""Unit tests of trainperf.runner.classify: how one child's end becomes an outcome."""

from __future__ import annotations

from trainperf.case import Outcome
from trainperf.runner import classify
from trainperf.workloads.protocol import EXIT_OK, EXIT_OOM


def test_result_file_outcome_wins() -> None:
    child = {"outcome": "oom", "message": "OOM at step 3"}
    assert classify(EXIT_OOM, False, child, "some unrelated stderr", 60) == (Outcome.OOM, "OOM at step 3")
    assert classify(EXIT_OK, False, {"outcome": "ok"}, "out of memory warning", 60) == (Outcome.OK, "")


def test_ok_with_nonzero_exit_is_a_crash() -> None:
    outcome, message = classify(139, False, {"outcome": "ok"}, "", 60)
    assert outcome is Outcome.CRASH
    assert "139" in message


def test_no_result_and_cuda_oom_in_stderr_is_oom() -> None:
    stderr = "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    outcome, _ = classify(1, False, {"steps": []}, stderr, 60)
    assert outcome is Outcome.OOM


def test_timeout_wins_over_everything() -> None:
    outcome, message = classify(-15, True, {"outcome": "ok"}, "CUDA out of memory", 90)
    assert outcome is Outcome.TIMEOUT
    assert "90s" in message and "--perf-timeout" in message


def test_killed_by_signal_is_a_crash_naming_the_signal() -> None:
    outcome, message = classify(-9, False, {"steps": [{"step": 0}]}, "step 0 done\n\n", 60)
    assert outcome is Outcome.CRASH
    assert "signal 9" in message
    assert "step 0 done" in message  # the last non-empty stderr line


def test_plain_crash_without_result() -> None:
    outcome, message = classify(1, False, {}, "", 60)
    assert outcome is Outcome.CRASH
    assert "exit status 1" in message and "(empty)" in message
