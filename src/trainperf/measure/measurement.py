"""From raw observations to metrics: a child's steps and the parent's NVML samples (no I/O).

Per fresh child: warm-up detected (``stats.steady_start``), steady-state step times and
throughput, memory peaks, and energy over exactly the steady window, read from the board's
energy counter (interpolated at the window's edges) or, where a board has none, from the
integral of sampled power. Repeats are then pooled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from trainperf.host_index_record import HostIndex
from trainperf.judge import stats
from trainperf.judge.metrics import (
    BUSY_SHARE,
    ENERGY_PER_TOKEN,
    HOST_INDEX,
    HOST_SIDE_SHARE,
    HOST_SPEED,
    HOST_TIME,
    KERNEL_TIME,
    METRICS,
    PHASE_REMAINDER,
    SM_CLOCK,
    STEP_TIME,
    STEP_TIME_P25,
    THROUGHPUT_PER_GPU,
    TOKENS_PER_S,
    Pooling,
    phase_metric_name,
    resolve_metric,
)
from trainperf.measure.energy import (
    per_step_energy_per_token,
    spans_energy_j,
    step_intervals,
)
from trainperf.measure.nvml import Sample
from trainperf.measure.step_parts import step_parts
from trainperf.result import MetricValue
from trainperf.run_record import RunRecord
from trainperf.trace_record import TraceRecord
from trainperf.traces.collect import collect
from trainperf.traces.profile_window import TracePlan
from trainperf.workloads.protocol import CACHED_INPUTS, CachedInput

GIB = 2**30


@dataclass(slots=True)
class RunMeasurement:
    """What one fresh child measured."""

    metrics: dict[str, float]
    step_samples: list[float]
    throughput_samples: list[float]
    info: RunRecord = field(default_factory=RunRecord)
    """The run's record as far as its measurement fills it (the launcher adds the rest)."""
    step_keys: list[str] = field(default_factory=list)
    """``step:tokens`` of each steady step: pairs samples with the baseline's same batch."""
    extra_samples: dict[str, list[float]] = field(default_factory=dict)
    """Per-steady-step samples of further metrics (phases, the framework's throughput)."""
    extra_keys: dict[str, list[str]] = field(default_factory=dict)
    """The keys of those samples that are not the steady steps' (kernel time: its window's steps)."""

    def to_dict(self) -> dict[str, Any]:
        """As a cut case's kept runs store it (``run.finished_runs``)."""
        return asdict(self) | {"info": self.info.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> RunMeasurement:
        if not isinstance(data, dict):
            raise TypeError(f"a run's measurement must be an object, not {type(data).__name__}")
        return cls(**(data | {"info": RunRecord.from_dict(data.get("info") or {})}))


def phase_metrics(steady: Sequence[dict[str, Any]]) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Per-phase figures of the steady steps that carry ``phases`` (RL families: generation, log
    probabilities, updates...): each phase's median and per-step samples, the remainder (step
    minus its phases) likewise, the framework's own ``throughput`` where steps report it, and the host's
    speed at each step's edge (its mean) where every step has it."""
    samples: dict[str, list[float]] = {}
    for step in steady:
        phases = step.get("phases")
        if phases:
            for phase, seconds in phases.items():
                samples.setdefault(phase_metric_name(phase), []).append(float(seconds))
            samples.setdefault(PHASE_REMAINDER, []).append(
                float(step["duration_s"]) - sum(map(float, phases.values()))
            )
        if step.get("throughput") is not None:
            samples.setdefault(THROUGHPUT_PER_GPU, []).append(float(step["throughput"]))
    values = {name: stats.median(values) for name, values in samples.items()}
    speeds = [float(step["host_speed"]) for step in steady if step.get("host_speed")]
    if len(speeds) == len(steady) and speeds:
        # The mean, not the median: a host that flips between two speeds reads as its mix of them.
        samples[HOST_SPEED] = speeds
        values[HOST_SPEED] = sum(speeds) / len(speeds)
    return values, samples


def framework_mfu(steady: Sequence[dict[str, Any]]) -> float | None:
    """The framework's own model FLOPs utilisation (verl's ``perf/mfu/actor``), median of the steady
    steps that log it; None where none does."""
    values = [float(step["mfu_actor"]) for step in steady if step.get("mfu_actor") is not None]
    return stats.median(values) if values else None


