"""What the fleet's end-to-end tests share: two tiny cpu cases run for real, their verdicts, and
the check that a merged nightly judges as one unsharded session would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SELECTION = "tiny-lora-short or tiny-full-short"
CASES = ["sft_hf-qwen3_tiny-full-short-b4", "sft_hf-qwen3_tiny-lora-short-b4"]


def pytest_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-k", SELECTION, "-p", "no:cacheprovider",
         "-rA", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False, env=env,
    )  # fmt: skip


def collect(marker: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest perf_tests -m MARKER --collect-only`` with the results history off."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", marker, "--collect-only", "-q",
         "-p", "no:cacheprovider", "--perf-store", "off", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


# The verdicts of two tiny cases that trained to the end, judged against baselines/cpu/: what this
# host's speed against the baseline's host (or a neighbour, which the host CPU watch calls
# `contaminated`) makes of them. These tests check the fleet (shards, merge, scheduler), not the
# host's speed; a crashed, hung or refused child is `outcome-changed`, `not-compared` or missing,
# and is never accepted.
TIMING_VERDICTS = {"pass", "improved", "noisy", "regressed", "contaminated"}


def verdicts(run_dir: Path) -> dict[str, Any]:
    return {
        path.stem: json.loads(path.read_text())["verdict"]["verdict"]
        for path in sorted((run_dir / "results").glob("*.json"))
    }


def assert_every_case_trained(run_dir: Path, returncode: int | None = None) -> dict[str, str]:
    """Both cases have a result, each trained to the end (outcome ``ok``) and judged on its timings;
    ``returncode`` (a session's, or a merge's) is the one those verdicts call for. The verdicts."""
    results = {
        path.stem: json.loads(path.read_text()) for path in sorted((run_dir / "results").glob("*.json"))
    }
    assert sorted(results) == CASES, f"results in {run_dir}: {sorted(results)}"
    for case, result in results.items():
        verdict = result["verdict"]
        assert result["outcome"] == "ok", f"{case}: {result['outcome']}: {result.get('message', '')[:300]}"
        assert verdict["verdict"] in TIMING_VERDICTS, (
            f"{case}: {verdict['verdict']}: {verdict['reason'][:300]}"
        )
    if returncode is not None:
        fails = any(result["verdict"]["fails"] for result in results.values())
        assert returncode == int(fails), f"exit status {returncode} for verdicts {verdicts(run_dir)}"
    return verdicts(run_dir)


def assert_merged_like_one_session(merged: Path, tmp_path: Path) -> None:
    """One unsharded session judges the merged results again (--perf-resume: judged, not re-run):
    every case trained, and each case's verdict is the one the shards reached."""
    sharded = assert_every_case_trained(merged)
    again = tmp_path / "unsharded"
    shutil.copytree(merged / "results", again / "results")
    done = pytest_run("--perf-resume", str(again), "--perf-store", "off")
    assert "resumed: judged from the stored result, not re-run" in done.stdout, done.stdout[-3000:]
    unsharded = assert_every_case_trained(again, done.returncode)
    for case in CASES:
        assert unsharded[case] == sharded[case], (
            f"{case}: {sharded[case]} sharded, {unsharded[case]} in one session"
        )
