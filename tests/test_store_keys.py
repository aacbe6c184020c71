"""Two sessions that record the same case on the same runner within one second keep both results
(the keys hold the creation time to the microsecond), and a result already stored is said as such,
never counted as recorded (real SQLite store, the suite's own session and result paths)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from trainperf.case import Case
from trainperf.ground.settings import resolve
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.run.case_runner import CaseRunner
from trainperf.run.context import RunContext, open_run

CASE = Case(
    family="sft_hf", model="qwen3_tiny", method="lora", profile="short", batch_size=4, gpu_classes=("cpu",)
)


def _session(tmp_path: Path, output: str, store: str) -> RunContext:
    cli = {"output": str(tmp_path / output), "baselines": str(tmp_path / "baselines"), "store": store}
    settings = resolve(cli, lambda _n: None, tmp_path)
    return open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path)


def test_two_sessions_recording_one_case_within_a_second_keep_both_and_a_repeat_is_said(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'history.sqlite'}"
    first, second = _session(tmp_path, "a", store), _session(tmp_path, "b", store)
    results = [CaseRunner(first).new_result(CASE), CaseRunner(second).new_result(CASE)]
    assert results[0].created != results[1].created
    for context, result in zip((first, second), results, strict=True):
        assert context.history is not None
        context.history.record(result, None)
    assert first.history is not None and second.history is not None
    first.history.record(results[0], None)  # the same result again: not recorded twice
    lines = first.history.conclude("2026-11-27T20:00:00+00:00") + second.history.conclude("x")
    assert any("1 case(s) recorded in the results history" in line for line in lines)
    assert f"{CASE.id}: a result of the same key (case, creation time, host, GPU) is already in" in lines[0]
    engine = sa.create_engine(store)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from cases")).scalar() == 2
        assert conn.execute(sa.text("select count(distinct run_id) from cases")).scalar() == 2
