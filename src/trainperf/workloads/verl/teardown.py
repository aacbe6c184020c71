"""Ending one verl run's processes, and only its own: every process of the session the run was
started in (the child starts verl with ``start_new_session``, so the session's id is verl's pid).

Why a session and not verl's process group: Ray's raylet starts each worker in a process group of
its own (Ray 2.59: per-worker process-group clean-up, on by default), so ``killpg`` on verl's group
reaches the driver, GCS, raylet and dashboard but not the workers nor what they start (a vLLM engine
core). Nothing Ray starts from ``ray.init()`` calls ``setsid``, so they all stay in the session. Matching
a run's session folder in command lines misses them too: Ray renames its workers ``ray::...``.

Why not ``ray stop --force``: it ends every Ray on the host, another run's or a developer's cluster
included, so verl runs had to take turns on a host. The sweep ends this run's Ray and nothing else's;
on an H100 runner ``ray stop`` found nothing after it ("Did not find any active Ray processes",
2026-11-24), and a self-test ends one of two Rays on a machine by its sweep while the other goes on
(``tests/test_verl_ray_side_by_side.py``).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
ROUNDS = 3
"""Sweeps at most: a process that was starting when the first signal went out is caught by the next."""


@dataclass(frozen=True, slots=True)
class Sweep:
    """What ending a session took: processes asked to stop, those killed after the grace, any left."""

    terminated: int
    killed: int
    left: int

    def to_dict(self) -> dict[str, int]:
        return {"terminated": self.terminated, "killed": self.killed, "left": self.left}


def session_of(stat_line: str) -> int | None:
    """The session id in a ``/proc/<pid>/stat`` line (the 4th field after the command's closing
    parenthesis: a command may hold spaces and parentheses of its own)."""
    fields = stat_line[stat_line.rfind(")") + 1 :].split()
    try:
        return int(fields[3])
    except (IndexError, ValueError):
        return None


def session_members(session: int, proc: Path = PROC) -> list[int]:
    """The live processes of ``session`` (zombies left out: they hold nothing), this one excepted."""
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            line = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        state = line[line.rfind(")") + 2 : line.rfind(")") + 3]
        if session_of(line) == session and state != "Z":
            members.append(int(entry.name))
    return members


def end_session(session: int, grace_s: float = 10.0, proc: Path = PROC) -> Sweep:
    """SIGTERM every process of ``session``, SIGKILL what is left after ``grace_s``, in up to
    ``ROUNDS`` sweeps; how many of each."""
    terminated = killed = 0
    for _ in range(ROUNDS):
        members = session_members(session, proc)
        if not members:
            break
        terminated += _signal(members, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and session_members(session, proc):
            time.sleep(0.1)
        killed += _signal(session_members(session, proc), signal.SIGKILL)
    return Sweep(terminated, killed, len(session_members(session, proc)))


def _signal(pids: list[int], sig: signal.Signals) -> int:
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except (ProcessLookupError, PermissionError):
            continue
    return sent


__all__ = ["Sweep", "end_session", "session_members", "session_of"]
