"""The session's progress line: cases done of the total, elapsed, and the pace's estimate of what is
left, spread over the workers (fake clock: no timing in the test)."""

from __future__ import annotations

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
    assert "~1m30s left" in fourth  # one left at the mean (90 s), on one of the workers
    last = progress.ended("d", "passed", 90.0, now=1400.0)
    assert last.endswith("6m40s in [1 failed, 3 passed, 1 skipped]") and "left" not in last


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
