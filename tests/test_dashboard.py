"""The trend site: what is red and every change point on the first page, each stored run drawn on
its case's page, checked in headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import required
from chromium import FLAGS
from pg_server import pg_url, postgres_server  # noqa: F401  (the fixtures)
from store_data import GPU, make_result, nightly, write_run_folder

from trainperf.cli.dashboard import since_of
from trainperf.diagnosis_record import Diagnosis
from trainperf.errors import TrainperfError
from trainperf.report.dashboard import build_site
from trainperf.report.trend_svg import time_ticks
from trainperf.result import CaseResult
from trainperf.store.db import Store, open_store
from trainperf.store.history_writes import record_case
from trainperf.store.records import RunInfo

CASES = ("sft_hf-qwen3_8b-lora-maxlen-b4", "sft_hf-qwen3_8b-lora-short-b4")
NIGHTS, STEP_NIGHT, CONTAMINATED, NOISY = 24, 12, 5, 8
LAST = NIGHTS - 1
DIAGNOSIS = "diagnosis: host-side delay: host-side +341.3 ms (119.9 -> 461.2)"


def _maxlen(day: int, fingerprint: dict[str, object]) -> CaseResult:
    """5% slower from STEP_NIGHT; one contaminated and one noisy night; the last night regressed
    a further 8%, with its reason and diagnosis in the result file."""
    level = 0.5 * (1.05 if day >= STEP_NIGHT else 1) * (1.3 if day == CONTAMINATED else 1)
    level *= 1.08 if day == LAST else 1
    verdict = {CONTAMINATED: "contaminated", NOISY: "noisy", LAST: "regressed"}.get(day, "pass")
    result = make_result(CASES[0], nightly(day), level, fingerprint=fingerprint, seed=day, verdict=verdict)
    if day == LAST:
        result.verdict.reason = "regressed: step_time_s +8.1%"
        result.verdict.diagnosis = Diagnosis(line=DIAGNOSIS)
    return result


def make_store(tmp_path: Path, url: str | None = None) -> Store:
    """24 nights of two cases, written as each case ends (with the checkout's commit) into the
    store (SQLite by default), each night also a run folder; transformers moves on with the maxlen
    case's step. The short case ran out of memory on the last night."""
    store = open_store(url or str(tmp_path / "h.sqlite"))
    for day in range(NIGHTS):
        fp = GPU if day < STEP_NIGHT else {**GPU, "transformers": "5.18.0"}
        outcome = "oom" if day == LAST else "ok"
        verdict = "outcome-changed" if day == LAST else "pass"
        short = make_result(CASES[1], nightly(day), 0.3, fingerprint=fp, seed=100 + day, outcome=outcome)
        short.verdict.verdict = verdict
        results = [_maxlen(day, fp), short]
        folder = write_run_folder(tmp_path / "reports" / f"n{day:02d}", nightly(day), results, fp)
        run = RunInfo(
            run_key=f"night-{day}",
            kind="pytest",
            started=nightly(day),
            fingerprint=fp,
            runner="nightly-h100",
            gpu_class="h100",
            commit=f"{day:02d}c0ffee" + "0" * 32,
            run_dir=str(folder),
        )
        for result in results:
            record_case(store, run, result, str(folder / "results" / f"{result.case_id}.json"))
    return store


def make_site(tmp_path: Path, **options: object) -> Path:
    store = make_store(tmp_path)
    try:
        assert build_site(store, tmp_path / "site", **options) == 2  # type: ignore[arg-type]
    finally:
        store.close()
    return tmp_path / "site"


def _text(html: str) -> str:
    """The page's words, without markup, styles and scripts."""
    html = re.sub(r"<(style|script)[^>]*>.*?</\1>", "", html, flags=re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&gt;", ">").replace("&rarr;", "->")


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end)]


