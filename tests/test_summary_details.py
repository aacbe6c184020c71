"""The lines under the summary table: a pass whose timing was not gated says why."""

from __future__ import annotations

from trainperf.case_record import CaseRecord
from trainperf.report.summary import details
from trainperf.result import CaseResult
from trainperf.stored_verdict import StoredMetricVerdict, StoredVerdict


def _result(verdict: str, reason: str) -> CaseResult:
    return CaseResult(
        case_id="sft_hf-qwen3_tiny-qlora-short-b4", case=CaseRecord(), gpu_class="cpu", outcome="ok",
        verdict=StoredVerdict(verdict, reason=reason, judged_against="the class's baseline file (a run)"),
    )  # fmt: skip


def test_a_pass_with_ungated_timing_names_the_other_host() -> None:
    reason = (
        "within tolerance; timing shown, not gated: the baseline was measured on another host (cpu_id x -> y)"
    )
    lines = details([_result("pass", reason)], {}, {})
    assert lines[0].endswith(reason) and lines[1] == "    judged against the class's baseline file (a run)"


def test_a_plain_pass_adds_no_lines() -> None:
    assert details([_result("pass", "within tolerance")], {}, {}) == []


def _timed(case_id: str, gated: bool) -> CaseResult:
    note = "" if gated else "not gated: the baseline was measured on another host (cpu_id unrecorded -> 'x')"
    metric = StoredMetricVerdict("step_time_s", "pass", gated=gated, note=note)
    return CaseResult(
        case_id=case_id, case=CaseRecord(), gpu_class="cpu", outcome="ok",
        verdict=StoredVerdict("pass", reason="within tolerance", metrics=[metric]),
    )  # fmt: skip


def test_passes_timed_against_another_hosts_baselines_get_one_line_with_the_fix() -> None:
    lines = details([_timed("a", gated=False), _timed("b", gated=False), _timed("c", gated=True)], {}, {})
    assert len(lines) == 1, lines
    why = "the baseline was measured on another host (cpu_id unrecorded -> 'x')"
    assert lines[0].startswith(f"timing of 2 case(s) shown, not gated: {why}; ")
    assert "pytest -m cpu --perf-update-baselines --perf-baselines baselines-$(hostname)" in lines[0]


def test_passes_gated_on_this_host_add_no_line() -> None:
    assert details([_timed("a", gated=True)], {}, {}) == []
