"""A floor under one GPU's memory while verl updates the actor, from the case alone.

verl's FSDP workers train in fp32: a trained model keeps fp32 weights, fp32 gradients and
AdamW's two fp32 states, 16 B/param, sharded over the case's GPUs. With offload (``offl``)
the actor's leave the GPU between phases, to make room for the rollout, but are loaded back for
its update, so they count either way. The critic (PPO's GAE), updated just before the actor,
keeps its 16 B/param on the GPU (the suite never offloads it), and the reference model (KL
loss) its bf16 weights unless offloaded. Activations, logits, the CUDA context and what the
rollout engine keeps while asleep come on top: this is a lower bound, and a case whose floor
exceeds the GPU fits at no micro-batch.

Measured against it: Qwen2.5-3B PPO on one H100, floor 92 GiB against 79.2 GiB: micro-batches
8, 2 and 1 each ran out of memory in the actor's update at 76 GiB allocated (2026-11-22). E1's
Qwen2.5-7B PPO on two 96 GB Max-Q, floor 109 GiB per GPU: published as OOM at every micro-batch.
Every measured verl peak so far lies above its floor (tests/test_verl_memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families.rl_verl.knobs import FAMILY, knobs_of
from trainperf.memory_estimate import GIB
from trainperf.plan.estimate import param_counts
from trainperf.synth.model_configs import load_model_fixture

TRAINED_BYTES_PER_PARAM = 16.0
"""fp32 weight, fp32 gradient, AdamW's two fp32 states."""
REFERENCE_BYTES_PER_PARAM = 2.0
"""bf16 weights, no gradient, no optimizer."""


@dataclass(frozen=True, slots=True)
class UpdateFloor:
    actor_b: float
    critic_b: float
    reference_b: float

    @property
    def total_gib(self) -> float:
        return (self.actor_b + self.critic_b + self.reference_b) / GIB

    def describe(self) -> str:
        parts = [f"actor {self.actor_b / GIB:.1f}"]
        if self.critic_b:
            parts.append(f"critic {self.critic_b / GIB:.1f}")
        if self.reference_b:
            parts.append(f"reference {self.reference_b / GIB:.1f}")
        return (
            f"verl's states at the actor update need at least {self.total_gib:.1f} GiB per GPU "
            f"({', '.join(parts)})"
        )


def update_floor(case: Case) -> UpdateFloor | None:
    """The floor for an ``rl_verl`` case on a model the suite counts; None otherwise (another
    family, a local checkpoint, an architecture without exact counts)."""
    if case.family != FAMILY or case.model_path:
        return None
    counts = param_counts(load_model_fixture(case.model)["config"])
    if counts is None:
        return None
    knobs = knobs_of(case)
    per_gpu = 1 / knobs.gpus
    critic = 0.0
    if knobs.use_critic:
        # The value model is the body and a one-output head: no language-model head of its own.
        untied_head = 0 if counts.embeddings_tied else counts.vocab * counts.hidden
        critic = (counts.total - untied_head + counts.hidden) * TRAINED_BYTES_PER_PARAM * per_gpu
    reference = (
        counts.total * REFERENCE_BYTES_PER_PARAM * per_gpu if knobs.kl_loss and not knobs.offload else 0.0
    )
    return UpdateFloor(counts.total * TRAINED_BYTES_PER_PARAM * per_gpu, critic, reference)


def over_the_floor(case: Case, limit_gib: float) -> str | None:
    """Why ``case`` cannot fit ``limit_gib`` whatever its micro-batch, when its floor already
    exceeds it; None otherwise (no floor, or under it)."""
    try:
        floor = update_floor(case)
    except TrainperfError:
        return None  # malformed knobs: pre-flight refuses the case as a config error, with the fix
    if floor is None or floor.total_gib <= limit_gib:
        return None
    return f"{floor.describe()} > {limit_gib:.1f} GiB"
