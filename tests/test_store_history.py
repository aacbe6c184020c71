"""Writing runs and judging against history, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import pg_url, postgres_server  # noqa: F401
from store_data import GPU, make_result, nightly

from trainperf.judge.compare import compare_case
from trainperf.judge.metrics import METRICS
from trainperf.store.db import Store, open_store
from trainperf.store.history import RunInfo, record_case, run_key, runner_label
from trainperf.store.history_baseline import choose_baseline, history_baseline
from trainperf.store.reads import stored_cases

CASE = "sft_hf-qwen3_8b-lora-maxlen-b4"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    url = str(tmp_path / "h.sqlite") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    opened = open_store(url)
    request.addfinalizer(opened.close)
    return opened


def _night(
    store: Store, day: int, step_s: float, fingerprint: dict | None = None, verdict: str = "pass"
) -> None:
    fp = fingerprint or GPU
    started = nightly(day)
    run = RunInfo(run_key(started, fp), "pytest", started, fp, runner_label(fp, "h100-a"), "h100")
    record_case(store, run, make_result(CASE, started, step_s, fingerprint=fp, seed=day, verdict=verdict))


def test_a_case_written_twice_is_stored_once(store: Store) -> None:
    started = nightly(0)
    run = RunInfo(run_key(started, GPU), "pytest", started, GPU, "h100-a", "h100")
    result = make_result(CASE, started, 0.5)
    assert record_case(store, run, result) is True
    assert record_case(store, run, result) is False
    assert len(stored_cases(store, CASE)) == 1


def test_history_baseline_pools_the_last_n_accepted_runs(store: Store) -> None:
    for day in range(12):
        _night(store, day, 0.5)
    _night(store, 12, 0.6, verdict="regressed")  # judged worse: never part of the baseline
    baseline, described = history_baseline(store, CASE, "h100-a", n=10, gpu_class="h100")
    assert baseline is not None
    assert described.startswith("the last 10 accepted runs on runner h100-a")
    step = baseline.metrics["step_time_s"]
    assert step.per_run is not None and len(step.per_run) == 10 and step.value == pytest.approx(0.5, rel=0.01)
    assert step.samples is not None and len(step.samples) == 120 and step.keys is not None
    # The pooled baseline judges with today's statistics: a 5% slower night regresses, an equal one passes.
    slower = make_result(CASE, nightly(13), 0.525, seed=99)
    same = make_result(CASE, nightly(13), 0.5, seed=98)
    judged = {
        r.metrics["step_time_s"].value: compare_case(
            r, baseline, METRICS, expectation="ok", timing_comparable=True
        )
        for r in (slower, same)
    }
    assert [v.verdict.value for v in judged.values()] == ["regressed", "pass"]


def test_no_history_falls_back_to_the_class_baseline_and_says_so(store: Store) -> None:
    class_file = make_result(CASE, nightly(0), 0.5)
    class_file.source = "baselines/h100"
    baseline, described = choose_baseline("history", store, CASE, "new-runner", class_file)
    assert baseline is class_file
    assert (
        "0 accepted runs on runner new-runner" in described
        and "judged against the class's baseline" in described
    )


def test_auto_takes_history_only_once_it_holds_n_runs(store: Store) -> None:
    class_file = make_result(CASE, nightly(0), 0.5)
    for day in range(3):
        _night(store, day, 0.5)
    _, described = choose_baseline("auto", store, CASE, "h100-a", class_file, n=4)
    assert "has 3 accepted runs" in described and "class's baseline file" in described
    _night(store, 3, 0.5)
    baseline, described = choose_baseline("auto", store, CASE, "h100-a", class_file, n=4)
    assert baseline is not class_file and described.startswith("the last 4 accepted runs")


def test_a_new_driver_under_the_same_label_is_an_environment_change_not_pooled(store: Store) -> None:
    for day in range(5):
        _night(store, day, 0.5)
    upgraded = {**GPU, "driver": "590.10"}
    for day in range(5, 7):
        _night(store, day, 0.45, fingerprint=upgraded)
    baseline, described = history_baseline(store, CASE, "h100-a", fingerprint=upgraded, min_runs=2)
    assert baseline is not None and baseline.metrics["step_time_s"].per_run == pytest.approx(
        [0.45, 0.45], rel=0.01
    )
    assert "environment changed under runner h100-a (driver 580.159.04 -> 590.10)" in described


def test_a_planted_slowdown_is_stored_but_kept_out_of_the_series(store: Store) -> None:
    from trainperf.store.series import history_points

    for day in range(3):
        _night(store, day, 0.5)
    started = nightly(3)
    planted = make_result(CASE, started, 0.51, seed=3)
    planted.planted_slowdown = 0.02
    record_case(store, RunInfo(run_key(started, GPU), "pytest", started, GPU, "h100-a", "h100"), planted)
    assert len(stored_cases(store, CASE)) == 4
    assert [p.values["step_time_s"] < 0.505 for p in history_points(store, ["step_time_s"], CASE)] == [
        True
    ] * 3
