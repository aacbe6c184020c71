"""Unit tests of trainperf.launch.outcome.classify: how one child's end becomes an outcome."""

from __future__ import annotations

from trainperf.case import Outcome
from trainperf.launch.outcome import classify, timeout_advice
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


# The 0.5B PPO micro-batch-2 verl case on an H100 (2026-11-22): cut by a 480 s limit after 4 of
# its 5 steps, having spent most of the limit setting up.
MB2_STEPS = [
    {"step": 1, "duration_s": 65.1},
    {"step": 2, "duration_s": 33.6},
    {"step": 3, "duration_s": 34.3},
    {"step": 4, "duration_s": 34.9},
]


def test_a_timeout_says_what_limit_the_run_needed_at_its_own_pace() -> None:
    outcome, message = classify(-15, True, {"steps": MB2_STEPS}, "", 480, steps_requested=5)
    assert outcome is Outcome.TIMEOUT
    # 480 s for set-up and 4 steps, one more at the median step (34.6 s): 515 s; a fifth more, in minutes
    assert "at step 4/5" in message and "about 515s" in message and "--perf-timeout 660 or more" in message


def test_a_timeout_before_the_first_step_says_so() -> None:
    _, message = classify(-15, True, {"steps": []}, "", 300, steps_requested=10)
    assert "cut before its first step ended" in message and "300s" in message


def test_timeout_advice_is_silent_when_every_step_was_done() -> None:
    assert timeout_advice(MB2_STEPS, 4, 480) == ""
