"""One fresh child process per case run: its own process group, a wall-clock limit, the whole
group killed on timeout or interrupt, and its output kept in files beside its result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.workloads.protocol import STDERR_FILE, STDOUT_FILE

POLL_S = 0.25
TERM_GRACE_S = 10.0


@dataclass(frozen=True, slots=True)
class Exit:
    returncode: int | None
    timed_out: bool
    wall_s: float
    stderr_tail: str


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


def run_child(
    command: list[str],
    *,
    log_dir: Path,
    env: dict[str, str],
    timeout_s: float,
    on_tick: Callable[[float], None] | None = None,
) -> Exit:
    """Run ``command`` to completion or timeout; Ctrl-C or SIGTERM kills the group and propagates."""
    log_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (
        open(log_dir / STDOUT_FILE, "wb") as out,
        open(log_dir / STDERR_FILE, "wb") as err,
        sigterm_as_interrupt(),
    ):
        try:
            process = subprocess.Popen(
                command,
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
        timed_out = False
        try:
            while process.poll() is None:
                elapsed = time.monotonic() - started
                if elapsed > timeout_s:
                    timed_out = True
                    kill_group(process)
                    break
                if on_tick is not None:
                    on_tick(elapsed)
                time.sleep(POLL_S)
        except BaseException:
            # The full grace: a verl child answers SIGTERM by stopping its Ray cluster, whose
            # workers are not in its process group and would keep GPU memory if cut short.
            kill_group(process)
            raise
        # Stragglers (dataloader workers, compile workers) must not outlive the case.
        if not _group_gone(process.pid):
            kill_group(process, grace_s=2.0)
    return Exit(process.returncode, timed_out, time.monotonic() - started, tail(log_dir / STDERR_FILE))
