"""verl's rollout engines side by side: E3's comparison (vLLM against SGLang), from measured results.

Two ``rl_verl`` results pair up when their cases differ in the engine alone (``eng``, and the
environment that follows it) and they come from one GPU class. For each pair: step time, each
phase verl times, throughput, memory and power for both engines, and SGLang/vLLM. Where published
reference points (``baselines/published/``, E3's 8×H100 phase times) give both engines' figure for
the same case shape, their ratio is shown beside, with the class it was measured on: a ratio
carries across GPU classes better than a time does, but it is still another machine. No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from trainperf.case import Outcome
from trainperf.errors import TrainperfError
from trainperf.families import FAMILIES
from trainperf.judge.metrics import (
    DEVICE_MEM_PEAK,
    ENERGY_PER_TOKEN,
    METRICS,
    PEAK_ALLOCATED,
    PHASE_REMAINDER,
    POWER_MEAN,
    STEP_TIME,
    THROUGHPUT_PER_GPU,
    TOKENS_PER_S,
    phase_metric_name,
    resolve_metric,
)
from trainperf.report.table import align, format_value
from trainperf.result import CaseResult
from trainperf.store.references import Reference

BASE, OTHER = "vllm", "sglang"
VERL_PHASES = (
    "gen", "old_log_prob", "ref", "values", "adv", "update_critic", "update_actor", "update_weights"
)  # fmt: skip
"""The phases verl times in a step, in its order (a workload logs them; the registry has none)."""


def _column(name: str) -> str:
    metric = resolve_metric(METRICS, name)
    return metric.column if metric is not None else name


SHOWN = (
    STEP_TIME,
    *(phase_metric_name(phase) for phase in VERL_PHASES),
    PHASE_REMAINDER,
    TOKENS_PER_S,
    THROUGHPUT_PER_GPU,
    PEAK_ALLOCATED,
    DEVICE_MEM_PEAK,
    POWER_MEAN,
    ENERGY_PER_TOKEN,
)
"""The rows, in order: step time, each phase verl times, throughput, memory and power."""
TITLES = {
    THROUGHPUT_PER_GPU: "verl tok/s/GPU",
    PEAK_ALLOCATED: "peak alloc GiB",
    DEVICE_MEM_PEAK: "device GiB (highest GPU)",
    POWER_MEAN: "W (all GPUs)",
}
"""Titles that say what a figure is over a multi-GPU case; the rest are the definitions' columns."""
ROWS = tuple((name, TITLES.get(name) or _column(name)) for name in SHOWN)
HEADER = ("figure", "vLLM", "SGLang", "SGLang/vLLM", "published SGLang/vLLM")


@dataclass(frozen=True, slots=True)
class EnginePair:
    shape: str
    """The case without its engine, as read: ``rl_verl qwen2_5_0_5b grpo, 2 GPUs, TP 2``."""
    vllm: CaseResult
    sglang: CaseResult


def _engine(result: CaseResult) -> str | None:
    family = FAMILIES.get(result.case.family or "")
    return family.rollout_engine(result.case.extra or {}) if family else None


def _shape_key(result: CaseResult) -> str:
    # Every knob but the engine, by the names the file stores them under: a shape is what is left.
    case = {
        k: v
        for k, v in result.case.to_dict().items()
        if k not in ("id", "environment", "expected", "gpu_classes", "notes")
    }
    case["extra"] = {k: v for k, v in (result.case.extra or {}).items() if k != "eng"}
    return json.dumps([result.gpu_class, case], sort_keys=True, default=str)


def _describe(result: CaseResult) -> str:
    case, extra = result.case, result.case.extra or {}
    return (
        f"{case.model} {extra.get('alg', '?')}, {case.gpus or 1} GPU(s), TP {extra.get('tp', '?')} "
        "on "
        f"{result.gpu_class} ({(case.id or result.case_id).replace('-eng' + BASE, '-eng*')})"
    )


def pairs(results: Sequence[CaseResult]) -> list[EnginePair]:
    """Every case shape measured with both engines, in a stable order; cliff searches left out."""
    by_shape: dict[str, dict[str, CaseResult]] = {}
    for result in results:
        engine = _engine(result)
        if engine is None or result.cliff:
            continue
        by_shape.setdefault(_shape_key(result), {})[engine] = result
    found = [
        EnginePair(_describe(group[BASE]), group[BASE], group[OTHER])
        for group in by_shape.values()
        if BASE in group and OTHER in group
    ]
    return sorted(found, key=lambda pair: pair.shape)


def _value(result: CaseResult, metric: str) -> float | None:
    value = result.metrics.get(metric)
    return value.value if value is not None and result.outcome == Outcome.OK else None


def _published_ratio(pair: EnginePair, metric: str, references: Sequence[Reference]) -> str:
    """SGLang/vLLM of published points whose match fits this shape (any GPU class, named)."""
    found: dict[str, tuple[float, str]] = {}
    for reference in references:
        if reference.metric != metric:
            continue
        for engine, result in ((BASE, pair.vllm), (OTHER, pair.sglang)):
            if reference.fits(result.case.as_case()):
                found[engine] = (reference.value, f"{reference.source}, {reference.gpu_class}")
    if BASE in found and OTHER in found and found[BASE][0]:
        return f"{found[OTHER][0] / found[BASE][0]:.2f} ({found[OTHER][1]})"
    return "-"


def table(pair: EnginePair, references: Sequence[Reference] = ()) -> list[list[str]]:
    body = []
    for metric, label in ROWS:
        base, other = _value(pair.vllm, metric), _value(pair.sglang, metric)
        if base is None and other is None:
            continue  # a phase this algorithm does not have (PPO's values, GRPO's ref)
        ratio = f"{other / base:.2f}" if base and other is not None else "-"
        body.append(
            [
                label,
                format_value(base),
                format_value(other),
                ratio,
                _published_ratio(pair, metric, references),
            ]
        )
    outcomes = f"{pair.vllm.outcome} / {pair.sglang.outcome}"
    if outcomes != "ok / ok":
        body.insert(0, ["outcome", pair.vllm.outcome, pair.sglang.outcome, "-", "-"])
    return body


def render(results: Sequence[CaseResult], references: Sequence[Reference] = ()) -> str:
    found = pairs(results)
    if not found:
        raise TrainperfError(
            "no verl case measured with both rollout engines here: give run folders or baselines/<class> "
            "holding an rl_verl case's engvllm and engsglang results"
        )
    blocks = []
    for pair in found:
        blocks += [pair.shape, *align(HEADER, table(pair, references)), ""]
    blocks.append(
        "medians over each run's steady steps; power and energy summed over the case's GPUs; one run per "
        "engine "
        "unless the results pooled more (see each result's runs)"
    )
    return "\n".join(blocks)
