"""What the reports plot, read back from a run folder: each run's steps and NVML samples (no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.ground.folder import RunFolder
from trainperf.judge import stats
from trainperf.measure.nvml import Sample
from trainperf.result import CaseResult

GIB = 2**30


@dataclass(slots=True)
class RunSeries:
    """One fresh child's records, timed from its first observation."""

    label: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)

    @property
    def t0(self) -> float:
        starts = [s["t_end"] - s["duration_s"] for s in self.steps[:1]] + [s.t for s in self.samples[:1]]
        return min(starts) if starts else 0.0

    def allocated_gib(self) -> list[tuple[float, float]]:
        return [(s["t_end"] - self.t0, s["allocated_b"] / GIB) for s in self.steps if "allocated_b" in s]

    def device_gib(self, idle_b: int) -> list[tuple[float, float]]:
        return [(s.t - self.t0, (s.mem_used_b - idle_b) / GIB) for s in self.samples]

    def power_w(self) -> list[tuple[float, float]]:
        return [(s.t - self.t0, s.power_w) for s in self.samples if s.power_w is not None]

    def step_times(self, profiled: bool) -> list[tuple[float, float]]:
        """The timed steps, or those under a profiler (a trace's, the kernel clock's window)."""
        return [
            (float(s["step"]), float(s["duration_s"]))
            for s in self.steps
            if bool(s.get("profiled") or s.get("kernel_window")) is profiled
        ]

    def tokens_per_s(self) -> float | None:
        """Median per-step throughput after the first step (a cliff probe runs only a few steps)."""
        rates = [
            s["tokens"] / s["duration_s"]
            for s in self.steps[1:]
            if s.get("duration_s") and not s.get("profiled") and not s.get("kernel_window")
        ]
        return stats.median(rates) if rates else None

    def phases(self) -> dict[str, float]:
        """Mean seconds per phase over the steps that carry ``phases`` (RL families)."""
        totals: dict[str, float] = {}
        carrying = [s["phases"] for s in self.steps if isinstance(s.get("phases"), dict)]
        for phases in carrying:
            for name, seconds in phases.items():
                totals[name] = totals.get(name, 0.0) + float(seconds)
        return {name: total / len(carrying) for name, total in totals.items()} if carrying else {}


def read_run(child: Path, label: str) -> RunSeries:
    return RunSeries(label, RunFolder.child_steps(child), RunFolder.child_samples(child))


def runs_of(run_dir: Path, result: CaseResult) -> list[RunSeries]:
    folder = RunFolder(run_dir)
    return [read_run(folder.child_dir(run.dir), Path(run.dir).name) for run in result.runs if run.dir]


def probe_series(run_dir: Path, case_id: str) -> list[RunSeries]:
    """The children of one (probe) case id, as a cliff search left them."""
    return [read_run(child, child.name) for child in RunFolder(run_dir).probe_dirs(case_id)]
