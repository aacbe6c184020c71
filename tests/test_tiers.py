"""The nightly's tiers and rotation (``plan.tiers``, ``fleet.night``, ``--perf-night``, ``trainperf cost
--night``), without a GPU: the core rule over the real catalogue, the week's coverage and projection
on the committed baselines, a date's plan reached twice alike, promotion, and the pytest option."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from fleet_runs import collect

from trainperf.case import Case
from trainperf.cli import main
from trainperf.errors import TrainperfError
from trainperf.fleet.night import baseline_figures, class_entries, load_baselines, promotions
from trainperf.ground.settings import resolve
from trainperf.plan.tiers import (
    NIGHTS,
    Entry,
    LastResult,
    core_keys,
    group_of,
    plan_night,
    promoted,
    week,
    with_promoted,
)

ROOT = Path(__file__).resolve().parents[1]
MONDAY = date(2026, 11, 23)
H100_CORE = {
    "rl_trl-qwen2_5_3b-lora-fixed-b16-p128-c64-g8",
    "rl_trl-qwen2_5_3b-full-fixed-b16-p128-c64-g8",
    "rl_verl-qwen2_5_0_5b-full-gsm8k-b64-mb8-algppo-engvllm-mini32-n1-p512-r512-tp1",
    "rl_verl-qwen2_5_0_5b-full-gsm8k-b16-alggrpo-dyn8192-engvllm-kl1-mini16-n4-offl1-p512-r1024-tp1",
    "rl_verl-qwen2_5_0_5b-full-gsm8k-b16-alggrpo-dyn8192-engsglang-kl1-mini16-n4-offl1-p512-r1024-tp1",
    "sft_hf-qwen3_8b-lora-short-b4",
    "sft_hf-qwen3_8b-qlora-short-b4",
    "sft_hf-qwen3_8b-full-short-b4",
    "sft_unsloth-qwen3_8b-qlora-short-b4",
}


def class_plan(gpu_class: str, night: date = MONDAY, budget: float | None = 60.0) -> Any:
    entries = class_entries(ROOT, gpu_class)
    figures = baseline_figures(
        load_baselines(ROOT / "baselines", gpu_class, [entry.key for entry in entries])
    )
    return plan_night(entries, gpu_class, night, figures, budget)


@pytest.mark.parametrize("gpu_class", ["h100", "h200", "cpu"])
def test_the_rule_picks_one_core_case_per_family_method_and_engine(gpu_class: str) -> None:
    entries = class_entries(ROOT, gpu_class)
    core = core_keys(entries, gpu_class)
    groups = {group_of(entry.case) for entry in entries}
    assert sorted(group_of(e.case) for e in entries if e.key in core) == sorted(groups)  # one each
    assert not any(entry.cliff for entry in entries if entry.key in core)
    if gpu_class != "cpu":  # on every GPU class: the catalogue's first small one-GPU case of each group
        assert core == H100_CORE


def test_a_case_may_declare_its_tier_where_the_rule_needs_help() -> None:
    def sft(profile: str, **kw: Any) -> Entry:
        case = Case(family="sft_hf", model="m", method="lora", profile=profile, batch_size=4, **kw)
        return Entry(case.id, case)

    plain = [sft("short"), sft("long")]
    assert core_keys(plain, "h100") == {"sft_hf-m-lora-short-b4"}
    # Rotating: never picked, the next one stands for the group; core: stands for it instead.
    assert core_keys([sft("short", tier="rotating"), sft("long")], "h100") == {"sft_hf-m-lora-long-b4"}
    assert core_keys([sft("short"), sft("long", tier="core")], "h100") == {"sft_hf-m-lora-long-b4"}
    # An expected OOM stands for its group only where nothing in it is expected to run.
    oom = sft("short", expected=(("h100", "oom"),))
    assert core_keys([oom, sft("long")], "h100") == {"sft_hf-m-lora-long-b4"}
    with pytest.raises(ValueError, match="unknown tier 'weekly'"):
        sft("short", tier="weekly")


@pytest.mark.parametrize("gpu_class", ["h100", "h200"])
def test_the_rotation_runs_every_case_once_a_week_and_core_every_night(gpu_class: str) -> None:
    plan = class_plan(gpu_class)
    for start in (MONDAY, MONDAY + timedelta(days=3)):
        nights = week(plan, start)
        runs = {key: sum(night.runs(key) for night in nights) for key in plan.keys}
        assert all(runs[key] == NIGHTS for key in plan.core)
        assert all(runs[key] == 1 for key in plan.keys if key not in plan.core)


def test_a_date_gives_the_same_selection_on_every_runner() -> None:
    night = date(2026, 11, 27)
    first, again = class_plan("h100", night), class_plan("h100", night)
    assert first.tonight(first.keys) == again.tonight(again.keys)
    assert first.on(night + timedelta(days=7)).tonight(first.keys) == first.tonight(first.keys)
    assert first.on(night + timedelta(days=1)).tonight(first.keys) != first.tonight(first.keys)


@pytest.mark.parametrize("gpu_class", ["h100", "h200"])
def test_every_night_of_the_committed_baselines_projects_under_60_gpu_minutes(
    gpu_class: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    args = ["cost", f"baselines/{gpu_class}", "--night", "2026-11-23", "--night-budget", "60", "--json"]
    assert main(args) == 0
    night = json.loads(capsys.readouterr().out)["night"]
    assert len(night["nights"]) == NIGHTS and all(n["gpu_minutes"] <= 60 for n in night["nights"])
    assert {case["tier"] for case in night["cases"]} == {"core", "rotating"}
    # A budget under the core tier's projection is said, and the command fails.
    assert main(["cost", f"baselines/{gpu_class}", "--night", "2026-11-23", "--night-budget", "1"]) == 1
    assert "over the 1 GPU-min night budget" in capsys.readouterr().out


def test_the_h100_week_figures_add_up_to_the_whole_nightly(capsys: pytest.CaptureFixture[str]) -> None:
    plan = class_plan("h100")
    whole, _ = plan.projected(plan.keys)
    core, _ = plan.projected(plan.core)
    nightly = sum(night.projected(night.tonight(plan.keys))[0] for night in week(plan, MONDAY))
    assert nightly == pytest.approx(whole + (NIGHTS - 1) * core)
    assert main(["cost", str(ROOT / "baselines/h100")]) == 0
    assert f"{whole:.1f} GPU-minutes" in capsys.readouterr().out  # the same figures as `trainperf cost`


def test_a_case_that_did_not_pass_runs_every_night_until_it_passes() -> None:
    plan = class_plan("cpu")
    rotating = sorted(key for key in plan.keys if key not in plan.core)
    regressed, new, passed = rotating[:3]
    results = [
        LastResult(regressed, "2026-11-20T02:30:00+00:00", "pass"),
        LastResult(regressed, "2026-11-22T02:30:00+00:00", "regressed"),
        LastResult(new, "2026-11-22T02:31:00+00:00", "new"),
        LastResult(passed, "2026-11-21T02:30:00+00:00", "regressed"),
        LastResult(passed, "2026-11-22T02:32:00+00:00", "pass"),  # the latest result counts
        LastResult(passed, "2026-11-23T02:32:00+00:00", "regressed"),  # tonight's own: not yet
    ]
    found = promoted(results, plan)
    assert sorted(found) == sorted([regressed, new])
    assert found[regressed] == "last result regressed on 2026-11-22"
    tonight = with_promoted(plan, found)
    assert all(tonight.on(MONDAY + timedelta(days=n)).runs(regressed) for n in range(NIGHTS))
    assert tonight.latency(regressed) == "every night until it passes"
    # A rotating case not seen for more than a week (its weekday moved) runs on the next night.
    stale = promoted([LastResult(passed, "2026-11-10T02:30:00+00:00", "pass")], plan)
    assert stale == {passed: "last ran on 2026-11-10, more than 7 nights before"}


def result_folder(root: Path, verdicts: dict[str, str], created: str) -> Path:
    """A run folder of the cpu baselines' results, judged as given."""
    (root / "results").mkdir(parents=True)
    for case_id, verdict in verdicts.items():
        data = json.loads((ROOT / "baselines" / "cpu" / f"{case_id}.json").read_text())
        data |= {"verdict": {"verdict": verdict, "fails": verdict == "regressed"}, "created": created}
        (root / "results" / f"{case_id}.json").write_text(json.dumps(data))
    return root


