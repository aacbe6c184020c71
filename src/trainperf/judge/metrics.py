"""The metric registry: every figure a case reports is defined once here, with its kind, unit,
titles, how repeats pool, its good direction and its tolerance. The rest of the package reads
these definitions: the measurement pools by them, the judge gates by them, the reports title their
columns with them and the step plan, diagnosis and contamination pick metrics by kind.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.judge.metric_types import Across, Direction, Kind, Metric, Part, Pooling

# The metrics other modules pick by meaning, spelled once.
STEP_TIME = "step_time_s"
STEP_TIME_P25 = "step_time_p25_s"
TOKENS_PER_S = "tokens_per_s"
THROUGHPUT_PER_GPU = "throughput_per_gpu"
SAMPLES_PER_HOUR = "samples_per_hour"
PEAK_ALLOCATED = "peak_allocated_gib"
DEVICE_MEM_PEAK = "device_mem_peak_gib"
ENERGY_PER_TOKEN = "energy_per_token_j"
POWER_MEAN = "power_mean_w"
BUSY_SHARE = "busy_pct"
HOST_SIDE_SHARE = "host_side_pct"
KERNEL_TIME = "kernel_ms"
HOST_TIME = "host_ms"
HOST_INDEX = "host_index"
HOST_SPEED = "host_speed"
SM_CLOCK = "sm_clock_mhz"


_REGISTRY: tuple[Metric, ...] = (
    Metric(
        name=STEP_TIME,
        kind=Kind.TIMING,
        unit="s",
        column="step s",
        label="step time (s)",
        direction=Direction.LOWER,
        tolerance=0.03,
        pooling=Pooling.MEDIAN_OF_STEPS,
        timing=True,
        description="median steady-state step time (warm-up detected and excluded); judged step by step "
        "against the baseline's same batches",
    ),
    Metric(
        name=STEP_TIME_P25,
        kind=Kind.TIMING,
        unit="s",
        column="step p25 s",
        label="step time, lower quartile (s)",
        direction=Direction.LOWER,
        tolerance=0.05,
        pooling=Pooling.STEP_TIME_QUARTILE,
        timing=True,
        gated=False,
        description="lower quartile of steady-state step times",
    ),
    Metric(
        name=KERNEL_TIME,
        kind=Kind.TIMING,
        unit="ms",
        column="kernel ms",
        label="GPU kernel time per step (ms)",
        direction=Direction.LOWER,
        # 1.5 times the widest spread measured across H100s of one class: 0.53% over six runs on four
        # GPUs for the maxlen case, 0.46% over three machines for a QLoRA step (docs/verdicts.md).
        tolerance=0.008,
        pooling=Pooling.MEDIAN_OF_STEPS,
        timing=True,
        part=Part.DEVICE,
        description="time the GPU ran the step's kernels, memcpys and memsets (streams merged), from the "
        "device's own activity records; judged step by step against the class's baseline, on any runner",
    ),
    Metric(
        name=HOST_TIME,
        kind=Kind.TIMING,
        unit="ms",
        column="host ms",
        label="host time per step (ms)",
        direction=Direction.LOWER,
        tolerance=0.03,
        abs_tolerance=5.0,
        timing=True,
        gated=False,
        part=Part.HOST,
        description="the host's share of a step: the median step time less the median kernel time of the "
        "window (the GPU waiting on Python, launches, data, the allocator); shown beside step time, which "
        "gates it on the runner's own reference",
    ),
    Metric(
        name=HOST_INDEX,
        kind=Kind.SPEED,
        unit="ops/us",
        column="host idx",
        label="host speed index (ops/us)",
        direction=Direction.HIGHER,
        tolerance=0.05,
        gated=False,
        description="a fixed calibration of the host's CPU before the case (Python and operator dispatch): "
        "where it moved beyond its own noise, host time is shown, not gated",
    ),
    Metric(
        name=HOST_SPEED,
        kind=Kind.SPEED,
        unit="ops/us",
        column="host speed",
        label="host speed through the steps (ops/us)",
        direction=Direction.HIGHER,
        tolerance=0.05,
        gated=False,
        description="interpreter work timed at every step's edge, its mean over the steady steps: it picks "
        "the steps host time is judged over, never whether it is (the case's own work slows it too)",
    ),
    Metric(
        name=SM_CLOCK,
        kind=Kind.SPEED,
        unit="MHz",
        column="SM MHz",
        label="SM clock over the steady steps (MHz)",
        direction=Direction.HIGHER,
        tolerance=0.02,
        gated=False,
        part=Part.DEVICE,
        description="median SM clock sampled over the steady steps (NVML): a down-clocked GPU explains "
        "slower kernels, which are then shown, not gated",
    ),
    Metric(
        name=TOKENS_PER_S,
        kind=Kind.THROUGHPUT,
        unit="tok/s",
        column="tok/s",
        label="tokens/s",
        direction=Direction.HIGHER,
        tolerance=0.10,
        timing=True,
        description="non-padding tokens over the whole steady-state time (stalls included, hence the wider "
        "tolerance)",
    ),
    Metric(
        name=THROUGHPUT_PER_GPU,
        kind=Kind.THROUGHPUT,
        unit="tok/s/GPU",
        column="tok/s/GPU",
        label="throughput per GPU (tok/s)",
        direction=Direction.HIGHER,
        tolerance=0.10,
        timing=True,
        description="the framework's own per-GPU throughput per step (verl's perf/throughput), median of "
        "steady steps",
    ),
    Metric(
        name=SAMPLES_PER_HOUR,
        kind=Kind.THROUGHPUT,
        unit="samples/h",
        column="samples/h",
        label="samples/hour",
        direction=Direction.HIGHER,
        tolerance=0.05,
        timing=True,
        gated=False,
        description="the published unit of E2 (steady-state)",
    ),
    Metric(
        name="warmup_s",
        kind=Kind.TIMING,
        unit="s",
        column="warm-up s",
        label="warm-up (s)",
        direction=Direction.LOWER,
        tolerance=0.5,
        timing=True,
        gated=False,
        description="time of the warm-up steps (first-step compile, allocation), reported apart",
    ),
    Metric(
        name=PEAK_ALLOCATED,
        kind=Kind.MEMORY,
        unit="GiB",
        column="alloc GiB",
        label="peak allocated (GiB)",
        direction=Direction.LOWER,
        tolerance=0.03,
        abs_tolerance=0.25,
        description="torch.cuda.max_memory_allocated over the run",
    ),
    Metric(
        name="peak_reserved_gib",
        kind=Kind.MEMORY,
        unit="GiB",
        column="reserved GiB",
        label="peak reserved (GiB)",
        direction=Direction.LOWER,
        tolerance=0.05,
        abs_tolerance=0.5,
        description="torch.cuda.max_memory_reserved over the run",
    ),
    Metric(
        name=DEVICE_MEM_PEAK,
        kind=Kind.MEMORY,
        unit="GiB",
        column="dev GiB",
        label="device memory peak, NVML (GiB)",
        direction=Direction.LOWER,
        tolerance=0.05,
        abs_tolerance=0.5,
        across_gpus=Across.MAX,
        description="peak device memory in use (NVML), the whole process incl. CUDA context",
    ),
    Metric(
        name="host_peak_rss_gib",
        kind=Kind.HOST_MEMORY,
        unit="GiB",
        column="RSS GiB",
        label="host peak RSS (GiB)",
        direction=Direction.LOWER,
        tolerance=0.15,
        abs_tolerance=0.25,
        description="peak resident memory of the child process (a run with profiled steps leaves it out)",
    ),
    Metric(
        name=ENERGY_PER_TOKEN,
        kind=Kind.ENERGY,
        unit="J/tok",
        column="J/tok",
        label="energy/token (J)",
        direction=Direction.LOWER,
        tolerance=0.08,
        timing=True,
        across_gpus=Across.SUM,
        description="NVML energy counter over the steady-state window per token",
    ),
    Metric(
        name=POWER_MEAN,
        kind=Kind.POWER,
        unit="W",
        column="W mean",
        label="mean board power (W)",
        direction=Direction.LOWER,
        tolerance=0.10,
        timing=True,
        gated=False,
        across_gpus=Across.SUM,
        description="mean board power over the steady-state window",
    ),
    Metric(
        name="power_peak_w",
        kind=Kind.POWER,
        unit="W",
        column="W peak",
        label="peak board power (W)",
        direction=Direction.LOWER,
        tolerance=0.10,
        timing=True,
        gated=False,
        across_gpus=Across.MAX,
        description="peak sampled board power during the run",
    ),
    Metric(
        name=BUSY_SHARE,
        kind=Kind.UTILISATION,
        unit="%",
        column="busy %",
        label="device busy, share of a profiled step (%)",
        direction=Direction.HIGHER,
        tolerance=0.05,
        abs_tolerance=2.0,
        timing=True,
        description="share of a profiled step the device ran kernels (all streams merged; on the CPU, "
        "the main thread's operator time); from the profiled steps of a traced run",
    ),
    Metric(
        name=HOST_SIDE_SHARE,
        kind=Kind.UTILISATION,
        unit="%",
        column="host %",
        label="host-side, share of a profiled step (%)",
        direction=Direction.LOWER,
        tolerance=0.25,
        abs_tolerance=2.0,
        timing=True,
        description="share of a profiled step the device idled waiting on the host's launch calls (on "
        "the CPU, the time outside operators): the host bounds what this share holds",
    ),
)

CLIFF_AXES = ("batch_size", "max_seq_len", "grad_accum", "micro_batch_size")
_CLIFFS = tuple(
    Metric(
        name=f"cliff_{axis}",
        kind=Kind.CLIFF,
        unit="",
        column=f"largest {axis}",
        label=f"OOM cliff: largest {axis}",
        direction=Direction.HIGHER,
        tolerance=0.0,
        description=f"largest {axis} that fits (OOM-cliff search); any move down fails",
    )
    for axis in CLIFF_AXES
)

METRICS: dict[str, Metric] = {m.name: m for m in (*_REGISTRY, *_CLIFFS)}
"""Every defined metric by name; ``register_metric`` adds to it in place, so that every module
that imported it sees a metric registered later."""


def register_metric(metric: Metric) -> Metric:
    """Define one more metric (a plugin's, a test's): from here on it is pooled, judged, titled
    and stored like the built-in ones, and ``[tool.trainperf.tolerances]`` may name it."""
    if metric.name in METRICS or metric.name.startswith(PHASE_PREFIX):
        raise TrainperfError(f"metric {metric.name} is defined already (or is a phase's name)")
    METRICS[metric.name] = metric
    return metric


def metrics_of_kind(*kinds: Kind) -> tuple[str, ...]:
    """The names of the defined metrics of these kinds, in the registry's order."""
    return tuple(name for name, metric in METRICS.items() if metric.kind in kinds)


