"""How far from the limit, as report lines: model FLOPs with their formula, achieved TFLOP/s, MFU
(or why n/a), energy per million tokens and the headroom to a stored OOM cliff (``result.limits``)."""

from __future__ import annotations

from collections.abc import Sequence

from trainperf.limits_record import Limits
from trainperf.report.table import format_value
from trainperf.result import CaseResult


def describe_limits(limits: Limits) -> str:
    """One line: ``MFU 41.3% (402.5 TFLOP/s of 989 ...); 52.1 GFLOP/token (formula); 0.21 kWh/Mtok; ...``."""
    parts = []
    if limits.mfu is not None:
        parts.append(f"MFU {limits.mfu:.1%} ({limits.mfu_note})")
    else:
        achieved = limits.achieved_tflops
        shown = f"; {format_value(achieved)} TFLOP/s achieved" if achieved is not None else ""
        parts.append(f"MFU {limits.mfu_note or 'n/a'}{shown}")
    if limits.framework_mfu is not None:
        parts.append(f"verl's own perf/mfu/actor {limits.framework_mfu:.1%}")
    if limits.model_flops_per_token is not None:
        per_step = limits.model_tflop_per_step
        step = f", {format_value(per_step)} TFLOP/step" if per_step is not None else ""
        parts.append(f"{limits.model_flops_per_token / 1e9:.4g} GFLOP/token{step} ({limits.formula or ''})")
    if limits.flops_note and limits.model_flops_per_token is not None:
        parts.append(limits.flops_note)
    if limits.kwh_per_mtok is not None:
        parts.append(f"{format_value(limits.kwh_per_mtok)} kWh per million tokens")
    if limits.cliff_headroom:
        parts.append(f"OOM cliff: {limits.cliff_headroom.text}")
    return "; ".join(parts)


def limit_lines(results: Sequence[CaseResult]) -> list[str]:
    """``case: <describe_limits>`` for each result that carries limits."""
    return [f"{result.case_id}: {describe_limits(result.limits)}" for result in results if result.limits]


def limits_markdown(results: Sequence[CaseResult]) -> list[str]:
    lines = limit_lines(results)
    return ["", "## How far from the limit", "", *(f"- {line}" for line in lines)] if lines else []
