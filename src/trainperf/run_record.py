"""One fresh child's record in its case's result (``CaseResult.runs``): its exit, steps, warm-up,
stalls, timings, the GPUs' state around it, its logs' folder.

Three layers fill it in turn: the measurement (``measure.measurement``: steps, energy, clocks,
kernel time, memory), the launcher (``launch.launcher``: exit, timeline, GPUs, idle check, trace)
and the case runner (why the run was made, its turn on a shared host). Every field is optional,
because each writer sets only what it saw and files written before a field was kept lack it:
None is "not recorded", and a key not recorded is not written, so ``to_dict`` gives a stored
file's runs back as they were.

The objects a run keeps of other parts are records of their own, read here from the stored objects
and written back as they were (``run_checks_record``: the GPUs before the run, idle after it, its
contamination and host turn; ``host_index_record``; ``child_report_record``: a framework's start-up,
an allocator snapshot; ``trace_record``; ``workloads.protocol.CachedInput``). A stored object that
would not write back as it was is kept aside whole, like any value that does not read as its field;
the cost report still reads a kept-aside list of cached inputs entry by entry
(``CachedInput.read_all``), so that a malformed entry in a hand-edited result hides none of the
others.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints

from trainperf.child_report_record import FrameworkSetup, MemorySnapshot
from trainperf.host_index_record import HostIndex
from trainperf.jsonio import stored_int, stored_number_or_none
from trainperf.run_checks_record import GpuCheck, HostTurn, IdleCheck, RunContamination
from trainperf.trace_record import TraceRecord
from trainperf.workloads.protocol import CachedInput


@dataclass(frozen=True, slots=True)
class KernelShare:
    """One kernel's GPU time per step (its name shortened, its group: GEMM, attention, ...)."""

    name: str
    group: str
    ms: float
    count: float


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """One GPU's figures in a multi-GPU run (``measure.multi_gpu``): its device, its rank, and what was
    measured on it, by metric name (``device_mem_peak_gib``, ``power_mean_w``, ``energy_steady_j``...)."""

    gpu: str
    rank: int
    figures: Mapping[str, float] = field(default_factory=dict)
    unread: Mapping[str, Any] = field(default_factory=dict)
    """Values that are no figure, as the file had them: written back, never read."""

    def to_dict(self) -> dict[str, Any]:
        return {**self.unread, "gpu": self.gpu, "rank": self.rank, **self.figures}

    @classmethod
    def from_dict(cls, data: Any) -> GpuFigures | None:
        """The row, or None where it names no GPU and rank."""
        if not isinstance(data, dict) or not isinstance(data.get("gpu"), str):
            return None
        if (rank := stored_int(data.get("rank"))) is None:
            return None
        named = {key: value for key, value in data.items() if key not in ("gpu", "rank")}
        figures = {key: value for key, value in named.items() if stored_number_or_none(value) is not None}
        return cls(data["gpu"], rank, figures, {k: v for k, v in named.items() if k not in figures})