def metrics_of_part(part: Part) -> tuple[str, ...]:
    """The names of the defined metrics that depend on this part of the machine (``Part``)."""
    return tuple(name for name, metric in METRICS.items() if metric.part is part)


def device_wide_metrics() -> tuple[str, ...]:
    """The names of the metrics NVML samples for a whole GPU (every process on it is in them)."""
    return tuple(name for name, metric in METRICS.items() if metric.device_wide)


PHASE_PREFIX = "phase_"
PHASE_REMAINDER = "phase_remainder_s"
PHASE_ABS_TOLERANCE_S = 0.05


def phase_metric_name(phase: str) -> str:
    return f"{PHASE_PREFIX}{phase}_s"


def resolve_metric(metrics: dict[str, Metric], name: str) -> Metric | None:
    """A metric of ``metrics`` by name, including the per-phase ones a workload defines by logging
    them (``phase_gen_s``...): those are judged like step time (its tolerance, as configured and
    scaled for the class), with changes under 50 ms never counting (a phase of a few ms is jitter).
    The remainder (step minus its phases) is the small difference of two large figures: shown, not gated."""
    if name in metrics:
        return metrics[name]
    if not (name.startswith(PHASE_PREFIX) and name.endswith("_s")) or STEP_TIME not in metrics:
        return None
    phase = name.removeprefix(PHASE_PREFIX).removesuffix("_s")
    remainder = name == PHASE_REMAINDER
    return dataclasses.replace(
        metrics[STEP_TIME],
        name=name,
        column=f"{phase} s",
        label=f"phase {phase} (s)",
        # Each run's median phase time, pooled as the median of the runs (not of the steps).
        pooling=Pooling.MEDIAN_OF_RUNS,
        abs_tolerance=PHASE_ABS_TOLERANCE_S,
        gated=not remainder,
        description="step time no phase explains"
        if remainder
        else f"median steady-state time of phase {phase}, judged step by step like step time",
    )


def with_tolerances(overrides: dict[str, Any], timing_scale: float = 1.0) -> dict[str, Metric]:
    """The registry with tolerances from ``[tool.trainperf.tolerances]``, timing ones scaled for the class."""
    unknown = sorted(set(overrides) - set(METRICS))
    if unknown:
        raise TrainperfError(
            f"unknown metric(s) {', '.join(unknown)} in [tool.trainperf.tolerances]; known: "
            f"{', '.join(METRICS)}"
        )
    result = {}
    for name, metric in METRICS.items():
        tolerance = float(overrides.get(name, metric.tolerance))
        if not 0 <= tolerance < 10:
            raise TrainperfError(f"tolerance for {name} must be a fraction such as 0.05, got {tolerance}")
        scale = timing_scale if metric.timing else 1.0
        result[name] = dataclasses.replace(metric, tolerance=tolerance * scale)
    return result


def tolerances_from_pyproject(rootdir: Path) -> dict[str, Any]:
    """``[tool.trainperf.tolerances]`` of ``rootdir/pyproject.toml`` (empty when absent)."""
    path = rootdir / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TrainperfError(f"{path} is not valid TOML ({exc})") from exc
    return dict(data.get("tool", {}).get("trainperf", {}).get("tolerances", {}))