def measure_run(
    child: dict[str, Any], samples: Sequence[Sample], *, samples_per_step: int, idle_mem_b: int | None
) -> RunMeasurement:
    # Steps under a profiler (--perf-trace, the kernel clock's window) run slower by its overhead:
    # never timed.
    recorded = child.get("steps") or []
    kernel_window = [s for s in recorded if s.get("kernel_window")]
    steps = [s for s in recorded if not s.get("profiled") and not s.get("kernel_window")]
    run = RunMeasurement({}, [], [], RunRecord(steps=len(steps)))
    if profiled := sum(1 for s in recorded if s.get("profiled")):
        run.info.profiled_steps = profiled
    if kernel_window:
        run.info.kernel_window_steps = len(kernel_window)
    if len(steps) >= 2:
        first = _measure_steady_steps(run, steps, samples_per_step)
        spans = step_intervals(steps[first - 1 :])
        _measure_steady_energy(run, samples, steps[first - 1 :], spans)
        _measure_steady_power(run, samples, spans)
        _measure_step_parts(run, steps[first:], kernel_window, child.get("kernel_time"))
    if (host_index := HostIndex.from_dict(child.get("host_index"))) is not None and host_index.index:
        run.metrics[HOST_INDEX] = float(host_index.index)
        run.info.host_index = host_index
    all_powers = [s.power_w for s in samples if s.power_w is not None]
    if all_powers:
        run.metrics["power_peak_w"] = max(all_powers)
    _measure_memory(run, child.get("memory") or {}, samples, idle_mem_b)
    if _built_in_peak(child) and "host_peak_rss_gib" in run.metrics:
        # A cache entry written by this child, whose peak memory could not be cleared after it: the
        # peak is the build's (synth.cache.forget_peak_rss), kept aside like a profiled run's.
        run.info.host_peak_rss_with_build_gib = run.metrics.pop("host_peak_rss_gib")
    if profiled and "host_peak_rss_gib" in run.metrics:
        # The profiler holds every kernel and operator record of its steps in the child's memory
        # until they are read back (3.0 -> 7.7 GiB on a TRL GRPO run): the process's peak is the
        # profiler's, not the workload's, and would move the case's host-memory figure by itself.
        run.info.host_peak_rss_profiled_gib = run.metrics.pop("host_peak_rss_gib")
    if steps:
        run.info.memory_peak_step = memory_peak_step(steps, child.get("memory") or {}, samples)
        run.info.memory_peak_late = run.info.memory_peak_step is None
    return run


MEMORY_PEAK_CLOSE = 0.001
"""A memory figure counts as at its peak within 0.1% of it: the device's last few MiB can come late
in a run (a library workspace, one more allocator block) and sit far inside every memory tolerance."""


def memory_peak_step(
    steps: Sequence[dict[str, Any]], memory: dict[str, Any], samples: Sequence[Sample]
) -> int | None:
    """The step by whose end the run had reached (within ``MEMORY_PEAK_CLOSE``) every memory peak
    it reports: the allocator's allocated and reserved peaks and the device's sampled one; 0 when it
    reports none, None when a peak came after its last step. A shorter run of the same batches
    reads the same memory only if it runs this far (``--perf-plan-steps``)."""
    reached: list[int | None] = []
    if memory.get("peak_allocated_b") is not None:
        reached.append(_first_step(steps, "max_allocated_b", memory["peak_allocated_b"]))
    if memory.get("peak_reserved_b") is not None:
        reached.append(_first_step(steps, "reserved_b", memory["peak_reserved_b"]))
    if samples:
        peak = max(s.mem_used_b for s in samples) * (1 - MEMORY_PEAK_CLOSE)
        at = next(s.t for s in samples if s.mem_used_b >= peak)
        reached.append(next((int(step["step"]) for step in steps if float(step["t_end"]) >= at), None))
    if any(step is None for step in reached):
        return None
    return max((step for step in reached if step is not None), default=0)


def _first_step(steps: Sequence[dict[str, Any]], key: str, peak: float) -> int | None:
    close = peak * (1 - MEMORY_PEAK_CLOSE)
    return next((int(step["step"]) for step in steps if float(step.get(key) or 0) >= close), None)