@dataclass(slots=True)
class RunRecord:
    """What one fresh child of a case did and what the parent measured around it."""

    # Written by the launcher for every run.
    dir: str | None = None
    """The child's folder, relative to the run folder: its spec, steps, samples and logs."""
    returncode: int | None = None
    steps_requested: int | None = None
    wall_s: float | None = None
    """From the launch to the child's exit."""
    outcome: str | None = None
    """The child's ``case.Outcome`` value."""
    timeline: dict[str, float] | None = None
    """The child's own timeline (build, setup and training seconds, or wall-clock marks)."""
    environment: str | None = None
    python: str | None = None
    """The interpreter the child ran in (a portable path)."""
    data_steps: int | None = None
    """The steps of data a planned run was built with (``run.step_count``), where not its own steps."""
    memory_snapshot: MemorySnapshot | None = None
    """The allocator snapshot's files (``workloads.profiling``), where one was taken."""
    setup: FrameworkSetup | None = None
    """Where a framework's start-up went (verl's ``workloads.rl_verl``); its ``line`` is shown."""
    cached_inputs: list[CachedInput] | None = None
    """``workloads.protocol.CachedInput`` records: what a fresh runner writes before this case starts."""
    stderr_tail: str | None = None
    """The end of the child's stderr, for a run that did not end ok."""
    gpus: list[str] | None = None
    gpu_wait_s: float | None = None
    """How long the run waited for its GPUs' locks."""
    gpu_before: GpuCheck | None = None
    """The GPUs' hygiene reading before the launch (``measure.hygiene``) and the wait for it."""
    host_cpu: dict[str, float] | None = None
    """The host's CPU over the run (``measure.host_load``): busy, steal, foreign cores, cores."""
    contamination: RunContamination | None = None
    """What shared the GPU or the host with the run (``launch.guard.contamination``)."""

    # Written by the measurement, where the child left steps to measure.
    steps: int | None = None
    """Timed steps (the profiled and kernel-window steps are not timed)."""
    profiled_steps: int | None = None
    kernel_window_steps: int | None = None
    framework_mfu_actor: float | None = None
    """The framework's own MFU (verl's ``perf/mfu/actor``), median of the steady steps."""
    warmup_steps: int | None = None
    steady_steps: int | None = None
    stalls: int | None = None
    """Steady steps far slower than the others (``stats.summarize``'s outliers)."""
    step_time_min_s: float | None = None
    step_time_p90_s: float | None = None
    step_time_robust_cv: float | None = None
    first_step_s: float | None = None
    energy_method: str | None = None
    """How the steady energy was read: the board's energy counter or the integral of sampled power."""
    energy_steady_j: float | None = None
    energy_samples: list[float] | None = None
    """Energy per token of each steady step, where the board counts energy."""
    sm_clock_min_mhz: float | None = None
    sm_clock_median_mhz: float | None = None
    clock_event_reasons: int | None = None
    """NVML's clock-event reason bits seen over the steady steps, or-ed."""
    kernel_time: str | None = None
    """Why kernel time was not measured, where it was asked for and is missing."""
    kernel_groups_ms: dict[str, float] | None = None
    kernel_top: list[KernelShare] | None = None
    kernel_roles_ms: dict[str, float] | None = None
    kernel_clock: str | None = None
    """How the child read its kernel records (``cupti``, ``profiler``)."""
    kernel_read_back_s: float | None = None
    kernel_clock_note: str | None = None
    """Why the kernel records were not read as asked, or how they had to be converted."""
    host_index: HostIndex | None = None
    """The child's host-speed probe (``workloads.host_index``): its ``index`` is a metric."""
    sample_interval_median_s: float | None = None
    samples: int | None = None
    """NVML samples taken over the run."""
    host_peak_rss_profiled_gib: float | None = None
    """The child's host memory peak where a profiler's records inflated it (so not a metric)."""
    host_peak_rss_with_build_gib: float | None = None
    """The child's host memory peak where it still held a cache entry's build (``synth.cache``)."""
    memory_peak_step: int | None = None
    """The step by whose end every memory peak was reached (``measurement.memory_peak_step``)."""
    memory_peak_late: bool = False
    """True: a memory peak came after the last step; stored as a null ``memory_peak_step``."""
    per_gpu: list[GpuFigures] | None = None
    """A multi-GPU run's figures per GPU (``measure.multi_gpu``): keyed by metric name."""
    device_mem_total_gib: float | None = None

    # Written by the launcher after the measurement.
    trace: TraceRecord | None = None
    """A traced run's trace record (``traces.collect``), or its ``error``."""
    idle_after: IdleCheck | list[IdleCheck] | None = None
    """Whether the GPU's memory came back to idle after the run (a list for several GPUs)."""

    # Written by the case runner.
    purpose: str | None = None
    """Why the run was made (``run.finished_runs``: measurement, confirmation, cliff-probe...)."""
    host_turn: HostTurn | None = None
    """Its turn on a shared host (``measure.host_turns``): alone or not, how long it waited."""

    unread: dict[str, Any] = field(default_factory=dict)
    """Keys this trainperf does not read (a newer one's, another tool's) and values it cannot read as
    its field (a null, another type), as the file had them: written back, never read, so that
    rewriting a result (a merge, a resumed run) loses nothing of it."""

    def to_dict(self) -> dict[str, Any]:
        """The recorded keys only, as they have always been stored."""
        recorded = {
            name: _stored(value) for name in _STORED_FIELDS if (value := getattr(self, name)) is not None
        }
        if self.memory_peak_late and self.memory_peak_step is None:
            recorded["memory_peak_step"] = None
        return self.unread | recorded

    @classmethod
    def from_dict(cls, data: Any) -> RunRecord:
        """Read a stored run; what it lacks stays None, what does not read as its field is kept aside."""
        if not isinstance(data, dict):
            raise TypeError(f"a run must be an object, not {type(data).__name__}")
        read: dict[str, Any] = {}
        unread: dict[str, Any] = {}
        for key, value in data.items():
            if key == "kernel_top":
                value = _kernel_shares(value)
            elif key in _RECORDS:
                value = _records(value, _RECORDS[key])
            if key in _STORED_FIELDS and value is not None and _reads_as(value, _STORED_FIELDS[key]):
                read[key] = value
            else:
                unread[key] = data[key]
        late = "memory_peak_step" in data and data["memory_peak_step"] is None
        if late:
            del unread["memory_peak_step"]
        return cls(**read, memory_peak_late=late, unread=unread)


