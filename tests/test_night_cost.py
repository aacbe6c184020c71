"""A night's measured GPU-minutes against its projection: every launch counted, cases without a
projection apart, and the line in a real night session's summary (two tiny cpu cases, xdist)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainperf.case_record import CaseRecord
from trainperf.fleet.night_cost import PROJECTED_KEY, night_cost, night_wall, recorded_night
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult
from trainperf.run_record import RunRecord


def _result(case_id: str, walls: list[float], gpus: int = 1, confirmations: int = 0) -> CaseResult:
    runs = [RunRecord(wall_s=wall) for wall in walls]
    for run in runs[len(runs) - confirmations :]:
        run.purpose = "confirmation"
    return CaseResult(case_id, CaseRecord(family="sft_hf", gpus=gpus), "h100", "ok", runs=runs)


def test_every_launch_counts_and_cases_without_a_projection_stay_out_of_the_ratio() -> None:
    night = {"date": "2026-11-28", PROJECTED_KEY: {"a": 60.0, "b": 120.0, "c": None, "gone": 600.0}}
    results = [
        _result("a", [70.0, 65.0, 66.0], confirmations=2),  # a first-run red and its two confirmations
        _result("b", [60.0], gpus=2),
        _result("c", [30.0]),
        _result("not-planned", [999.0]),
    ]
    cost = night_cost(night, results)
    assert cost is not None
    assert (cost.cases, cost.launches, cost.confirmations) == (2, 4, 2)
    assert cost.measured_min == (70 + 65 + 66 + 2 * 60) / 60 and cost.projected_min == 3.0
    assert (cost.unprojected_cases, cost.unprojected_min) == (1, 0.5)
    assert cost.line() == (
        "trainperf: night 2026-11-28: 2 case(s) took 5.3 GPU-min (4 launch(es), 2 confirmation run(s)) "
        "against 3.0 projected (+78%); 1 case(s) without a projection took 0.5 GPU-min more"
    )


def test_a_record_without_a_projection_or_a_night_without_results_gives_no_line() -> None:
    assert night_cost({"date": "2026-11-28"}, [_result("a", [1.0])]) is None
    assert night_cost({"date": "2026-11-28", PROJECTED_KEY: {"a": 1.0}}, [_result("b", [1.0])]) is None
    sessions = [{"settings": {}}, {"settings": {"fleet": {"night": {"date": "2026-11-28"}}}}]
    assert recorded_night(sessions) == {"date": "2026-11-28"}
    assert recorded_night([{"settings": {"fleet": {"shard": "1/2"}}}]) is None


def test_a_night_on_a_hosts_workers_says_its_wall_time_from_the_first_start_to_the_last_end() -> None:
    fleet = {"night": {"date": "2026-11-28"}, "workers": {"count": 4, "projected_wall_s": 360.0}}
    sessions = [
        {"started": "2026-11-28T02:05:16+00:00", "settings": {"fleet": fleet}},
        {"started": "2026-11-28T02:05:17+00:00", "settings": {"fleet": fleet}},
    ]
    early, late = _result("a", [60.0]), _result("b", [300.0, 30.0])
    early.created, late.created = "2026-11-28T02:05:16+00:00", "2026-11-28T02:06:16+00:00"
    wall = night_wall(sessions, [early, late])
    assert wall is not None and wall.measured_s == 390.0  # 60 s in, then its two runs
    assert wall.line() == "trainperf: on 4 workers the night took 6.5 min wall against 6.0 projected (+8%)"
    assert night_wall([{"started": "2026-11-28T02:05:16+00:00"}], [early]) is None  # not dealt to workers


def test_a_night_session_under_xdist_says_what_it_took_against_its_projection(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "perf_tests",
            "-m",
            "cpu",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "-k",
            "qwen3_tiny and lora and short",
            "--perf-night",
            "2026-11-27",
            "--perf-output",
            str(tmp_path),
            "--perf-store",
            "off",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    run_dir = next(tmp_path.iterdir())
    line = next(line for line in done.stdout.splitlines() if line.startswith("trainperf: night 2026-11-27: "))
    assert "2 case(s) took " in line and " GPU-min (2 launch(es), 0 confirmation run(s)) against " in line
    # Under the headline, read from the workers' session records (an xdist night's plan is in them).
    assert (run_dir / "summary.md").read_text().splitlines()[4] == line
    assert done.stdout.count(line) == 1
    # The controller says the session's progress: at the start, and as each worker's case ends.
    assert "[trainperf] session: 2 case(s) to run on 2 workers" in done.stdout
    assert "[trainperf] case 2/2 done: sft_hf-qwen3_tiny-" in done.stdout
    # Its two cases were dealt to the two workers, the longest first, and it says its wall time against that.
    assert "trainperf: 2 case(s) dealt to 2 workers, the longest first: projected " in done.stdout
    wall = next(
        line for line in done.stdout.splitlines() if line.startswith("trainperf: on 2 workers the night")
    )
    assert " min wall against " in wall and wall in (run_dir / "summary.md").read_text()
    records = [json.loads(path.read_text()) for path in run_dir.glob("run.gw*.json")]
    night = recorded_night([s for record in records for s in record["sessions"]])
    assert night is not None and set(night[PROJECTED_KEY]) == set(night["tonight"])


def test_the_nights_cost_leads_the_page_and_the_summary(tmp_path: Path) -> None:
    """On the first screen, under the headline, not among the notes under the table: a night that ran
    long says so before any case does."""
    from trainperf.report.build import write_reports

    results = [_result("a", [90.0])]
    line = "trainperf: night 2026-11-28: 1 case(s) took 1.5 GPU-min (1 launch(es), 0 confirmation run(s)) "
    line += "against 1.0 projected (+50%)"
    write_reports(tmp_path, results, "trainperf h100: night", ["a note"], night=[line])
    summary = (tmp_path / "summary.md").read_text()
    assert summary.splitlines()[4] == line and summary.count(line) == 1 and "a note" in summary
    page = (tmp_path / "index.html").read_text()
    assert (
        page.index('<p class="headline">') < page.index(f'<p class="night">{line}</p>') < page.index("<table")
    )
    assert page.count(line) == 1
