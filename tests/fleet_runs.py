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


def verdicts(run_dir: Path) -> dict[str, Any]:
    return {
        path.stem: json.loads(path.read_text())["verdict"]["verdict"]
        for path in sorted((run_dir / "results").glob("*.json"))
    }


def assert_merged_like_one_session(merged: Path, tmp_path: Path) -> None:
    """One unsharded session judges the merged results again (--perf-resume: judged, not re-run):
    every verdict is the one the shards reached."""
    again = tmp_path / "unsharded"
    shutil.copytree(merged / "results", again / "results")
    done = pytest_run("--perf-resume", str(again), "--perf-store", "off")
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    assert "resumed: judged from the stored result, not re-run" in done.stdout
    assert sorted(verdicts(again)) == CASES
    assert verdicts(again) == verdicts(merged)
