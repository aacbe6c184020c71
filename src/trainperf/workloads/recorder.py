"""Per-step measurements taken inside the child: time between synchronised step edges, tokens, memory.

Each step is appended to ``steps.jsonl`` and flushed as it ends, so a crash or a timeout
keeps every finished step, and the parent can show progress by counting lines.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from trainperf.traces.profile_window import TracePlan
from trainperf.workloads import faults
from trainperf.workloads.host_index import step_probe
from trainperf.workloads.kernel_clock import KernelClock
from trainperf.workloads.plants import Plant
from trainperf.workloads.profiling import allocator_blocks
from trainperf.workloads.protocol import ChildSpec


class StepRecorder:
    """Framework-neutral: a family calls ``begin()``, then ``step_end(tokens)`` after each optimizer step."""

    def __init__(self, steps_path: Path, spec: ChildSpec, rank: int = 0) -> None:
        self.path = steps_path
        self.device = torch.device(spec.device)
        self.plant_slowdown = spec.plant_slowdown
        self.plant = Plant(spec.plant, self.device)
        self._fault = faults.planned()
        self.steps: list[dict[str, Any]] = []
        self._last_edge: float | None = None
        self._last_edge_wall = 0.0
        plan = TracePlan.from_spec(spec.trace)
        self.trace_plan = plan.for_rank(rank) if plan is not None else None
        self._external: dict[str, Any] | None = None
        self._external_kernels: dict[str, Any] | None = None
        self.profiler = None
        if self.trace_plan is not None:
            from trainperf.workloads.profiling import StepProfiler

            self.profiler = StepProfiler(self.trace_plan, self.device)
        # The GPU's kernel time over a window of early steps, before any trace's (``kernel_clock``).
        self.kernels = KernelClock.for_run(self.device, spec.kernel_window, spec.kernel_clock)
        # Kept open for the child's life (line-buffered); the process ends with os._exit.
        self._handle = open(self.path, "a", buffering=1)  # noqa: SIM115

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def begin(self) -> None:
        """Mark the start of training (the left edge of the first step)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self.plant.calibrate()
        self._sync()
        if self.profiler is not None:
            self.profiler.start()
        self._last_edge, self._last_edge_wall = time.perf_counter(), time.time()
        if self.kernels is not None:
            self.kernels.before_step(1)
        self.plant.at_step_start()

    def step_end(self, tokens: int, **extra: Any) -> None:
        """Close a step at a synchronised edge. ``tokens`` counts non-padding tokens of the step."""
        if self._last_edge is None:
            self.begin()
        assert self._last_edge is not None
        self._sync()
        if self.plant_slowdown > 0:
            # A deliberate, honest slowdown: the step really takes this much longer.
            time.sleep(self.plant_slowdown * (time.perf_counter() - self._last_edge))
        self.plant.after_edge(time.perf_counter() - self._last_edge)
        edge = time.perf_counter()
        t_end = time.time()
        # The host's speed at this edge, outside any step's time (the next step starts after it).
        host_speed = step_probe()
        next_edge, next_edge_wall = time.perf_counter(), time.time()
        record: dict[str, Any] = {
            "step": len(self.steps) + 1,
            "t_start": self._last_edge_wall,
            "t_end": t_end,
            "duration_s": edge - self._last_edge,
            "tokens": int(tokens),
            "host_speed": host_speed,
        }
        if self.device.type == "cuda":
            record["allocated_b"] = torch.cuda.memory_allocated(self.device)
            record["reserved_b"] = torch.cuda.memory_reserved(self.device)
            record["max_allocated_b"] = torch.cuda.max_memory_allocated(self.device)
        last = self.trace_plan is not None and record["step"] == self.trace_plan.total_steps
        if last and self.profiler is not None:
            # The allocator's blocks at the last profiled edge, for the profile summary.
            self.profiler.info["memory"] = allocator_blocks(self.device)
        record.update(extra)
        if self.kernels is not None and self.kernels.covers(record["step"]):
            record["kernel_window"] = True  # left out of the timing metrics (measure.measurement)
        self.record(record)  # marks the profiled steps
        read_back = False
        if self.kernels is not None:
            # The marker after the edge; after the window's last step its records are read back, and
            # the next step's clock starts after that (the device sits idle meanwhile).
            read_back = self.kernels.edge(record["step"])
            self.kernels.before_step(record["step"] + 1)
        if self.profiler is not None:
            # After the edge: the profiler's start and its trace export land in marked steps only.
            self.profiler.step()
        if read_back:
            self._last_edge, self._last_edge_wall = time.perf_counter(), time.time()
        else:
            self._last_edge, self._last_edge_wall = next_edge, next_edge_wall
        self.plant.at_step_start()  # the next step's own: after its left edge, whichever was taken

    def record(self, record: dict[str, Any]) -> None:
        """Append a step as given: for a framework that times its own steps in other processes
        (verl's ``timing_s/step``), where an edge in this process would measure nothing."""
        if "host_speed" not in record:
            # A step timed in other processes (verl's workers) on this machine: the host's speed as
            # its record arrives stands for the spell the step ran in (the spells are the machine's;
            # records read back together share one reading).
            record["host_speed"] = step_probe()
        if self.trace_plan is not None and self.trace_plan.profiled(int(record.get("step", 0))):
            record.setdefault("profiled", True)  # left out of the timing metrics (measure.measurement)
        self.steps.append(record)
        self._handle.write(json.dumps(record) + "\n")
        faults.at_step(len(self.steps), self._fault)  # a drill only (TRAINPERF_INJECT_FAULT)

    def external_trace(self, info: dict[str, Any]) -> None:
        """The trace a framework's own profiler wrote at the plan's path (verl's workers), reported
        instead of this process's profiler, which saw no training."""
        self._external = info

    def trace_info(self) -> dict[str, Any] | None:
        """What the profiler captured (file, sizes, steps), for the result; None when not tracing."""
        if self._external is not None:
            return self._external
        if self.profiler is None:
            return None
        try:
            self.profiler.stop()  # a no-op after a full window; after a failure it ends the profiler
        except Exception as exc:  # noqa: BLE001 - the trace must never hide how the run ended
            self.profiler.info["stop_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return self.profiler.info

    def external_kernels(self, record: dict[str, Any]) -> None:
        """The kernel time a framework's own processes recorded (verl's: ``verl.kernel_hook``), reported
        instead of this process's clock, which saw no kernel."""
        self._external_kernels = record

    def kernel_info(self) -> dict[str, Any] | None:
        """The device's kernel time per step (``traces.kernel_steps.KernelTimes``), None without a clock."""
        if self._external_kernels is not None:
            return self._external_kernels
        return self.kernels.result() if self.kernels is not None else None

    def memory_summary(self) -> dict[str, int]:
        """This process's allocator peaks; empty where it allocated nothing on the GPU.

        A zero peak is no measurement: the training ran in other processes (verl's Ray workers,
        whose own peaks the family reports from their log) or never reached the GPU. Reported as
        0 GiB it would read as a figure and become a baseline that any real run "exceeds"."""
        if self.device.type != "cuda" or not torch.cuda.is_available():
            return {}
        allocated = torch.cuda.max_memory_allocated(self.device)
        if allocated == 0:
            return {}
        return {"peak_allocated_b": allocated, "peak_reserved_b": torch.cuda.max_memory_reserved(self.device)}
