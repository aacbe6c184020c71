"""Child-side capture without a training stack: a toy torch loop driven through the StepRecorder."""

from __future__ import annotations

import json
from pathlib import Path

import required

from trainperf.ground.folder import RunFolder
from trainperf.traces.collect import collect
from trainperf.traces.profile_window import TracePlan, plan_trace

torch = required.module("torch", "make setup (torch from ci/envs/cpu.txt or ci/envs/hf.txt)")


def toy_run(tmp_path: Path, plan: TracePlan, rank: int = 0) -> tuple[list[dict], dict]:
    from trainperf.workloads.protocol import ChildSpec, rank_file
    from trainperf.workloads.recorder import StepRecorder

    recorder = StepRecorder(
        tmp_path / rank_file("steps.jsonl", rank),
        ChildSpec(case={}, steps=0, out_dir=str(tmp_path), trace=plan.to_spec()),
        rank,
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
    steps = [
        json.loads(line) for line in (tmp_path / rank_file("steps.jsonl", rank)).read_text().splitlines()
    ]
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


def test_each_rank_of_a_multi_gpu_run_writes_its_own_trace(tmp_path: Path) -> None:
    # Two ranks exporting to one file name raced on its temporary file: one rank's trace, and with
    # it the run's profile, was lost ("No such file or directory: r2.pt.trace.json.tmp").
    plan = TracePlan(trace_dir=str(tmp_path / "t"), worker="r2", total_steps=6, active=2)
    _, rank0 = toy_run(tmp_path, plan, rank=0)
    _, rank1 = toy_run(tmp_path, plan, rank=1)
    assert rank0["file"] == "r2.pt.trace.json.gz" and rank1["file"] == "r2.rank1.pt.trace.json.gz"
    assert "error" not in rank0 and "error" not in rank1
    record = collect(rank0, plan, tmp_path)
    assert record["file"] == "t/r2.pt.trace.json.gz" and record["summary"]["steps"] == 2
    assert record["rank_traces"] == ["t/r2.rank1.pt.trace.json.gz"]
    capped = TracePlan(trace_dir=plan.trace_dir, worker="r2", total_steps=6, active=2, cap_mb=1e-6)
    record = collect(rank0, capped, tmp_path)
    (rank1_line,) = record["rank_traces"]
    assert rank1_line.startswith("r2.rank1.pt.trace.json.gz: ") and rank1_line.endswith("MB cap: deleted")
    assert not list(Path(plan.trace_dir).glob("*.gz"))


def test_memory_snapshot_on_cpu_says_why_there_is_none(tmp_path: Path) -> None:
    from trainperf.workloads.profiling import MemoryHistory

    assert "CPU run" in MemoryHistory(torch.device("cpu")).dump(tmp_path)["skipped"]
