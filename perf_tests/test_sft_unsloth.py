"""E2 (docs/experiments.md) with unsloth: QLoRA through ``FastLanguageModel`` on a pre-quantised 4-bit
checkpoint, ``use_gradient_checkpointing="unsloth"``, TRL's SFTTrainer, in the 'unsloth' environment.

Batch 32 as published for Qwen3-32B and gpt-oss-120b (gpt-oss-120b on the long profile ran at
batch 16 on the H100: batch 32 did not fit). Qwen3-8B also at batch 4, E2's batch for every
method on that model, so that it sits next to the sft_hf LoRA/QLoRA cases like for like.
Without the 'unsloth' environment these cases are skipped with the command that creates it.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.case import Case
from trainperf.ground.catalogue import params

GPU = ("maxq", "h100", "h200")
PROFILES = ("short", "long")


def unsloth(model: str, profile: str, batch: int, classes: tuple[str, ...] = GPU, **kw: Any) -> Case:
    return Case(
        family="sft_unsloth", environment="unsloth", model=model, method="qlora", profile=profile,
        batch_size=batch, gpu_classes=classes, **kw,
    )  # fmt: skip


# Published samples/hour (Max-Q and H100 SXM5) exist for Qwen3-32B and gpt-oss-120b; the rest is unmeasured.
GPT_OSS_NOTE = (
    "published: attention layers only got adapters (expert weights fused); unsloth 2026.10.9 also "
    "targets the per-expert 4-bit linears (adapter_scope attention+experts on h200, 83-98 GiB allocated "
    "at batch 32); the 4-bit cache takes 62 GB"
)
CASES = [
    *(unsloth("qwen3_8b", p, 4) for p in PROFILES),
    *(unsloth("qwen3_8b", p, 32, expected=(("h100", "unknown"), ("maxq", "unknown"))) for p in PROFILES),
    # Published to fit on Max-Q (96 GB) and H100 (80 GB) at batch 32, both profiles.
    *(unsloth("qwen3_32b", p, 32, slow=True) for p in PROFILES),
    # Ran on h200 (2026-11-28); not yet on maxq or h100, where the expert adapters may not fit.
    unsloth("gpt_oss_120b", "short", 32, slow=True, notes=GPT_OSS_NOTE,
            expected=(("maxq", "unknown"), ("h100", "unknown"))),
    unsloth("gpt_oss_120b", "long", 32, ("maxq", "h200"), slow=True, notes=GPT_OSS_NOTE,
            expected=(("maxq", "unknown"),)),
    unsloth("gpt_oss_120b", "long", 16, ("h100",), slow=True, notes=GPT_OSS_NOTE + "; batch 32 did not fit "
                                                                                   "on H100",
            expected=(("h100", "unknown"),)),
]  # fmt: skip


@pytest.mark.parametrize("case", params(CASES))
def test_sft_unsloth(case: Case, trainperf: Any) -> None:
    trainperf(case)