_RECORDS: dict[str, Callable[[Any], Any]] = {
    "gpu_before": GpuCheck.from_dict,
    "contamination": RunContamination.from_dict,
    "idle_after": IdleCheck.from_dict,
    "host_turn": HostTurn.from_dict,
    "host_index": HostIndex.from_dict,
    "trace": TraceRecord.from_dict,
    "setup": FrameworkSetup.from_dict,
    "memory_snapshot": MemorySnapshot.from_dict,
    "per_gpu": GpuFigures.from_dict,
    "cached_inputs": CachedInput.from_dict,
}
"""The stored objects read as records of their own, by their readers."""


def _records(value: Any, read: Callable[[Any], Any]) -> Any:
    """A stored object (or list of them) as its record(s), where each writes back as it was stored;
    else the value as it is, which then does not read as its field and is kept aside."""
    if isinstance(value, list):
        records = [read(item) for item in value]
        written = [record.to_dict() if record is not None else None for record in records]
        return records if written == value else value
    record = read(value)
    return record if record is not None and record.to_dict() == value else value


def _stored(value: Any) -> Any:
    """A field's value as the file stores it: a record as its object, lists and mappings item by item."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, list):
        return [_stored(item) for item in value]
    if isinstance(value, dict):
        return {key: _stored(item) for key, item in value.items()}
    return value


def _kernel_shares(value: Any) -> Any:
    """Stored top kernels as records where each entry has exactly their fields, else as they are."""
    names = {f.name for f in dataclasses.fields(KernelShare)}
    if isinstance(value, list) and all(isinstance(e, dict) and set(e) == names for e in value):
        return [KernelShare(**entry) for entry in value]
    return value


def _reads_as(value: Any, hint: Any) -> bool:
    """Whether a JSON value is of the field type ``hint``; an int reads as a float (a median of
    integer clock readings is stored as one)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_reads_as(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(_reads_as(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(_reads_as(item, args[1]) for item in value.values())
    if hint is Any:
        return True
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


_STORED_FIELDS: dict[str, Any] = {
    name: hint
    for name, hint in get_type_hints(RunRecord).items()
    if name not in ("unread", "memory_peak_late")
}
"""Each stored key's field type, read from the record's annotations."""
