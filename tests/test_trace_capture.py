"""Child-side capture without a training stack: a toy torch loop driven through the StepRecorder."""

from __future__ import annotations

import json
from pathlib import Path

import required

from trainperf.ground.folder import RunFolder
from trainperf.traces.collect import collect
from trainperf.traces.profile_window import TracePlan, plan_trace

torch = required.module("torch", "make setup (torch from ci/envs/cpu.txt or ci/envs/hf.txt)")


def toy_run(tmp_path: Path, plan: TracePlan) -> tuple[list[dict], dict]:
    from trainperf.workloads.protocol import ChildSpec
    from trainperf.workloads.recorder import StepRecorder

    recorder = StepRecorder(
        tmp_path / "steps.jsonl", ChildSpec(case={}, steps=0, out_dir=str(tmp_path), trace=plan.to_spec())
    )
    model = torch.nn.Linear(32, 32)
    optimizer = torch.optim.AdamW(model.parameters())
    recorder.begin()
    for _ in range(plan.total_steps):
        model(torch.randn(16, 32)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        recorder.step_end(16)
    info = recorder.trace_info()
    assert info is not None
    steps = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    return steps, info


def test_last_steps_are_profiled_marked_and_analysed(tmp_path: Path) -> None:
    plan = plan_trace(RunFolder(tmp_path).trace_dir("case-a"), "r1", 8)
    assert isinstance(plan, TracePlan)
    steps, info = toy_run(tmp_path, plan)
    assert [s["step"] for s in steps if s.get("profiled")] == [5, 6, 7, 8]
    assert info["activities"] == ["CPU"] and info["bytes"] == plan.path.stat().st_size
    assert plan.path == tmp_path / "traces" / "case-a" / "r1.pt.trace.json.gz"
    record = collect(info, plan, tmp_path)
    assert record["file"] == "traces/case-a/r1.pt.trace.json.gz"
    summary = record["summary"]
    assert summary["kind"] == "cpu" and summary["steps"] == 3
    # AdamW's work is found inside its Optimizer.step region.
    assert summary["categories_ms"].get("optimizer", 0) > 0 and summary["categories_ms"].get("matmul", 0) > 0


def test_a_trace_over_the_cap_is_analysed_then_deleted(tmp_path: Path) -> None:
    plan = TracePlan(trace_dir=str(tmp_path / "t"), worker="r1", total_steps=6, active=2, cap_mb=1e-6)
    _, info = toy_run(tmp_path, plan)
    record = collect(info, plan, tmp_path)
    assert "summary" in record and "file" not in record and "over the 1e-06 MB cap" in record["deleted"]
    assert not plan.path.exists()


def test_memory_snapshot_on_cpu_says_why_there_is_none(tmp_path: Path) -> None:
    from trainperf.workloads.profiling import MemoryHistory

    assert "CPU run" in MemoryHistory(torch.device("cpu")).dump(tmp_path)["skipped"]
