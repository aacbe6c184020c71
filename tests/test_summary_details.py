"""The lines under the summary table: a pass whose timing was not gated says why."""

from __future__ import annotations

from trainperf.report.summary import details
from trainperf.result import CaseResult


def _result(verdict: str, reason: str) -> CaseResult:
    return CaseResult(
        case_id="sft_hf-qwen3_tiny-qlora-short-b4", case={}, gpu_class="cpu", outcome="ok",
        verdict={"verdict": verdict, "reason": reason, "judged_against": "the class's baseline file (a run)"},
    )  # fmt: skip


def test_a_pass_with_ungated_timing_names_the_other_host() -> None:
    reason = (
        "within tolerance; timing shown, not gated: the baseline was measured on another host (cpu_id x -> y)"
    )
    lines = details([_result("pass", reason)], {}, {})
    assert lines[0].endswith(reason) and lines[1] == "    judged against the class's baseline file (a run)"


def test_a_plain_pass_adds_no_lines() -> None:
    assert details([_result("pass", "within tolerance")], {}, {}) == []