def test_promoted_cases_come_from_run_folders_or_a_file_of_case_ids(tmp_path: Path) -> None:
    plan = class_plan("cpu")
    night1 = {"sft_hf-qwen3_tiny-full-long-b4": "regressed", "sft_hf-qwen3_tiny-lora-long-b4": "pass"}
    result_folder(tmp_path / "nights" / "a" / "20261121-0217-cpu", night1, "2026-11-21T02:40:00+00:00")
    night2 = {"sft_hf-qwen3_tiny-lora-long-b4": "new"}
    result_folder(tmp_path / "nights" / "b" / "20261122-0217-cpu", night2, "2026-11-22T02:40:00+00:00")
    found, note = promotions(plan, str(tmp_path / "nights"), "cpu", None, shard=True)
    assert note == "" and sorted(found) == [*night1][:1] + [*night2]
    ids = tmp_path / "promote.txt"
    ids.write_text("# carried over by hand\nsft_hf-qwen3_tiny-qlora-long-b4\n")
    assert promotions(plan, str(ids), "cpu", None, shard=True)[0] == {
        "sft_hf-qwen3_tiny-qlora-long-b4": f"listed in {ids}"
    }
    # A shard never reads one machine's SQLite history: the others could not read the same.
    store = f"sqlite:///{tmp_path}/history.sqlite"
    assert "every shard reads" in promotions(plan, "store", "cpu", store, shard=True)[1]
    with pytest.raises(TrainperfError, match="no such file or folder; give a run folder"):
        promotions(plan, str(tmp_path / "missing"), "cpu", None, shard=False)


