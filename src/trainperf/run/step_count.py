"""How many steps a case's children run: ``--perf-steps``, its own count, a plan from its baseline's
noise (``--perf-plan-steps``), the baseline's count (like for like), or the default.

A plan keeps what the full length detects. It is the shortest length at which the gate catches a
change of 5/3 of each keyed metric's tolerance (5% for step time) as often as at the baseline's
length, and calls an unchanged run regressed no more often (within 2 points, ``judge.step_power``);
that runs past the step where the baseline's runs reached their memory peaks (so memory reads the
same); and whose data is the full run's first batches in the same order (``ChildSpec.data_steps``).
Where any of that cannot be known, the case runs its full length and the note says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainperf.case import Case
from trainperf.families import family_of
from trainperf.ground.settings import Settings
from trainperf.judge.compare import MIN_STABLE_PAIRS
from trainperf.judge.metrics import (
    DEVICE_MEM_PEAK,
    Kind,
    Metric,
    metrics_of_kind,
    tolerances_from_pyproject,
)
from trainperf.judge.step_power import POWER_MARGIN, MetricPower, power_at
from trainperf.measure.hardware import CPU_CLASS, GpuClass, load_classes
from trainperf.result import CaseResult, requested_steps

DEFAULT_STEPS = {"gpu": 40, "cpu": 16}
MIN_FULL_POWER = 0.5
"""Below this, the full length itself rarely catches the change, and a shorter one matching it
would be matching chance (the gate's power is not monotonic in the steps there)."""
MAX_LENGTHS_TRIED = 12
"""Lengths simulated per case at most (each is about a tenth of a second): the parent plans while
the GPU waits."""


@dataclass(frozen=True, slots=True)
class StepCount:
    """Steps a child runs, the steps' worth of data it trains on when more, and why."""

    steps: int
    data_steps: int | None = None
    note: str | None = None


def step_count(
    case: Case,
    settings: Settings,
    baseline: CaseResult | None,
    metrics: dict[str, Metric],
    memory_gib: float | None,
) -> StepCount:
    """The case's steps: --perf-steps or its own, else a plan (when asked), else the baseline's.
    ``memory_gib``: the memory the case may use (None on the CPU)."""
    if settings.steps:
        # Given on the command line, it wins over the case's own count (a user shortening a
        # 10-step verl case to read it in minutes): said, so that a baseline's length is not a surprise.
        own, given = case.steps, settings.steps
        note = f"steps: {given} (--perf-steps), the case's own is {own}" if own and own != given else None
        return StepCount(given, note=note)
    if case.steps:
        return StepCount(case.steps)
    full = requested_steps(baseline) or DEFAULT_STEPS["cpu" if memory_gib is None else "gpu"]
    if not settings.plan_steps or settings.update_baselines:
        return StepCount(full)
    return plan_steps(case, baseline, metrics, full, memory_gib)


def memory_limit(case: Case, gpu_class: GpuClass) -> float | None:
    """The memory a case may use: its own cap, else its class's; None on the CPU."""
    return None if gpu_class.name == CPU_CLASS else case.memory_cap_gib or gpu_class.memory_gib


def plan_steps(
    case: Case, baseline: CaseResult | None, metrics: dict[str, Metric], full: int, memory_gib: float | None
) -> StepCount:
    """The shortest length that detects what ``full`` steps detect; ``full`` with the reason when
    no shorter one is known to."""
    if (why := _unplannable(case, baseline) or _near_memory_limit(baseline, metrics, memory_gib)) is not None:
        return StepCount(full, note=f"steps not planned ({why}): {full}")
    assert baseline is not None
    data_steps = max(run.data_steps or run.steps_requested or 0 for run in baseline.runs)
    floor = _floor(baseline)
    keyed = {
        name: metrics[name]
        for name, value in baseline.metrics.items()
        if name in metrics and metrics[name].gated and value.keys
    }
    at_full = _powers(keyed, baseline, full)
    if not at_full:
        return StepCount(full, note=f"steps not planned (the baseline has no per-step samples): {full}")
    if weak := [power for power in at_full.values() if power.power < MIN_FULL_POWER]:
        caught = ", ".join(f"{p.metric} {p.change} in {p.power:.0%}" for p in weak)
        return StepCount(
            full, note=f"steps not planned (too noisy: at full length the gate catches {caught}): {full}"
        )
    for length in _lengths(floor, full):
        at_length = _powers(keyed, baseline, length)
        if all(_as_good(at_length.get(name), at_full[name]) for name in at_full):
            return StepCount(length, data_steps, _planned_note(length, full, floor, at_length, at_full))
    return StepCount(full, note=f"steps not planned (no shorter run detects as often): {full}")


def projected_plans(baselines: list[CaseResult], rootdir: Path) -> dict[str, StepCount]:
    """Each baseline's plan as a nightly with --perf-plan-steps would make it, under its class's
    tolerances (``pyproject.toml``'s overrides included); cases that would not be planned are left out."""
    classes = load_classes()
    overrides = tolerances_from_pyproject(rootdir)
    plans = {}
    for baseline in baselines:
        gpu_class = classes.get(baseline.gpu_class)
        full = requested_steps(baseline)
        if gpu_class is None or full is None or baseline.cliff:
            continue
        metrics = gpu_class.metrics(overrides)
        case = baseline.case.as_case()
        plans[baseline.case_id] = plan_steps(case, baseline, metrics, full, memory_limit(case, gpu_class))
    return plans


def _as_good(shorter: MetricPower | None, full: MetricPower) -> bool:
    """Catches the change as often, and calls an unchanged run regressed no more often, within the
    simulation's margin."""
    if shorter is None:
        return False
    return (
        shorter.power >= full.power - POWER_MARGIN and shorter.false_alarm <= full.false_alarm + POWER_MARGIN
    )


def _unplannable(case: Case, baseline: CaseResult | None) -> str | None:
    if not family_of(case.family).data_sized_by_steps:
        return f"{case.family} data is not the same batches at another length"
    if baseline is None:
        return "no baseline"
    if not baseline.runs:
        return (
            "the baseline keeps no run records (a history pooled from results): plans need the class's file"
        )
    if case.gpus > 1:
        return "a multi-GPU case"
    if len(baseline.runs) < 2:
        return "the baseline has one run, so no step's run-to-run noise: re-take it with 3 (the default)"
    gated_memory = [name for name in metrics_of_kind(Kind.MEMORY) if name in baseline.metrics]
    if gated_memory and _memory_peak_steps(baseline) is None:
        return "the baseline does not record where its memory peaked: re-take it"
    return None


def _near_memory_limit(
    baseline: CaseResult | None, metrics: dict[str, Metric], memory_gib: float | None
) -> str | None:
    """Why a case too close to its memory limit runs full length. Growth that the memory gate lets
    pass can still run out of memory at a later step, when the allocator needs one more large
    block: on an H100, Qwen3-8B full fine-tuning at 78.3 of 79.2 GiB with 1 GiB more ran out at
    step 19 of 40, and its 12 planned steps passed. So a plan needs room for that growth."""
    device = baseline.metrics.get(DEVICE_MEM_PEAK) if baseline else None
    if device is None or memory_gib is None:
        return None
    memory = metrics_of_kind(Kind.MEMORY)
    tolerance = max((metrics[name].tolerance for name in memory if name in metrics), default=0.05)
    if device.value * (1 + tolerance) <= memory_gib:
        return None
    return (
        f"its device peak {device.value:.1f} GiB and the {tolerance:.0%} the memory gate lets pass "
        "do not fit "
        f"in {memory_gib:.0f} GiB: an out-of-memory may come at a later step"
    )


def _memory_peak_steps(baseline: CaseResult) -> list[int] | None:
    """Where each run reached its memory peaks; None where a run does not say. A run whose last steps
    were profiled (a baseline's profile summary) may not: the profiler's own memory came after its
    timed steps, and the other runs stand for it."""
    recorded = [run.memory_peak_step for run in baseline.runs]
    unprofiled = [run.memory_peak_step for run in baseline.runs if not run.profiled_steps]
    if all(step is not None for step in recorded):
        return [step for step in recorded if step is not None]
    if unprofiled and all(step is not None for step in unprofiled):
        return [step for step in unprofiled if step is not None]
    return None


def _floor(baseline: CaseResult) -> int:
    """The shortest length worth simulating: past every run's memory peak and warm-up, with room for
    the steps the gate needs and for the warm-up to be told from the steady steps."""
    peak = max(_memory_peak_steps(baseline) or [0])
    warmup = max(run.warmup_steps or 0 for run in baseline.runs)
    return max(peak, warmup + MIN_STABLE_PAIRS, 2 * warmup + 2)


def _lengths(floor: int, full: int) -> list[int]:
    stride = max(1, (full - floor) // MAX_LENGTHS_TRIED + 1)
    return list(range(floor, full, stride))


def _powers(keyed: dict[str, Metric], baseline: CaseResult, steps: int) -> dict[str, MetricPower]:
    powers = {}
    for name, metric in keyed.items():
        if (power := power_at(metric, baseline.metrics[name], steps)) is not None:
            powers[name] = power
    return powers


def _planned_note(
    length: int, full: int, floor: int, at_length: dict[str, MetricPower], at_full: dict[str, MetricPower]
) -> str:
    powers = ", ".join(
        f"{name} {at_length[name].change}: {at_length[name].power:.0%} vs {at_full[name].power:.0%}"
        for name in at_full
    )
    caught = f"a change caught at {length} vs {full} steps: {powers}"
    return f"steps planned: {length} of {full} (floor {floor}; {caught})"


__all__ = [
    "DEFAULT_STEPS",
    "StepCount",
    "memory_limit",
    "plan_steps",
    "projected_plans",
    "step_count",
]
