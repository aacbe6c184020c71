"""A cliff search cut short (a time limit) is resumed from its recorded probes, not re-run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.hardware import load_classes
from trainperf.runner import CaseRunner
from trainperf.session import Detection, open_run
from trainperf.settings import resolve

CASE = Case(family="sft_hf", model="qwen3_tiny", method="lora", profile="long", batch_size=1, gpu_classes=("cpu",))
TRUE_CLIFF = 37


def _runner(tmp_path: Path, resume: Path | None, launched: list[int], monkeypatch: pytest.MonkeyPatch) -> CaseRunner:
    cli: dict[str, Any] = {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines"), "resume": resume}
    settings = resolve(cli, lambda _name: None, tmp_path)
    context = open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path)
    context.say = lambda _line: None
    runner = CaseRunner(context)

    def fake_runs(case: Case, steps: int, result: Any, measurements: Any, count: int, purpose: str = "") -> None:
        launched.append(case.batch_size)
        if case.batch_size > TRUE_CLIFF:
            result.outcome, result.message = "oom", "out of memory (fake)"

    monkeypatch.setattr(runner, "_add_runs", fake_runs)
    return runner


def test_resumed_search_replays_recorded_probes_and_launches_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launched: list[int] = []
    first = _runner(tmp_path, None, launched, monkeypatch).run_cliff(CASE, "batch_size", 1, 512)
    assert first.result.cliff is not None and first.result.cliff["largest_fit"] == TRUE_CLIFF
    full = list(launched)
    run_dir = next((tmp_path / "reports").iterdir())
    probes = run_dir / "results" / f"{CASE.id}-cliff-batch_size.probes.jsonl"
    lines = probes.read_text().splitlines()
    assert len(lines) == len(full)  # every launch recorded, confirmations included
    probes.write_text("\n".join(lines[:4]) + "\n{\"value\": 9")  # cut after 4 probes, mid-line

    launched.clear()
    resumed = _runner(tmp_path, run_dir, launched, monkeypatch).run_cliff(CASE, "batch_size", 1, 512)
    assert launched == full[4:]
    assert resumed.result.cliff is not None and resumed.result.cliff["largest_fit"] == TRUE_CLIFF
    assert resumed.result.cliff["confirmed"]
