"""Whether a run's timing can be trusted: was its GPU shared with another job, or held back by
something the case did not cause? (Its host CPU: ``measure.host_load``.)

Before a measured run the suite waits (``--perf-gpu-wait``, bounded) for the run's GPUs to be
free of foreign processes and throttling, ending the suite's own orphans first. During the run a
watch reads the GPUs' compute processes every few seconds, and the sampler's clock-event reasons
show throttling. A run that met any of it is *contaminated*: its timing and energy are shown, not
judged (``judge.contamination``), and the results history keeps it out of baselines.

Throttling that counts: a hardware slowdown, a thermal slowdown or an external power brake. A card
at its software power cap while it trains is the case's own load, not a neighbour's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trainperf.measure.hygiene import Hygiene, check
from trainperf.measure.nvml import Nvml, Sample
from trainperf.measure.ownership import Orphan, is_ours, sweep_orphans

WAIT_POLL_S = 2.0
WATCH_POLL_S = 2.0
EXTERNAL_THROTTLE = {
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
THROTTLED_SHARE = 0.05
"""A run is throttled when at least this share of its samples show an external reason: a single
sample's flicker at a clock change is not a neighbour."""


def wait_until_clean(
    devices: Sequence[str],
    wait_s: float,
    say: Callable[[str], None],
    read: Callable[[Sequence[str]], Hygiene] = check,
    sweep: Callable[[], list[Orphan]] = sweep_orphans,
) -> tuple[Hygiene, float]:
    """Poll the GPUs until no foreign process holds them and none is throttled, for at most
    ``wait_s``; the last reading and the seconds waited. A foreign process that is an orphan of an
    earlier run of the suite is ended, and said."""
    started = time.monotonic()
    hygiene = read(devices)
    said = False
    while not hygiene.clean:
        if hygiene.foreign:
            for orphan in sweep():
                say(f"[trainperf] ended {orphan.describe()}, left running by an earlier run of the suite")
        waited = time.monotonic() - started
        if waited >= wait_s:
            break
        if not said:
            say(f"[trainperf] waiting up to {wait_s:.0f}s (--perf-gpu-wait): {'; '.join(hygiene.problems())}")
            said = True
        time.sleep(min(WAIT_POLL_S, max(0.0, wait_s - waited)))
        hygiene = read(devices)
    return hygiene, time.monotonic() - started


@dataclass(slots=True)
class ForeignWatch:
    """Reads the run's GPUs' compute processes while it runs: any process not of this session
    (``ownership.is_ours``) that appears is foreign. Call it from the parent's polling loop."""

    devices: Sequence[str]
    tag: str
    interval_s: float = WATCH_POLL_S
    foreign: dict[int, tuple[str, int | None]] = field(default_factory=dict)
    """pid -> (GPU, most memory it was seen to hold)."""
    unresolved: set[int] = field(default_factory=set)
    _next_at: float = 0.0

    def __call__(self, elapsed: float) -> None:
        if elapsed < self._next_at:
            return
        self._next_at = elapsed + self.interval_s
        for device in self.devices:
            for pid, used in Nvml.compute_processes(Nvml.handle(device)):
                self.see(device, pid, used)

    def see(self, device: str, pid: int, used: int | None) -> None:
        ours = is_ours(pid, self.tag)
        if ours is None:
            self.unresolved.add(pid)
        elif not ours:
            _, most = self.foreign.get(pid, (device, None))
            self.foreign[pid] = (device, max(used or 0, most or 0) or None)

    def reasons(self) -> list[str]:
        return [
            f"GPU {device}: foreign process pid {pid}"
            + (f" ({used / 2**30:.1f} GiB)" if used else "")
            + " appeared during the run"
            for pid, (device, used) in sorted(self.foreign.items())
        ]


def throttled_during(samples: dict[str, list[Sample]]) -> list[str]:
    """Each GPU held back by an external reason in at least ``THROTTLED_SHARE`` of its samples."""
    reasons = []
    for device, series in samples.items():
        if not series:
            continue
        hits: dict[str, int] = {}
        for sample in series:
            for bit, name in EXTERNAL_THROTTLE.items():
                if sample.throttle_reasons and sample.throttle_reasons & bit:
                    hits[name] = hits.get(name, 0) + 1
        for name, count in sorted(hits.items()):
            if count / len(series) >= THROTTLED_SHARE:
                reasons.append(
                    f"GPU {device} throttled ({name}) in {count / len(series):.0%} of the run's samples"
                )
    return reasons


def before_reasons(hygiene: Hygiene | None) -> list[str]:
    """What still held the GPUs when the run started, after the wait."""
    if hygiene is None or hygiene.clean:
        return []
    return hygiene.problems(when="when the run started")
