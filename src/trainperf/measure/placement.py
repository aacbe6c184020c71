"""Which GPUs a case runs on: one pytest-xdist worker per GPU, k-GPU cases reserved without deadlock.

Every visible GPU has a lock file; a child holds the locks of every GPU it uses for its whole
life (and the idle wait after it). ``flock`` locks die with their process, so a killed worker never
leaves a stale reservation.

Worker ``gw<i>`` owns GPU ``i mod n`` of the visible list; with more workers than GPUs two
workers share one and its lock serialises them. A one-GPU case waits for its worker's GPU. A k-GPU
case takes the first k GPUs of the session that are free at one moment, its worker's own and the next
ones preferred (``Placement.for_case``), all k at once or none: a holder never waits while it holds,
so no cycle of waits can form, and the case starts as soon as any k are free. With the next GPU fixed,
a 2-GPU case on a 4-GPU night (2026-11-29, h200) waited 460 s behind a 10-minute verl case on it while
other GPUs had none left to run.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError

LOCK_DIR_ENV = "TRAINPERF_GPU_LOCK_DIR"
"""Where the per-GPU lock files live; machine-wide by default, so that two pytest sessions on
one runner (a nightly and a manual run) also queue instead of sharing a GPU."""
_WORKER_ID = re.compile(r"^gw(\d+)$")
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""What torch (intra-op threads), MKL and OpenBLAS size their thread pools by at start."""


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "trainperf-gpu-locks")


def visible_devices(count_gpus: Callable[[], int]) -> list[str]:
    """The GPUs this session may use, as CUDA_VISIBLE_DEVICES names them (indices or UUIDs).

    ``count_gpus`` is asked only when CUDA_VISIBLE_DEVICES is unset (NVML's device count).
    """
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(i) for i in range(count_gpus())]
    names = [name.strip() for name in visible.split(",") if name.strip()]
    return [] if names[:1] == ["-1"] else names


def worker_index(worker_id: str | None) -> int:
    """0 for a serial run (no xdist) or the controller, ``i`` for worker ``gw<i>``."""
    if not worker_id:
        return 0
    match = _WORKER_ID.match(worker_id)
    return int(match.group(1)) if match else 0


@dataclass(frozen=True, slots=True)
class Placement:
    """The GPUs of this pytest process: all visible ones, and the one it owns."""

    devices: tuple[str, ...]
    worker: int = 0

    @property
    def own(self) -> str | None:
        return self.devices[self.worker % len(self.devices)] if self.devices else None

    def for_case(self, gpus: int) -> tuple[str, ...]:
        """The ``gpus`` devices a case takes: this worker's own GPU and the next ones, wrapping."""
        if gpus > len(self.devices):
            raise TrainperfError(
                f"the case needs {gpus} GPUs and this session sees {len(self.devices)} "
                f"({','.join(self.devices) or 'none'}); run it on a runner with {gpus} GPUs or widen "
                "CUDA_VISIBLE_DEVICES"
            )
        start = self.worker % len(self.devices)
        return tuple(self.devices[(start + k) % len(self.devices)] for k in range(gpus))


@dataclass(frozen=True, slots=True)
class CpuShare:
    """The CPU threads each child gets when pytest-xdist workers run children side by side."""

    threads: int
    cores: int
    workers: int

    def env(self) -> dict[str, str]:
        return dict.fromkeys(THREAD_ENV_VARS, str(self.threads))

    def note(self) -> str:
        return (
            f"CPU threads per child: {self.threads} ({self.cores} cores shared by {self.workers} "
            "xdist workers; set OMP_NUM_THREADS to choose)"
        )


