"""pytest-xdist: many workers, one run. The controller names the run folder, every worker writes
its cases' result files into it, and the controller writes the one summary from those files.

The controller collects nothing and measures nothing, so it cannot know the GPU class; it
hands each worker a time stamp (``workerinput``) and each worker opens ``<stamp>-<class>``.
Session-level work is per worker but harmless there: each worker reads the idle memory of its
own GPU, writes ``run.<worker>.json`` (not one shared file), and baselines are per case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from trainperf.monitor.nvml import Nvml
from trainperf.placement import Placement, visible_devices, worker_index
from trainperf.report.build import write_reports
from trainperf.report.table import failure_detail, render_text
from trainperf.results import CaseResult, load_result
from trainperf.session import Detection

STAMP_KEY = "trainperf_run_stamp"
QUIET_VERDICTS = ("pass", "new", "expected-oom", "not-compared")


def worker_id(config: Any) -> str | None:
    """``gw0``, ``gw1``... in an xdist worker; None in the controller or a serial run."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else None


def is_controller(config: Any) -> bool:
    """True in the xdist controller of a ``-n`` run (it runs no tests itself)."""
    option = config.option
    return worker_id(config) is None and bool(getattr(option, "numprocesses", None)) and getattr(option, "dist", "no") != "no"


def new_stamp(output: Path, now: datetime | None = None) -> str:
    """A run-folder stamp no earlier run in ``output`` has used (``20261121-231500``, ``...-2``)."""
    base = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    stamp, suffix = base, 1
    while output.is_dir() and any(output.glob(f"{stamp}-*")):
        suffix += 1
        stamp = f"{base}.{suffix}"
    return stamp


def shared_stamp(config: Any) -> str | None:
    """The controller's stamp as a worker sees it."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput[STAMP_KEY]) if workerinput and STAMP_KEY in workerinput else None


def placement_for(config: Any) -> Placement:
    """The GPUs of this process: every visible one, owning the one of its worker number."""
    return Placement(tuple(visible_devices(Nvml.count)), worker_index(worker_id(config)))


def auto_workers() -> int | None:
    """Workers for ``-n auto``: the number of visible GPUs; None (xdist decides) without one."""
    return len(visible_devices(Nvml.count)) or None


def own_gpu(detection: Detection, placement: Placement) -> Detection:
    """The detection moved to this worker's own GPU (same class: a runner's GPUs are alike)."""
    own = placement.own
    if own is None or detection.device is None or own == detection.device:
        return detection
    return dataclasses.replace(detection, device=own, info=Nvml.info(own))


def run_dirs(output: Path, stamp: str) -> list[Path]:
    return sorted(path for path in output.glob(f"{stamp}-*") if path.is_dir())


def load_run_results(run_dir: Path) -> list[CaseResult]:
    """Every case result the workers wrote, in the order they finished."""
    results = [load_result(path) for path in sorted((run_dir / "results").glob("*.json"))]
    return sorted(results, key=lambda result: (result.created, result.case_id))


def details(
    results: Iterable[CaseResult], notes: Mapping[str, Sequence[str]], written: Mapping[str, Path | str]
) -> list[str]:
    """The lines under the table: why a case failed or was flagged, its notes, baselines written."""
    lines: list[str] = []
    for result in results:
        if result.verdict.get("verdict") not in QUIET_VERDICTS:
            lines += failure_detail(result)
        lines += [f"{result.case_id}: {note}" for note in notes.get(result.case_id, result.verdict.get("notes", []))]
        if result.case_id in written:
            lines.append(f"{result.case_id}: baseline written to {written[result.case_id]}")
    return lines


def write_summary(run_dir: Path, gpu_class: str, results: Sequence[CaseResult], lines: Sequence[str]) -> str:
    """Write the run's reports (summary.md, index.html, benchmark.json) and return the text table."""
    write_reports(run_dir, results, f"trainperf {gpu_class}: {run_dir.name}", lines)
    return render_text(results)
