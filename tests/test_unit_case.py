"""Unit tests of trainperf.case.Case: stable ids, serialisation, validation."""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.case import Case, Outcome
from trainperf.families import family_of


def _case(**kw: Any) -> Case:
    fields: dict[str, Any] = {
        "family": "sft_hf",
        "model": "qwen3_8b",
        "method": "lora",
        "profile": "long",
        "batch_size": 4,
    }
    fields.update(kw)
    return Case(**fields)


def test_id_of_default_case() -> None:
    assert _case().id == "sft_hf-qwen3_8b-lora-long-b4"


@pytest.mark.parametrize(
    ("changes", "suffix"),
    [
        ({"grad_accum": 2}, "-ga2"),
        ({"gradient_checkpointing": False}, "-nogc"),
        ({"gpus": 2}, "-gpus2"),
        ({"max_seq_len": 4096}, "-len4096"),
        ({"model_path": "/models/x"}, "-localmodel"),
        ({"dataset_path": "/data/x.jsonl"}, "-localdata"),
        ({"grad_accum": 2, "gradient_checkpointing": False}, "-ga2-nogc"),
        ({"extra": (("rank", "16"),)}, "-rank16"),
    ],
)
def test_id_appends_non_default_knobs(changes: dict[str, Any], suffix: str) -> None:
    assert _case(**changes).id == "sft_hf-qwen3_8b-lora-long-b4" + suffix


def test_id_ignores_knobs_that_are_not_in_it() -> None:
    """Fields such as notes, classes and expectations must not change an id (they'd orphan baselines)."""
    changed = _case(notes="x", gpu_classes=("h100",), expected=(("h100", "oom"),), slow=True, steps=10)
    assert changed.id == _case().id


def test_round_trip() -> None:
    case = _case(
        grad_accum=2,
        gpu_classes=("h100", "h200"),
        expected=(("h100", "oom"), ("h200", "unknown")),
        extra=(("a", "1"), ("b", "x")),
        steps=12,
    )
    data = case.to_dict()
    assert data["id"] == case.id
    assert data["expected"] == {"h100": "oom", "h200": "unknown"}
    assert Case.from_dict(data) == case
    assert Case.from_dict(data).to_json() == case.to_json()


def test_round_trip_of_unsorted_pairs_keeps_case_and_id() -> None:
    case = _case(expected=(("maxq", "oom"), ("h100", "oom")), extra=(("z", "1"), ("a", "2")))
    back = Case.from_dict(case.to_dict())
    assert back.id == case.id
    assert back == case


@pytest.mark.parametrize("changes", [{"method": "dpo"}, {"batch_size": 0}, {"grad_accum": 0}, {"gpus": 0}])
def test_invalid_cases_raise(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        _case(**changes)


def test_expectation() -> None:
    case = _case(expected=(("maxq", "oom"),))
    assert case.expectation("maxq") == "oom"
    assert case.expectation("h100") == "ok"
    assert _case().expectation("cpu") == "ok"


def test_samples_per_step() -> None:
    case = _case(batch_size=4, grad_accum=2, gpus=2)
    assert family_of(case.family).samples_per_step(case) == 16


def test_outcome_failure_to_run() -> None:
    assert Outcome.OOM.is_failure_to_run and Outcome.CRASH.is_failure_to_run
    assert not Outcome.OK.is_failure_to_run and not Outcome.SKIPPED.is_failure_to_run
