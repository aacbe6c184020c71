"""pytest-xdist: many workers, one run. The controller names the run folder, every worker writes
its cases' result files into it, and the controller summarises those files (``report.summary``).

The controller collects nothing and measures nothing, so it cannot know the GPU class; it
hands each worker a time stamp (``workerinput``) and each worker opens ``<stamp>-<class>``.
Session-level work is per worker but harmless there: each worker reads the idle memory of its
own GPU, writes ``run.<worker>.json`` (not one shared file), and baselines are per case.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path
from typing import Any

from trainperf.measure.detection import Detection
from trainperf.measure.nvml import Nvml
from trainperf.measure.placement import Placement, visible_devices, worker_index

STAMP_KEY = "trainperf_run_stamp"


def worker_id(config: Any) -> str | None:
    """``gw0``, ``gw1``... in an xdist worker; None in the controller or a serial run."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else None


def is_controller(config: Any) -> bool:
    """True in the xdist controller of a ``-n`` run (it runs no tests itself)."""
    option = config.option
    return (
        worker_id(config) is None
        and bool(getattr(option, "numprocesses", None))
        and getattr(option, "dist", "no") != "no"
    )


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
