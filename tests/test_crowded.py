"""The end-to-end tests' rule for a crowded host (crowded.py), checked on written results: a planted
regression is `regressed` and fails, or `contaminated` and passes only where the host CPU watch
recorded a crowded host; a baseline is missing only for such a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from crowded import planted_verdict, written_baseline

CASE = "sft_hf-qwen3_tiny-lora-short-b4"
CROWDED = {"reasons": ["host CPU: other processes used 1.0 of 2 cores on a host 98% busy (python pid 9)"]}


class Session:
    """What planted_verdict asks of a pytester run: its outcome counts."""

    def __init__(self, **outcomes: int) -> None:
        self.outcomes = outcomes

    def assert_outcomes(self, **expected: int) -> None:
        assert self.outcomes == expected, (self.outcomes, expected)


def _write(run_dir: Path, verdict: str, contamination: dict[str, Any] | None) -> Path:
    reason = f"{verdict}: host CPU: ..." if contamination else verdict
    result = {"runs": [{"contamination": contamination}], "verdict": {"verdict": verdict, "reason": reason}}
    (run_dir / "results").mkdir(parents=True, exist_ok=True)
    (run_dir / "results" / f"{CASE}.json").write_text(json.dumps(result))
    return run_dir


def test_a_planted_regression_fails_or_is_contaminated_only_on_a_crowded_host(tmp_path: Path) -> None:
    assert planted_verdict(Session(failed=1), _write(tmp_path, "regressed", None), CASE) == "regressed"
    assert (
        planted_verdict(Session(passed=1), _write(tmp_path, "contaminated", CROWDED), CASE) == "contaminated"
    )
    with pytest.raises(AssertionError):  # a planted slowdown that passed on a quiet host
        planted_verdict(Session(passed=1), _write(tmp_path, "pass", None), CASE)
    with pytest.raises(AssertionError):  # a crowded run judged all the same
        planted_verdict(Session(failed=1), _write(tmp_path, "regressed", CROWDED), CASE)
    with pytest.raises(AssertionError):  # a regression that did not fail its case
        planted_verdict(Session(passed=1), _write(tmp_path, "regressed", None), CASE)


def test_a_baseline_is_missing_only_for_a_crowded_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    baselines = tmp_path / "baselines"
    (baselines / "cpu").mkdir(parents=True)
    run_dir = _write(tmp_path / "run", "new", None)
    with pytest.raises(FileNotFoundError):  # a quiet run wrote none: the test fails
        written_baseline(baselines, run_dir, CASE)
    (baselines / "cpu" / f"{CASE}.json").write_text('{"outcome": "ok"}')
    assert written_baseline(baselines, run_dir, CASE) == {"outcome": "ok"}
    crowded = _write(tmp_path / "crowded", "contaminated", CROWDED)
    with pytest.raises(AssertionError, match="a crowded run was written as a baseline"):
        written_baseline(baselines, crowded, CASE)
    (baselines / "cpu" / f"{CASE}.json").unlink()
    with pytest.raises(pytest.skip.Exception, match="the host was crowded during the baseline run"):
        written_baseline(baselines, crowded, CASE)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot run under CI"):
        written_baseline(baselines, crowded, CASE)