def test_promoted_cases_come_from_the_results_history_of_the_class(tmp_path: Path) -> None:
    from trainperf.recording.ingest import ingest
    from trainperf.store.db import open_store

    verdicts = {"sft_hf-qwen3_tiny-full-long-b4": "outcome-changed", "sft_hf-qwen3_tiny-lora-long-b4": "pass"}
    run_dir = result_folder(tmp_path / "20261122-0217-cpu", verdicts, "2026-11-22T02:40:00+00:00")
    session = {"started": "2026-11-22T02:17:00+00:00", "gpu_class": "cpu", "commit": {"id": "c0ffee"},
               "fingerprint": {"hostname": "node1"}, "settings": {}}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps({"sessions": [session]}))
    url = f"sqlite:///{tmp_path}/history.sqlite"
    store = open_store(url)
    ingest(store, [run_dir], say=lambda _line: None)
    store.close()
    found, note = promotions(class_plan("cpu"), "store", "cpu", url, shard=False)
    assert note == ""
    assert found == {"sft_hf-qwen3_tiny-full-long-b4": "last result outcome-changed on 2026-11-22"}
    # Runs of the night itself (or later) are not read: every shard of the night reads the same.
    assert promotions(class_plan("cpu", date(2026, 11, 22)), "store", "cpu", url, shard=False) == ({}, "")


@pytest.mark.parametrize("text", ["2026-13-01", "tomorrow", "27/11/2026"])
def test_a_bad_night_is_one_line_naming_the_fix(text: str) -> None:
    with pytest.raises(TrainperfError) as caught:
        resolve({"night": text}, lambda _name: None, ROOT)
    assert "\n" not in str(caught.value) and "give YYYY-MM-DD or today" in str(caught.value)


def items(done: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.split("[", 1)[1].rstrip("]") for line in done.stdout.splitlines() if "::" in line}


def test_the_night_option_deselects_the_other_nights_cases_in_one_line(tmp_path: Path) -> None:
    whole = collect("h100")
    assert whole.returncode == 0 and "trainperf: night" not in whole.stdout  # off by default
    plan = class_plan("h100", date(2026, 11, 27))
    done = collect("h100", "--perf-night", "2026-11-27", "--perf-night-budget", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert items(done) == set(plan.tonight(sorted(items(whole))))
    # The projection is the committed baselines' (re-taking one moves it): the plan's own sum.
    minutes, unknown = plan.projected(items(done))
    assert unknown == 4
    assert (
        f"trainperf: night 2026-11-27 Fri: 9 core + 8 rotating + 0 promoted of {len(items(whole))} cases, "
        f"projected {minutes:.1f} GPU-min (+4 without a recorded wall time) of a 60 GPU-min night budget; 47 "
        "deselected, each runs within 7 nights"
    ) in done.stdout
    assert "core     tonight every night                  sft_hf-qwen3_8b-lora-short-b4" in done.stdout
    # A rotating case's night follows the baselines' costs (the rotation balances them): named, not fixed.
    assert re.search(
        r"within 7 nights \((Mon|Tues|Wednes|Thurs|Sat|Sun)days\) +sft_hf-qwen3_8b-lora-long-b4\n",
        done.stdout,
    )
    # A promoted case joins the night; the shards of the night split only what it runs.
    ids = tmp_path / "promote.txt"
    ids.write_text("sft_hf-qwen3_8b-lora-long-b4\n")
    night = ("--perf-night", "2026-11-27", "--perf-night-promote", str(ids))
    shards = [collect("h100", *night, "--perf-shard", f"{k}/2") for k in (1, 2)]
    assert "9 core + 8 rotating + 1 promoted" in shards[0].stdout
    assert items(shards[0]) | items(shards[1]) == items(done) | {"sft_hf-qwen3_8b-lora-long-b4"}
    assert not items(shards[0]) & items(shards[1])


def test_items_the_catalogue_does_not_declare_are_planned_after_its_own(tmp_path: Path) -> None:
    case = Case(family="sft_hf", model="m", method="lora", profile="short", batch_size=4,
                gpu_classes=("cpu",))  # fmt: skip
    planned = [entry.key for entry in class_entries(ROOT, "cpu", [(case.id, case)])]
    assert planned[-1] == case.id and len(planned) == len(class_entries(ROOT, "cpu")) + 1
    assert [entry.key for entry in class_entries(tmp_path, "cpu", [(case.id, case)])] == [case.id]


def test_under_xdist_the_controller_says_the_workers_night_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-k", "tiny-full-long", "-n", "2",
         "-p", "no:cacheprovider", "--perf-night", "2026-11-26", "--perf-store", "off",
         "--perf-output", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    # Its night is not this case's: nothing runs, and that is the session's answer, not an error.
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no case of this selection is this session's to run; nothing failed" in done.stdout
    assert "trainperf: night 2026-11-26 Thu: 0 core + 0 rotating + 0 promoted of 1 cases" in done.stdout


def test_a_selection_that_matches_nothing_still_fails(tmp_path: Path) -> None:
    """Only the night's plan or a shard may leave a session empty and stay green: a ``-k`` that
    matches no case is pytest's "no tests" (status 5), night or not."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-k", "no_such_case",
         "-p", "no:cacheprovider", "--perf-night", "2026-11-26", "--perf-store", "off",
         "--perf-output", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 5, done.stdout + done.stderr
