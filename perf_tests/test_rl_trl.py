"""GRPO through TRL's GRPOTrainer with plain transformers generation (family ``rl_trl``).

Runs in the ``hf`` environment on any GPU, so RL is measured even where verl's engines are not
installed. Each step: ``batch_size`` completions (``num_generations`` per prompt) of exactly
``completion_len`` tokens after prompts of ``prompt_len`` tokens, a rule reward, one optimizer
step; generation, reward, preparation and update are timed apart (``phases``).

Sizes (not yet measured: every GPU expectation below is an estimate). The update of 16 x 192
tokens is small; transformers' ``generate`` costs ~completion_len forward passes of the whole
batch, each bound by Python and kernel launches at this size, so generation dominates, as in E3. Full
fine-tuning with AdamW holds ~10 B per parameter
(bf16 weights and gradients, two bf16 AdamW states, the foreach step's temporary): Qwen2.5-3B
~29 GiB fits every class; Qwen2.5-7B ~71 GiB before activations is unknown on the 80 GB H100
and the 96 GB Max-Q. No reference model (beta 0), so no second copy of the weights.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.case import Case
from trainperf.ground.catalogue import params

GPU = ("maxq", "h100", "h200")
# E3's learning rate; the timing does not depend on it, but a random model trained at an SFT
# rate could drift into non-finite logits and stop the sampler.
GRPO_LR = 1e-6


def grpo(model: str, method: str, batch: int, classes: tuple[str, ...], **kw: Any) -> Case:
    return Case(
        family="rl_trl",
        model=model,
        method=method,
        profile="fixed",
        batch_size=batch,  # type: ignore[arg-type]
        gpu_classes=classes,
        learning_rate=GRPO_LR,
        **kw,
    )


# Sized so that one child takes ~45 s on an H100 (estimated, not measured yet: ~20 s to start and
# build, then 8 steps of which generation, ~64 decode passes of the batch at tens of ms each, is most).
GPU_SHAPE: dict[str, Any] = {"prompt_len": 128, "completion_len": 64, "num_generations": 8, "steps": 8}

CASES = [
    # Tiny, for any CPU: real GRPO steps (generation, reward, update), gated against baselines/cpu.
    grpo("qwen3_tiny", "lora", 8, ("cpu",), prompt_len=16, completion_len=16, num_generations=4, steps=12),
    # A small and a mid-size model (E1's Qwen2.5 pair), 2 prompts x 8 completions per step.
    *(grpo("qwen2_5_3b", m, 16, GPU, **GPU_SHAPE) for m in ("lora", "full")),
    grpo("qwen2_5_7b", "lora", 16, GPU, **GPU_SHAPE),
    grpo(
        "qwen2_5_7b",
        "full",
        16,
        GPU,
        **GPU_SHAPE,
        expected=(("h100", "unknown"), ("maxq", "unknown")),
        notes="~71 GiB of weights, gradients and AdamW states before activations",
    ),
]


@pytest.mark.parametrize("case", params(CASES))
def test_rl_trl(case: Case, trainperf: Any) -> None:
    trainperf(case)
