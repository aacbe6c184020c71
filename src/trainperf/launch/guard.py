"""What stands around a child's run on its GPUs: the wait for clean GPUs before it, the watch for
foreign processes while it runs, the record of what contaminated it after, and its progress lines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.ground.settings import Settings
from trainperf.measure.contamination import ForeignWatch, before_reasons, throttled_during, wait_until_clean
from trainperf.measure.host_load import HostLoadWatch
from trainperf.measure.hygiene import Hygiene
from trainperf.measure.nvml import Sample
from trainperf.measure.ownership import owner_tag
from trainperf.run_checks_record import GpuCheck, RunContamination


def check_before(
    settings: Settings,
    say: Callable[[str], None],
    case: Case,
    devices: tuple[str, ...],
    label: str,
    bare: bool,
) -> tuple[GpuCheck | None, Hygiene | None]:
    """Runner hygiene before a child: wait (bounded) for its GPUs to be free of foreign processes
    and throttling; what is left is said, stored, makes the run contaminated, and with
    --perf-require-idle-gpu is an error. The GPU reading and the hygiene it gives."""
    if not devices:
        return None, None
    wait_s = 0.0 if bare else settings.gpu_wait
    hygiene, waited = wait_until_clean(devices, wait_s, say)
    for problem in hygiene.problems():
        say(f"[trainperf] {label}: {problem}")
    if not hygiene.clean and settings.require_idle_gpu:
        raise TrainperfError(
            f"{case.id}: {'; '.join(hygiene.problems())} (--perf-require-idle-gpu): "
            "free the GPU or run without the option"
        )
    return hygiene.record(waited_s=round(waited, 1)), hygiene


def both(*ticks: Callable[[float], None]) -> Callable[[float], None]:
    """One tick that calls each of ``ticks`` in turn."""

    def tick(elapsed: float) -> None:
        for each in ticks:
            each(elapsed)

    return tick


def contamination(
    before: Hygiene | None,
    watch: ForeignWatch | None,
    samples: dict[str, list[Sample]],
    host: HostLoadWatch | None = None,
) -> RunContamination | None:
    """The run's contamination record: its reasons, whether a foreign process shared the GPU (then the
    device-wide memory is not the case's alone either; a neighbour on the host CPU leaves it the
    case's), and whether anything touched the GPU at all (a crowded host CPU leaves its kernel time
    the case's own)."""
    during = watch.reasons() if watch is not None else []
    on_host = host.reasons() if host is not None else []
    on_gpu = [*before_reasons(before), *during, *throttled_during(samples)]
    reasons = [*on_gpu, *on_host]
    if not reasons:
        return None
    foreign = bool(during) or bool(before is not None and before.foreign)
    return RunContamination(reasons=tuple(reasons), foreign_process=foreign, on_gpu=bool(on_gpu))


@dataclass(frozen=True, slots=True)
class Watched:
    """What the watches recorded over one run (each None where there is nothing to record)."""

    host_cpu: dict[str, float] | None = None
    """The host's CPU over the run (``HostLoadWatch.figures``)."""
    contamination: RunContamination | None = None
    """What made the run's timing untrustworthy (``contamination``): a foreign process, throttling."""


@dataclass(slots=True)
class RunWatch:
    """What is watched while one child runs: foreign processes on its GPUs and its host's CPU
    (neither for a bare run, which measures nothing)."""

    gpu: ForeignWatch | None
    host: HostLoadWatch | None

    @classmethod
    def for_run(cls, devices: tuple[str, ...], bare: bool) -> RunWatch:
        gpu = ForeignWatch(devices, owner_tag()) if devices and not bare else None
        return cls(gpu, None if bare else HostLoadWatch())

    def begin(self) -> None:
        if self.host is not None:
            self.host.begin()

    def end(self) -> None:
        if self.host is not None:
            self.host.finish()

    def ticks(self) -> list[Callable[[float], None]]:
        return [watch for watch in (self.gpu, self.host) if watch is not None]

    def record(self, before: Hygiene | None, samples: dict[str, list[Sample]]) -> Watched:
        """The run's ``host_cpu`` figures and its ``contamination`` record, where there are any."""
        figures = self.host.figures() if self.host is not None else {}
        found = contamination(before, self.gpu, samples, self.host)
        return Watched(host_cpu=dict(figures) or None, contamination=found)


class Progress:
    """Prints ``step k/n`` of a running child every ``interval_s``, never more often."""

    def __init__(
        self, say: Callable[[str], None], label: str, steps_path: Path, total: int, interval_s: float
    ) -> None:
        self.say, self.label, self.path, self.total, self.interval = say, label, steps_path, total, interval_s
        self.next_at = interval_s

    def __call__(self, elapsed: float) -> None:
        if self.interval <= 0 or elapsed < self.next_at:
            return
        self.next_at = elapsed + self.interval
        done = 0
        if self.path.is_file():
            with open(self.path, "rb") as handle:
                done = sum(1 for _ in handle)
        phase = f"step {done}/{self.total}" if done else "setting up (model build, first step)"
        self.say(f"[trainperf] {self.label}: {phase}, {elapsed:.0f}s")
