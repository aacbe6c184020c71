"""The trend site: pages per case, change points and environment changes marked, checked in Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from store_data import GPU, make_result, nightly, write_run_folder

from trainperf.report.dashboard import build_site
from trainperf.run.ingest import ingest
from trainperf.store.db import open_store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
CASES = ("sft_hf-qwen3_8b-lora-maxlen-b4", "sft_hf-qwen3_8b-lora-short-b4")


def make_site(tmp_path: Path) -> Path:
    """24 nights: from night 12 the maxlen case is 5% slower, and transformers moved on that night."""
    for day in range(24):
        fp = GPU if day < 12 else {**GPU, "transformers": "5.18.0"}
        results = [
            make_result(CASES[0], nightly(day), 0.5 * (1.05 if day >= 12 else 1), fingerprint=fp, seed=day),
            make_result(CASES[1], nightly(day), 0.3, fingerprint=fp, seed=100 + day),
        ]
        write_run_folder(tmp_path / "reports" / f"n{day:02d}", nightly(day), results, fp)
    store = open_store(str(tmp_path / "h.sqlite"))
    ingest(store, [tmp_path / "reports"], say=lambda _: None)
    assert build_site(store, tmp_path / "site") == 2
    return tmp_path / "site"


def test_the_case_page_marks_the_change_point_and_its_environment_change(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    page = (site / "cases" / f"{CASES[0]}.html").read_text()
    assert page.count("class='cp'") >= 1 and "transformers 5.17.0 -&gt; 5.18.0" in page
    assert re.search(r"step_time_s \+5\.\d%</span> at run 2026-01-13", page)
    assert "href='../../reports/n00/index.html'" in page
    assert "<script src" not in page and "http" not in page.split("</style>")[0]  # nothing fetched from a CDN
    index = (site / "index.html").read_text()
    assert index.count("class='plot spark'") == 8 and f"cases/{CASES[1]}.html" in index


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; .ci/run does)"
)
@pytest.mark.parametrize("page", ["index.html", f"cases/{CASES[0]}.html"])
def test_pages_render_in_headless_chromium_without_script_errors(tmp_path: Path, page: str) -> None:
    site = make_site(tmp_path)
    assert CHROMIUM is not None
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            (site / page).resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    html_tag = re.search(r"<html[^>]*>", dom.stdout)
    assert html_tag is not None and 'data-report="rendered"' in html_tag.group(0)
    assert "data-script-error" not in html_tag.group(0)
    plots = int(re.search(r'data-plots="(\d+)"', html_tag.group(0)).group(1))  # type: ignore[union-attr]
    assert plots >= 4
    assert "<polyline" in dom.stdout and re.search(
        r"points=\"[\d.]+,[\d.]+ [\d.]+,[\d.]+", dom.stdout
    )  # no empty plot
