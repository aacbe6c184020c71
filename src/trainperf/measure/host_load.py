"""Whether a run's host CPU was taken by something other than the suite while it ran.

The GPU watch (``measure.contamination``) sees a neighbour on the GPU; a host-bound case is just
as easily slowed by a neighbour on the CPU: another job's data loading, a compile, a second CI job
on the same machine, or the hypervisor giving a virtual machine's cores to another guest
(``steal`` in ``/proc/stat``). Fresh confirmation runs do not help: the neighbour is still there.

While a run runs, this watch reads ``/proc`` every few seconds: the host's CPU time (busy, idle,
steal) and each process's CPU time. A process is the suite's own when it carries a suite tag
(``TRAINPERF_OWNER``, any session's: parallel workers and shards of one run are the run's own
load), is this process, one of its ancestors (pytest, make, the CI job's shell) or one below it.
Everything else is foreign. A process that starts and ends between two readings is not seen: the
watch can miss load, never invent it.

A run's host is *loaded* when a foreign share of at least ``FOREIGN_CORES`` cores ran on a host
that was saturated: busy at least ``SATURATED`` of its cores' time, or with less than
``IDLE_CORES`` cores idle on average (a neighbour on a host with idle cores took nothing from the
case; on a small host, half a core is what one of the case's threads lacks); or when the
hypervisor stole at least ``STEAL_SHARE`` of the time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from trainperf.measure.ownership import PROC, descends_from, parent_of, stat_fields, tag_of

WATCH_POLL_S = 2.0
FOREIGN_CORES = 0.25
"""Average cores of foreign CPU time over the run: below it, system daemons and a CI agent's own
bookkeeping stay quiet enough not to count."""
SATURATED = 0.9
"""Share of the host's CPU time that was busy: below it, there were idle cores for everyone."""
IDLE_CORES = 0.5
"""Cores left idle on average, below which the host is saturated whatever its busy share: on 2
cores that is 75% busy. Measured on a 2-core host (2026-11-26): a tiny CPU case ran 4.9x slower
beside 0.59 cores of other work with the host 88.9% busy, which the busy share alone let pass."""
STEAL_SHARE = 0.05
"""Share of the host's CPU time the hypervisor gave to other guests."""


@dataclass(frozen=True, slots=True)
class HostTimes:
    """``/proc/stat``'s aggregate ``cpu`` line in clock ticks."""

    busy: int
    steal: int
    total: int


def read_host_times(proc: Path = PROC) -> HostTimes | None:
    """The host's CPU time so far; None off Linux or when ``/proc/stat`` is unreadable."""
    try:
        first = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu" or len(first) < 5:
        return None
    return _times_of([int(value) for value in first[1:]])


def read_cpu_times(proc: Path = PROC) -> dict[int, HostTimes] | None:
    """Each processor's CPU time so far (``/proc/stat``'s ``cpuN`` lines); None off Linux or when
    unreadable."""
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    times: dict[int, HostTimes] = {}
    for line in lines:
        name, *values = line.split() or [""]
        if name.startswith("cpu") and name[3:].isdigit() and len(values) >= 4:
            times[int(name[3:])] = _times_of([int(value) for value in values])
    return times


def _times_of(ticks: list[int]) -> HostTimes:
    """One ``cpu`` line's ticks: user nice system idle iowait irq softirq steal (guest is already in
    user)."""
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    steal = ticks[7] if len(ticks) > 7 else 0
    total = sum(ticks[:8])
    # Stolen time is the hypervisor's other guests, not this host's work: busy leaves it out.
    return HostTimes(busy=total - idle - steal, steal=steal, total=total)


def process_times(pid: int, proc: Path = PROC) -> tuple[int, int] | None:
    """A process's start time and its user and system time, in clock ticks (``/proc/<pid>/stat``
    fields 22, 14 and 15); None when it is gone."""
    fields = stat_fields(pid, proc)
    if len(fields) <= 19:
        return None
    return int(fields[19]), int(fields[11]) + int(fields[12])


def _ancestors(pid: int, proc: Path) -> set[tuple[int, int]]:
    """This process's parent, grandparent, ... as (pid, start ticks), up to init."""
    found = set()
    for _ in range(64):
        parent = parent_of(pid, proc) or 0
        times = process_times(parent, proc) if parent > 1 else None
        if times is None:
            break
        found.add((parent, times[0]))
        pid = parent
    return found


