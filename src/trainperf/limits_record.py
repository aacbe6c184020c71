"""How far a measured case is from the GPU's limits, as its result keeps it (``CaseResult.limits``):
``plan.headroom`` computes it, the summary's limit lines, the table's MFU cell and the benchmark
export read it.

Every figure is kept with the reason it is missing where it is, so a report never shows a made-up
number: ``mfu`` is None with ``mfu_note`` "n/a: ..." where there is no peak to compare with. The
three MFU keys are always stored (a missing figure as null); the others only where there is a figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trainperf.jsonio import stored_number_or_none as _number
from trainperf.jsonio import stored_text as _text

ALWAYS_STORED = ("achieved_tflops", "mfu", "mfu_note")
"""Stored even where there is no figure (null): a report says why with ``mfu_note``."""


@dataclass(frozen=True, slots=True)
class CliffHeadroom:
    """How far this case's value of a cliff's axis is from the largest that fits (a stored OOM cliff)."""

    axis: str
    value: int
    largest_fit: int | None
    """None: the stored cliff found nothing that fits."""
    headroom: float | None
    """``largest_fit / value``; None where nothing fits."""
    text: str
    """The line shown: ``batch_size 4 of largest fitting 16 (4x, OOM at 17)``."""

    @classmethod
    def from_dict(cls, data: Any) -> CliffHeadroom | None:
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            return None
        return cls(
            axis=str(data.get("axis") or ""),
            value=int(data.get("value") or 0),
            largest_fit=_integer(data.get("largest_fit")),
            headroom=_number(data.get("headroom")),
            text=data["text"],
        )


@dataclass(slots=True)
class Limits:
    """Model FLOPs with their formula, achieved TFLOP/s, MFU (or why n/a), the framework's own MFU,
    energy per million tokens and the headroom to a stored OOM cliff."""

    achieved_tflops: float | None = None
    """Model FLOPs per token times the steady throughput; None without either."""
    mfu: float | None = None
    """Achieved over the class's bf16 dense peak for the case's GPUs; None where n/a (``mfu_note``)."""
    mfu_note: str = ""
    """What the MFU was computed against, or why it is n/a."""
    model_flops_per_token: float | None = None
    """None where the training formula does not describe the step (RL, an unknown architecture)."""
    formula: str | None = None
    attention_seq_len: float | None = None
    """Σ s² / Σ s over the run's samples, the attention term's length; None where not known."""
    model_tflop_per_step: float | None = None
    flops_note: str | None = None
    """Why the FLOPs are missing or partial."""
    framework_mfu: float | None = None
    """The framework's own MFU (verl's ``perf/mfu/actor``)."""
    kwh_per_mtok: float | None = None
    cliff_headroom: CliffHeadroom | None = None

    def to_dict(self) -> dict[str, Any]:
        stored = asdict(self).items()
        return {key: value for key, value in stored if value is not None or key in ALWAYS_STORED}

    @classmethod
    def from_dict(cls, data: Any) -> Limits | None:
        """The record, or None where there is none (a case that did not run); a key it lacks keeps its
        default, a key it does not know is dropped (the figures are the run's, not a child's)."""
        if not isinstance(data, dict) or not data:
            return None
        return cls(
            achieved_tflops=_number(data.get("achieved_tflops")),
            mfu=_number(data.get("mfu")),
            mfu_note=str(data.get("mfu_note") or ""),
            model_flops_per_token=_number(data.get("model_flops_per_token")),
            formula=_text(data.get("formula")),
            attention_seq_len=_number(data.get("attention_seq_len")),
            model_tflop_per_step=_number(data.get("model_tflop_per_step")),
            flops_note=_text(data.get("flops_note")),
            framework_mfu=_number(data.get("framework_mfu")),
            kwh_per_mtok=_number(data.get("kwh_per_mtok")),
            cliff_headroom=CliffHeadroom.from_dict(data.get("cliff_headroom")),
        )


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
