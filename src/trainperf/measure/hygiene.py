"""Runner hygiene: before a case, is each of its GPUs idle, at full clocks and not throttled?

A noisy neighbour (another job's process on the GPU, a card held down by heat or a power
brake) slows a case exactly as a regression would. It is read through NVML just before the
child starts, stored with the run, and reported beside the verdict; with
``--perf-require-idle-gpu`` it fails the case instead of measuring it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trainperf.measure.nvml import Nvml
from trainperf.run_checks_record import GpuCheck, GpuState

# NVML clocks-event ("throttle") reason bits that mean the card is held below its clocks by
# something other than its own idleness or a setting we chose (nvmlClocksEventReason*). The
# others are benign and ignored: GPU idle 0x1, application clocks 0x2, sync boost 0x10, display
# clock 0x100.
THROTTLE_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


@dataclass(slots=True)
class Hygiene:
    """The verdict on a case's GPUs: who else is on them and what holds them back."""

    states: list[GpuState]
    foreign: dict[str, list[tuple[int, int | None]]] = field(default_factory=dict)
    throttled: dict[str, list[str]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not self.foreign and not self.throttled

    def problems(self, when: str = "before the case") -> list[str]:
        """One line per busy or throttled GPU; ``when`` says at what moment it was read."""
        lines = []
        for device, procs in self.foreign.items():
            held = ", ".join(
                f"pid {pid}" + (f" ({used / 2**30:.1f} GiB)" if used else "") for pid, used in procs
            )
            lines.append(f"GPU {device} busy {when}: {held}")
        for device, reasons in self.throttled.items():
            lines.append(f"GPU {device} throttled {when}: {', '.join(reasons)}")
        return lines

    def record(self, waited_s: float | None = None) -> GpuCheck:
        """The reading as a run stores it (``gpu_before``), with the wait for the GPUs to come clean."""
        return GpuCheck(
            gpus=tuple(self.states),
            foreign_processes={device: tuple(procs) for device, procs in self.foreign.items()},
            throttled={device: tuple(reasons) for device, reasons in self.throttled.items()},
            clean=self.clean,
            waited_s=waited_s,
        )


def throttle_names(reasons: int | None) -> list[str]:
    """The reasons in ``reasons`` that mean a held-back card (idle and settings are not)."""
    if not reasons:
        return []
    return [name for bit, name in THROTTLE_REASONS.items() if reasons & bit]


def judge(states: Sequence[GpuState], own_pids: Sequence[int] = ()) -> Hygiene:
    """Foreign processes (any compute context not ours) and throttling, per GPU (pure)."""
    hygiene = Hygiene(list(states))
    mine = set(own_pids)
    for state in states:
        foreign = [(pid, used) for pid, used in state.processes if pid not in mine]
        if foreign:
            hygiene.foreign[state.device] = foreign
        reasons = throttle_names(state.clock_event_reasons)
        if reasons:
            hygiene.throttled[state.device] = reasons
    return hygiene


def read_nvml(device: str) -> GpuState:
    handle = Nvml.handle(device)
    sample = Nvml.sample(handle)
    return GpuState(
        device=device,
        processes=tuple(Nvml.compute_processes(handle)),
        mem_used_b=sample.mem_used_b,
        sm_clock_mhz=sample.sm_clock_mhz,
        sm_clock_max_mhz=Nvml.max_sm_clock_mhz(handle),
        power_limit_w=Nvml.power_limit_w(handle),
        temperature_c=sample.temperature_c,
        clock_event_reasons=sample.throttle_reasons,
    )


def check(devices: Sequence[str], read: Callable[[str], GpuState] = read_nvml) -> Hygiene:
    """Read and judge the case's GPUs; this pytest process itself never counts as foreign."""
    return judge([read(device) for device in devices], own_pids=(os.getpid(),))
