"""A cliff search cut short (a time limit) is resumed from its recorded probes, not re-run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.ground.settings import resolve
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.run.case_runner import CaseRunner
from trainperf.run.cliff import run_cliff
from trainperf.run.context import open_run

CASE = Case(
    family="sft_hf", model="qwen3_tiny", method="lora", profile="long", batch_size=1, gpu_classes=("cpu",)
)
TRUE_CLIFF = 37


def _runner(
    tmp_path: Path, resume: Path | None, launched: list[int], monkeypatch: pytest.MonkeyPatch
) -> CaseRunner:
    cli: dict[str, Any] = {
        "output": str(tmp_path / "reports"),
        "baselines": str(tmp_path / "baselines"),
        "resume": resume,
    }
    settings = resolve(cli, lambda _name: None, tmp_path)
    context = open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path)
    context.say = lambda _line: None
    runner = CaseRunner(context)

    def fake_runs(
        case: Case, steps: int, result: Any, measurements: Any, count: int, purpose: str = "", **_kw: Any
    ) -> None:
        launched.append(case.batch_size)
        if case.batch_size > TRUE_CLIFF:
            result.outcome, result.message = "oom", "out of memory (fake)"

    monkeypatch.setattr(runner, "add_runs", fake_runs)
    return runner


def test_resumed_search_replays_recorded_probes_and_launches_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[int] = []
    first = run_cliff(_runner(tmp_path, None, launched, monkeypatch), CASE, "batch_size", 1, 512)
    assert first.result.cliff is not None and first.result.cliff.largest_fit == TRUE_CLIFF
    full = list(launched)
    run_dir = next((tmp_path / "reports").iterdir())
    probes = run_dir / "results" / f"{CASE.id}-cliff-batch_size.probes.jsonl"
    lines = probes.read_text().splitlines()
    assert len(lines) == len(full)  # every launch recorded, confirmations included
    probes.write_text("\n".join(lines[:4]) + '\n{"value": 9')  # cut after 4 probes, mid-line

    launched.clear()
    resumed = run_cliff(_runner(tmp_path, run_dir, launched, monkeypatch), CASE, "batch_size", 1, 512)
    assert launched == full[4:]
    assert resumed.result.cliff is not None and resumed.result.cliff.largest_fit == TRUE_CLIFF
    assert resumed.result.cliff.confirmed


def test_the_verl_micro_batch_cliff_launches_no_value_pre_flight_rejects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E1's 3B one-GPU cliff through the runner, pre-flight real: 256 and 512 do not divide the
    per-GPU mini-batch of 128 and are cut before the first launch, so the search starts at 8."""
    from trainperf.ground.catalogue import load_catalogue

    root = Path(__file__).resolve().parents[1]
    case = load_catalogue(root)[
        "rl_verl-qwen2_5_3b-full-gsm8k-b256-mb1-algppo-engvllm-mini128-n1-p1024-r1024-tp1"
    ]
    launched: list[int] = []
    runner = _runner(tmp_path, None, [], monkeypatch)

    def fake_runs(
        case: Case, steps: int, result: Any, measurements: Any, count: int, purpose: str = "", **_kw: Any
    ) -> None:
        assert case.micro_batch_size is not None
        launched.append(case.micro_batch_size)
        # A cliff between 8 and 16, to follow the bisection (on an H100 nothing fits: measured
        # 2026-11-22, the actor's and critic's full states alone outgrow 80 GB)
        if case.micro_batch_size > 8:
            result.outcome, result.message = "oom", "out of memory (fake)"

    monkeypatch.setattr(runner, "add_runs", fake_runs)
    report = run_cliff(runner, case, "micro_batch_size", 1, 512)
    assert report.result.cliff is not None
    assert (report.result.cliff.largest_fit, report.result.cliff.smallest_oom) == (8, 16)
    assert launched == [8, 32, 16, 8, 16]  # the search, then the confirmations at both edges
    rejected = [p for p in report.result.cliff.probes if p.outcome == "config_error"]
    assert [p.value for p in rejected] == [512, 256] and "divisible" in rejected[0].note


def test_a_cliff_with_a_baseline_is_verified_in_two_launches_and_searched_when_it_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's target: a cliff that has not moved costs 2 launches; one that moved falls back
    to the full search (and its confirmation), without launching the verification's values again."""
    from trainperf.store.baselines import BaselineStore

    launched: list[int] = []
    first = run_cliff(_runner(tmp_path, None, launched, monkeypatch), CASE, "batch_size", 1, 512)
    searched = len(launched)
    assert searched >= 10 and first.result.cliff is not None and not first.result.cliff.verified
    BaselineStore(tmp_path / "baselines").save(first.result, "the first search")

    launched.clear()
    again = run_cliff(_runner(tmp_path, None, launched, monkeypatch), CASE, "batch_size", 1, 512)
    assert launched == [TRUE_CLIFF, TRUE_CLIFF + 1]
    assert again.result.cliff is not None and again.result.cliff.verified and again.result.cliff.confirmed
    assert again.result.cliff.launched == 2 and again.verdict.verdict.value == "pass"
    assert any("verified at its edges with 2 launches" in note for note in again.notes)

    launched.clear()
    monkeypatch.setattr(sys.modules[__name__], "TRUE_CLIFF", 30)  # the cliff moved down
    moved = run_cliff(_runner(tmp_path, None, launched, monkeypatch), CASE, "batch_size", 1, 512)
    assert launched[0] == 37 and len(launched) > 2 and len(set(launched[:-2])) == len(launched[:-2])
    assert moved.result.cliff is not None and not moved.result.cliff.verified
    assert (moved.result.cliff.largest_fit, moved.result.cliff.smallest_oom) == (30, 31)
    assert moved.verdict.fails
