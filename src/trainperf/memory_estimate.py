"""Peak allocator memory estimated before launch, as a result keeps it (``CaseResult.estimate``)
beside the measured peak; ``plan.estimate`` computes it from the model config and the case."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trainperf.jsonio import stored_number as _number

GIB = 2**30


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    weights_b: float
    trainable_states_b: float
    """The trainable parameters, their gradients, AdamW's states and its step's temporary."""
    activations_b: float
    """Per padded token of the largest micro-batch: logits and what the layers keep."""
    max_tokens_per_microbatch: int
    total_b: float

    @property
    def total_gib(self) -> float:
        return self.total_b / GIB

    def to_dict(self) -> dict[str, Any]:
        """The terms, and the total in GiB as the table shows it (to three places)."""
        data = asdict(self)
        data["total_gib"] = round(self.total_gib, 3)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> MemoryEstimate | None:
        """The record, or None where there is none (a family without an estimate) or it is not one;
        ``total_gib`` is the total's, computed again."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                weights_b=_number(data["weights_b"]),
                trainable_states_b=_number(data["trainable_states_b"]),
                activations_b=_number(data["activations_b"]),
                max_tokens_per_microbatch=int(data["max_tokens_per_microbatch"]),
                total_b=_number(data["total_b"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
