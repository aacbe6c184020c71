"""Session-wide facts every case needs, and the run folder they are opened with."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from trainperf.errors import TrainperfError
from trainperf.ground.folder import SESSION_ELAPSED, SESSION_ENDED, SESSION_INTERRUPTED, RunFolder
from trainperf.ground.settings import Settings
from trainperf.judge.family_tolerance import FamilyTolerances, with_family_tolerances
from trainperf.judge.metrics import Metric, tolerances_from_pyproject
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import CPU_CLASS, GpuClass
from trainperf.measure.host import checkout_commit, host_fingerprint
from trainperf.measure.nvml import Nvml
from trainperf.measure.ownership import sweep_orphans
from trainperf.measure.placement import Placement
from trainperf.paths import PUBLISHED_DIR, SQLITE_URL, portable, portable_argv
from trainperf.recording.session_history import SessionHistory, open_history
from trainperf.store.baselines import BaselineStore
from trainperf.store.records import runner_label
from trainperf.store.references import Reference, load_references


@dataclass(slots=True)
class RunContext:
    """Session-wide facts every case needs (a launch asks for part of them:
    ``launch.launch_context.LaunchContext``)."""

    settings: Settings
    run_dir: Path
    gpu_class: GpuClass
    device: str | None
    """NVML id (index or UUID) of the GPU cases run on; None on a machine without one."""
    idle_mem_b: int | None
    fingerprint: dict[str, Any]
    metrics: dict[str, Metric]
    baselines: BaselineStore
    references: list[Reference] = field(default_factory=list)
    emulated: str | None = None
    """Set under --perf-emulate: every child's memory is capped to ``gpu_class.memory_gib``."""
    say: Callable[[str], None] = print
    placement: Placement | None = None
    """The GPUs this pytest process may use and the one it owns (one xdist worker per GPU)."""
    history: SessionHistory | None = None
    """The results history this session judges against and records into (None: files only)."""
    unsaid: list[str] = field(default_factory=list)
    """Lines from opening the run (orphans of an earlier run ended) for the first case to say."""
    worker: str | None = None
    """The xdist worker whose session record is its own file (None: ``run.json``)."""
    opened_s: float = field(default_factory=time.monotonic)
    """When the session opened the run: its record says how long it ran."""
    configured_tolerances: frozenset[str] = frozenset()
    """The metrics whose tolerance pyproject.toml sets: a family's own never replaces those."""

    def family_metrics(self, metrics: dict[str, Metric], family: FamilyTolerances) -> dict[str, Metric]:
        """``metrics`` with a family's own timing tolerances, scaled for the class."""
        return with_family_tolerances(
            metrics,
            family.scaled(self.gpu_class.timing_tolerance_scale),
            class_metrics=self.metrics,
            configured=self.configured_tolerances,
        )

    def record_end(self, interrupted: bool) -> None:
        """Add the session's end to its record; a folder that can no longer be written keeps the record
        as it was (the end is what a merge says of cases the session did not reach)."""
        ended = {
            SESSION_ENDED: datetime.now(timezone.utc).isoformat(timespec="seconds"),
            SESSION_ELAPSED: round(time.monotonic() - self.opened_s, 1),
            SESSION_INTERRUPTED: interrupted,
        }
        try:
            self.folder.update_session(ended, self.worker)
        except (OSError, ValueError):
            pass

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.run_dir)

    @property
    def on_gpu(self) -> bool:
        return self.gpu_class.name != CPU_CLASS and self.device is not None


def open_run(
    settings: Settings,
    detection: Detection,
    rootdir: Path,
    *,
    stamp: str | None = None,
    worker: str | None = None,
) -> RunContext:
    """Create (or reopen, with --perf-resume) the run folder and everything a case needs.

    ``stamp``: the run folder's time stamp, given by the xdist controller so that every worker
    writes into one folder; ``worker``: the xdist worker, whose session record is its own file.
    """
    gpu_class = _class_of(detection)
    on_gpu = gpu_class.name != CPU_CLASS
    run_dir = _run_dir(settings, gpu_class.name, detection.emulated, stamp)
    _unwritable_is_one_line(
        run_dir, "create the run folder", lambda: run_dir.mkdir(parents=True, exist_ok=True)
    )
    ended = _end_orphans()  # before the idle level is read: an orphan's memory is not idle
    idle_mem_b = None
    if on_gpu and detection.device is not None:
        idle_mem_b = Nvml.sample(Nvml.handle(detection.device)).mem_used_b
    fingerprint = host_fingerprint(detection.info if on_gpu else None)
    # Host time compares on its own runner only: every result says which runner measured it.
    fingerprint["runner"] = runner_label(fingerprint, settings.runner)
    configured = tolerances_from_pyproject(rootdir)
    metrics = gpu_class.metrics(configured)
    commit = checkout_commit(rootdir)  # pytest-benchmark's commit_info, and the run's in the history
    started = _unwritable_is_one_line(
        run_dir,
        "write the run record in",
        lambda: _write_run_file(
            RunFolder(run_dir), worker, settings, detection, fingerprint, idle_mem_b, commit
        ),
    )
    history = open_history(
        settings,
        run_dir=run_dir,
        started=started,
        fingerprint=fingerprint,
        gpu_class=gpu_class.name,
        commit=commit.get("id"),
    )
    return RunContext(
        settings=settings,
        run_dir=run_dir,
        gpu_class=gpu_class,
        device=detection.device if on_gpu else None,
        idle_mem_b=idle_mem_b,
        fingerprint=fingerprint,
        metrics=metrics,
        configured_tolerances=frozenset(configured),
        baselines=BaselineStore(settings.baselines),
        references=load_references(settings.baselines / PUBLISHED_DIR),
        emulated=detection.emulated,
        history=history,
        unsaid=ended,
        worker=worker,
    )


