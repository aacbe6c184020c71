"""Hydra overrides for ``python -m verl.trainer.main_ppo`` generated from a case (version-aware).

Every knob that changes the work is set explicitly, even where it equals verl's default, so
that a default changing between releases does not silently change the case (the rollout's
tensor parallel size defaults to 2, which a one-GPU case cannot run). Key paths checked against
``verl/trainer/config/_generated_ppo_trainer.yaml`` of 0.7.0, 0.8.0 and 0.9.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainperf.families.rl_verl.knobs import KL_LOSS_COEF, KL_LOSS_TYPE, VerlKnobs
from trainperf.families.rl_verl.versions import RuleSet
from trainperf.workloads.protocol import CachedInput

ACTOR_LR = 1e-6
CRITIC_LR = 1e-5
GPU_MEMORY_UTILIZATION = 0.5
REWARD_FUNCTION = "compute_score"
ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """The files a run reads and writes (made by the child before launch)."""

    model_dir: Path
    tokenizer_dir: Path
    train_parquet: Path
    reward_file: Path
    work_dir: Path
    experiment: str
    cached: tuple[CachedInput, ...] = ()
    """The cached synthetic inputs among them (a fresh runner writes these first)."""


def _flag(value: bool) -> str:
    return "True" if value else "False"


def overrides(knobs: VerlKnobs, inputs: Inputs, *, steps: int, rules: RuleSet) -> list[str]:
    """The argument list after ``python -m verl.trainer.main_ppo``."""
    return [
        *_data_args(knobs, inputs),
        *_actor_rollout_args(knobs, inputs),
        *_critic_args(knobs, inputs),
        *_reward_args(inputs, rules),
        *_trainer_args(knobs, inputs, steps),
    ]


def _data_args(knobs: VerlKnobs, inputs: Inputs) -> list[str]:
    """The algorithm and the prompts: the batch, the lengths, always the same order."""
    return [
        f"algorithm.adv_estimator={'gae' if knobs.use_critic else 'grpo'}",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={inputs.train_parquet}",
        f"data.val_files={inputs.train_parquet}",
        f"data.train_batch_size={knobs.train_batch}",
        f"data.max_prompt_length={knobs.prompt_len}",
        f"data.max_response_length={knobs.response_len}",
        "data.filter_overlong_prompts=False",
        "data.truncation=error",
        # Step k is the same batch in every run (paired comparison of phases).
        "data.shuffle=False",
    ]


def _actor_rollout_args(knobs: VerlKnobs, inputs: Inputs) -> list[str]:
    """The actor (and its reference) and the rollout engine: model, optimiser, batching, offload."""
    args = [
        f"actor_rollout_ref.model.path={inputs.model_dir}",
        f"actor_rollout_ref.model.tokenizer_path={inputs.tokenizer_dir}",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        f"{ACTOR}.optim.lr={ACTOR_LR:g}",
        f"{ACTOR}.ppo_mini_batch_size={knobs.mini_batch}",
        f"{ACTOR}.use_kl_loss={_flag(knobs.kl_loss)}",
        f"{ROLLOUT}.name={knobs.engine}",
        f"{ROLLOUT}.tensor_model_parallel_size={knobs.rollout_tp}",
        f"{ROLLOUT}.gpu_memory_utilization={GPU_MEMORY_UTILIZATION}",
        f"{ROLLOUT}.n={knobs.rollout_n}",
    ]
    if knobs.kl_loss:
        args += [f"{ACTOR}.kl_loss_coef={KL_LOSS_COEF}", f"{ACTOR}.kl_loss_type={KL_LOSS_TYPE}"]
    if not knobs.natural_lengths:
        # Random weights emit EOS rarely but not never: ignore_eos makes every response exactly
        # response_len tokens, so the work per step is the same in every run. verl passes it to
        # vLLM's SamplingParams (0.9.1 vllm_async_server.py:624); its SGLang server does not read
        # it, so SGLang lengths are fixed only up to that rare EOS (response_length/* is recorded).
        args.append(f"{ROLLOUT}.ignore_eos=True")
    if knobs.dynamic_batch:
        args += [
            f"{ACTOR}.use_dynamic_bsz=True",
            f"{ACTOR}.ppo_max_token_len_per_gpu={knobs.max_tokens_per_gpu}",
        ]
    else:
        micro = knobs.micro_batch
        args += [
            f"{ACTOR}.ppo_micro_batch_size_per_gpu={micro}",
            f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu={micro}",
            f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        ]
    if knobs.offload:
        args += [
            f"{ACTOR}.fsdp_config.param_offload=True",
            f"{ACTOR}.fsdp_config.optimizer_offload=True",
            "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        ]
    return args


def _critic_args(knobs: VerlKnobs, inputs: Inputs) -> list[str]:
    """PPO's critic, on the actor's model and batching (none for GRPO)."""
    if not knobs.use_critic:
        return []
    args = [
        f"critic.model.path={inputs.model_dir}",
        f"critic.model.tokenizer_path={inputs.tokenizer_dir}",
        "critic.model.use_remove_padding=True",
        "critic.model.enable_gradient_checkpointing=True",
        f"critic.optim.lr={CRITIC_LR:g}",
        f"critic.ppo_mini_batch_size={knobs.mini_batch}",
    ]
    if knobs.dynamic_batch:
        args += [
            "critic.use_dynamic_bsz=True",
            f"critic.ppo_max_token_len_per_gpu={knobs.max_tokens_per_gpu}",
        ]
    else:
        args.append(f"critic.ppo_micro_batch_size_per_gpu={knobs.micro_batch}")
    return args


def _reward_args(inputs: Inputs, rules: RuleSet) -> list[str]:
    # The custom reward moved under ``reward.`` in 0.8 (the top-level key is a deprecated alias there).
    reward = "custom_reward_function" if rules == "workers" else "reward.custom_reward_function"
    return [f"{reward}.path={inputs.reward_file}", f"{reward}.name={REWARD_FUNCTION}"]


def _trainer_args(knobs: VerlKnobs, inputs: Inputs, steps: int) -> list[str]:
    """One node, ``steps`` training steps in one epoch, no validation, no checkpoints."""
    work = inputs.work_dir
    return [
        "trainer.critic_warmup=0",
        "trainer.logger=[console,file]",
        "trainer.project_name=trainperf",
        f"trainer.experiment_name={inputs.experiment}",
        f"trainer.n_gpus_per_node={knobs.gpus}",
        "trainer.nnodes=1",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={work / 'checkpoints'}",
        "trainer.total_epochs=1",
        f"trainer.total_training_steps={steps}",
        f"hydra.run.dir={work / 'hydra'}",
    ]


def dataset_rows(knobs: VerlKnobs, steps: int) -> int:
    """Prompts the parquet needs: one epoch covers every step (``total_epochs=1``)."""
    return knobs.train_batch * steps


def merge_overrides(args: list[str], extra: list[str]) -> list[str]:
    """``args`` with ``extra`` Hydra overrides applied: one for a key already set replaces it
    (Hydra refuses a key given twice), a new one (``+key=`` / ``++key=``) is appended."""

    def key_of(item: str) -> str:
        return item.split("=", 1)[0].lstrip("+~")

    replaced = {key_of(item): item for item in extra}
    merged = [replaced.pop(key_of(item), item) for item in args]
    return merged + [item for item in extra if key_of(item) in replaced]


# Without flash-attn (no wheel on PyPI; building it takes hours), the actor and reference models
# can run PyTorch's SDPA: verl 0.9 reads ``model.override_config.attn_implementation`` (its
# workers/config/model.py) and has pure-torch unpad/pad fallbacks, but its remove-padding path is
# written for flash-attn's varlen kernels, so it is turned off too. Recorded in the result.
SDPA_OVERRIDES = (
    "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.model.use_remove_padding=False",
)
# The PPO critic ignores override_config: verl's load_valuehead_model hard-codes
# flash_attention_2. The child has verl import trainperf's replacement in every process
# (trainperf/workloads/verl_sdpa_critic.py says how and why not through external_lib).
CRITIC_SDPA_OVERRIDES = (
    "++critic.model.override_config.attn_implementation=sdpa",
    "critic.model.use_remove_padding=False",
)


@dataclass(frozen=True, slots=True)
class Attention:
    """What a run without flash-attn changes: its overrides and what the result records."""

    overrides: tuple[str, ...]
    actor: str
    critic: str | None  # None: the case has no critic

    @property
    def needs_critic_shim(self) -> bool:
        """A critic on SDPA: verl's own loader would ask for flash_attention_2."""
        return self.critic == "sdpa"


def attention_overrides(knobs: VerlKnobs, *, flash_attn_installed: bool) -> Attention:
    """Overrides that let a case run where flash-attn is missing (none where it is installed)."""
    critic = knobs.use_critic
    if flash_attn_installed:
        return Attention((), "flash_attention_2", "flash_attention_2" if critic else None)
    extra = CRITIC_SDPA_OVERRIDES if critic else ()
    return Attention((*SDPA_OVERRIDES, *extra), "sdpa", "sdpa" if critic else None)
