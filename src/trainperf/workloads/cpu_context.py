"""Where the host index's calibration ran, and how busy the host was around it (Linux; no torch).

On cloud GPU machines fresh children of one case read host indexes about 2x apart, in two groups,
with no relation to their steps' host time (docs/measurements/2026-11-28-h200-core-baselines). A
calibration that shares its core with a busy SMT sibling, or runs while the rest of the host is
busy, reads about half speed: these figures, recorded beside the index, tell those apart from the
CPU's own speed. Each is None where the system does not say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")
SELF_STAT = Path("/proc/self/stat")
TOPOLOGY = "/sys/devices/system/cpu/cpu{}/topology/thread_siblings_list"
IDLE_FIELDS = (3, 4)
"""idle and iowait: 0-based among /proc/stat's user nice system idle iowait irq softirq steal."""
STEAL_FIELD = 7


@dataclass(frozen=True, slots=True)
class CpuTimes:
    busy: int
    total: int
    steal: int


@dataclass(frozen=True, slots=True)
class CpuContext:
    cpu: int | None
    """The processor the calibration ended on."""
    siblings: tuple[int, ...]
    """Its SMT siblings (the other hardware threads of its core)."""
    siblings_busy: float | None
    """Their busy share over the calibration: near 1, the calibration shared its core."""
    others_busy: float | None
    """The rest of the host's processors' busy share over it."""
    steal: float | None
    """The host's steal share over it (a hypervisor's other guests)."""

    def record(self) -> dict[str, Any]:
        return asdict(self)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``0,8`` or ``0-1`` or ``3``: the processors of a sysfs list."""
    found: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, dash, high = part.partition("-")
        found.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    return tuple(found)


def parse_proc_stat(text: str) -> dict[int, CpuTimes]:
    """Each processor's cumulative times from /proc/stat's ``cpuN`` lines."""
    times: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or not fields:
            continue
        values = [int(value) for value in fields[:8]] + [0] * max(0, 8 - len(fields))
        idle = sum(values[i] for i in IDLE_FIELDS)
        steal = values[STEAL_FIELD]
        total = sum(values)
        # Stolen time is the hypervisor's other guests, not this host's work: busy leaves it out.
        times[int(name[3:])] = CpuTimes(total - idle - steal, total, steal)
    return times


def processor_of(self_stat: str) -> int | None:
    """Field 39 of /proc/self/stat (after the command name, which may hold spaces)."""
    fields = self_stat.rsplit(")", 1)[-1].split()
    return int(fields[36]) if len(fields) > 36 else None


def busy_share(
    before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes], cpus: Sequence[int]
) -> float | None:
    busy = sum(after[c].busy - before[c].busy for c in cpus if c in after and c in before)
    total = sum(after[c].total - before[c].total for c in cpus if c in after and c in before)
    return round(busy / total, 3) if total > 0 else None


def context(
    before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes], cpu: int | None, siblings: Sequence[int]
) -> CpuContext:
    """The calibration's context from the counters around it (pure)."""
    mates = tuple(s for s in siblings if s != cpu)
    others = [c for c in after if c != cpu and c not in mates]
    total = sum(after[c].total - before[c].total for c in after if c in before)
    steal = sum(after[c].steal - before[c].steal for c in after if c in before)
    return CpuContext(
        cpu,
        mates,
        busy_share(before, after, mates) if mates else None,
        busy_share(before, after, others),
        round(steal / total, 3) if total > 0 else None,
    )


def read_times() -> dict[int, CpuTimes] | None:
    try:
        return parse_proc_stat(PROC_STAT.read_text())
    except (OSError, ValueError):
        return None


def observed(before: Mapping[int, CpuTimes] | None) -> CpuContext | None:
    """The context of what ran since ``before`` (``read_times()``), on this process's processor; None
    where /proc says nothing (not Linux)."""
    after = read_times()
    if before is None or after is None:
        return None
    try:
        cpu = processor_of(SELF_STAT.read_text())
    except (OSError, ValueError):
        cpu = None
    siblings: tuple[int, ...] = ()
    if cpu is not None:
        try:
            siblings = parse_cpu_list(Path(TOPOLOGY.format(cpu)).read_text())
        except (OSError, ValueError):
            siblings = ()
    return context(before, after, cpu, siblings)
