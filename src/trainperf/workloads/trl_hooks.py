"""What the rl_trl workload needs of TRL's GRPOTrainer, checked, and the hooks that time its phases.

The hooks wrap four GRPOTrainer methods on the trainer instance and read what two of them return,
so they depend on TRL's internals: every release from 1.0.0 to 1.16.0 was read for them. No release
is refused by its number; each piece the workload relies on is checked instead, before the run or at
every hooked call, and a missing one is a one-line error naming it and the releases that have it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.families.rl_trl import GrpoShape
from trainperf.workloads.phases import PhaseClock
from trainperf.workloads.protocol import SkipCase

PHASE_HOOKS = {
    "training_step": "update",
    "_prepare_inputs": "prepare",
    "_generate": "gen",
    "_calculate_rewards": "reward",
}
"""GRPOTrainer method -> phase charged with its time (less the time of the phases nested in it)."""
TRL_RELEASES_READ = "trl 1.0.0 to 1.16.0"
"""The releases whose GRPOTrainer the hooks were checked against, all 23 alike in what the hooks
use: the four hooked methods, called with the same arguments, ``_generate`` returning the prompt
and completion token ids first (a tuple of 7 items in 1.0.0, 9 in 1.1-1.8, 8 from 1.9), and
``_calculate_rewards`` a (completions x reward functions) tensor. No release is refused by its
number: what the workload needs is checked instead, before the run and at every hooked call."""
GRPO_CONFIG_FIELDS = (
    "num_generations",
    "max_completion_length",
    "generation_kwargs",
    "beta",
    "steps_per_generation",  # read back, with loss_type, for the effective configuration
    "loss_type",
)
"""GRPOConfig fields the workload sets or reads beyond transformers' TrainingArguments."""


def check_grpo_config(version: str, fields: set[str]) -> None:
    """GRPOConfig must take every field the workload sets or reads: checked before it is built,
    where a missing one would be an unexplained ``TypeError`` (an unexpected keyword argument)."""
    missing = [name for name in GRPO_CONFIG_FIELDS if name not in fields]
    if missing:
        raise TrainperfError(
            f"trl {version}: GRPOConfig has no {', '.join(missing)}, which the rl_trl workload sets "
            f"or reads; {TRL_RELEASES_READ} have it"
        )


def check_log_prob_kernel(version: str, device_type: str) -> None:
    """Whether this release's GRPOTrainer can compute a loss on this machine at all.

    trl 1.15 patches the model with a fused LM head whose chunked log-probability kernel is Triton
    alone, launched whatever the device (without Triton the kernel is None and the first loss
    crashes: ``'NoneType' object has no attribute 'apply'``), and no setting turns the head off;
    1.16 folds the same tiles in torch where Triton cannot run (``_use_triton``). Such a release
    runs on a GPU host but not here, which is a skip saying why, not a crash."""
    if not hasattr(importlib.import_module("trl.trainer.utils"), "add_fused_lm_head"):
        return  # log-probabilities from the model's own logits (trl 1.0.0 to 1.14.2)
    try:
        kernel = importlib.import_module("trl.kernels.chunked_logprob")
    except ImportError as exc:
        cause = f"this torch build has no Triton ({exc})"
    else:
        if hasattr(kernel, "_use_triton") or device_type in ("cuda", "xpu"):
            return  # a torch fallback (trl 1.16), or a device Triton drives
        cause = f"Triton runs it on CUDA or XPU devices, not on {device_type}"
    raise SkipCase(
        f"trl {version}: GRPOTrainer computes log-probabilities only through a Triton kernel "
        f"(trl.kernels.chunked_logprob), and {cause}; trl 1.16.0 falls back to torch, "
        "trl 1.0.0 to 1.14.2 use the model's logits"
    )


def check_trl(version: str, trainer: Any) -> None:
    """The trainer must have every hooked method (an inherited one counts: ``training_step`` is
    transformers' in trl 0.19.1) and the generation config that forces the completion length."""
    missing = [name for name in PHASE_HOOKS if not callable(getattr(trainer, name, None))]
    if missing:
        raise TrainperfError(
            f"trl {version}: GRPOTrainer has no {', '.join(missing)}, which the rl_trl phase hooks "
            f"time; {TRL_RELEASES_READ} have it"
        )
    if getattr(trainer, "generation_config", None) is None:
        raise TrainperfError(
            f"trl {version}: GRPOTrainer has no generation_config, through which the rl_trl workload "
            f"forces the completion length; {TRL_RELEASES_READ} have it"
        )


