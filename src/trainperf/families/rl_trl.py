"""TRL GRPO cases (family ``rl_trl``), parent side: the shape of a step and TRL's batch rules (no torch).

A GRPO step samples ``num_generations`` completions for each of its prompts, scores them with a
rule reward and trains on them. The work per step is fixed by three case fields: ``prompt_len``
(tokens per synthetic prompt), ``completion_len`` (tokens generated per completion, forced under
the ``fixed`` profile) and ``num_generations``; ``batch_size`` counts completions per micro-batch,
as TRL's ``per_device_train_batch_size`` does.

TRL's own configuration errors are predicted here, before any process starts, so such a case is a
``config_error`` in milliseconds (the rules of ``GRPOConfig.__post_init__``, the same in every trl
release from 1.0.0 to 1.16.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families.base import Family, check_model
from trainperf.synth.model_configs import load_model_fixture

FAMILY = "rl_trl"
FIXED_PROFILE = "fixed"
"""Prompts of exactly ``prompt_len`` tokens, generation forced to exactly ``completion_len`` tokens."""
METHODS = ("lora", "full")


@dataclass(frozen=True, slots=True)
class GrpoShape:
    prompt_len: int
    completion_len: int
    num_generations: int
    completions_per_step: int

    @property
    def prompts_per_step(self) -> int:
        return self.completions_per_step // self.num_generations

    @property
    def tokens_per_step(self) -> int:
        """Prompt plus completion tokens of the step's sequences: what the step records as its tokens."""
        return self.completions_per_step * (self.prompt_len + self.completion_len)


def grpo_shape(case: Case) -> GrpoShape:
    """The case's step shape; a one-line ``TrainperfError`` where TRL (or this family) would refuse it."""
    where = f"case {case.id}"
    if case.prompt_len is None or case.completion_len is None or case.num_generations is None:
        raise TrainperfError(
            f"{where}: an {FAMILY} case needs prompt_len, completion_len and num_generations"
        )
    if case.prompt_len < 1 or case.completion_len < 1:
        raise TrainperfError(f"{where}: prompt_len and completion_len must be >= 1")
    if case.num_generations < 2:
        # GRPOConfig: "GRPO requires at least 2 generations per prompt to calculate the advantages".
        raise TrainperfError(
            f"{where}: num_generations {case.num_generations} < 2; GRPO needs a group of at least 2"
        )
    if case.gpus != 1:
        raise TrainperfError(f"{where}: {FAMILY} runs one process on one GPU; use gpus=1")
    # GRPOConfig: generation_batch_size (batch x processes x steps_per_generation, the latter = grad_accum
    # by default) must be divisible by num_generations: whole prompt groups per generation batch.
    generation_batch = case.batch_size * case.gpus * case.grad_accum
    if generation_batch % case.num_generations:
        raise TrainperfError(
            f"{where}: TRL needs the generation batch (batch {case.batch_size} x grad_accum "
            f"{case.grad_accum} = "
            f"{generation_batch}) divisible by num_generations {case.num_generations}"
        )
    return GrpoShape(case.prompt_len, case.completion_len, case.num_generations, generation_batch)


def preflight_grpo(case: Case) -> GrpoShape:
    """Everything checkable before launch: the shape, the method, the profile, the model's context."""
    shape = grpo_shape(case)
    if case.method not in METHODS:
        raise TrainperfError(
            f"case {case.id}: {FAMILY} supports methods {', '.join(METHODS)}, not {case.method}"
        )
    if case.profile != FIXED_PROFILE:
        raise TrainperfError(
            f"case {case.id}: {FAMILY} supports profile '{FIXED_PROFILE}' (fixed prompt and completion "
            "lengths), "
            f"not '{case.profile}'"
        )
    if case.model_path or case.dataset_path:
        raise TrainperfError(f"case {case.id}: {FAMILY} runs random-weight models on synthetic prompts only")
    config = load_model_fixture(case.model)["config"]
    positions = int(config.get("max_position_embeddings") or 0)
    if positions and shape.prompt_len + shape.completion_len > positions:
        raise TrainperfError(
            f"case {case.id}: prompt_len + completion_len = {shape.prompt_len + shape.completion_len} "
            "exceeds "
            f"{case.model}'s max_position_embeddings {positions}"
        )
    return shape


class RlTrl(Family):
    name = FAMILY
    child = "trainperf.workloads.rl_trl"
    kind = "rl"
    label = "TRL"

    def preflight(self, case: Case, python: str | None) -> None:
        check_model(case)
        preflight_grpo(case)  # fixed-length synthetic prompts: no length profile

    def samples_per_step(self, case: Case) -> int:
        return case.batch_size  # an RL train batch is global: prompts per step over all GPUs
