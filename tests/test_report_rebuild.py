"""``trainperf report`` rebuilding the page of a real night a time limit cut (four H100s, 2026-11-28,
from its measurement's archive): the rebuilt summary and page lead with the same headline the
session wrote, the cut case counted and named with how to go on, checked in headless Chromium."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from pathlib import Path

import required
from chromium import FLAGS as CHROMIUM_FLAGS

from trainperf.paths import REPO_ROOT

ARCHIVE = REPO_ROOT / "docs" / "measurements" / "2026-11-28-h100x4-night" / "raw.tar.xz"
HEADLINE = "11 case(s): 10 judged (1 expected-oom, 1 new, 8 pass), 1 interrupted"
CUT = "interrupted during sft_unsloth-qwen3_32b-qlora-long-b32 run 1/1 after 19/20 steps"


def _cut_night(tmp_path: Path) -> Path:
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(
            tmp_path, members=[m for m in tar.getmembers() if m.name.startswith("night2/")], filter="data"
        )
    return tmp_path / "night2"


def test_a_rebuilt_page_of_a_cut_night_counts_and_names_the_cut_case(tmp_path: Path) -> None:
    run_dir = _cut_night(tmp_path)
    # What the session itself wrote, before the limit cut it.
    assert f"**{HEADLINE}**" in (run_dir / "summary.md").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "report", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(HEADLINE) and CUT in done.stdout
    summary = (run_dir / "summary.md").read_text()
    assert f"**{HEADLINE}**" in summary and CUT in summary
    assert "trainperf: night 2026-11-28: 9 case(s) took 10.1 GPU-min" in summary
    dom = subprocess.run(
        [
            required.chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            (run_dir / "index.html").resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"<[^>]+>", "", dom.stdout)
    assert HEADLINE in text and CUT in text
    assert text.index(HEADLINE) < text.index("sft_hf-qwen3_8b-qlora-short-b4")  # first, above the table