T = TypeVar("T")


def _class_of(detection: Detection) -> GpuClass:
    if detection.gpu_class is None:
        raise TrainperfError(
            f"GPU {detection.describe()} matches no class in fixtures/hardware/: add a class file there "
            "or pass --perf-gpu-class NAME"
        )
    return detection.gpu_class


def _end_orphans() -> list[str]:
    """End the orphans of earlier runs (``measure.ownership``); a line for each, for the first case."""
    return [
        f"[trainperf] ended {orphan.describe()}, left running by an earlier run of the suite (its "
        f"parent, tag {orphan.tag}, is gone)"
        for orphan in sweep_orphans()
    ]


def _unwritable_is_one_line(run_dir: Path, what: str, action: Callable[[], T]) -> T:
    """Do ``action``; a folder that cannot take it (read-only, full) is one line naming the fix."""
    try:
        return action()
    except OSError as exc:
        raise TrainperfError(
            f"cannot {what} {run_dir}: {exc.strerror}; give a writable folder with --perf-output (or "
            "free space there)"
        ) from exc


def _run_dir(settings: Settings, gpu_class: str, emulated: str | None, stamp: str | None) -> Path:
    """The resumed folder, the one the xdist controller's stamp names, or a new ``<time>-<class>``."""
    if settings.resume is not None:
        return settings.resume
    if stamp is not None:
        return settings.output / f"{stamp}-{gpu_class}{'-emulated' if emulated else ''}"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = settings.output / f"{stamp}-{gpu_class}{'-emulated' if emulated else ''}"
    suffix = 1
    while run_dir.exists():
        suffix += 1
        run_dir = settings.output / f"{stamp}-{gpu_class}-{suffix}"
    return run_dir


def _write_run_file(
    folder: RunFolder,
    worker: str | None,
    settings: Settings,
    detection: Detection,
    fingerprint: dict[str, Any],
    idle_mem_b: int | None,
    commit: dict[str, Any],
) -> str:
    """Append this session to the run folder's record; return when it started (the run's key in
    the results history, which ``trainperf ingest`` derives from this file alike)."""
    record = {
        "started": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        "argv": portable_argv(sys.argv),
        "gpu_class": detection.gpu_class.name if detection.gpu_class else None,
        "class_overridden": detection.overridden,
        "emulated": detection.emulated,
        "device": detection.device,
        "idle_mem_b": idle_mem_b,
        "fingerprint": fingerprint,
        "commit": commit,
        "settings": _recorded_settings(settings, folder.root),
    }
    history = folder.record_session(record, worker)
    return str(history[0]["started"])


def _recorded_settings(settings: Settings, run_dir: Path) -> dict[str, Any]:
    """The settings as ``run.json`` records them: paths relative to the run folder or the project
    (``paths.portable``), the store's URL without a password."""
    from trainperf.store.interface import shown

    recorded = asdict(settings)
    for key in ("output", "baselines", "resume", "python"):
        if recorded[key] is not None:
            recorded[key] = portable(recorded[key], run_dir)
    if recorded["env"]:  # NAME=PYTHON[,NAME=PYTHON]
        pairs = (pair.partition("=") for pair in str(recorded["env"]).split(","))
        recorded["env"] = ",".join(f"{name}={portable(python, run_dir)}" for name, _, python in pairs)
    store = recorded["store"]
    if isinstance(store, str) and store.startswith(SQLITE_URL):
        recorded["store"] = SQLITE_URL + portable(store.removeprefix(SQLITE_URL), run_dir)
    elif isinstance(store, str):
        recorded["store"] = shown(store)
    return {k: str(v) if isinstance(v, Path) else v for k, v in recorded.items()}
