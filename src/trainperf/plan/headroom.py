"""How far a measured case is from the GPU's limits (pure): model FLOPs, achieved TFLOP/s, MFU,
energy per million tokens and the headroom to the OOM cliff. The FLOPs formula is in
``trainperf.plan.flops``; the run fills the inputs from the case, its result and the class.

The record (``limits_record.Limits``, a result's ``limits``) keeps every figure with the reason it
is missing where it is, so a report never shows a made-up number: ``mfu`` is None with ``mfu_note``
"n/a: ..." on a class without a published peak (the CPU), under an emulated class, or for a family
whose step the formula does not describe (RL: generation is not training FLOPs; verl's own
``perf/mfu/actor`` is shown instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.limits_record import CliffHeadroom, Limits
from trainperf.plan.flops import ModelShape, TokenFlops, kwh_per_million_tokens, mfu, token_flops


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitInputs:
    """What the limits of one measured case are computed from."""

    family: str
    kind: str
    """The family's kind (``Family.kind``): only an ``sft`` step is the training the formula counts."""
    method: str
    gpus: int
    shape: ModelShape | None
    lora_params: int
    """Trainable adapter parameters (the effective configuration's, else rank x the shape's)."""
    attention_seq_len: float | None
    """Σ s² / Σ s over the run's samples; None when their lengths are not known (a local dataset)."""
    tokens_per_step: float | None
    tokens_per_s: float | None
    energy_per_token_j: float | None
    peak_tflops: float | None
    """The class's bf16 dense peak per GPU (``bf16_dense_tflops``), None when it has none."""
    emulated: str | None = None
    framework_mfu: float | None = None
    """The framework's own MFU (verl's ``perf/mfu/actor``, median of steady steps)."""


def _flops(inputs: LimitInputs) -> tuple[TokenFlops | None, str]:
    if inputs.kind != "sft":
        return (
            None,
            f"n/a: a {inputs.family} step includes generation, which the training formula does not count",
        )
    if inputs.shape is None:
        return None, "n/a: the model's architecture is neither a dense decoder nor a mixture of experts"
    seq_len = inputs.attention_seq_len or 0.0
    flops = token_flops(inputs.shape, method=inputs.method, lora_params=inputs.lora_params, seq_len=seq_len)
    if inputs.attention_seq_len is None:
        return flops, "attention term left out: the sample lengths of a local dataset are not known"
    return flops, ""


def case_limits(inputs: LimitInputs) -> Limits:
    """The limits record of one case (see the module's docstring)."""
    record = Limits()
    flops, note = _flops(inputs)
    if flops is not None:
        record.model_flops_per_token = flops.total
        record.formula = flops.formula
        if inputs.attention_seq_len is not None:
            record.attention_seq_len = round(inputs.attention_seq_len, 2)
        if inputs.tokens_per_step:
            record.model_tflop_per_step = flops.total * inputs.tokens_per_step / 1e12
    record.flops_note = note or None
    achieved = flops.total * inputs.tokens_per_s / 1e12 if flops is not None and inputs.tokens_per_s else None
    record.achieved_tflops = achieved
    if achieved is None:
        record.mfu, record.mfu_note = None, note or "n/a: no steady-state throughput was measured"
    elif inputs.emulated:
        record.mfu, record.mfu_note = None, f"n/a: emulated class ({inputs.emulated}), not its GPU"
    else:
        record.mfu, record.mfu_note = mfu(achieved, inputs.peak_tflops, inputs.gpus)
    record.framework_mfu = inputs.framework_mfu
    if inputs.energy_per_token_j is not None:
        record.kwh_per_mtok = kwh_per_million_tokens(inputs.energy_per_token_j)
    return record


def cliff_headroom(
    axis: str, this_value: int, largest_fit: int | None, smallest_oom: int | None
) -> CliffHeadroom:
    """How far this case's value of ``axis`` is from the largest that fits (a stored OOM cliff)."""
    if largest_fit is None:
        text = f"{axis} {this_value}: the stored cliff found nothing that fits"
        return CliffHeadroom(axis, this_value, None, None, text)
    headroom = largest_fit / this_value
    above = (
        f", OOM at {smallest_oom}" if smallest_oom is not None else ", the cliff is above the searched range"
    )
    text = f"{axis} {this_value} of largest fitting {largest_fit} ({headroom:.2g}x{above})"
    return CliffHeadroom(axis, this_value, largest_fit, headroom, text)


def mfu_cell(limits: Limits | None) -> str:
    """The table's MFU cell: a percentage, the framework's own (``verl``) or ``n/a``."""
    if not limits:
        return "-"
    if limits.mfu is not None:
        return f"{limits.mfu:.1%}"
    if limits.framework_mfu is not None:
        return f"{limits.framework_mfu:.1%} (verl)"
    return "n/a"
