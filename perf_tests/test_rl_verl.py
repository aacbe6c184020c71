"""E1 and E3 (docs/experiments.md): RL with verl's ``main_ppo``, PPO and GRPO, vLLM and SGLang rollout.

E1: PPO with GAE and a critic on Qwen2.5-3B and -7B (random weights from the shipped configs),
batch 256, mini-batch 128, prompt 1024, response 1024, micro-batch per GPU 1, 2, 4, ..., 512 on
2 GPUs (the published sweep, 10 steps) and the published micro-batch 16 on one GPU. On 2 GPUs
verl normalises the mini-batch to 64 per GPU, so micro-batches of 128 and more are rejected
by verl itself: the pre-flight predicts that in milliseconds (``config_error``, expected).
Qwen2.5-7B ran out of memory at every micro-batch on 2 Max-Q cards (expected OOM).

E3: GRPO with rollout TP 2, FSDP param and optimizer offload, dynamic batch size and KL loss
(low_var_kl, 0.001), once per engine: at its own scale (14B on 8 GPUs, fixed 8,192-token
responses), at a size that fits two GPUs (7B), and on the 0.5B model (1 and 2 GPUs). A small one-GPU PPO case
runs every phase
(critic included) in minutes: the first verl case to run on a new machine.

Every case runs in the ``verl-vllm`` or ``verl-sglang`` environment (``--perf-python``); where
verl is not installed the child skips with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.case import Case
from trainperf.ground.catalogue import marks_for, params

GPU = ("maxq", "h100", "h200")
E1_MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SMALL_PPO_MICRO_BATCHES = (2, 4, 16, 32, 64)  # and 8, the case above


def verl(
    model: str,
    alg: str,
    eng: str,
    batch: int,
    mini: int,
    micro: int | None,
    gpus: int,
    classes: tuple[str, ...],
    *,
    p: int = 1024,
    r: int = 1024,
    n: int = 1,
    tp: int = 1,
    **kw: Any,
) -> Case:
    knobs = {"alg": alg, "eng": eng, "mini": str(mini), "n": str(n), "p": str(p), "r": str(r), "tp": str(tp)}
    knobs.update({k: str(v) for k, v in kw.pop("knobs", {}).items()})
    return Case(
        family="rl_verl",
        model=model,
        method="full",
        profile="gsm8k",
        batch_size=batch,
        micro_batch_size=micro,
        gpus=gpus,
        environment=f"verl-{eng}",
        gpu_classes=classes,
        extra=tuple(knobs.items()),
        **kw,
    )


def e1_expected(micro: int, gpus: int) -> tuple[tuple[str, Any], ...]:
    """Published on 2 Max-Q: 32 and 64 ran out of memory, >= 128 was rejected by verl. On 2 H200s
    (2026-11-28) 32 ran out too, in the first step's log-probabilities: the entropy of 32 x 2,048
    tokens' fp32 logits asked for 37.09 GiB more; 64 asks for twice that."""
    if gpus == 2 and micro >= 128:
        return tuple((c, "config_error") for c in GPU)
    if gpus == 2 and micro in (32, 64):
        return (("maxq", "oom"), ("h100", "unknown"), ("h200", "oom"))
    return (("h100", "unknown"),) if micro > 16 else ()


def e1(model: str, micro: int, gpus: int, **kw: Any) -> Case:
    return verl(model, "ppo", "vllm", 256, 128, micro, gpus, GPU, steps=10, slow=True, **kw)


