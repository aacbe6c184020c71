"""One fresh child process per case run: its own process group under a supervisor that dies with
the suite, a wall-clock limit and a silence limit, the whole group killed on timeout, silence or
interrupt, and its output kept in files beside its result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.workloads.protocol import STDERR_FILE, STDOUT_FILE, STEPS_FILE

POLL_S = 0.25
TERM_GRACE_S = 10.0
STACKS_WAIT_S = 2.0
SETUP_FACTOR = 3


@dataclass(frozen=True, slots=True)
class Exit:
    returncode: int | None
    timed_out: bool
    wall_s: float
    stderr_tail: str
    silent_s: float | None = None
    """Set when the child was killed for writing nothing that long (``--perf-silent-timeout``)."""


def kill_group(process: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL whatever is left after ``grace_s``."""
    pgid = process.pid  # start_new_session=True made the child the leader of its own group
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            if sig is signal.SIGKILL or _group_gone(pgid):
                return
        except subprocess.TimeoutExpired:
            continue


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a child ran: handled as Ctrl-C is (the child's group killed, the
    finished cases reported), since the child's own session would otherwise outlive us."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a child runs, SIGTERM (``timeout``'s default, a CI runner cancelling a job) stops the
    run the way Ctrl-C does. Without this the parent dies at once and the child, started in its
    own session so that it can be killed as a group, trains on and holds the GPU."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be set from the main thread; a worker thread's caller owns them
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise Terminated("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def tail(path: Path, lines: int = 30) -> str:
    if not path.is_file():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 16384))
        text = handle.read().decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


def supervised(command: list[str]) -> list[str]:
    """``command`` under the supervisor (``launch.supervisor``): it dies with this process, and so does
    everything it started, whichever session or process group that moved to."""
    return [sys.executable, "-m", "trainperf.launch.supervisor", str(os.getpid()), "--", *command]


class SilenceWatch:
    """When did the child last show a sign of life: a byte more in any file of its folder (its steps,
    its stdout and stderr, its ranks' files)? A hang (a deadlocked collective, a stuck data worker)
    shows none, long before the wall-clock limit ends it. Before its first step a child may build a
    large model in silence: it gets ``SETUP_FACTOR`` times the limit then."""

    def __init__(self, folder: Path, limit_s: float) -> None:
        self.folder, self.limit_s = folder, limit_s
        self.size, self.changed_at = -1, time.monotonic()

    def _size(self) -> int:
        total = 0
        for entry in os.scandir(self.folder):
            try:
                total += entry.stat().st_size if entry.is_file() else 0
            except OSError:
                continue
        return total

    def silent_for(self) -> float:
        size = self._size()
        if size != self.size:
            self.size, self.changed_at = size, time.monotonic()
        return time.monotonic() - self.changed_at

    def expired(self) -> bool:
        if self.limit_s <= 0:
            return False
        steps = self.folder / STEPS_FILE
        stepping = steps.is_file() and steps.stat().st_size > 0
        return self.silent_for() > self.limit_s * (1 if stepping else SETUP_FACTOR)


def _ask_for_stacks(process: subprocess.Popen[bytes]) -> None:
    """SIGUSR1 to the group: the workload prints every thread's stack to its stderr (faulthandler)."""
    try:
        os.killpg(process.pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(STACKS_WAIT_S)


def _start(
    command: list[str], log_dir: Path, env: dict[str, str], out: Any, err: Any
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            supervised(command),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=log_dir,
            start_new_session=True,
        )
    except OSError as exc:
        raise TrainperfError(
            f"cannot start the case's child ({command[0]}): {exc.strerror}; check --perf-python"
        ) from exc


def _watch(
    process: subprocess.Popen[bytes],
    started: float,
    timeout_s: float,
    silence: SilenceWatch,
    on_tick: Callable[[float], None] | None,
) -> tuple[bool, float | None]:
    """Poll the child to its end: (timed out, silent for how long when killed for silence)."""
    while process.poll() is None:
        elapsed = time.monotonic() - started
        if elapsed > timeout_s:
            kill_group(process)
            return True, None
        if silence.expired():
            quiet = silence.silent_for()
            _ask_for_stacks(process)
            kill_group(process)
            return False, quiet
        if on_tick is not None:
            on_tick(elapsed)
        time.sleep(POLL_S)
    return False, None


def run_child(
    command: list[str],
    *,
    log_dir: Path,
    env: dict[str, str],
    timeout_s: float,
    on_tick: Callable[[float], None] | None = None,
    silent_timeout_s: float = 0.0,
) -> Exit:
    """Run ``command`` to completion, timeout or silence; Ctrl-C or SIGTERM kills the group and
    propagates. ``silent_timeout_s``: kill a child that writes nothing for that long (0: never)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (
        open(log_dir / STDOUT_FILE, "wb") as out,
        open(log_dir / STDERR_FILE, "wb") as err,
        sigterm_as_interrupt(),
    ):
        process = _start(command, log_dir, env, out, err)
        try:
            timed_out, silent_s = _watch(
                process, started, timeout_s, SilenceWatch(log_dir, silent_timeout_s), on_tick
            )
        except BaseException:
            # The full grace: a verl child answers SIGTERM by stopping its Ray cluster, whose
            # workers are not in its process group and would keep GPU memory if cut short.
            kill_group(process)
            raise
        # Stragglers (dataloader workers, compile workers) must not outlive the case.
        if not _group_gone(process.pid):
            kill_group(process, grace_s=2.0)
    return Exit(
        process.returncode, timed_out, time.monotonic() - started, tail(log_dir / STDERR_FILE), silent_s
    )
