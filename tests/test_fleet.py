"""Shards, their merge and the budget, without launching a child: the split's arithmetic, the
refusals of ``trainperf merge`` on run folders built from real result files, and the collection
of the cpu cases into shards and under a budget through the plugin."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet_runs import collect
from pg_server import pg_url, postgres_server  # noqa: F401  (the fixtures)

from trainperf.cli import main
from trainperf.cliff_record import CliffRecord
from trainperf.errors import TrainperfError
from trainperf.fleet.budget import Budget, CaseValue, by_value, values_from_timeline
from trainperf.fleet.merge import read_shards
from trainperf.fleet.shard import (
    baseline_seconds,
    durations_from_timeline,
    expected_durations,
    read_timeline,
    split,
)
from trainperf.ground.settings import Shard, parse_shard, resolve
from trainperf.store.reads import TimelineRow
from trainperf.store.results import load_result

ROOT = Path(__file__).resolve().parents[1]
CPU_BASELINES = sorted((ROOT / "baselines" / "cpu").glob("*.json"))


@pytest.mark.parametrize("text", ["3/2", "0/2", "a/b", "2", "1/0", "-1/2"])
def test_a_bad_shard_is_one_line_naming_the_fix(text: str) -> None:
    with pytest.raises(TrainperfError) as caught:
        resolve({"shard": text}, lambda _name: None, ROOT)
    message = str(caught.value)
    assert "\n" not in message and "--perf-shard" in message
    assert "K runs from 1 to N" in message or "K/N with whole numbers" in message


def test_shards_parse() -> None:
    assert parse_shard("2/3") == Shard(2, 3) and str(parse_shard(" 1/1 ")) == "1/1"


def test_the_split_is_balanced_complete_and_independent_of_order() -> None:
    rng = random.Random(7)
    expected = {f"case-{i:02d}": float(rng.choice([30, 60, 120, 600, 1200, 4000])) for i in range(40)}
    assigned = split(expected, 3)
    shuffled = dict(sorted(expected.items(), key=lambda _item: rng.random()))
    assert split(shuffled, 3) == assigned  # every shard computes the same split on its own
    assert set(assigned) == set(expected) and set(assigned.values()) == {1, 2, 3}
    loads = [sum(s for k, s in expected.items() if assigned[k] == shard) for shard in (1, 2, 3)]
    # Longest-first greedy: no shard exceeds the ideal share by more than the longest case.
    assert max(loads) - sum(loads) / 3 <= max(expected.values())
    assert max(loads) / min(loads) < 1.1


def test_equal_durations_tie_by_case_id() -> None:
    assert split({"b": 1.0, "a": 1.0, "c": 1.0, "d": 1.0}, 2) == {"a": 1, "b": 2, "c": 1, "d": 2}


def row(
    run: int, case_id: str, created: str, ended: str | None = None, step: float | None = 1.0
) -> TimelineRow:
    return TimelineRow(run, "2026-11-01T00:00:00+00:00", ended, case_id, created, step)


def test_history_durations_run_from_a_case_start_to_the_next() -> None:
    rows = [
        row(1, "a", "2026-11-01T02:00:00+00:00"),
        row(1, "b", "2026-11-01T02:10:00+00:00"),
        row(1, "c", "2026-11-01T02:12:00+00:00", ended="2026-11-01T02:13:30+00:00"),
        row(2, "a", "2026-11-02T02:00:00+00:00"),
        row(2, "b", "2026-11-02T02:08:00+00:00"),  # its run has no end: no figure
    ]
    assert durations_from_timeline(rows) == {"a": [600.0, 480.0], "b": [120.0], "c": [90.0]}


def test_expected_durations_history_then_baseline_then_default() -> None:
    baseline = load_result(CPU_BASELINES[0])
    walls = [run.wall_s for run in baseline.runs]
    expected = expected_durations(
        ["from-history", baseline.case_id, "nothing", "nothing-cliff-batch_size"],
        "cpu",
        {"from-history": [50.0, 70.0, 400.0]},
        lambda key: baseline if key == baseline.case_id else None,
    )
    assert expected["from-history"].seconds == 70.0 and expected["from-history"].source == "history"
    assert expected[baseline.case_id].source == "baseline"
    assert min(walls) <= expected[baseline.case_id].seconds <= max(walls)
    assert expected["nothing"].source == "default"
    assert expected["nothing-cliff-batch_size"].seconds == 10 * expected["nothing"].seconds


def test_budget_order_puts_a_recent_change_then_the_longest_unrun_first() -> None:
    steady = [
        row(i, "steady", f"2026-11-{i:02d}T02:00:00+00:00", step=1.0 + 0.001 * (i % 2)) for i in range(1, 21)
    ]
    moved = [
        row(i, "moved", f"2026-11-{i:02d}T03:00:00+00:00", step=1.0 if i < 17 else 1.5) for i in range(1, 21)
    ]
    old = [row(1, "old", "2026-10-01T02:00:00+00:00")]
    values = values_from_timeline(steady + moved + old)
    assert values["moved"].recent_change and not values["steady"].recent_change
    assert by_value(["steady", "old", "never", "moved"], values) == ["moved", "never", "old", "steady"]
    assert by_value(["b", "a"], {"a": CaseValue(False, "x"), "b": CaseValue(False, "x")}) == ["a", "b"]


def test_budget_refuses_a_case_that_would_not_end_in_time() -> None:
    budget = Budget(10, {"short": 120.0, "long": 900.0})
    assert budget.refusal("short") is None
    reason = budget.refusal("long")
    assert reason is not None and reason.startswith("over --perf-budget 10 min: expected 15.0 min")
    assert budget.left_out == ["long"]


# Shard run folders made of real result files (the cpu baselines), as a shard writes them.
def make_shard(
    root: Path,
    index: int,
    count: int,
    split_of: dict[str, int],
    *,
    gpu_class: str = "cpu",
    commit: str = "c0ffee",
    night: str | None = None,
) -> Path:
    run_dir = root / f"shard-{index}" / f"20261124-020000-{gpu_class}"
    (run_dir / "results").mkdir(parents=True)
    for path in CPU_BASELINES:
        if split_of.get(path.stem) == index:
            (run_dir / "results" / path.name).write_text(path.read_text())
    fleet: dict[str, Any] = {
        "shard": f"{index}/{count}",
        "split": {k: [v, 60.0, "baseline"] for k, v in split_of.items()},
    }
    if night is not None:
        fleet["night"] = {"date": night, "tonight": sorted(split_of), "promoted": {}}
    session = {
        "started": f"2026-11-24T02:00:0{index}+00:00",
        "gpu_class": gpu_class,
        "commit": {"id": commit},
        "fingerprint": {"hostname": f"node{index}"},
        "settings": {"fleet": fleet},
    }
    (run_dir / "run.json").write_text(json.dumps({"sessions": [session]}))
    return run_dir.parent


def halves() -> dict[str, int]:
    return {path.stem: 1 + i % 2 for i, path in enumerate(CPU_BASELINES)}


def test_merge_refuses_shards_of_other_classes_or_checkouts(tmp_path: Path) -> None:
    one = make_shard(tmp_path / "a", 1, 2, halves())
    with pytest.raises(TrainperfError, match=r"^shards of different classes: cpu \(.*\) and h100"):
        read_shards([one, make_shard(tmp_path / "b", 2, 2, halves(), gpu_class="h100")])
    with pytest.raises(TrainperfError, match=r"^shards of different checkouts: c0ffee .* and beef"):
        read_shards([one, make_shard(tmp_path / "c", 2, 2, halves(), commit="beef")])
    other = {key: 3 - index for key, index in halves().items()}
    with pytest.raises(TrainperfError, match="split the selection differently"):
        read_shards([one, make_shard(tmp_path / "d", 2, 2, other)])
    friday = make_shard(tmp_path / "e", 1, 2, halves(), night="2026-11-27")
    with pytest.raises(
        TrainperfError, match=r"^shards of different nights: 2026-11-27 \(.*\) and 2026-11-28"
    ):
        read_shards([friday, make_shard(tmp_path / "f", 2, 2, halves(), night="2026-11-28")])
    with pytest.raises(TrainperfError, match=r"^shards of different nights: 2026-11-27 \(.*\) and none"):
        read_shards([friday, make_shard(tmp_path / "g", 2, 2, halves())])


def test_merge_names_a_missing_shard_and_one_that_crashed(tmp_path: Path) -> None:
    one = make_shard(tmp_path, 1, 3, halves())  # shard 2 has cases; shard 3 has none
    with pytest.raises(TrainperfError, match=r"^shard 2/3 is missing"):
        read_shards([one])
    empty = tmp_path / "shard-2"
    empty.mkdir()
    with pytest.raises(
        TrainperfError, match=r"^.*shard-2 is not a run folder \(no run.json\): shard 2/3 wrote nothing"
    ):
        read_shards([one, empty])
    two = make_shard(tmp_path / "b", 2, 3, {key: 2 if i else 1 for i, key in enumerate(halves())})
    for path in (next(two.iterdir()) / "results").iterdir():
        path.unlink()  # the shard's run began (run.json) but no case ended
    one = make_shard(tmp_path / "c", 1, 3, {key: 2 if i else 1 for i, key in enumerate(halves())})
    with pytest.raises(
        TrainperfError, match=r"^shard 2/3 \(.*\) wrote no result: it crashed before its first case"
    ):
        read_shards([one, two])


def test_merge_cli_says_one_line_for_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes").mkdir()
    assert main(["merge", str(tmp_path / "notes"), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not a run folder (no run.json)" in err


def test_merge_of_built_shards_writes_one_run_with_every_report(tmp_path: Path) -> None:
    shards = [make_shard(tmp_path, k, 2, halves()) for k in (1, 2)]
    store = f"sqlite:///{tmp_path}/history.sqlite"
    out = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--output", str(out), "--store", store]) in (0, 1)
    assert sorted(p.name for p in (out / "results").glob("*.json")) == [p.name for p in CPU_BASELINES]
    for name in ("summary.md", "index.html", "benchmark.json", "junit.xml"):
        assert (out / name).is_file(), name
    junit = (out / "junit.xml").read_text()
    assert junit.count("<testcase ") == len(CPU_BASELINES)
    record = json.loads((out / "run.json").read_text())["merged"]
    assert [s["shard"] for s in record["shards"]] == ["1/2", "2/2"]
    from trainperf.store.db import open_store
    from trainperf.store.reads import list_runs

    runs = list_runs(open_store(store))
    nightly = [r for r in runs if r["kind"] == "nightly"]
    assert len(nightly) == 1 and nightly[0]["run_key"] == record["nightly"]
    assert nightly[0]["run_dir"] == str(out.resolve())
    # The shards' runs are in the history as they ran: the class's timeline a later split reads.
    from trainperf.store.reads import class_timeline

    timeline = class_timeline(open_store(store), "cpu", before="2026-11-25")
    assert sorted(row.case_id for row in timeline) == [p.stem for p in CPU_BASELINES]
    assert {row.run_started[:19] for row in timeline} == {"2026-11-24T02:00:01", "2026-11-24T02:00:02"}
    assert class_timeline(open_store(store), "cpu", before="2026-11-24") == []
    # A SQLite file is one machine's: it never weighs a split the other shards could not read.
    assert read_timeline(store, "cpu")[1] is False


def test_shards_of_the_cpu_cases_are_disjoint_and_cover_the_selection() -> None:
    whole = {line for line in collect("cpu").stdout.splitlines() if "::" in line}
    parts: list[set[str]] = []
    for k in (1, 2, 3):
        done = collect("cpu", "--perf-shard", f"{k}/3")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"trainperf: shard {k}/3: " in done.stdout and "expected" in done.stdout
        parts.append({line for line in done.stdout.splitlines() if "::" in line})
    assert set().union(*parts) == whole and sum(map(len, parts)) == len(whole)
    assert all(parts), "a shard was left empty with 8 cases over 3 shards"


@pytest.mark.parametrize("text", ["3/2", "0/2", "a/b"])
def test_a_bad_shard_stops_pytest_with_one_line(text: str) -> None:
    done = collect("cpu", "--perf-shard", text)
    assert done.returncode == 4
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--perf-shard" in errors[0]


def test_a_case_over_the_budget_is_skipped_and_listed(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-k", "tiny-lora-short", "-rs", "-p",
         "no:cacheprovider", "--perf-budget", "0.01", "--perf-store", "off", "--perf-output", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "over --perf-budget 0.01 min" in done.stdout
    (run_dir,) = tmp_path.iterdir()
    summary = (run_dir / "summary.md").read_text()
    assert "| sft_hf-qwen3_tiny-lora-short-b4 | skipped |" in summary
    assert "sft_hf-qwen3_tiny-lora-short-b4: left out: over --perf-budget 0.01 min" in summary
    result: dict[str, Any] = json.loads(
        (run_dir / "results" / "sft_hf-qwen3_tiny-lora-short-b4.json").read_text()
    )
    assert result["outcome"] == "skipped" and "over --perf-budget" in result["message"]
    assert not list((run_dir / "cases").glob("*/r1/spec.json")), "a case over the budget was launched"


def test_a_stored_cliff_is_expected_to_cost_its_two_edge_probes() -> None:
    baseline = load_result(CPU_BASELINES[0])
    probes = [
        {"value": 1, "fits": True, "outcome": "ok", "wall_s": 30.0},
        {"value": 48, "fits": True, "outcome": "ok", "wall_s": 41.0},
        {"value": 49, "fits": False, "outcome": "oom", "wall_s": 35.5},
    ]
    stored = {
        "axis": "batch_size",
        "low": 1,
        "high": 512,
        "largest_fit": 48,
        "smallest_oom": 49,
        "probes": probes,
    }
    baseline.cliff = CliffRecord.from_dict(stored)
    assert baseline_seconds(baseline, 1) == 76.5
    probes[2]["wall_s"] = 0.0  # probes recorded before their wall time was kept
    baseline.cliff = CliffRecord.from_dict(stored)
    key = "some-cliff-batch_size"
    expected = expected_durations([key], "h100", {}, lambda _key: baseline)
    assert expected[key].source == "default" and expected[key].seconds == 2 * 600.0


def test_listing_a_gpu_class_s_shards_elsewhere_weighs_them_by_that_class() -> None:
    from trainperf.case import Case
    from trainperf.fleet.session_share import durations_class

    case = Case(family="sft_hf", model="qwen3_8b", method="lora", profile="short", batch_size=4,
                gpu_classes=("h100", "h200"))  # fmt: skip
    assert durations_class("cpu", "h100", [case]) == "h100"
    assert durations_class("h200", "", [case]) == "h200"
    assert durations_class("cpu", "h100 and not slow", [case]) == "cpu"


def test_slurm_submission_without_slurm_names_what_is_missing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "slurm", "submit", "--class", "cpu", "--shards", "2",
         "--runs", str(tmp_path / "nightly"), "--checkout", str(ROOT)],
        env={**os.environ, "PATH": str(tmp_path)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "sbatch is not on PATH" in done.stderr and "slurm-client" in done.stderr


def test_slurm_dry_run_prints_the_array_and_the_dependent_merge(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "slurm", "submit", "--class", "h100", "--shards", "4",
         "--runs", str(tmp_path), "--checkout", str(ROOT), "--dry-run", "--", "-k", "qwen3_8b"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    shards, merge = done.stdout.splitlines()
    assert "--array=1-4" in shards and "--gres=gpu:1" in shards and shards.endswith("ci/slurm/shards.sbatch")
    assert "--dependency=afterany:ARRAY_JOB_ID" in merge and merge.endswith("ci/slurm/merge.sbatch")


def test_a_budget_runs_cases_in_value_order_until_the_next_would_not_end_in_time(tmp_path: Path) -> None:
    """Two tiny cases, each expected (from its baseline file) to take 6 s: the first by value
    (neither has run on this store: ties by case id) starts, really runs (longer than the 9 s budget
    leaves for a second case), and the second is not started. The baselines are copies of the
    committed ones with their wall times set, so the test does not hang on the host they were taken on."""
    baselines = tmp_path / "baselines" / "cpu"
    baselines.mkdir(parents=True)
    for case_id in ("sft_hf-qwen3_tiny-full-short-b4", "sft_hf-qwen3_tiny-lora-short-b4"):
        baseline = json.loads((ROOT / "baselines" / "cpu" / f"{case_id}.json").read_text())
        baseline["runs"] = [{**run, "wall_s": 6.0} for run in baseline["runs"]]
        (baselines / f"{case_id}.json").write_text(json.dumps(baseline))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-k",
         "tiny-lora-short or tiny-full-short", "-rA", "-p", "no:cacheprovider",
         "--perf-budget", "0.15", "--perf-output", str(tmp_path / "reports"),
         "--perf-baselines", str(tmp_path / "baselines")],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    (run_dir,) = (tmp_path / "reports").iterdir()
    first = json.loads((run_dir / "results" / "sft_hf-qwen3_tiny-full-short-b4.json").read_text())
    second = json.loads((run_dir / "results" / "sft_hf-qwen3_tiny-lora-short-b4.json").read_text())
    assert first["outcome"] == "ok" and first["runs"], "the first case by value did not run"
    assert second["outcome"] == "skipped" and second["message"].startswith("over --perf-budget 0.15 min")


def test_a_shared_postgresql_history_weighs_every_shard_s_split_alike(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    """Two earlier nightlies of the class, ingested into a PostgreSQL history: every shard reads
    the same durations from it (runs before today only), so the split follows the history."""
    from trainperf.recording.ingest import ingest
    from trainperf.store.db import open_store

    store = open_store(pg_url)
    for day, index in (("01", 1), ("02", 2)):
        shard = make_shard(tmp_path / day, index, 2, halves())
        record = next(shard.iterdir()) / "run.json"
        data = json.loads(record.read_text())
        data["sessions"][0]["started"] = f"2026-11-{day}T02:00:00+00:00"
        record.write_text(json.dumps(data))
        ingest(store, [shard], say=lambda _line: None)
    store.close()
    rows, shared = read_timeline(pg_url, "cpu")
    assert shared and {row.case_id for row in rows} == {key for key, index in halves().items()}
    history = durations_from_timeline(rows)
    assert history and all(seconds > 0 for figures in history.values() for seconds in figures)
    expected = expected_durations(sorted(halves()), "cpu", history, lambda _key: None)
    assert {value.source for key, value in expected.items() if key in history} == {"history"}


def test_a_case_without_a_baseline_of_its_class_is_planned_from_the_class_it_plans_from(
    tmp_path: Path,
) -> None:
    """fixtures/hardware/h200.yaml plans from h100: a night on an H200 without an h200 baseline for a
    case weighs it by its h100 one, says so, and never takes it for a default of 10 minutes."""
    from trainperf.fleet.night import load_baselines, stand_in_line
    from trainperf.fleet.shard import baseline_loader
    from trainperf.store.baselines import BaselineStore

    root = Path(__file__).resolve().parents[1] / "baselines"
    only_h100, both = "rl_trl-qwen2_5_3b-lora-fixed-b16-p128-c64-g8", "sft_hf-qwen3_8b-lora-short-b4"
    for gpu_class, key in (("h100", only_h100), ("h100", both), ("h200", both)):
        (tmp_path / gpu_class).mkdir(exist_ok=True)
        (tmp_path / gpu_class / f"{key}.json").write_bytes((root / gpu_class / f"{key}.json").read_bytes())
    loader = baseline_loader(BaselineStore(tmp_path), "h200")
    expected = expected_durations([only_h100, both, "nothing"], "h200", {}, loader)
    assert expected[only_h100].source == "h100 baseline" and expected[only_h100].seconds < 600.0
    assert expected[both].source == "baseline"  # its own class first
    assert expected["nothing"].source == "default"
    loaded = load_baselines(tmp_path, "h200", [only_h100, both, "nothing"])
    assert loaded[only_h100].gpu_class == "h100" and loaded[both].gpu_class == "h200"  # type: ignore[union-attr]
    line = stand_in_line(loaded, [only_h100, both, "nothing"], "h200")
    assert line is not None and "1 of tonight's case(s) have no h200 baseline" in line and "h100" in line
    assert stand_in_line(load_baselines(tmp_path, "h100", [only_h100]), [only_h100], "h100") is None
    assert (
        expected_durations([only_h100], "h100", {}, baseline_loader(BaselineStore(tmp_path), "maxq"))[
            only_h100
        ].source
        == "default"
    )  # maxq plans from nothing
