"""trainperf ab explains the cases that moved: from the rounds' kernel records where they say what
moved, else one profiled run a side diffed like a red night's diagnosis (the profiled runs themselves
on the CPU's tiny case), never a profiled pair that went the other way from the rounds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainperf.ground.folder import RunFolder
from trainperf.judge.compare import CaseVerdict, MetricVerdict, Verdict
from trainperf.paths import REPO_ROOT
from trainperf.studies.ab_explain import (
    explain_moved,
    explain_round,
    explained_again,
    explanations,
    moved_cases,
    narrowed_selection,
    profile_reason,
    profiled_now,
)


def _verdict(verdict: Verdict, ratio: float, *more: MetricVerdict, kernels: str = "") -> CaseVerdict:
    step = MetricVerdict("step_time_s", verdict, 1.0, 1.0, ratio)
    return CaseVerdict(verdict, verdict is Verdict.REGRESSED, "", [step, *more], kernels=kernels)


KERNELS = MetricVerdict("kernel_ms", Verdict.IMPROVED, 899.0, 908.0, 0.99)
HOST_UNSETTLED = MetricVerdict("host_ms", Verdict.PASS, 4751.0, 4988.0, 0.95)
HOST_MOVED = MetricVerdict("host_ms", Verdict.REGRESSED, 5900.0, 4988.0, 1.18)


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


def test_only_a_case_the_rounds_cannot_explain_is_profiled() -> None:
    """Kernel records on both sides and host time that did not conclude: the rounds' line, no run.
    No kernel time, or host time that concluded: one profiled run a side."""
    verdicts = {
        "kernels-moved": _verdict(Verdict.IMPROVED, 0.95, KERNELS, HOST_UNSETTLED, kernels="GEMM -1.3 ms"),
        "host-moved": _verdict(Verdict.REGRESSED, 1.18, KERNELS, HOST_MOVED),
        "no-kernel-time": _verdict(Verdict.NOISY, 1.1),
        "unchanged": _verdict(Verdict.PASS, 1.0, KERNELS),
    }
    assert profile_reason(verdicts["kernels-moved"]) is None
    assert profile_reason(verdicts["host-moved"]) == "the host's time regressed"
    assert profile_reason(verdicts["no-kernel-time"]) == "the rounds recorded no kernel time"
    asked: list[list[str]] = []

    def profile(cases: list[str]) -> tuple[Path, Path]:
        asked.append(cases)
        return Path("/nonexistent-a"), Path("/nonexistent-b")

    lines = explain_moved(verdicts, profiled_now(profile))
    assert asked == [["host-moved", "no-kernel-time"]]
    assert list(lines) == ["host-moved", "kernels-moved", "no-kernel-time"]
    assert lines["kernels-moved"] == (
        "no profiled run: the rounds' kernel records say what moved, and the host's time did not conclude"
    )
    assert lines["host-moved"].startswith("not explained: the profiled runs could not be read")
    assert (
        explain_moved({"unchanged": verdicts["unchanged"]}, profiled_now(profile)) == {} and len(asked) == 1
    )


def test_judged_again_a_case_needing_a_profile_keeps_its_line_where_none_was_kept(tmp_path: Path) -> None:
    verdicts = {
        "kernels-moved": _verdict(Verdict.IMPROVED, 0.95, KERNELS, HOST_UNSETTLED, kernels="GEMM -1.3 ms"),
        "host-moved": _verdict(Verdict.REGRESSED, 1.18, KERNELS, HOST_MOVED),
        "no-kernel-time": _verdict(Verdict.NOISY, 1.1),
    }
    stored = {"host-moved": "B against A, profiled: host-side +80.0 ms", "kernels-moved": "old line"}
    lines = explained_again(verdicts, tmp_path, stored)
    assert lines["host-moved"] == stored["host-moved"]
    assert lines["kernels-moved"].startswith("no profiled run: the rounds' kernel records say what moved")
    assert lines["no-kernel-time"] == "not explained: no profiled runs kept beside the rounds"


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
    profiled = [RunFolder.open(f).results()[0].profile for f in (folder_a, folder_b)]
    assert profiled[0] is not None and profiled[1] is not None
    b_slower = profiled[1].step_ms > profiled[0].step_ms
    # The rounds' direction as the profiled pair went: a diagnosis; the other way: said to disagree.
    agreeing = explanations(folder_a, folder_b, {case: 1.2 if b_slower else 0.8})[case]
    expected = "B against A, profiled: " if b_slower else "A against B (B is faster), profiled: "
    assert agreeing.startswith(expected) and "profiled)" in agreeing
    against = explanations(folder_a, folder_b, {case: 0.8 if b_slower else 1.2})[case]
    assert against.startswith("not explained: the profiled runs went the other way from the rounds")
    assert f"{profiled[0].step_ms:,.1f}" in against
