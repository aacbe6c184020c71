"""Child side of ``--perf-trace``: torch.profiler over the last steps, and a CUDA memory snapshot on OOM.

Driven by the ``StepRecorder`` (every family already calls it at each step edge), so any
family is traced without its own code. The plan (which steps, where, how large) is
``trainperf.traces.profile_window.TracePlan``.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from trainperf.traces.profile_window import TracePlan

SNAPSHOT_FILE = "memory_snapshot.pickle"
SNAPSHOT_HTML = "memory_snapshot.html"
# Allocator events kept in the history: enough for several steps of an 8B model, a few hundred MB at most.
SNAPSHOT_MAX_ENTRIES = 200_000


class StepProfiler:
    """A ``torch.profiler.profile`` whose schedule is driven from the recorder's step edges."""

    def __init__(self, plan: TracePlan, device: torch.device) -> None:
        self.plan = plan
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.info: dict[str, Any] = {
            "activities": [a.name for a in activities],
            "profiled_steps": list(range(plan.first_profiled_step, plan.total_steps + 1)),
            "warmup": plan.warmup,
            "active": plan.active,
        }
        self._profile = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(
                wait=plan.wait, warmup=plan.warmup, active=plan.active, repeat=1
            ),
            on_trace_ready=self._export,
            # Shapes and stacks multiply the size for little diagnostic value here.
            record_shapes=False,
            with_stack=False,
            profile_memory=False,
        )
        self._started = False

    def start(self) -> None:
        if not self._started and "error" not in self.info:
            self._guarded(self._profile.start)
            self._started = "error" not in self.info

    def step(self) -> None:
        """Called after each step's edge was taken, so start-up and export cost land in marked steps."""
        if self._started:
            self._guarded(self._profile.step)

    def _guarded(self, action: Any) -> None:
        """A profiler that fails (no CUPTI, a full disk) ends the trace, never the measurement."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001
            self.info["error"] = f"profiler failed: {type(exc).__name__}: {exc}"[:300]
            self._started = False

    def stop(self) -> None:
        if self._started:
            self._started = False
            self._profile.stop()

    def _export(self, prof: Any) -> None:
        target = self.plan.path
        target.parent.mkdir(parents=True, exist_ok=True)
        raw = target.with_name(target.name.removesuffix(".gz") + ".tmp")
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as source, gzip.open(target, "wb", compresslevel=6) as sink:
            shutil.copyfileobj(source, sink)
        self.info.update(file=target.name, raw_bytes=raw.stat().st_size, bytes=target.stat().st_size)
        raw.unlink()


LARGEST_BLOCKS = 10


def allocator_blocks(device: torch.device) -> dict[str, Any]:
    """The CUDA caching allocator's largest live blocks and peak (``torch.cuda.memory_snapshot``), each
    block with the first frame outside torch where the allocator history recorded one."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return {"n/a": "CPU run: the allocator's blocks are the CUDA caching allocator's"}
    try:
        segments = torch.cuda.memory_snapshot()
    except Exception as exc:  # noqa: BLE001 - a summary must not stop the measurement
        return {"n/a": f"memory snapshot failed: {type(exc).__name__}: {exc}"[:200]}
    blocks: list[dict[str, Any]] = [
        {"size_b": int(block["size"]), "frame": _user_frame(block.get("frames") or [])}
        for segment in segments
        for block in segment.get("blocks", [])
        if block.get("state") == "active_allocated"
    ]
    blocks.sort(key=lambda block: -int(block["size_b"]))
    return {
        "peak_allocated_b": torch.cuda.max_memory_allocated(device),
        "allocated_b": torch.cuda.memory_allocated(device),
        "blocks": blocks[:LARGEST_BLOCKS],
    }


def _user_frame(frames: list[dict[str, Any]]) -> str:
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if filename and "/torch/" not in filename and not filename.startswith("??"):
            return f"{os.path.basename(filename)}:{frame.get('line')} {frame.get('name', '')}".strip()
    return ""


class MemoryHistory:
    """CUDA allocator history, recorded from before training, dumped with an HTML view on OOM."""

    def __init__(self, device: torch.device) -> None:
        self.on_cuda = device.type == "cuda" and torch.cuda.is_available()
        self.error: str | None = None
        if self.on_cuda:
            try:
                self._start()
            except Exception as exc:  # noqa: BLE001 - a missing history must not stop the measurement
                self.error = f"allocator history not recorded: {type(exc).__name__}: {exc}"[:300]

    def _start(self) -> None:
        if self.on_cuda:
            # Python stacks at allocation only (no C++ stacks, no frees): the cheapest history that
            # still says which code allocated what. It costs host time on every allocation, so a
            # traced run is compared with a traced baseline (README, "Traces").
            torch.cuda.memory._record_memory_history(
                enabled="all", context="alloc", stacks="python", max_entries=SNAPSHOT_MAX_ENTRIES
            )

    def dump(self, out_dir: Path) -> dict[str, Any]:
        """The snapshot written into ``out_dir``; its files named relative to it (the run's ``dir``)."""
        if not self.on_cuda:
            return {"skipped": "CPU run: a memory snapshot is the CUDA allocator's history, none on the CPU"}
        if self.error:
            return {"error": self.error}
        pickle_path = out_dir / SNAPSHOT_FILE
        torch.cuda.memory._dump_snapshot(str(pickle_path))
        info: dict[str, Any] = {"file": pickle_path.name, "bytes": pickle_path.stat().st_size}
        try:
            import pickle

            from torch.cuda import _memory_viz

            with open(pickle_path, "rb") as handle:
                snapshot = pickle.load(handle)  # written by this very process just now
            html_path = out_dir / SNAPSHOT_HTML
            html_path.write_text(_memory_viz.trace_plot(snapshot))
            info["html"] = html_path.name
        except Exception as exc:  # noqa: BLE001 - the pickle is what matters; the view is a convenience
            info["html_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return info


def environment_note() -> dict[str, str]:
    """Settings that change what a trace shows (a host-bound run made on purpose, for one)."""
    keys = ("CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF")
    return {key: os.environ[key] for key in keys if key in os.environ}