def _measure_steady_steps(run: RunMeasurement, steps: Sequence[dict[str, Any]], samples_per_step: int) -> int:
    """Step time, throughput and phases over the steady steps (after the detected warm-up), with
    their per-step samples and keys; returns the index of the first steady step."""
    durations = [float(s["duration_s"]) for s in steps]
    tokens = [float(s["tokens"]) for s in steps]
    metrics = run.metrics
    first = stats.steady_start(durations, tokens if all(tokens) else None)
    steady = steps[first:]
    steady_time = sum(durations[first:])
    steady_tokens = sum(tokens[first:])
    run.step_samples = durations[first:]
    run.throughput_samples = [t / d for t, d in zip(tokens[first:], durations[first:]) if d > 0]
    summary = stats.summarize(run.step_samples)
    metrics[STEP_TIME] = summary.median
    metrics[STEP_TIME_P25] = stats.quantile(run.step_samples, 0.25)
    metrics[TOKENS_PER_S] = steady_tokens / steady_time if steady_time else 0.0
    metrics["samples_per_hour"] = (
        len(steady) * samples_per_step * 3600.0 / steady_time if steady_time else 0.0
    )
    metrics["warmup_s"] = sum(durations[:first])
    phase_values, run.extra_samples = phase_metrics(steady)
    metrics.update(phase_values)
    if (own_mfu := framework_mfu(steady)) is not None:
        run.info.framework_mfu_actor = own_mfu
    run.info.warmup_steps = first
    run.info.steady_steps = len(steady)
    run.info.stalls = summary.outliers
    run.info.step_time_min_s = summary.minimum
    run.info.step_time_p90_s = summary.p90
    run.info.step_time_robust_cv = summary.robust_cv
    run.info.first_step_s = durations[0]
    run.step_keys = [f"{int(s['step'])}:{int(s['tokens'])}" for s in steady]
    return first


def _measure_steady_energy(
    run: RunMeasurement,
    samples: Sequence[Sample],
    edges: Sequence[dict[str, Any]],
    spans: Sequence[tuple[float, float]],
) -> None:
    """Energy per token over the steady steps' spans, and per steady step where the board counts energy;
    ``edges`` are the steady steps after the step that closes the warm-up."""
    steady_tokens = sum(float(s["tokens"]) for s in edges[1:])
    energy, method = spans_energy_j(samples, spans)
    if energy is not None and steady_tokens:
        run.metrics[ENERGY_PER_TOKEN] = energy / steady_tokens
        run.info.energy_method = method
        run.info.energy_steady_j = energy
        energy_samples = per_step_energy_per_token(samples, edges)
        if energy_samples:
            run.info.energy_samples = energy_samples


def _measure_steady_power(
    run: RunMeasurement, samples: Sequence[Sample], spans: Sequence[tuple[float, float]]
) -> None:
    """Mean power, the SM clock and the clock-event reasons seen over the steady steps' spans."""
    in_window = [s for s in samples if any(start <= s.t <= end for start, end in spans)]
    powers = [s.power_w for s in in_window if s.power_w is not None]
    if powers:
        run.metrics["power_mean_w"] = sum(powers) / len(powers)
    clocks = [s.sm_clock_mhz for s in in_window if s.sm_clock_mhz is not None]
    if clocks:
        run.info.sm_clock_min_mhz, run.info.sm_clock_median_mhz = min(clocks), stats.median(clocks)
        run.metrics[SM_CLOCK] = float(stats.median(clocks))
    reasons = 0
    for s in in_window:
        reasons |= s.throttle_reasons or 0
    run.info.clock_event_reasons = reasons


def _measure_step_parts(
    run: RunMeasurement, steady: Sequence[dict[str, Any]], window: Sequence[dict[str, Any]], record: Any
) -> None:
    """Kernel time per window step, with the steps' keys, and the host's share of the timed steps, where
    the child recorded the device's work; each group's GPU time and the top kernels; else why not."""
    parts, why = step_parts(steady, window, record)
    if parts is None:
        if why:
            run.info.kernel_time = why
        return
    run.metrics[KERNEL_TIME] = parts.kernel_median
    run.metrics[HOST_TIME] = parts.host_ms
    run.extra_samples[KERNEL_TIME] = parts.kernel_ms
    run.extra_keys[KERNEL_TIME] = parts.keys
    run.info.kernel_groups_ms = parts.groups_ms
    run.info.kernel_top = parts.top
    if parts.roles_ms:
        run.info.kernel_roles_ms = parts.roles_ms
    if parts.clock:
        run.info.kernel_clock = parts.clock
        run.info.kernel_read_back_s = parts.read_back_s
    if parts.clock_note:
        run.info.kernel_clock_note = parts.clock_note


def _built_in_peak(child: dict[str, Any]) -> bool:
    records = [CachedInput.from_dict(raw) for raw in child.get(CACHED_INPUTS) or []]
    return any(record is not None and record.build_in_peak_rss for record in records)


