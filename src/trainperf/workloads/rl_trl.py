"""GRPO with TRL's GRPOTrainer: plain transformers generation (no vLLM), a rule reward, LoRA or full.

The work per step is fixed: synthetic prompts of exactly ``prompt_len`` tokens, generation
forced to exactly ``completion_len`` tokens (``min_new_tokens`` = ``max_new_tokens``: the EOS
logit is masked until then; any other length stops the run), a reward computed from the token
ids alone, reference-free (``beta`` 0: no reference model, no KL term) and one generation per
optimizer step (TRL's default ``steps_per_generation`` = gradient accumulation), so no old
log-probabilities are recomputed either.

Phases per step, timed by wrapping four methods on the trainer instance (TRL itself is not
patched): ``gen`` (``_generate``: prompt tokenisation, ``model.generate``, decoding), ``reward``
(``_calculate_rewards``), ``prepare`` (the rest of ``_prepare_inputs``: padding, log-probabilities
where TRL computes them, advantages) and ``update`` (``training_step`` less its preparation:
forward and backward; plus, from the last micro-batch to the step's end, gradient clipping, the
optimizer and scheduler steps). Tokens per step are the prompt plus completion tokens of the
step's sequences (each is prefilled or decoded once, then trained on once): TRL's own
``num_input_tokens_seen`` counts the same. What the hooks need of TRL, and how each piece is
checked across releases, is in ``trl_hooks``.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import time
from typing import Any

import torch

from trainperf.case import Case
from trainperf.families.rl_trl import FIXED_PROFILE, GrpoShape, preflight_grpo
from trainperf.workloads.effective import (
    effective_config,
    harness_trainer_args,
    library_versions,
    trainer_output_dir,
)
from trainperf.workloads.phases import PhaseClock
from trainperf.workloads.protocol import ChildSpec
from trainperf.workloads.recorder import StepRecorder
from trainperf.workloads.sft_hf import (
    ATTN_IMPLEMENTATION,
    lora_config,
    train_timed,
)  # E2's adapter recipe, shared
from trainperf.workloads.trl_hooks import (
    GrpoStepLog,
    check_grpo_config,
    check_log_prob_kernel,
    check_trl,
    install_phase_hooks,
)


def even_token_reward(completion_ids: list[list[int]], **_: Any) -> list[float | None]:
    """The share of even token ids in each completion: deterministic, costs microseconds, and differs
    between the completions of a group, so advantages (and so gradients) are not all zero."""
    return [sum(1 for token in ids if token % 2 == 0) / len(ids) if ids else 0.0 for ids in completion_ids]


def prompt_texts(count: int, prompt_len: int, vocab_size: int, seed: int) -> list[str]:
    """``count`` prompts of exactly ``prompt_len`` tokens under the local word-level tokenizer."""
    from trainperf.synth.profiles import synthetic_token_ids
    from trainperf.synth.tokenizer import FIRST_REGULAR_ID, regular_id_end

    rows = synthetic_token_ids([prompt_len] * count, regular_id_end(vocab_size), FIRST_REGULAR_ID, seed=seed)
    return [" ".join(f"w{token}" for token in row) for row in rows]


def run(spec: ChildSpec, recorder: StepRecorder) -> dict[str, Any]:
    case = Case.from_dict(spec.case)
    shape = preflight_grpo(case)  # the parent checked it too; a hand-written spec gets the same one line
    device = _select_device(spec)
    on_gpu = device.type == "cuda"
    dtype = torch.bfloat16 if on_gpu else torch.float32
    steps, seed = spec.steps, spec.seed
    timeline: dict[str, float] = {}
    started = time.perf_counter()

    from trl import GRPOTrainer

    trl_version = importlib.metadata.version("trl")
    check_log_prob_kernel(trl_version, device.type)  # a release that cannot train here skips before set-up
    model, tokenizer, build = _model_and_tokenizer(case, device, dtype, seed)
    timeline["build_s"] = build.seconds

    import datasets
    import peft  # noqa: F401 - every method imports it up front: missing, the case is skipped before set-up

    texts = prompt_texts(steps * shape.prompts_per_step, shape.prompt_len, model.config.vocab_size, seed)
    peft_config = lora_config(case) if case.method == "lora" else None
    force_length = case.profile == FIXED_PROFILE
    args = _grpo_args(case, shape, spec, on_gpu, force_length, trl_version)
    clock = PhaseClock(sync=(lambda: torch.cuda.synchronize(device)) if on_gpu else (lambda: None))
    log = GrpoStepLog(shape, force_length, trl_version)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[even_token_reward],
        args=args,
        train_dataset=datasets.Dataset.from_dict({"prompt": texts}),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_callback(recorder, clock, log)],
    )
    check_trl(trl_version, trainer)
    install_phase_hooks(trainer, clock, log)
    train_timed(trainer, timeline, started)

    return {
        "effective_config": _effective(trainer, args, build, shape, on_gpu),
        "versions": library_versions(),
        "timeline": timeline,
        "device_name": torch.cuda.get_device_name(device) if on_gpu else "cpu",
    }


def _select_device(spec: ChildSpec) -> torch.device:
    """The spec's device, made current on a GPU; on the CPU, one intra-op thread."""
    device = torch.device(spec.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        # One intra-op thread on the CPU: generation is a long chain of tiny forwards, and with two
        # threads on a shared 2-core machine every op waits at a barrier for a descheduled thread
        # (16 tokens for 8 sequences of the tiny model: 0.14 s with one thread, 1.0-2.9 s with two).
        torch.set_num_threads(1)
    return device


def _model_and_tokenizer(
    case: Case, device: torch.device, dtype: torch.dtype, seed: int
) -> tuple[Any, Any, Any]:
    """A random model of the case's architecture and the local tokenizer, whose special ids the
    model's configs take over."""
    from trainperf.synth.random_model import build_random_model, hf_config
    from trainperf.synth.tokenizer import build_tokenizer

    config = hf_config(case.model, dtype, ATTN_IMPLEMENTATION)
    model, build = build_random_model(config, device=device, dtype=dtype, quantize_4bit=False, seed=seed)
    tokenizer = build_tokenizer(config.vocab_size)
    # The shipped configs name the real tokenizer's special ids (Qwen2.5's EOS is 151645, an ordinary
    # word here): only the local tokenizer's EOS may end, or be held back from ending, a completion.
    configs: tuple[Any, ...] = (model.config, model.generation_config)
    for source in configs:
        source.eos_token_id, source.bos_token_id = tokenizer.eos_token_id, tokenizer.bos_token_id
        source.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer, build


def _grpo_args(
    case: Case, shape: GrpoShape, spec: ChildSpec, on_gpu: bool, force_length: bool, trl_version: str
) -> Any:
    """GRPOConfig: reference-free (``beta`` 0), completions forced to their full length where the
    profile fixes it."""
    from trl import GRPOConfig

    check_grpo_config(trl_version, {field.name for field in dataclasses.fields(GRPOConfig)})

    generation_kwargs: dict[str, Any] = {
        "use_cache": True
    }  # the model config says no cache (a training default)
    if force_length:
        generation_kwargs["min_new_tokens"] = shape.completion_len
    return GRPOConfig(
        output_dir=trainer_output_dir(spec),
        max_steps=spec.steps,
        per_device_train_batch_size=case.batch_size,
        gradient_accumulation_steps=case.grad_accum,
        num_generations=shape.num_generations,
        max_completion_length=shape.completion_len,
        generation_kwargs=generation_kwargs,
        beta=0.0,
        learning_rate=case.learning_rate,
        gradient_checkpointing=case.gradient_checkpointing,
        **harness_trainer_args(spec.seed, on_gpu),
    )


def _effective(trainer: Any, args: Any, build: Any, shape: GrpoShape, on_gpu: bool) -> dict[str, Any]:
    """The configuration the run trained with, generation and GRPO's settings included."""
    assert trainer.model is not None
    effective = effective_config(trainer.model, precision="bf16" if on_gpu else "fp32")
    generation = trainer.generation_config
    effective.update(
        optimizer=getattr(args.optim, "value", str(args.optim)),
        model_source=build.source,
        dataset_source=f"synthetic prompts: {shape.prompt_len} tokens",
        generation_backend="transformers.generate",
        generation_use_cache=bool(generation.use_cache),
        generation_min_new_tokens=generation.min_new_tokens,
        generation_max_new_tokens=generation.max_new_tokens,
        num_generations=args.num_generations,
        steps_per_generation=args.steps_per_generation,
        beta=args.beta,
        loss_type=args.loss_type,
        reward=even_token_reward.__name__,
        cpu_threads=None if on_gpu else torch.get_num_threads(),
    )
    return effective


def _callback(recorder: StepRecorder, clock: PhaseClock, log: GrpoStepLog) -> Any:
    from transformers import TrainerCallback

    class StepEdges(TrainerCallback):
        """Synchronised step edges; each step's phases, tokens and rewards from the hooks."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            clock.take()
            log.take()
            recorder.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            clock.charge_since_last_edge("update")  # clipping, optimizer, scheduler, zero_grad
            fields = log.close_step()
            tokens = fields["prompt_tokens"] + fields["completion_tokens"]
            recorder.step_end(tokens, phases={k: round(v, 6) for k, v in clock.take().items()}, **fields)

    return StepEdges()
