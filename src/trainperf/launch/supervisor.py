"""The first process of every case's child: no part of the case outlives the suite.

``python -m trainperf.launch.supervisor PARENT_PID -- COMMAND...`` asks the kernel to send it
SIGTERM when its parent dies (``PR_SET_PDEATHSIG``: a ``kill -9`` of pytest runs no handler of
pytest's own), makes itself the reaper of every orphaned descendant (``PR_SET_CHILD_SUBREAPER``:
torchrun ranks, Ray's workers and rollout servers that leave the process group by starting
sessions of their own), then runs COMMAND. When COMMAND ends, or a stop signal comes, it ends
the whole tree below it: SIGTERM, a short grace, SIGKILL. Its exit status is COMMAND's, a signal
included, so the parent classifies the child exactly as it would without it.

Standard library only, and nothing of the package imported: it starts in a few tens of
milliseconds and needs no training stack.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
EXIT_PARENT_GONE = 70
GRACE_S = 8.0
"""After a stop signal from the parent: less than the parent's own grace before its SIGKILL."""
ORPHANED_GRACE_S = 3.0
"""After the parent died: nobody waits for the tree, and the GPU must be free within seconds."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


POLL_S = 0.1


class Stops:
    """The stop signal that came, if any. The handler only notes it: an exception raised from a
    handler can land anywhere (in a library's cleanup, at interpreter exit) and be lost there."""

    signum: int | None = None

    @classmethod
    def note(cls, signum: int, _frame: object) -> None:
        cls.signum = cls.signum or signum


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def descendants(root: int, proc: Path = Path("/proc")) -> list[int]:
    """Every process below ``root``, parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _reap() -> None:
    """Collect every exited child (orphans reparented here included) without blocking."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_tree(grace_s: float) -> None:
    """SIGTERM everything below this process, SIGKILL what is left after ``grace_s``, reap it all."""
    me = os.getpid()
    _signal_all(descendants(me), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while descendants(me) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.05)
    for _ in range(20):  # ranks may fork while being killed: repeat until nothing is left
        left = descendants(me)
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
        _reap()
    _reap()


def _exit_like(status: int) -> NoReturn:
    """Leave with the status the command left with, a death by signal included."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command dumped its own core, if any
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _wait_for(pid: int, parent: int) -> int | None:
    """Reap children until ``pid`` ends (its wait status), or until a stop signal comes or the parent
    is gone (None). The parent is also watched directly: where the death signal is not delivered
    (a sandboxed kernel), being re-parented says the same within ``POLL_S``."""
    while Stops.signum is None and os.getppid() == parent:
        try:
            reaped, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if reaped == pid:
            return status
        if reaped == 0:
            time.sleep(POLL_S)
    return None


def _stop(orphaned: bool, signum: int) -> NoReturn:
    """End the tree and leave as the stop signal says (SIGKILL of the group where the parent is gone)."""
    for each in STOP_SIGNALS:
        signal.signal(each, signal.SIG_IGN)  # nothing may cut the tree's end short
    end_tree(ORPHANED_GRACE_S if orphaned else GRACE_S)
    if orphaned:
        os.killpg(os.getpgid(0), signal.SIGKILL)  # the group, this process included: nobody waits for it
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)


def supervise(parent: int, command: list[str]) -> NoReturn:
    if sys.platform.startswith("linux"):
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        sys.exit(EXIT_PARENT_GONE)
    for signum in STOP_SIGNALS:
        signal.signal(signum, Stops.note)
    # The parent asks a silent child's group for its stacks with SIGUSR1: meant for the workload
    # (faulthandler), never the end of the supervisor. A handler, not SIG_IGN, which exec would pass on.
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: None)
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"trainperf: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        sys.exit(127)
    status = _wait_for(child.pid, parent)
    if status is None:
        _stop(os.getppid() != parent, Stops.signum or signal.SIGTERM)
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)  # the tree's end below must not be cut short
    end_tree(grace_s=2.0)  # stragglers: dataloader and compile workers, a Ray daemon
    _exit_like(status)


def main(argv: list[str]) -> NoReturn:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: python -m trainperf.launch.supervisor PARENT_PID -- COMMAND...", file=sys.stderr)
        sys.exit(2)
    supervise(int(argv[0]), argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
