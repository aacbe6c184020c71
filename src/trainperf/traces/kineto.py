"""Reading a Kineto (PyTorch profiler) Chrome-trace file: plain or gzipped JSON, events as intervals."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
GPU_ANNOTATION = "gpu_user_annotation"
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
STEP_PREFIX = "ProfilerStep#"
OPTIMIZER_PREFIX = "Optimizer.step#"


@dataclass(frozen=True, slots=True)
class Event:
    """One complete (``ph: X``) event; times in microseconds as the trace gives them."""

    name: str
    cat: str
    pid: Any
    tid: Any
    start: float
    dur: float
    correlation: int | None

    @property
    def end(self) -> float:
        return self.start + self.dur


def load_trace(path: Path) -> dict[str, Any]:
    """The trace as a dict; an unreadable file is one line naming it."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as handle:
            data = json.load(handle)
    except (OSError, ValueError, EOFError) as exc:
        raise TrainperfError(
            f"trace {path} cannot be read ({type(exc).__name__}: {exc}); re-run with --perf-trace"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TrainperfError(f"trace {path} has no traceEvents list: not a PyTorch profiler trace")
    return data


def events(trace: dict[str, Any]) -> list[Event]:
    """The complete events with a duration, sorted by start."""
    found = []
    for raw in trace.get("traceEvents", []):
        if raw.get("ph") != "X" or "dur" not in raw or "ts" not in raw:
            continue
        args = raw.get("args") or {}
        correlation = args.get("correlation")
        found.append(
            Event(
                name=str(raw.get("name", "")),
                cat=str(raw.get("cat", "")),
                pid=raw.get("pid"),
                tid=raw.get("tid"),
                start=float(raw["ts"]),
                dur=float(raw["dur"]),
                correlation=int(correlation) if isinstance(correlation, (int, float)) else None,
            )
        )
    found.sort(key=lambda e: (e.start, -e.dur))
    return found
