"""Writing runs and judging against history, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_server import pg_url, postgres_server  # noqa: F401
from store_data import GPU, make_result, nightly

from trainperf.judge.compare import compare_case
from trainperf.judge.metrics import METRICS
from trainperf.run_record import RunRecord
from trainperf.store.db import Store, open_store
from trainperf.store.history_baseline import choose_baseline, history_baseline
from trainperf.store.history_writes import record_case
from trainperf.store.reads import stored_cases
from trainperf.store.records import RunInfo, run_key, runner_label

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
    from trainperf.store.series_reads import history_points

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


def test_a_baseline_file_taken_after_the_history_restarts_it(store: Store) -> None:
    # Ten nights at 0.5 s, then the team accepts a slower step by taking the baseline again.
    for day in range(10):
        _night(store, day, 0.5)
    retaken = make_result(CASE, nightly(10), 0.6)
    baseline, described = choose_baseline("auto", store, CASE, "h100-a", retaken, n=4)
    assert baseline is retaken
    assert "has 0 accepted runs" in described and "not pooled: it was written after them" in described
    for day in range(11, 15):
        _night(store, day, 0.6)
    baseline, described = choose_baseline("auto", store, CASE, "h100-a", retaken, n=4)
    assert baseline is not None and baseline is not retaken
    assert baseline.metrics["step_time_s"].per_run == pytest.approx([0.6] * 4, rel=0.01)
    assert described.startswith("the last 4 accepted runs")


def _night_of(store: Store, day: int, step_s: float, steps: int) -> None:
    started = nightly(day)
    run = RunInfo(run_key(started, GPU), "pytest", started, GPU, "h100-a", "h100")
    result = make_result(CASE, started, step_s, seed=day)
    result.runs = [RunRecord(steps_requested=steps)]
    record_case(store, run, result)


def test_a_series_breaks_where_the_measured_steps_change_and_finds_changes_within(store: Store) -> None:
    from trainperf.store.series import series_of
    from trainperf.store.series_reads import history_points

    # 40-step nights, then planned 12-step nights whose first-steps rate reads 20% lower by itself,
    # then a real 15% drop within the 12-step stretch.
    for day in range(12):
        _night_of(store, day, 0.500, 40)
    for day in range(12, 24):
        _night_of(store, day, 0.625, 12)
    for day in range(24, 36):
        _night_of(store, day, 0.735, 12)
    (series,) = series_of(history_points(store, ["tokens_per_s"], case_id=CASE), "tokens_per_s")
    assert series.environment == {12: [("measured steps", 40, 12)]}
    assert [cp.index for cp in series.change_points] == [24]
    assert [p.steps for p in series.points[11:13]] == [40, 12]


def test_an_older_store_gains_the_steps_column_and_its_results_keep_none(store: Store) -> None:
    import sqlalchemy as sa

    from trainperf.store.db import SCHEMA_VERSION, cases, open_store, schema_info

    _night_of(store, 0, 0.5, 40)
    with store.writing() as conn:  # as a store written by the version before
        conn.execute(sa.text("ALTER TABLE cases DROP COLUMN steps"))
        conn.execute(schema_info.update().values(value=str(SCHEMA_VERSION - 1)))
    reopened = open_store(store.url)
    try:
        with reopened.reading() as conn:
            assert conn.execute(sa.select(cases.c.steps)).scalars().all() == [None]
            assert conn.execute(sa.select(schema_info.c.value)).scalar() == str(SCHEMA_VERSION)
        _night_of(reopened, 1, 0.5, 40)
        with reopened.reading() as conn:
            assert sorted(conn.execute(sa.select(cases.c.steps)).scalars().all(), key=str) == [40, None]
    finally:
        reopened.close()
