"""Did verl run the work the case describes? Its own per-step length metrics against the knobs.

A run whose prompts or responses are not the case's lengths measures some other workload; it
must not become a baseline or pass a gate. On an H100 the synthetic prompts reached verl as 6
tokens instead of 512 (a tokenizer the model folder's config swapped, see synth/rl_inputs.py),
and nothing failed: every phase ran, shorter. verl logs ``prompt_length/mean`` and
``response_length/mean`` each step (trainer/ppo/metric_utils.py); they are checked here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainperf.families.rl_verl.knobs import VerlKnobs
from trainperf.judge import stats

# Means over a batch of equal lengths are exact; half a token absorbs float formatting.
TOLERANCE_TOKENS = 0.5


@dataclass(frozen=True, slots=True)
class Lengths:
    prompt: float | None
    response: float | None

    def to_config(self) -> dict[str, float]:
        measured = {"prompt_len_measured": self.prompt, "response_len_measured": self.response}
        return {key: round(value, 1) for key, value in measured.items() if value is not None}


def measured_lengths(steps: Sequence[dict[str, Any]]) -> Lengths:
    """Median over the steps of verl's per-step mean prompt and response lengths."""

    def median(field: str) -> float | None:
        values = [float(s[field]) for s in steps if field in s]
        return stats.median(values) if values else None

    return Lengths(median("prompt_length_mean"), median("response_length_mean"))


def length_mismatch(knobs: VerlKnobs, lengths: Lengths, *, synthetic_prompts: bool) -> str | None:
    """Why the run is not the case's work, or None. Prompts are checked where the suite wrote
    them (a user's dataset has its own lengths); responses where they are forced (vLLM's
    ignore_eos: verl does not pass it to SGLang, whose rare early EOS is recorded, not refused)."""
    if (
        synthetic_prompts
        and lengths.prompt is not None
        and abs(lengths.prompt - knobs.prompt_len) > TOLERANCE_TOKENS
    ):
        return (
            f"verl's prompts were {lengths.prompt:g} tokens, the case's are {knobs.prompt_len}: the tokenizer verl "
            "loaded does not keep the synthetic prompts (see the model folder's tokenizer/); nothing was baselined"
        )
    forced = not knobs.natural_lengths and knobs.engine == "vllm"
    if (
        forced
        and lengths.response is not None
        and abs(lengths.response - knobs.response_len) > TOLERANCE_TOKENS
    ):
        return (
            f"verl's responses were {lengths.response:g} tokens, the case forces {knobs.response_len} "
            "(rollout.ignore_eos): the engine did not honour it; nothing was baselined"
        )
    return None