def generated_ids(version: str, output: Any) -> tuple[list[list[int]], list[list[int]]]:
    """The prompt and completion token ids of one ``_generate`` call, one row per completion.

    Every release read returns a tuple whose first two items are these lists (its length varies);
    anything else is refused rather than guessed at: padded tensors would pass the length checks
    at their padded length, and one prompt row per group would undercount the prompt tokens."""
    where = f"trl {version}: GRPOTrainer._generate returned"
    expected = (
        f"where the rl_trl hooks read (prompt_ids, completion_ids, ...), one list of token ids "
        f"per completion, as {TRL_RELEASES_READ} return them"
    )
    if not isinstance(output, tuple) or len(output) < 2:
        raise TrainperfError(f"{where} {_described(output)}, {expected}")
    for position in (0, 1):
        rows = output[position]
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise TrainperfError(f"{where} {_described(rows)} at position {position}, {expected}")
    prompt_ids, completion_ids = output[0], output[1]
    if len(prompt_ids) != len(completion_ids):
        raise TrainperfError(
            f"{where} {len(prompt_ids)} prompt rows for {len(completion_ids)} completions, {expected}"
        )
    return prompt_ids, completion_ids


def _described(value: Any) -> str:
    """``a tuple of 1``, ``a Tensor``, ``a list of Tensor``: enough to see which layout came back."""
    name = type(value).__name__
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if isinstance(value, list) and value:
        return f"a list of {type(value[0]).__name__}"
    return f"a {name}"


class GrpoStepLog:
    """What the hooks saw during one optimizer step: the generated batch's token counts and rewards."""

    def __init__(self, shape: GrpoShape, force_length: bool, trl_version: str) -> None:
        self.shape, self.force_length, self.trl_version = shape, force_length, trl_version
        self.completions = self.prompt_tokens = self.completion_tokens = 0
        self.rewards: list[float] = []

    def generated(self, output: Any) -> None:
        prompt_ids, completion_ids = generated_ids(self.trl_version, output)
        lengths = sorted({len(ids) for ids in completion_ids})
        if self.force_length and lengths != [self.shape.completion_len]:
            raise TrainperfError(
                f"completions of {lengths} tokens where exactly {self.shape.completion_len} were forced: "
                "generation "
                "ignored min_new_tokens, so the work per step is no longer fixed"
            )
        prompt_lengths = sorted({len(ids) for ids in prompt_ids})
        if prompt_lengths != [self.shape.prompt_len]:
            raise TrainperfError(
                f"prompts of {prompt_lengths} tokens where {self.shape.prompt_len} were built"
            )
        self.completions += len(completion_ids)
        self.prompt_tokens += sum(len(ids) for ids in prompt_ids)
        self.completion_tokens += sum(len(ids) for ids in completion_ids)

    def scored(self, output: Any) -> None:
        # Every release read returns one row per completion, one column per reward function.
        if getattr(output, "ndim", None) != 2:
            raise TrainperfError(
                f"trl {self.trl_version}: GRPOTrainer._calculate_rewards returned {_described(output)}, "
                f"where the rl_trl hooks read a (completions x reward functions) tensor, as "
                f"{TRL_RELEASES_READ} return it"
            )
        self.rewards.extend(float(r) for r in output.sum(dim=1).tolist())

    def close_step(self) -> dict[str, Any]:
        """The step's fields, once the hooks are shown to have seen all of its generation: a release
        that generated some other way would leave time and tokens out of the step, unnoticed."""
        if self.completions != self.shape.completions_per_step:
            raise TrainperfError(
                f"trl {self.trl_version}: the phase hooks saw {self.completions} completions generated in a "
                f"step that trains on {self.shape.completions_per_step}: GRPOTrainer generated outside "
                "_generate, or not once per optimizer step, so the step's time and tokens would not match"
            )
        return self.take()

    def take(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.rewards:
            fields["reward_mean"] = sum(self.rewards) / len(self.rewards)
        self.completions = self.prompt_tokens = self.completion_tokens = 0
        self.rewards = []
        return fields


def install_phase_hooks(trainer: Any, clock: PhaseClock, log: GrpoStepLog) -> None:
    """Wrap the hooked methods on this trainer instance: every caller inside TRL and transformers
    reaches them through ``self``, so the instance attributes take effect and TRL stays unpatched."""
    after: dict[str, Callable[[Any], None]] = {"_generate": log.generated, "_calculate_rewards": log.scored}
    for name, phase in PHASE_HOOKS.items():
        setattr(trainer, name, _timed(getattr(trainer, name), phase, clock, after.get(name)))


def _timed(
    method: Callable[..., Any], phase: str, clock: PhaseClock, after: Callable[[Any], None] | None
) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with clock.phase(phase):
            output = method(*args, **kwargs)
        if after is not None:
            after(output)
        return output

    return wrapper
