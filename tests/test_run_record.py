"""A result's run records (``trainperf.run_record``): typed fields, read from and written back to the
JSON objects results and baselines have always stored, key for key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult
from trainperf.run_record import KernelShare, RunRecord

STORED = {
    "dir": "cases/sft_hf-qwen3_tiny-lora-short-b4/r1",
    "returncode": 0,
    "steps_requested": 16,
    "wall_s": 41.5,
    "outcome": "ok",
    "timeline": {"build_s": 2.5, "setup_s": 1.0, "train_s": 30.0},
    "steps": 16,
    "warmup_steps": 2,
    "sm_clock_median_mhz": 1980,
    "clock_event_reasons": 4,
    "kernel_groups_ms": {"GEMM": 120.5},
    "kernel_top": [{"name": "sm90_gemm", "group": "GEMM", "ms": 60.25, "count": 14}],
    "idle_after": [{"idle": True, "mem_used_gib": 0.5, "waited_s": 0.0}],
    "memory_peak_step": None,
    "purpose": "measurement",
}


def test_a_stored_run_reads_as_typed_fields_and_writes_back_unchanged() -> None:
    run = RunRecord.from_dict(STORED)
    assert run.wall_s == 41.5 and run.steps_requested == 16 and run.purpose == "measurement"
    assert run.kernel_top == [KernelShare("sm90_gemm", "GEMM", 60.25, 14)]
    assert run.memory_peak_step is None and run.memory_peak_late  # a peak after the last step
    assert run.unread == {}
    # Compared as text: 1980 stays an int, as it was stored.
    assert json.dumps(run.to_dict(), sort_keys=True) == json.dumps(STORED, sort_keys=True)


def test_a_key_not_recorded_is_not_written() -> None:
    assert RunRecord().to_dict() == {}
    assert RunRecord(wall_s=3.0, memory_peak_step=4).to_dict() == {"wall_s": 3.0, "memory_peak_step": 4}


def test_what_this_trainperf_cannot_read_is_kept_as_written_and_never_read() -> None:
    stored = {"wall_s": "slow", "kernel_clock": None, "from_a_newer_trainperf": {"x": 1}, "steps": 3}
    run = RunRecord.from_dict(stored)
    assert run.wall_s is None and run.kernel_clock is None and run.steps == 3
    assert run.unread == {"wall_s": "slow", "kernel_clock": None, "from_a_newer_trainperf": {"x": 1}}
    assert run.to_dict() == stored


def test_a_run_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(TypeError, match="a run must be an object"):
        RunRecord.from_dict(["not", "a", "run"])


def test_every_stored_baselines_runs_read_in_full_and_write_back_unchanged() -> None:
    files = [p for p in sorted((REPO_ROOT / "baselines").rglob("*.json")) if "published" not in p.parts]
    assert files
    for path in files:
        data = json.loads(Path(path).read_text())
        result = CaseResult.from_dict(data, origin=str(path))
        assert all(not run.unread for run in result.runs), path  # every key the suite writes is a field
        assert result.to_dict()["runs"] == data["runs"], path
