"""Which processes are the suite's own: a tag in their environment, and the orphans it finds.

Every child of a case (and everything that child starts: torchrun ranks, Ray workers, rollout
servers) inherits ``TRAINPERF_OWNER=<pid>:<start>``, the pytest process that launched it and
that process's start time in clock ticks. The pair names the owner even after its pid is reused.
A process whose tag names an owner that no longer runs is an orphan of an earlier run (its
parent was killed with ``kill -9``, or lost to the kernel's OOM killer): the suite ends it at
start-up, by that tag only, never by a name match that could hit another user's training.

A GPU process on the suite's GPU is the suite's own when it carries this session's tag; one that
does not is foreign. A pid that ``/proc`` cannot show (NVML reports host pids, and a container
has its own pid namespace) can be judged only before a case starts, when none of ours runs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

OWNER_ENV = "TRAINPERF_OWNER"
PROC = Path("/proc")


def stat_fields(pid: int, proc: Path) -> list[str]:
    """``/proc/<pid>/stat`` after the command name (field 3 on), or [] when unreadable. The name
    (field 2) may hold spaces and parentheses: the split is after its last ')'."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return []
    return stat.rpartition(")")[2].split()


def start_ticks(pid: int, proc: Path = PROC) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    fields = stat_fields(pid, proc)
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def owner_tag(pid: int | None = None, proc: Path = PROC) -> str:
    """This process's tag (or ``pid``'s): what its children carry in ``TRAINPERF_OWNER``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_ticks(pid, proc) or 0}"


def _environ(pid: int, proc: Path) -> bytes | None:
    """A process's environment block; None when unreadable (empty while the process exits)."""
    try:
        return (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None


def _tag_in(environ: bytes | None) -> str | None:
    prefix = f"{OWNER_ENV}=".encode()
    for entry in (environ or b"").split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "replace")
    return None


def tag_of(pid: int, proc: Path = PROC) -> str | None:
    """The ``TRAINPERF_OWNER`` a process was started with; None when it has none or is unreadable."""
    return _tag_in(_environ(pid, proc))


def owner_alive(tag: str, proc: Path = PROC) -> bool:
    """Whether the process a tag names still runs (the same process: pid and start time)."""
    pid_text, _, ticks_text = tag.partition(":")
    try:
        pid, ticks = int(pid_text), int(ticks_text)
    except ValueError:
        return True  # not a tag we wrote: never treat its holder as ours to end
    started = start_ticks(pid, proc)
    return started is not None and (ticks == 0 or started == ticks)


def visible(pid: int, proc: Path = PROC) -> bool:
    """Whether ``pid`` is a process of this pid namespace (NVML may report another's)."""
    return (proc / str(pid)).is_dir()


@dataclass(frozen=True, slots=True)
class Orphan:
    pid: int
    tag: str
    command: str

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command[:80]})"


def _command(pid: int, proc: Path) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip() or "?"


def _pids(proc: Path) -> Iterable[int]:
    for entry in proc.iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def find_orphans(proc: Path = PROC) -> list[Orphan]:
    """Processes carrying a suite tag whose owner is gone (this process and its own never are)."""
    mine = owner_tag(proc=proc)
    orphans = []
    for pid in _pids(proc):
        tag = tag_of(pid, proc)
        if tag is None or tag == mine or pid == os.getpid():
            continue
        if not owner_alive(tag, proc):
            orphans.append(Orphan(pid, tag, _command(pid, proc)))
    return orphans


def end_orphans(orphans: Iterable[Orphan]) -> list[Orphan]:
    """SIGKILL each orphan (it has no parent left to report to); the ones that were still there."""
    ended = []
    for orphan in orphans:
        try:
            os.kill(orphan.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        ended.append(orphan)
    return ended


def sweep_orphans() -> list[Orphan]:
    """Find and end the orphans of earlier runs; what was ended (empty off Linux)."""
    if not PROC.is_dir():
        return []
    return end_orphans(find_orphans())


def parent_of(pid: int, proc: Path = PROC) -> int | None:
    """The process's parent pid (``/proc/<pid>/stat`` field 4), or None when it is gone."""
    fields = stat_fields(pid, proc)
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def descends_from(pid: int, ancestor: int, proc: Path = PROC) -> bool:
    """Whether ``ancestor`` is ``pid``'s parent, grandparent, ... (``/proc`` stat, readable for an
    exiting process too)."""
    seen = 0
    while pid > 1 and seen < 64:
        parent = parent_of(pid, proc)
        if parent is None:
            return False
        if parent == ancestor:
            return True
        pid, seen = parent, seen + 1
    return False


def is_ours(pid: int, tag: str, proc: Path = PROC) -> bool | None:
    """True for this session's process (this one, one carrying ``tag``, or one below this process),
    False for another's, None when ``/proc`` cannot tell: the pid is in another pid namespace, or
    the process is exiting (its environment reads empty while NVML still lists it)."""
    if pid == os.getpid():
        return True
    if not visible(pid, proc):
        return None
    environ = _environ(pid, proc)
    if _tag_in(environ) == tag or descends_from(pid, os.getpid(), proc):
        return True
    return False if environ else None
