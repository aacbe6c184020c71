"""Synthetic files cached on disk (random-weight checkpoints): built once, reused by every run.

An entry is written into a temporary folder and renamed into place after its completion marker,
so a run killed half-way leaves only a temporary folder, which the next run removes; a final
folder without its marker (copied, or tampered with) is rebuilt, never loaded. Two runs that want
the same entry at once (xdist workers on one host) take turns on its lock file: the second waits
and finds it written, rather than writing a second copy beside it (on a fresh 4-GPU runner, two
unsloth cases of one model each spent about 37 s writing the same 8B checkpoint, and two copies of
a 32B one need twice its disk). A killed writer's lock ends with it. Before writing, the room the
entry needs is checked against the disk's free space, so that a disk too small is one line at once,
not a failure minutes later half-way through.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.pids import alive
from trainperf.workloads.protocol import CachedInput

COMPLETE_MARKER = "trainperf-complete.json"
LOCKS_FOLDER = ".locks"
BUILD_S_KEY = "build_s"
BYTES_KEY = "bytes"
"""The marker's record of its writer: seconds spent and bytes written (``CacheEntry.record``)."""
DISK_MARGIN = 1.05
"""Room asked beyond the estimate: small files (index, config, tokenizer) and the estimate's error."""


class NotEnoughDisk(TrainperfError):
    """The cache's disk cannot hold the entry: found before writing, not after minutes of it."""


@dataclass(frozen=True, slots=True)
class CacheEntry:
    path: Path
    hit: bool
    seconds: float
    marker: dict[str, Any]
    """What the builder recorded about the files (parameter counts, shards...)."""
    rebuilt_partial: bool
    """A half-written entry was found and rebuilt."""
    build_in_peak_rss: bool = False
    """Written by this process, whose peak host memory still holds the build (``forget_peak_rss``)."""

    def state(self) -> str:
        """For the child's log: ``cache hit`` or ``written in 95s``."""
        return "cache hit" if self.hit else f"written in {self.seconds:.0f}s"

    def record(self) -> CachedInput:
        """What the run reports of the entry: the writer's size and time come from the marker, so a
        run that found it cached still says what a fresh runner pays for it."""
        record = CachedInput.from_dict(
            {
                "kind": self.path.parent.name,
                "key": self.path.name,
                "bytes": self.marker.get(BYTES_KEY),
                "build_s": self.marker.get(BUILD_S_KEY),
                "hit": self.hit,
                "build_in_peak_rss": self.build_in_peak_rss,
            }
        )
        assert record is not None  # an entry's folder always has a name and a parent
        return record


def cache_dir() -> Path:
    """``$TRAINPERF_CACHE_DIR`` (default ``~/.cache/trainperf``): every kind of entry lives below it."""
    return Path(os.environ.get("TRAINPERF_CACHE_DIR") or Path.home() / ".cache" / "trainperf")


def cache_root(kind: str) -> Path:
    """``$TRAINPERF_CACHE_DIR/<kind>`` (default ``~/.cache/trainperf/<kind>``)."""
    return cache_dir() / kind


def holds(kind: str, key: str) -> bool:
    """Whether this machine's cache holds the entry complete (what a fresh runner would write first)."""
    return is_complete(cache_root(kind) / key)


def entry_key(name: str, material: dict[str, Any]) -> str:
    """``<name>-<hash>``: the hash covers everything in ``material`` that shapes the files."""
    return f"{name}-{hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]}"


def is_complete(path: Path) -> bool:
    return (path / COMPLETE_MARKER).is_file()


def require_room(folder: Path, needed_b: int, what: str, instead: str) -> None:
    """Refuse in one line when ``folder``'s disk has less than ``needed_b`` (and the margin) free."""
    free_b = shutil.disk_usage(folder).free
    if needed_b * DISK_MARGIN > free_b:
        raise NotEnoughDisk(
            f"{what} needs about {needed_b * DISK_MARGIN / 1e9:.1f} GB under {folder.parent} and "
            f"{free_b / 1e9:.1f} GB "
            f"are free: point TRAINPERF_CACHE_DIR at a larger disk, or give the case {instead}"
        )


def ensure_entry(
    root: Path,
    key: str,
    build: Callable[[Path], dict[str, Any]],
    *,
    say: Callable[[str], None] = print,
) -> CacheEntry:
    """The entry ``root/key``, built first by ``build(folder)`` (which returns the marker's
    content, and checks the room with ``require_room`` before it writes) if it is missing or
    half-written."""
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    # The lock files stay (unlinking one another writer waits on would hand out a second lock).
    locks = root / LOCKS_FOLDER
    locks.mkdir(exist_ok=True)
    with open(locks / f"{key}.lock", "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"[trainperf] waiting for another run writing cache entry {root / key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_locked(root, key, build, say, started)


def _ensure_locked(
    root: Path, key: str, build: Callable[[Path], dict[str, Any]], say: Callable[[str], None], started: float
) -> CacheEntry:
    final = root / key
    _remove_stale_temporaries(root, key, say)
    if is_complete(final):
        marker = json.loads((final / COMPLETE_MARKER).read_text())
        return CacheEntry(final, True, time.perf_counter() - started, marker, False)
    rebuilt = final.exists()
    if rebuilt:
        say(f"[trainperf] cache entry {final} is half-written (no {COMPLETE_MARKER}): rebuilding it")
        shutil.rmtree(final)
    tmp = root / f"{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        building = time.perf_counter()
        marker = {"key": key, **build(tmp)}
        marker[BUILD_S_KEY] = round(time.perf_counter() - building, 1)
        marker[BYTES_KEY] = folder_bytes(tmp)
        (tmp / COMPLETE_MARKER).write_text(json.dumps(marker))
        try:
            os.rename(tmp, final)
        except OSError:
            if not is_complete(final):  # not another writer that finished first: a real failure
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CacheEntry(
        final, False, time.perf_counter() - started, marker, rebuilt, build_in_peak_rss=not forget_peak_rss()
    )


def forget_peak_rss() -> bool:
    """Reset this process's peak resident memory to what it holds now (Linux ``clear_refs`` 5), and
    whether that worked. A run that writes an entry (a 0.5B model folder held 1.97 GiB of host memory
    in verl's child, against 0.91 GiB for the same case's runs that found it cached) would otherwise
    report the build's peak as the workload's, and the first run on a fresh runner would read as a
    host-memory regression."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def folder_bytes(folder: Path) -> int:
    """The size of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _remove_stale_temporaries(root: Path, key: str, say: Callable[[str], None]) -> None:
    """Temporary folders of writers that died (their pid is gone) are half-written entries."""
    for leftover in root.glob(f"{key}.tmp-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and alive(int(pid)):
            continue
        say(f"[trainperf] removing half-written cache entry {leftover} (its writer is gone)")
        shutil.rmtree(leftover, ignore_errors=True)
