"""``trainperf baselines --stale``: which baselines lack a figure the suite now reads from a baseline,
what goes without it, and the command that re-takes exactly those cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainperf.case_record import CaseRecord
from trainperf.fingerprint_record import Fingerprint
from trainperf.plan.retake import GAPS, gaps_of, retake_command, stale_baselines
from trainperf.profile_record import AllocatorSummary, ProfileSummary
from trainperf.result import CaseResult, MetricValue
from trainperf.run_record import RunRecord

PROFILE = ProfileSummary(
    kind="gpu", steps=1, step_ms=1.0, busy_ms=0.5, host_side_ms=0.5, idle_other_ms=0.0,
    device_ms={"GEMM": 0.5}, top_kernels=(), memory=AllocatorSummary(unavailable="not recorded"),
)  # fmt: skip


def _baseline(case_id: str, *, complete: bool) -> CaseResult:
    run = RunRecord(wall_s=61.0, memory_peak_step=3) if complete else RunRecord()
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(),
        gpu_class="h100",
        outcome="ok",
        metrics={"kernel_ms": MetricValue(196.6, "ms")} if complete else {},
        runs=[run],
        fingerprint=Fingerprint(cpu_id="GenuineIntel family 6 model 143 stepping 8")
        if complete
        else Fingerprint(),
        profile=PROFILE if complete else None,
    )


def test_kernel_time_is_no_gap_where_a_run_cannot_record_it() -> None:
    """A cliff search is no pooled run, the CPU has no kernels, an OOM ran no steady step: none of them
    lacks kernel time. A verl baseline without it does (verl records it in its own processes)."""
    for case_id, changes in (
        ("sft_hf-a-b4-cliff-batch_size", {"cliff": {"axis": "batch_size"}}),
        ("sft_hf-a-b4", {"gpu_class": "cpu"}),
        ("sft_hf-a-b4", {"outcome": "oom"}),
    ):
        baseline = _baseline(case_id, complete=True)
        baseline.metrics = {}
        for key, value in changes.items():
            setattr(baseline, key, value)
        assert "kernel time" not in gaps_of(baseline), case_id
    assert "kernel time" in gaps_of(_baseline("sft_hf-a-b4", complete=False))
    verl = _baseline("rl_verl-qwen2_5_0_5b-full-gsm8k-b64", complete=True)
    verl.metrics = {}
    assert "kernel time" in gaps_of(verl)


def test_a_baseline_of_today_has_no_gap_and_an_old_one_every_gap() -> None:
    assert gaps_of(_baseline("new", complete=True)) == []
    assert gaps_of(_baseline("old", complete=False)) == [gap.name for gap in GAPS]
    half = _baseline("half", complete=True)
    half.runs.append(RunRecord(memory_peak_step=4))  # a second run without its wall time
    assert gaps_of(half) == ["wall time"]


def test_only_stale_baselines_are_listed_and_the_command_selects_them() -> None:
    results = [_baseline("sft_hf-a-b4", complete=True), _baseline("rl_trl-b", complete=False)]
    assert list(stale_baselines(results)) == ["rl_trl-b"]
    command = retake_command("h100", ["sft_hf-z", "rl_trl-b"])
    assert command == "pytest perf_tests -m h100 --perf-update-baselines -k 'rl_trl-b or sft_hf-z'"


def test_the_command_line_lists_the_gaps_and_the_retake(tmp_path: Path) -> None:
    folder = tmp_path / "h100"
    folder.mkdir()
    for result in (_baseline("sft_hf-new", complete=True), _baseline("sft_hf-old", complete=False)):
        (folder / f"{result.case_id}.json").write_text(json.dumps(result.to_dict()))
    completed = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "baselines", "--baselines", str(tmp_path), "--stale"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "== h100: 1 of 2 baselines lack a figure the suite now reads" in out
    assert "  sft_hf-old: kernel time, profile, memory-peak step, wall time, CPU identity" in out
    assert "sft_hf-new" not in out
    assert out.rstrip().endswith("pytest perf_tests -m h100 --perf-update-baselines -k sft_hf-old")