@dataclass(slots=True)
class HostLoadWatch:
    """Reads the host's CPU while a run runs; call it from the parent's polling loop, then
    ``finish()`` once the run has ended."""

    proc: Path = PROC
    interval_s: float = WATCH_POLL_S
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)
    started: HostTimes | None = None
    ended: HostTimes | None = None
    foreign: dict[tuple[int, int], tuple[int, int, str]] = field(default_factory=dict)
    """(pid, start ticks) -> (CPU ticks when first seen, latest CPU ticks, command name)."""
    _ours: set[tuple[int, int]] = field(default_factory=set)
    _boot_ticks: int = 0
    _next_at: float = 0.0

    def begin(self) -> None:
        self.started = read_host_times(self.proc)
        self._boot_ticks = _uptime_ticks(self.proc)
        self._ours = _ancestors(os.getpid(), self.proc)
        self.scan(first=True)

    def __call__(self, elapsed: float) -> None:
        if elapsed < self._next_at:
            return
        self._next_at = elapsed + self.interval_s
        self.scan()

    def scan(self, first: bool = False) -> None:
        """Note every foreign process's CPU time; one born during the run counts from zero."""
        for entry in self.proc.iterdir() if self.proc.is_dir() else ():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            times = process_times(pid, self.proc)
            if times is None:
                continue
            key, ticks = (pid, times[0]), times[1]
            if key in self._ours:
                continue
            if key not in self.foreign and self._is_ours(pid):
                self._ours.add(key)
                continue
            if key in self.foreign:
                seen_first, _, name = self.foreign[key]
            else:
                born_during = not first and key[1] >= self._boot_ticks
                seen_first, name = (0 if born_during else ticks), _name(pid, self.proc)
            self.foreign[key] = (seen_first, ticks, name)

    def _is_ours(self, pid: int) -> bool:
        return (
            pid == os.getpid()
            or tag_of(pid, self.proc) is not None
            or descends_from(pid, os.getpid(), self.proc)
        )

    def finish(self) -> None:
        self.scan()
        self.ended = read_host_times(self.proc)

    def _shares(self) -> tuple[float, float, float] | None:
        """The host over the run, unrounded: (busy share, steal share, cores used by others); None
        when ``/proc`` could not be read."""
        if self.started is None or self.ended is None:
            return None
        total = self.ended.total - self.started.total
        if total <= 0:
            return None
        busy = (self.ended.busy - self.started.busy) / total
        steal = (self.ended.steal - self.started.steal) / total
        return busy, steal, self.foreign_ticks() / total * self.cores

    def figures(self) -> dict[str, float | int]:
        """The host over the run, as recorded: its share busy, the hypervisor's steal, the cores
        other processes used on average (of ``cores``); empty when ``/proc`` could not be read."""
        if (shares := self._shares()) is None:
            return {}
        busy, steal, foreign_cores = shares
        return {
            "busy": round(busy, 3),
            "steal": round(steal, 3),
            "foreign_cores": round(foreign_cores, 2),
            "cores": self.cores,
        }

    def reasons(self) -> list[str]:
        """Why the run's host timing cannot be trusted, or [] when the host was left to it (judged
        on the unrounded shares: a recorded figure's rounding must not cross a threshold)."""
        if (shares := self._shares()) is None:
            return []
        busy, steal, foreign_cores = shares
        reasons = []
        if steal >= STEAL_SHARE:
            reasons.append(f"host CPU: the hypervisor took {steal:.0%} of the CPU time (steal)")
        saturated = busy >= SATURATED or (1 - busy) * self.cores < IDLE_CORES
        if foreign_cores >= FOREIGN_CORES and saturated:
            reasons.append(
                f"host CPU: other processes used {foreign_cores:.1f} of {self.cores} cores on a host "
                f"{busy:.0%} busy ({self.top_foreign()})"
            )
        return reasons

    def foreign_ticks(self) -> int:
        return sum(max(0, last - first) for first, last, _ in self.foreign.values())

    def top_foreign(self, count: int = 3) -> str:
        used = sorted(
            ((last - first, name, pid) for (pid, _), (first, last, name) in self.foreign.items()),
            reverse=True,
        )
        return ", ".join(f"{name} pid {pid}" for ticks, name, pid in used[:count] if ticks > 0)


def _uptime_ticks(proc: Path) -> int:
    """Clock ticks since boot now: a process whose start time is later was born during the run."""
    try:
        seconds = float((proc / "uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0
    return int(seconds * os.sysconf("SC_CLK_TCK"))


def _name(pid: int, proc: Path) -> str:
    try:
        return (proc / str(pid) / "comm").read_text().strip() or "?"
    except OSError:
        return "?"