def _measure_memory(
    run: RunMeasurement, memory: dict[str, Any], samples: Sequence[Sample], idle_mem_b: int | None
) -> None:
    """The framework's and the host's memory peaks, and the device's over its idle use, with how
    often it was sampled."""
    if "peak_allocated_b" in memory:
        run.metrics["peak_allocated_gib"] = memory["peak_allocated_b"] / GIB
        run.metrics["peak_reserved_gib"] = memory["peak_reserved_b"] / GIB
    if memory.get("host_peak_rss_b"):
        run.metrics["host_peak_rss_gib"] = memory["host_peak_rss_b"] / GIB
    if samples:
        peak_used = max(s.mem_used_b for s in samples)
        run.metrics["device_mem_peak_gib"] = (peak_used - (idle_mem_b or 0)) / GIB
        intervals = [b.t - a.t for a, b in pairwise(samples)]
        if intervals:
            run.info.sample_interval_median_s = stats.median(intervals)
        run.info.samples = len(samples)


def run_metrics(run: RunMeasurement) -> dict[str, MetricValue]:
    """One run's metrics, each with the per-step samples behind it and their step keys."""
    samples = {
        STEP_TIME: run.step_samples,
        TOKENS_PER_S: run.throughput_samples,
        ENERGY_PER_TOKEN: run.info.energy_samples or [],
        **run.extra_samples,
    }
    values = {}
    for name, value in run.metrics.items():
        behind = samples.get(name) or None
        own = run.extra_keys.get(name, run.step_keys)
        keys = own if behind is not None and len(own) == len(behind) else None
        values[name] = MetricValue(
            value, METRICS[name].unit if name in METRICS else "", behind, [value], keys
        )
    return values


def pooling_of(name: str) -> Pooling:
    """How a metric's runs pool, as its definition says (a phase's: the median of its runs)."""
    metric = resolve_metric(METRICS, name)
    return metric.pooling if metric is not None else Pooling.MEDIAN_OF_RUNS


def merge_metric(name: str, values: Sequence[MetricValue]) -> MetricValue:
    """Several fresh runs of one metric as one value: samples, keys and per-run values concatenated,
    the value pooled as the metric's definition says (the step-time quartile in ``pool_runs``).
    Keys are kept only where every sample has one, so that pairing with a baseline stays exact.
    """
    per_run = [v for value in values for v in (value.per_run or [value.value])]
    samples = [s for value in values for s in (value.samples or [])] or None
    keys = [k for value in values for k in (value.keys or [])] or None
    if keys is not None and (samples is None or len(keys) != len(samples)):
        keys = None
    pooling = pooling_of(name)
    if pooling is Pooling.MEDIAN_OF_STEPS and samples:
        center = stats.median(samples)
    elif pooling is Pooling.MAX_OF_RUNS:
        center = max(per_run)
    else:
        center = stats.median(per_run)
    return MetricValue(center, values[0].unit, samples, per_run, keys)


def collect_trace(
    captured: dict[str, Any], plan: TracePlan, root: Path, run: RunMeasurement | None
) -> TraceRecord | None:
    """A traced run's trace record (``traces.collect``), its profiled steps' busy and host-side
    shares added to the run's metrics: where a step's time goes, as figures a change in gates. Only
    a profile of whole steps counts (a verl profile covers one stage of a step, whose shares would
    read as the step's)."""
    trace = collect(captured, plan, root)
    profile = trace.get("profile") or {}
    step_ms = float(profile.get("step_ms") or 0.0)
    if run is not None and step_ms > 0 and not profile.get("scope"):
        run.metrics[BUSY_SHARE] = 100 * float(profile.get("busy_ms") or 0.0) / step_ms
        run.metrics[HOST_SIDE_SHARE] = 100 * float(profile.get("host_side_ms") or 0.0) / step_ms
    return TraceRecord.from_dict(trace)


def pool_runs(runs: Sequence[RunMeasurement]) -> dict[str, MetricValue]:
    """Pool repeats (``merge_metric`` per metric); a step-time quartile from all pooled steps."""
    per_run = [run_metrics(run) for run in runs]
    names = sorted({name for metrics in per_run for name in metrics})
    pooled = {name: merge_metric(name, [m[name] for m in per_run if name in m]) for name in names}
    steps = pooled[STEP_TIME].samples if STEP_TIME in pooled else None
    for name, value in pooled.items():
        if steps and pooling_of(name) is Pooling.STEP_TIME_QUARTILE:
            value.value = stats.quantile(steps, 0.25)
    return pooled
