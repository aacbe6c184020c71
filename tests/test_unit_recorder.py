"""The child's own allocator figures: reported only where this process trained on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainperf.workloads.protocol import ChildSpec
from trainperf.workloads.recorder import StepRecorder


def _cuda_recorder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allocated: int, reserved: int
) -> StepRecorder:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: allocated)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: reserved)
    return StepRecorder(
        tmp_path / "steps.jsonl", ChildSpec(case={}, steps=0, out_dir=str(tmp_path), device="cuda:0")
    )


def test_a_process_that_trained_on_the_gpu_reports_its_peaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _cuda_recorder(tmp_path, monkeypatch, allocated=7 << 30, reserved=8 << 30)
    assert recorder.memory_summary() == {"peak_allocated_b": 7 << 30, "peak_reserved_b": 8 << 30}


def test_a_process_that_allocated_nothing_reports_no_figure_not_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verl's launcher process on an H100: its workers ran out of memory, it allocated nothing itself.
    recorder = _cuda_recorder(tmp_path, monkeypatch, allocated=0, reserved=0)
    assert recorder.memory_summary() == {}


def test_a_cpu_run_reports_no_gpu_figures(tmp_path: Path) -> None:
    assert (
        StepRecorder(
            tmp_path / "steps.jsonl", ChildSpec(case={}, steps=0, out_dir=str(tmp_path))
        ).memory_summary()
        == {}
    )


def test_each_step_records_the_hosts_speed_taken_outside_every_steps_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe runs at the edge, after the step's right edge and before the next step's left one:
    a slow probe (here 50 ms) lengthens no step."""
    import time

    from trainperf.workloads import recorder as recorder_module

    def slow_probe() -> float:
        time.sleep(0.05)
        return 0.7

    monkeypatch.setattr(recorder_module, "step_probe", slow_probe)
    recorder = StepRecorder(tmp_path / "steps.jsonl", ChildSpec(case={}, steps=0, out_dir=str(tmp_path)))
    recorder.begin()
    for _ in range(3):
        recorder.step_end(tokens=10)
    assert [step["host_speed"] for step in recorder.steps] == [0.7, 0.7, 0.7]
    assert all(step["duration_s"] < 0.04 for step in recorder.steps[1:])


def test_the_step_probe_reads_the_hosts_speed() -> None:
    from trainperf.workloads.host_index import step_probe

    assert step_probe() > 0


def test_a_step_timed_in_other_processes_gets_the_hosts_speed_as_it_arrives(tmp_path: Path) -> None:
    """verl's steps are recorded as its workers log them: the driver times the host then; a record that
    already carries a reading keeps it."""
    recorder = StepRecorder(tmp_path / "steps.jsonl", ChildSpec(case={}, steps=0, out_dir=str(tmp_path)))
    recorder.record({"step": 1, "duration_s": 2.0, "tokens": 10})
    recorder.record({"step": 2, "duration_s": 2.0, "tokens": 10, "host_speed": 0.5})
    assert recorder.steps[0]["host_speed"] > 0 and recorder.steps[1]["host_speed"] == 0.5
