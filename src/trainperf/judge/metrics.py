"""The metric registry: every gated figure declares its unit, its good direction and a tolerance."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError


class Direction(str, Enum):
    LOWER = "lower"
    HIGHER = "higher"


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    tolerance: float
    """Relative change (fraction of the baseline) that counts as a change."""
    abs_tolerance: float = 0.0
    """Changes smaller than this, in the metric's unit, never count (memory jitter, say)."""
    timing: bool = False
    """Depends on speed: not gated when timing is not comparable (other CPU, emulated class)."""
    gated: bool = True
    """Informational metrics are reported next to the verdict but never fail a case."""
    description: str = ""


_REGISTRY: tuple[Metric, ...] = (
    Metric(
        name="step_time_s",
        unit="s",
        direction=Direction.LOWER,
        tolerance=0.03,
        timing=True,
        description="median steady-state step time (warm-up detected and excluded); judged step by step "
        "against the baseline's same batches",
    ),
    Metric(
        name="step_time_p25_s",
        unit="s",
        direction=Direction.LOWER,
        tolerance=0.05,
        timing=True,
        gated=False,
        description="lower quartile of steady-state step times",
    ),
    Metric(
        name="tokens_per_s",
        unit="tok/s",
        direction=Direction.HIGHER,
        tolerance=0.10,
        timing=True,
        description="non-padding tokens over the whole steady-state time (stalls included, hence the wider tolerance)",
    ),
    Metric(
        name="throughput_per_gpu",
        unit="tok/s/GPU",
        direction=Direction.HIGHER,
        tolerance=0.10,
        timing=True,
        description="the framework's own per-GPU throughput per step (verl's perf/throughput), median of steady steps",
    ),
    Metric(
        name="samples_per_hour",
        unit="samples/h",
        direction=Direction.HIGHER,
        tolerance=0.05,
        timing=True,
        gated=False,
        description="the published unit of E2 (steady-state)",
    ),
    Metric(
        name="warmup_s",
        unit="s",
        direction=Direction.LOWER,
        tolerance=0.5,
        timing=True,
        gated=False,
        description="time of the warm-up steps (first-step compile, allocation), reported apart",
    ),
    Metric(
        name="peak_allocated_gib",
        unit="GiB",
        direction=Direction.LOWER,
        tolerance=0.03,
        abs_tolerance=0.25,
        description="torch.cuda.max_memory_allocated over the run",
    ),
    Metric(
        name="peak_reserved_gib",
        unit="GiB",
        direction=Direction.LOWER,
        tolerance=0.05,
        abs_tolerance=0.5,
        description="torch.cuda.max_memory_reserved over the run",
    ),
    Metric(
        name="device_mem_peak_gib",
        unit="GiB",
        direction=Direction.LOWER,
        tolerance=0.05,
        abs_tolerance=0.5,
        description="peak device memory in use (NVML), the whole process incl. CUDA context",
    ),
    Metric(
        name="host_peak_rss_gib",
        unit="GiB",
        direction=Direction.LOWER,
        tolerance=0.15,
        abs_tolerance=0.25,
        description="peak resident memory of the child process",
    ),
    Metric(
        name="energy_per_token_j",
        unit="J/tok",
        direction=Direction.LOWER,
        tolerance=0.08,
        timing=True,
        description="NVML energy counter over the steady-state window per token",
    ),
    Metric(
        name="power_mean_w",
        unit="W",
        direction=Direction.LOWER,
        tolerance=0.10,
        timing=True,
        gated=False,
        description="mean board power over the steady-state window",
    ),
    Metric(
        name="power_peak_w",
        unit="W",
        direction=Direction.LOWER,
        tolerance=0.10,
        timing=True,
        gated=False,
        description="peak sampled board power during the run",
    ),
)

_CLIFFS = tuple(
    Metric(
        name=f"cliff_{axis}",
        unit="",
        direction=Direction.HIGHER,
        tolerance=0.0,
        description=f"largest {axis} that fits (OOM-cliff search); any move down fails",
    )
    for axis in ("batch_size", "max_seq_len", "grad_accum", "micro_batch_size")
)

METRICS: dict[str, Metric] = {m.name: m for m in (*_REGISTRY, *_CLIFFS)}


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
    if not (name.startswith(PHASE_PREFIX) and name.endswith("_s")) or "step_time_s" not in metrics:
        return None
    import dataclasses

    step = metrics["step_time_s"]
    remainder = name == PHASE_REMAINDER
    return dataclasses.replace(
        step,
        name=name,
        abs_tolerance=PHASE_ABS_TOLERANCE_S,
        gated=not remainder,
        description="step time no phase explains"
        if remainder
        else f"median steady-state time of phase "
        f"{name.removeprefix(PHASE_PREFIX).removesuffix('_s')}, judged step by step like step time",
    )


def with_tolerances(overrides: dict[str, Any], timing_scale: float = 1.0) -> dict[str, Metric]:
    """The registry with tolerances from ``[tool.trainperf.tolerances]``, timing ones scaled for the class."""
    import dataclasses

    unknown = sorted(set(overrides) - set(METRICS))
    if unknown:
        raise TrainperfError(
            f"unknown metric(s) {', '.join(unknown)} in [tool.trainperf.tolerances]; known: {', '.join(METRICS)}"
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
