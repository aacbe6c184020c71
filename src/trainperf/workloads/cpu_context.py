"""Where the host index's calibration ran, and how busy the host was around it (Linux; no torch).

On cloud GPU machines fresh children of one case read host indexes about 2x apart, in two groups,
with no relation to their steps' host time (docs/measurements/2026-11-28-h200-core-baselines). A
calibration that shares its core with a busy SMT sibling, or runs while the rest of the host is
busy, reads about half speed: these figures, recorded beside the index, tell those apart from the
CPU's own speed. Each is None where the system does not say.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from trainperf.host_index_record import CpuContext
from trainperf.measure.host_load import HostTimes, read_cpu_times
from trainperf.measure.ownership import PROC, stat_fields

TOPOLOGY = "cpu{}/topology/thread_siblings_list"
"""Under /sys/devices/system/cpu: the processor's SMT siblings."""
SYS_CPU = Path("/sys/devices/system/cpu")
PROCESSOR_FIELD = 36
"""``/proc/<pid>/stat`` field 39 (the processor it last ran on), counted from field 3 as ``stat_fields``."""


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``0,8`` or ``0-1`` or ``3``: the processors of a sysfs list."""
    found: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, dash, high = part.partition("-")
        found.extend(range(int(low), int(high) + 1) if dash else [int(low)])
    return tuple(found)


def processor(pid: int, proc: Path = PROC) -> int | None:
    """The processor ``pid`` last ran on; None where /proc does not say."""
    fields = stat_fields(pid, proc)
    return int(fields[PROCESSOR_FIELD]) if len(fields) > PROCESSOR_FIELD else None


def busy_share(
    before: Mapping[int, HostTimes], after: Mapping[int, HostTimes], cpus: Sequence[int]
) -> float | None:
    busy = sum(after[c].busy - before[c].busy for c in cpus if c in after and c in before)
    total = sum(after[c].total - before[c].total for c in cpus if c in after and c in before)
    return round(busy / total, 3) if total > 0 else None


def context(
    before: Mapping[int, HostTimes], after: Mapping[int, HostTimes], cpu: int | None, siblings: Sequence[int]
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


def observed(
    before: Mapping[int, HostTimes] | None, proc: Path = PROC, sys_cpu: Path = SYS_CPU
) -> CpuContext | None:
    """The context of what ran since ``before`` (``read_cpu_times()``), on this process's processor;
    None where /proc says nothing (not Linux)."""
    after = read_cpu_times(proc)
    if before is None or after is None:
        return None
    cpu = processor(os.getpid(), proc)
    siblings: tuple[int, ...] = ()
    if cpu is not None:
        try:
            siblings = parse_cpu_list((sys_cpu / TOPOLOGY.format(cpu)).read_text())
        except (OSError, ValueError):
            siblings = ()
    return context(before, after, cpu, siblings)