CASES = [
    # Small, one GPU, minutes: every PPO phase (critic, values, GAE), then GRPO per engine.
    verl("qwen2_5_0_5b", "ppo", "vllm", 64, 32, 8, 1, GPU, p=512, r=512, steps=5),
    # E1's micro-batch sweep at the small size: the same case at micro-batch 2 ... 32 (phase times
    # per micro-batch), and 64, above the mini-batch of 32, which verl rejects (pre-flight).
    *(
        verl(
            "qwen2_5_0_5b",
            "ppo",
            "vllm",
            64,
            32,
            mb,
            1,
            GPU,
            p=512,
            r=512,
            steps=5,
            expected=tuple((c, "config_error") for c in GPU) if mb > 32 else (),
        )
        for mb in SMALL_PPO_MICRO_BATCHES
    ),
    *(
        verl(
            "qwen2_5_0_5b",
            "grpo",
            eng,
            16,
            16,
            None,
            1,
            GPU,
            p=512,
            r=1024,
            n=4,
            steps=8,
            knobs={"dyn": 8192, "offl": 1, "kl": 1},
        )
        for eng in ("vllm", "sglang")
    ),
    # E3's shape (rollout TP 2 over 2 GPUs, offload, dynamic batch, KL loss) on the small model:
    # minutes, the first 2-GPU verl case to run on a new machine, per engine.
    *(
        verl(
            "qwen2_5_0_5b",
            "grpo",
            eng,
            16,
            16,
            None,
            2,
            GPU,
            p=512,
            r=1024,
            n=4,
            tp=2,
            steps=4,
            knobs={"dyn": 8192, "offl": 1, "kl": 1},
        )
        for eng in ("vllm", "sglang")
    ),
    # E1: the published sweep on 2 GPUs, and micro-batch 16 on one GPU (the published full run).
    *(e1("qwen2_5_3b", mb, 2, expected=e1_expected(mb, 2)) for mb in E1_MICRO_BATCHES),
    # Fits a Max-Q's 96 GB (E1's full run); on an H100 (2026-11-22) the first update asked for
    # 18.55 GiB at once, the fp32 logits of 16 x 2,048 tokens x Qwen2.5's 151,936-word vocabulary.
    # No micro-batch fits there: the cliff's probes at 8, 2 and 1 ran out in the actor's update
    # at 76 GiB allocated, whatever the micro-batch (actor and critic states, no offload).
    e1(
        "qwen2_5_3b",
        16,
        1,
        expected=(("h100", "oom"), ("maxq", "unknown")),
        notes="H100: OOM in the first update (18.55 GiB logits block); no micro-batch fits (cliff)",
    ),
    *(
        e1(
            "qwen2_5_7b",
            mb,
            2,
            expected=(("maxq", "oom"), ("h100", "unknown"), ("h200", "unknown")),
            notes="published: OOM at every micro-batch on 2x Max-Q",
        )
        for mb in (1, 4, 16)
    ),
    e1("qwen2_5_7b", 16, 1, expected=(("maxq", "oom"), ("h100", "oom"), ("h200", "unknown"))),
    # E3 at a size that fits two GPUs: GRPO, TP 2, offload, dynamic batch size, KL loss; per engine.
    *(
        verl(
            "qwen2_5_7b",
            "grpo",
            eng,
            16,
            16,
            None,
            2,
            GPU,
            r=4096,
            tp=2,
            steps=5,
            slow=True,
            knobs={"dyn": 16384, "offl": 1, "kl": 1},
            expected=(("maxq", "unknown"), ("h100", "unknown")),
        )
        for eng in ("vllm", "sglang")
    ),
    # E3 at its scale (8 GPUs, the Phi-4-sized 14B model, rollout TP 2, FSDP offload, dynamic
    # batch of 39,904 tokens per GPU, KL loss, batch 16, n 1, prompts of 1,020 tokens), per engine.
    # E3's responses ran to 31,744 tokens (mean 17,436); here they are fixed at 8,192 so that a
    # few steps fit one machine's loan and every run does the same work.
    *(
        verl(
            "phi_4",
            "grpo",
            eng,
            16,
            16,
            None,
            8,
            ("h100", "h200"),
            p=1020,
            r=8192,
            tp=2,
            steps=3,
            slow=True,
            knobs={"dyn": 39904, "offl": 1, "kl": 1},
            notes="E3 at its scale: 14B GRPO on 8 GPUs",
        )
        for eng in ("vllm", "sglang")
    ),
]

# The micro-batch cliff of E1 (the largest micro-batch that fits), by bisection over 1, 2, 4...;
# micro-batches verl rejects bound the search like an OOM does, at no GPU cost. Two steps a
# probe: E1's OOMs came in the first update.
CLIFFS = [
    (e1("qwen2_5_3b", 1, 2).replace(steps=2), "micro_batch_size", 1, 512),
    (e1("qwen2_5_3b", 1, 1).replace(steps=2), "micro_batch_size", 1, 512),
]


@pytest.mark.parametrize("case", params(CASES))
def test_rl_verl(case: Case, trainperf: Any) -> None:
    trainperf(case)


@pytest.mark.parametrize(
    ("case", "axis", "low", "high"),
    [pytest.param(c, a, lo, hi, id=f"{c.id}-cliff-{a}", marks=marks_for(c)) for c, a, lo, hi in CLIFFS],
)
def test_rl_verl_cliff(case: Case, axis: str, low: int, high: int, trainperf: Any) -> None:
    trainperf.cliff(case, axis, low, high)