def xdist_workers(environ: Mapping[str, str]) -> int:
    """How many pytest-xdist workers share the session (1 in a serial run), as a worker sees it."""
    try:
        return max(1, int(environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    except ValueError:
        return 1


def cpu_share(environ: Mapping[str, str], cores: int | None = None) -> CpuShare | None:
    """Each worker's share of the cores, or None for a single worker or a user's own
    OMP_NUM_THREADS. Without a share every child sizes its pools to all cores, and side by side
    they oversubscribe the CPU: tiny cases then run many times slower than alone."""
    workers = xdist_workers(environ)
    if workers <= 1 or environ.get("OMP_NUM_THREADS"):
        return None
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return CpuShare(max(1, cores // workers), cores, workers)


def lock_order(devices: Sequence[str], all_devices: Sequence[str]) -> list[str]:
    """The one global order every process takes locks in: position in the visible list."""
    rank = {name: position for position, name in enumerate(all_devices)}
    return sorted(devices, key=lambda name: (rank.get(name, len(rank)), name))


@dataclass(frozen=True, slots=True)
class Reservation:
    """The GPUs a case holds and how long it waited for them."""

    devices: tuple[str, ...]
    waited_s: float


@contextmanager
def reserve_for_case(
    wanted: Sequence[str],
    all_devices: Sequence[str],
    *,
    directory: Path | None = None,
    on_wait: Callable[[str], None] | None = None,
    poll_s: float = 0.5,
) -> Iterator[Reservation]:
    """Hold a case's GPUs for the block: one GPU waited for (``reserve``); for several, the first
    ``len(wanted)`` of ``all_devices`` free at one moment, ``wanted`` first, taken all at once or not
    at all. ``on_wait`` gets what it waits for, once."""
    if len(wanted) <= 1 or len(all_devices) <= len(wanted):
        with reserve(wanted, all_devices, directory=directory, on_wait=on_wait, poll_s=poll_s) as waited:
            yield Reservation(tuple(wanted), waited)
        return
    preferred = [*wanted, *(name for name in all_devices if name not in wanted)]
    handles = _lock_files(preferred, directory or lock_dir())
    started, told = time.monotonic(), False
    try:
        while True:
            held = _take_free(handles, len(wanted))
            if held:
                break
            if on_wait is not None and not told:
                on_wait(f"{len(wanted)} free GPUs at once (of {', '.join(all_devices)})")
                told = True
            time.sleep(poll_s)
        yield Reservation(tuple(lock_order(held, all_devices)), time.monotonic() - started)
    finally:
        _release(handles)


def _lock_files(names: Sequence[str], folder: Path) -> dict[str, Any]:
    """Each GPU's lock file, opened in ``names``' order (the order it is locked in)."""
    folder.mkdir(parents=True, exist_ok=True)
    # Held until the reservation ends, so not context managers.
    return {name: open(folder / f"gpu-{_safe(name)}.lock", "a+") for name in names}


def _release(handles: Mapping[str, Any]) -> None:
    """Every lock of a reservation released (one never taken is released as a no-op) and closed."""
    for handle in handles.values():
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _take_free(handles: Mapping[str, Any], count: int) -> list[str]:
    """``count`` of the GPUs whose locks are free now, in the handles' order, locked; or none held."""
    taken = []
    for name, handle in handles.items():
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        taken.append(name)
        if len(taken) == count:
            return taken
    for name in taken:
        fcntl.flock(handles[name], fcntl.LOCK_UN)
    return []


@contextmanager
def reserve(
    devices: Sequence[str],
    all_devices: Sequence[str],
    *,
    directory: Path | None = None,
    on_wait: Callable[[str], None] | None = None,
    poll_s: float = 0.5,
) -> Iterator[float]:
    """Hold the locks of ``devices`` (ascending order) for the block; yields the seconds waited.
    ``on_wait`` gets what it waits for (``GPU 1``)."""
    handles = _lock_files(lock_order(devices, all_devices), directory or lock_dir())
    started = time.monotonic()
    try:
        for name, handle in handles.items():
            told = False
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if on_wait is not None and not told:
                        on_wait(f"GPU {name}")
                        told = True
                    time.sleep(poll_s)
        yield time.monotonic() - started
    finally:
        _release(handles)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
