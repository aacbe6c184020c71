"""Unit tests of result files (trainperf.store.results) and the baseline store (trainperf.store.baselines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.errors import TrainperfError
from trainperf.fingerprint_record import Fingerprint
from trainperf.result import SCHEMA_VERSION, CaseResult, MetricValue
from trainperf.run_record import RunRecord
from trainperf.store.baselines import BaselineStore
from trainperf.store.results import load_result, save_result
from trainperf.stored_verdict import StoredVerdict

CASE_ID = "sft_hf-qwen3_tiny-lora-short-b4"


def _result(**kw: Any) -> CaseResult:
    fields: dict[str, Any] = {
        "case_id": CASE_ID,
        "case": CaseRecord(family="sft_hf", batch_size=4),
        "gpu_class": "cpu",
        "outcome": "ok",
        "metrics": {
            "step_time_s": MetricValue(0.5, "s", samples=[0.5, 0.6], per_run=[0.5], keys=["1:100", "2:90"]),
            "peak_allocated_gib": MetricValue(1.25, "GiB"),
        },
        "effective_config": EffectiveConfig(gradient_checkpointing=True),
        "fingerprint": Fingerprint.from_dict({"torch": "2.13.0"}),
        "runs": [RunRecord(returncode=0, steps_requested=16)],
        "verdict": StoredVerdict(verdict="pass"),
        "created": "2025-01-01T00:00:00+00:00",
    }
    fields.update(kw)
    return CaseResult(**fields)


def test_save_and_load_result_round_trip(tmp_path: Path) -> None:
    result = _result()
    path = tmp_path / "results" / f"{CASE_ID}.json"
    save_result(path, result)
    assert load_result(path) == result
    assert not list(path.parent.glob("*.tmp"))  # the atomic write leaves no temporary file


def test_baseline_store_round_trip(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    path = store.save(_result(), source="run-1: pytest perf_tests")
    assert path == tmp_path / "cpu" / f"{CASE_ID}.json"
    loaded = store.load("cpu", CASE_ID)
    assert loaded is not None
    assert loaded.metrics == _result().metrics
    assert loaded.source == "run-1: pytest perf_tests"
    assert loaded.verdict == StoredVerdict() and not loaded.verdict.judged  # a baseline carries no verdict
    assert store.case_ids("cpu") == [CASE_ID]
    assert store.load("cpu", "other-case") is None
    assert store.load("h100", CASE_ID) is None


def test_save_does_not_mutate_the_result(tmp_path: Path) -> None:
    result = _result(source="")
    BaselineStore(tmp_path).save(result, source="run-2")
    assert result.verdict == StoredVerdict(verdict="pass")
    assert result.source == ""


def _assert_one_line_fix(exc: pytest.ExceptionInfo[TrainperfError], path: Path) -> None:
    message = str(exc.value)
    assert str(path) in message
    assert "--perf-update-baselines" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text",
    [
        '{"case_id": "x", ',  # truncated JSON
        "[1, 2, 3]",  # not an object
        json.dumps({"schema_version": SCHEMA_VERSION, "case_id": "x"}),  # fields missing
        json.dumps({**_result().to_dict(), "unknown_field": 1}),
    ],
)
def test_corrupt_baseline_is_one_line_error(tmp_path: Path, text: str) -> None:
    store = BaselineStore(tmp_path)
    path = store.path("cpu", CASE_ID)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(TrainperfError) as info:
        store.load("cpu", CASE_ID)
    _assert_one_line_fix(info, path)


def test_schema_version_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**_result().to_dict(), "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(TrainperfError) as info:
        load_result(path)
    _assert_one_line_fix(info, path)
    assert "schema version" in str(info.value)


def test_metrics_not_an_object_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**_result().to_dict(), "metrics": []}))
    with pytest.raises(TrainperfError) as info:
        load_result(path)
    _assert_one_line_fix(info, path)


def test_baseline_holding_another_case_raises(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    path = store.path("cpu", "sft_hf-qwen3_tiny-full-short-b4")
    save_result(path, _result())  # the file is named for another case
    with pytest.raises(TrainperfError) as info:
        store.load("cpu", "sft_hf-qwen3_tiny-full-short-b4")
    _assert_one_line_fix(info, path)
    assert CASE_ID in str(info.value)


def test_baseline_in_wrong_class_folder_raises(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    save_result(store.path("h100", CASE_ID), _result())  # gpu_class "cpu" inside h100/
    with pytest.raises(
        TrainperfError, match=f"holds case '{CASE_ID}' of class 'cpu'; move it to the right file"
    ):
        store.load("h100", CASE_ID)


@pytest.mark.parametrize("changes", [{"emulated": "h100"}, {"planted_slowdown": 0.2}])
def test_emulated_or_planted_result_is_never_a_baseline(tmp_path: Path, changes: dict[str, Any]) -> None:
    store = BaselineStore(tmp_path)
    says = (
        "emulated results are never stored"
        if "emulated" in changes
        else "planted regression: it cannot become"
    )
    with pytest.raises(TrainperfError, match=says):
        store.save(_result(**changes), source="run")
    assert not store.path("cpu", CASE_ID).exists()
