"""trainperf ab explains the cases that moved: one profiled run a side, diffed like a red night's
diagnosis; the profiled runs themselves on the CPU's tiny case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainperf.judge.compare import CaseVerdict, MetricVerdict, Verdict
from trainperf.paths import REPO_ROOT
from trainperf.studies.ab_explain import explain_round, explanations, moved_cases, narrowed_selection


def _verdict(verdict: Verdict, ratio: float) -> CaseVerdict:
    step = MetricVerdict("step_time_s", verdict, 1.0, 1.0, ratio)
    return CaseVerdict(verdict, verdict is Verdict.REGRESSED, "", [step])


def test_the_cases_that_moved_are_the_regressed_improved_and_noisy_ones() -> None:
    verdicts = {
        "a": _verdict(Verdict.PASS, 1.01),
        "b": _verdict(Verdict.REGRESSED, 1.12),
        "c": _verdict(Verdict.NOISY, 0.9),
        "d": _verdict(Verdict.IMPROVED, 0.8),
        "e": _verdict(Verdict.CONTAMINATED, 1.3),
    }
    assert moved_cases(verdicts) == {"b": 1.12, "c": 0.9, "d": 0.8}
    assert moved_cases(None) == {}


def test_the_profiled_run_narrows_the_studys_own_selection_to_the_moved_cases() -> None:
    study = ["perf_tests", "-m", "h200", "-k", "short and not gpus2", "--perf-steps", "20"]
    assert narrowed_selection(study, ["x-1", "y-2"]) == [
        "perf_tests", "-m", "h200", "-k", "(short and not gpus2) and (x-1 or y-2)", "--perf-steps", "20",
        "--perf-trace",
    ]  # fmt: skip
    equals_form = narrowed_selection(["-m", "h200", "-k=lora"], ["x"])
    assert equals_form == ["-m", "h200", "-k=(lora) and (x)", "--perf-trace"]
    assert narrowed_selection(["-m", "h200"], ["x"]) == ["-m", "h200", "-k", "x", "--perf-trace"]


def test_a_side_without_a_profile_says_so(tmp_path: Path) -> None:
    lines = explanations(tmp_path / "nothing-a", tmp_path / "nothing-b", {"case": 1.2})
    assert lines["case"].startswith("not explained: ")


def test_each_side_profiles_the_moved_case_once_and_the_line_names_what_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A and B the same interpreter, the tiny CPU case: each side's profiled run writes its profile
    summary, and the case's line is a diagnosis of B against A (or the other way where B is faster)."""
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setenv("TRAINPERF_STORE", f"sqlite:///{tmp_path / 'history.sqlite'}")
    case = "sft_hf-qwen3_tiny-lora-short-b4"
    selection = [
        "perf_tests/test_sft_hf.py",
        "-m",
        "cpu",
        "-k",
        "qwen3_tiny and lora and short and not qlora",
    ]
    folder_a, folder_b = explain_round(
        (sys.executable, sys.executable), [*selection, "--perf-steps", "8"], [case], tmp_path
    )
    assert folder_a.parent.name == "explain-A" and folder_b.parent.name == "explain-B"
    slower = explanations(folder_a, folder_b, {case: 1.2})[case]
    assert slower.startswith("B against A, profiled: ") and "profiled)" in slower
    faster = explanations(folder_a, folder_b, {case: 0.8})[case]
    assert faster.startswith("A against B (B is faster), profiled: ")
