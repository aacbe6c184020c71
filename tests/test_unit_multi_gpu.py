"""Multi-GPU cases: launcher command, ids, rank files merged, per-GPU and total figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.case import Case
from trainperf.ground.catalogue import marks_for
from trainperf.launch.launcher import child_command
from trainperf.measure.multi_gpu import measure_gpus, merge_ranks, per_gpu_note
from trainperf.measure.nvml import Sample
from trainperf.run_record import GpuFigures, RunRecord
from trainperf.workloads.protocol import rank_file


def lora(**kw: object) -> Case:
    return Case(
        family="sft_hf",
        model="qwen3_8b",
        method="lora",
        profile="short",
        batch_size=4,
        gpu_classes=("h200",),
        **kw,
    )  # type: ignore[arg-type]


def test_ids_name_gpus_and_a_non_default_strategy_only() -> None:
    assert lora().id == "sft_hf-qwen3_8b-lora-short-b4"
    assert lora(gpus=2).id == "sft_hf-qwen3_8b-lora-short-b4-gpus2"
    assert lora(gpus=2, strategy="fsdp").id == "sft_hf-qwen3_8b-lora-short-b4-gpus2-fsdp"
    assert "multi_gpu" in {mark.name for mark in marks_for(lora(gpus=2))}
    assert Case.from_dict(lora(gpus=2, strategy="fsdp").to_dict()) == lora(gpus=2, strategy="fsdp")
    with pytest.raises(ValueError, match="unknown strategy"):
        lora(strategy="zero3")


def test_one_gpu_runs_the_workload_and_k_gpus_run_the_launcher() -> None:
    spec = Path("/r/spec.json")
    assert child_command("py", 1, spec, "sft_hf") == ["py", "-m", "trainperf.workloads", "/r/spec.json"]
    assert child_command("py", 2, spec, "sft_hf") == [
        "py",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        "--nproc-per-node=2",
        "-m",
        "trainperf.workloads",
        "/r/spec.json",
    ]


def test_verl_spreads_over_its_gpus_itself_so_its_child_is_one_process() -> None:
    # Under torchrun each of the 2 ranks would start a whole verl trainer (and Ray cluster).
    spec = Path("/r/spec.json")
    assert child_command("py", 2, spec, "rl_verl") == ["py", "-m", "trainperf.workloads", "/r/spec.json"]
    assert child_command("py", 8, spec, "rl_verl") == ["py", "-m", "trainperf.workloads", "/r/spec.json"]


def test_rank_files() -> None:
    assert rank_file("result.json", 0) == "result.json"
    assert rank_file("steps.jsonl", 1) == "steps.rank1.jsonl"


def test_merge_takes_the_highest_rank_memory_and_the_worst_outcome(tmp_path: Path) -> None:
    rank0 = {"outcome": "ok", "memory": {"peak_allocated_b": 10, "peak_reserved_b": 12}, "steps": [1]}
    (tmp_path / "result.rank1.json").write_text(
        json.dumps(
            {
                "outcome": "oom",
                "rank": 1,
                "message": "CUDA out of memory",
                "memory": {"peak_allocated_b": 30, "peak_reserved_b": 31},
            }
        )
    )
    merged = merge_ranks(rank0, tmp_path, 2)
    assert merged["memory"] == {"peak_allocated_b": 30, "peak_reserved_b": 31}
    assert merged["outcome"] == "oom" and merged["message"] == "rank 1: CUDA out of memory"
    assert [r["memory"]["peak_allocated_b"] for r in merged["ranks"]] == [10, 30]


def _samples(watts: float, mem_gib: float, start: float, count: int) -> list[Sample]:
    # A board energy counter that rises at ``watts``; samples every 0.1 s.
    return [
        Sample(start + 0.1 * i, int(mem_gib * 2**30), watts, int(watts * 0.1 * i * 1000), 1980, 60, 0)
        for i in range(count)
    ]


def test_power_and_energy_sum_over_gpus_memory_is_the_highest_gpu() -> None:
    t0 = 1000.0
    steps = [
        {"step": k + 1, "t_end": t0 + 0.5 * (k + 1), "duration_s": 0.5, "tokens": 1000} for k in range(8)
    ]
    child = {
        "steps": steps,
        "memory": {"peak_allocated_b": 20 * 2**30, "peak_reserved_b": 22 * 2**30},
        "ranks": [{"memory": {"peak_allocated_b": 18 * 2**30}}, {"memory": {"peak_allocated_b": 20 * 2**30}}],
    }
    samples = {"0": _samples(300.0, 20.0, t0, 60), "1": _samples(100.0, 24.0, t0, 60)}
    run = measure_gpus(child, samples, samples_per_step=8, idle_mem_b={"0": 0, "1": 0})
    assert run.metrics["power_mean_w"] == pytest.approx(400.0)
    # 400 J/s over 2000 tokens/s: 0.2 J per token for the job.
    assert run.metrics["energy_per_token_j"] == pytest.approx(0.2, rel=1e-3)
    assert run.metrics["device_mem_peak_gib"] == pytest.approx(24.0)
    assert run.info.device_mem_total_gib == pytest.approx(44.0)
    assert run.info.per_gpu is not None and [row.gpu for row in run.info.per_gpu] == ["0", "1"]
    assert run.info.per_gpu[0].figures["energy_per_token_j"] == pytest.approx(0.15, rel=1e-3)
    assert run.info.energy_samples == pytest.approx([0.2] * len(run.info.energy_samples or []), rel=1e-3)
    note = per_gpu_note([run.info])
    assert note is not None
    assert note.startswith(
        "per GPU: GPU 0 (rank 0) alloc 18.0 GiB dev 20.0 GiB 300 W 0.15 J/tok | GPU 1 (rank 1)"
    )
    assert note.endswith("| total dev 44.0 GiB 400 W 0.2 J/tok")


def test_a_run_with_no_step_totals_only_what_every_gpu_measured() -> None:
    # An OOM before the first step: device memory peaks, no mean power (2x H200, 2026-11-28, read "0 W").
    rows = [
        GpuFigures("0", 0, {"device_mem_peak_gib": 138.2}),
        GpuFigures("1", 1, {"device_mem_peak_gib": 136.4}),
    ]
    note = per_gpu_note([RunRecord(per_gpu=rows)])
    assert (
        note == "per GPU: GPU 0 (rank 0) dev 138.2 GiB | GPU 1 (rank 1) dev 136.4 GiB | total dev 274.6 GiB"
    )


def test_a_gpu_without_energy_drops_the_total_rather_than_underreport() -> None:
    t0 = 1000.0
    steps = [
        {"step": k + 1, "t_end": t0 + 0.5 * (k + 1), "duration_s": 0.5, "tokens": 1000} for k in range(8)
    ]
    blind = [Sample(s.t, s.mem_used_b, None, None, None, None, None) for s in _samples(100.0, 4.0, t0, 60)]
    run = measure_gpus(
        {"steps": steps}, {"0": _samples(300.0, 20.0, t0, 60), "1": blind}, samples_per_step=8, idle_mem_b={}
    )
    assert "energy_per_token_j" not in run.metrics and "power_mean_w" not in run.metrics


def test_child_sees_exactly_the_case_gpus_numbered_as_nvml_numbers_them() -> None:
    from trainperf.launch.launcher import child_env

    env = child_env("2,3")
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert child_env(None)["CUDA_VISIBLE_DEVICES"] == ""