def test_the_first_page_lists_what_is_red_largest_first_with_cause_environment_and_run(
    tmp_path: Path,
) -> None:
    site = make_site(tmp_path)
    index = (site / "index.html").read_text()
    red = _section(_text(index), "Not a pass on the latest run: 2 case(s)", "Change points from")
    assert red.index(CASES[1]) < red.index(CASES[0])  # a run with no value at all comes first
    assert "failed: oom" in red
    assert "no figure: the run failed" in red[: red.index(CASES[1])]  # its change cell says why
    row = red[red.index(CASES[0]) :]
    assert re.search(r"since 2026-01-24 02:00 23c0ffee 1 run\(s\); last good 2026-01-23 02:00", row)
    assert "host-side delay: host-side +341.3 ms" in row and "regressed: step_time_s +8.1%" in row
    assert re.search(r"\+8\.\d% step time", _text(index))  # its size, against the good runs before it
    assert "href='../reports/n23/index.html'" in index
    assert "<script src" not in index and "http" not in index.split("</style>")[0]  # nothing from a CDN


def test_change_points_anywhere_in_the_window_are_listed_with_their_environment(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    changes = _section(_text((site / "index.html").read_text()), "Change points from", "All cases")
    # The step is 12 runs old: further back than the last 10 runs, and still on the first page.
    assert re.search(r"\+5\.\d% step time \(s\).*2026-01-13 02:00 12c0ffee", changes)
    assert "transformers 5.17.0 -> 5.18.0" in changes


def test_every_stored_run_is_drawn_with_its_verdict(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    page = (site / "cases" / f"{CASES[0]}.html").read_text()
    assert "24 stored runs (21 pass, 1 contaminated, 1 noisy, 1 regressed)" in _text(page)
    step = re.search(r"<svg class='plot trend'[^>]*data-metric='step_time_s'.*?</svg>", page, re.DOTALL)
    assert step is not None
    for kind in ("contaminated", "noisy", "regressed"):
        assert step.group(0).count(f"class='mark {kind}'") == 1, kind
    data = json.loads(
        re.search(r"<script type='application/json' class='runs'>(.*?)</script>", page).group(1)
    )  # type: ignore[union-attr]
    assert len(data["r"]) == len(data["x"]) == NIGHTS
    short = (site / "cases" / f"{CASES[1]}.html").read_text()
    assert short.count("class='mark failed'") >= 1 and "failed: oom" in short
    index = _text((site / "index.html").read_text())
    assert "24 (21 pass, 1 contaminated, 1 noisy, 1 regressed)" in index


def test_a_case_whose_only_run_was_contaminated_is_drawn_and_listed(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    result = make_result(CASES[0], nightly(0), 0.65, verdict="contaminated")
    folder = write_run_folder(tmp_path / "reports" / "n00", nightly(0), [result])
    run = RunInfo("night-0", "pytest", nightly(0), GPU, "nightly-h100", "h100", run_dir=str(folder))
    record_case(store, run, result)
    try:
        assert build_site(store, tmp_path / "site") == 1
    finally:
        store.close()
    index = _text((tmp_path / "site" / "index.html").read_text())
    assert "Not a pass on the latest run: 1 case(s)" in index and "1 (1 contaminated)" in index
    page = (tmp_path / "site" / "cases" / f"{CASES[0]}.html").read_text()
    assert page.count("class='mark contaminated'") >= 4  # on each metric's plot


def test_a_plot_reads_in_percent_of_the_reference_with_band_levels_and_dates(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    page = (site / "cases" / f"{CASES[0]}.html").read_text()
    step = re.search(r"<svg class='plot trend'[^>]*data-metric='step_time_s'.*?</svg>", page, re.DOTALL)
    assert step is not None
    plot = step.group(0)
    assert "class='band'" in plot and ">100%</text>" in plot and "tolerance \u00b13.0%" in plot
    assert plot.count("class='level'") == 2  # the median of each side of the change point
    assert re.search(r">\+5\.\d% 01-13</text>", plot)
    assert re.search(r">01-\d\d</text>", plot)  # a time axis in dates
    assert (
        "<text class='commit'" in plot and ">12c0ffee</text>" in plot
    )  # the change point's commit, on the axis


def test_run_folders_moved_since_they_were_stored_are_found_under_runs(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    archive = tmp_path / "archive"
    (tmp_path / "reports").rename(archive)
    try:
        build_site(store, tmp_path / "lost")
        build_site(store, tmp_path / "found", runs_root=archive)
    finally:
        store.close()
    lost = _text((tmp_path / "lost" / "index.html").read_text())
    assert "host-side delay" not in lost and "pass --runs DIR" in lost
    found = (tmp_path / "found" / "index.html").read_text()
    assert "host-side delay" in found and "href='../archive/n23/index.html'" in found


def test_a_postgresql_store_gives_the_same_site(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    sqlite_site = make_site(tmp_path / "lite")
    store = make_store(tmp_path / "pg", pg_url)
    try:
        assert build_site(store, tmp_path / "pg" / "site") == 2
    finally:
        store.close()
    lite, pg = (_text((site / "index.html").read_text()) for site in (sqlite_site, tmp_path / "pg" / "site"))
    assert pg.replace("/pg/", "/lite/") == lite and "host-side delay" in pg


def test_the_window_starts_where_since_says(tmp_path: Path) -> None:
    site = make_site(tmp_path, since=nightly(STEP_NIGHT))
    index = _text((site / "index.html").read_text())
    assert "Change points from 2026-01-13 to 2026-01-24: 0" in index
    assert "12 (11 pass, 1 regressed)" in index


def test_since_takes_a_date_or_days_and_says_what_it_wants_otherwise() -> None:
    assert since_of("2026-03-01") == "2026-03-01"
    assert since_of(None) is None
    assert since_of("30d") is not None and since_of("30d") < since_of("1d")  # type: ignore[operator]
    with pytest.raises(TrainperfError, match="YYYY-MM-DD or a number of days"):
        since_of("last week")


def test_the_command_builds_the_site_and_names_a_missing_runs_folder(tmp_path: Path) -> None:
    import argparse

    from trainperf.cli import dashboard

    make_store(tmp_path).close()
    parser = argparse.ArgumentParser(prog="trainperf")
    dashboard.add_parser(parser.add_subparsers(dest="command", required=True))
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    args = parser.parse_args(
        ["dashboard", "--store", store, "--output", str(tmp_path / "s"), "--since", "10d"]
    )
    assert args.func(args) == 0 and (tmp_path / "s" / "index.html").is_file()
    missing = parser.parse_args(
        ["dashboard", "--store", store, "--output", "x", "--runs", str(tmp_path / "no")]
    )
    with pytest.raises(TrainperfError, match="is not a folder: name the folder that holds the run folders"):
        missing.func(missing)


def test_time_ticks_read_as_clock_times_within_a_day_and_months_over_a_year() -> None:
    from trainperf.report.trend_model import epoch

    minutes = time_ticks(epoch("2026-11-24T02:47:00+00:00"), epoch("2026-11-24T03:03:00+00:00"))
    assert [label for _, label in minutes][:2] == ["11-24 02:50", "02:55"]
    year = time_ticks(epoch("2026-01-01T02:00:00+00:00"), epoch("2026-12-31T02:00:00+00:00"))
    assert [label for _, label in year][:2] == ["Mar 2026", "May"]  # every other month


@pytest.mark.parametrize("page", ["index.html", f"cases/{CASES[0]}.html"])
def test_pages_render_in_headless_chromium_without_script_errors(tmp_path: Path, page: str) -> None:
    site = make_site(tmp_path)
    chromium = required.chromium()
    dom = subprocess.run(
        [
            chromium,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,1200",
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
    assert 'data-labels-outside="0"' in html_tag.group(0), html_tag.group(0)  # no label cut by a frame
    if page.startswith("cases/"):
        plots = int(re.search(r'data-plots="(\d+)"', html_tag.group(0)).group(1))  # type: ignore[union-attr]
        assert plots >= 4
        assert f'data-runs="{NIGHTS}"' in html_tag.group(0)  # the tooltip script read every run
        assert re.search(r"points=\"[\d.]+,[\d.]+ [\d.]+,[\d.]+", dom.stdout)  # no empty plot
