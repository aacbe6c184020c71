"""Multi-GPU cases on the parent side: the ranks' files merged, per-GPU figures (the command:
``launch.launcher``).

A case with ``gpus > 1`` runs as one child that is torchrun (``python -m torch.distributed.run``)
with one rank per GPU; the whole launcher group is the child, so a timeout or Ctrl-C kills
every rank. Rank 0 records the steps (the Trainer's token counter is already summed over
ranks); every rank reports its own allocator memory. A family that spreads over its GPUs
itself (verl, through Ray: ``LaunchMode.SELF_DISTRIBUTING``) runs as one plain child that sees them all.
Either way the parent samples every GPU of the case.

For such a case the gated figures mean: peak allocated/reserved and device memory, the
highest single rank or GPU (what has to fit on one card); mean power and energy per token,
the sum over the case's GPUs (what the job draws). Each GPU's own figures and the totals are
kept in the run's ``per_gpu`` record and shown as a note (E1 reports them stacked per GPU).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainperf.case import Outcome
from trainperf.judge.metrics import METRICS, Across, device_wide_metrics
from trainperf.measure.measurement import GIB, RunMeasurement, measure_run
from trainperf.measure.nvml import Sample
from trainperf.run_record import GpuFigures, RunRecord
from trainperf.workloads.protocol import RESULT_FILE, rank_file

# Worst first: the outcome a multi-rank child ends with is the worst of its ranks.
_SEVERITY = tuple(o.value for o in (Outcome.OOM, Outcome.CRASH, Outcome.SKIPPED, Outcome.OK))


def merge_ranks(child: dict[str, Any], out_dir: Path, world: int) -> dict[str, Any]:
    """Rank 0's result with every rank's memory and the worst rank's outcome folded in."""
    ranks = [child] + [_read(out_dir / rank_file(RESULT_FILE, r)) for r in range(1, world)]
    merged = dict(child)
    merged["ranks"] = [
        {"rank": r, "outcome": data.get("outcome"), "memory": data.get("memory", {})}
        for r, data in enumerate(ranks)
    ]
    memory = dict(child.get("memory") or {})
    for key in ("peak_allocated_b", "peak_reserved_b", "host_peak_rss_b"):
        values = [int(data["memory"][key]) for data in ranks if key in (data.get("memory") or {})]
        if values:
            memory[key] = max(values)
    merged["memory"] = memory
    outcomes = [data["outcome"] for data in ranks if data.get("outcome") in _SEVERITY]
    if outcomes:
        worst = min(outcomes, key=_SEVERITY.index)
        if worst != child.get("outcome"):
            culprit = next(data for data in ranks if data.get("outcome") == worst)
            merged["outcome"] = worst
            merged["message"] = f"rank {culprit.get('rank', '?')}: {culprit.get('message', worst)}"
    return merged


def _read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def measure_gpus(
    child: dict[str, Any],
    samples: dict[str, list[Sample]],
    *,
    samples_per_step: int,
    idle_mem_b: dict[str, int | None],
) -> RunMeasurement:
    """One run of a case over several GPUs: timing from rank 0's steps, sampled figures per GPU.

    ``samples`` is ordered as the case's GPUs, i.e. by local rank (CUDA_VISIBLE_DEVICES order).
    """
    devices = list(samples)
    per_device = {
        d: measure_run(child, samples[d], samples_per_step=samples_per_step, idle_mem_b=idle_mem_b.get(d))
        for d in devices
    }
    first = (
        per_device[devices[0]]
        if devices
        else measure_run(child, [], samples_per_step=samples_per_step, idle_mem_b=None)
    )
    metrics = dict(first.metrics)
    info = dataclasses.replace(first.info, energy_samples=None)  # summed over the GPUs below, or none
    ranks = child.get("ranks") or []
    rows = []
    for position, device in enumerate(devices):
        m = per_device[device]
        figures = {name: m.metrics[name] for name in device_wide_metrics() if name in m.metrics}
        if m.info.energy_steady_j is not None:
            figures["energy_steady_j"] = m.info.energy_steady_j
        rank_memory = ranks[position]["memory"] if position < len(ranks) else {}
        if "peak_allocated_b" in rank_memory:
            figures["peak_allocated_gib"] = rank_memory["peak_allocated_b"] / GIB
        rows.append(GpuFigures(device, position, figures))
    _combine(metrics, info, rows, [per_device[d] for d in devices])
    info.per_gpu = rows
    return RunMeasurement(
        metrics,
        first.step_samples,
        first.throughput_samples,
        info,
        first.step_keys,
        first.extra_samples,
        first.extra_keys,
    )


def _combine(
    metrics: dict[str, float],
    info: RunRecord,
    rows: list[GpuFigures],
    runs: Sequence[RunMeasurement],
) -> None:
    """Totals over the case's GPUs for what the job draws; the highest GPU for what must fit."""
    for name in device_wide_metrics():
        values = [row.figures[name] for row in rows if name in row.figures]
        if METRICS[name].across_gpus is not Across.SUM:
            if values:
                metrics[name] = max(values)
        elif values and len(values) == len(rows):
            metrics[name] = sum(values)
        else:
            metrics.pop(name, None)  # a partial sum would read as a drop in power or energy
    energy_steps = [run.info.energy_samples or [] for run in runs]
    if energy_steps and all(energy_steps) and len({len(s) for s in energy_steps}) == 1:
        info.energy_samples = [sum(step) for step in zip(*energy_steps)]
    mem = [row.figures["device_mem_peak_gib"] for row in rows if "device_mem_peak_gib" in row.figures]
    if mem:
        info.device_mem_total_gib = sum(mem)


def per_gpu_note(runs: Sequence[RunRecord]) -> str | None:
    """One line per case: each GPU's device memory, mean power and energy per token, then the total."""
    rows = next((run.per_gpu for run in reversed(runs) if run.per_gpu), None)
    if not rows:
        return None
    cells = [_cell(f"GPU {row.gpu} (rank {row.rank})", row.figures) for row in rows]
    # A sum only where every GPU has the figure: a run that ran out of memory before its first
    # step has no mean power, and a total of "0 W" would read as a measurement.
    summed = ("device_mem_peak_gib", "power_mean_w", "energy_per_token_j")
    total = {
        name: sum(row.figures[name] for row in rows)
        for name in summed
        if all(name in row.figures for row in rows)
    }
    cells.append(_cell("total", total))
    return "per GPU: " + " | ".join(cells)


def _cell(label: str, row: Mapping[str, float]) -> str:
    parts = [label]
    if "peak_allocated_gib" in row:
        parts.append(f"alloc {row['peak_allocated_gib']:.1f} GiB")
    if "device_mem_peak_gib" in row:
        parts.append(f"dev {row['device_mem_peak_gib']:.1f} GiB")
    if "power_mean_w" in row:
        parts.append(f"{row['power_mean_w']:.0f} W")
    if "energy_per_token_j" in row:
        parts.append(f"{row['energy_per_token_j']:.3g} J/tok")
    return " ".join(parts)
