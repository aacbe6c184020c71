"""SFT with TRL's SFTTrainer: peft LoRA, bitsandbytes QLoRA (NF4) or full fine-tuning (E2's recipe).

The harness hooks in through a ``TrainerCallback``; the training loop is TRL's own.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from trainperf.case import Case
from trainperf.families import family_of
from trainperf.workloads.effective import (
    effective_config,
    harness_trainer_args,
    library_versions,
    trainer_output_dir,
)
from trainperf.workloads.protocol import BARE_WINDOW_START, ChildSpec
from trainperf.workloads.recorder import StepRecorder

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ATTN_IMPLEMENTATION = "sdpa"


def run(spec: ChildSpec, recorder: StepRecorder) -> dict[str, Any]:
    case = Case.from_dict(spec.case)
    _import_dependencies(case)
    device = torch.device(spec.device)
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    steps = spec.steps
    timeline: dict[str, float] = {}

    started = time.perf_counter()
    model, tokenizer, build = _model_and_tokenizer(case, device, dtype)
    timeline["build_s"] = build.seconds
    dataset = _dataset(case, tokenizer, spec.dataset_steps, model.config.vocab_size, spec.seed)

    from trl import SFTTrainer

    model, peft_config = _adapters(case, model)
    bare_window = None
    if spec.bare:
        bare_window = _bare_window(
            device, steps, BARE_WINDOW_START if spec.bare_window_after is None else spec.bare_window_after
        )
    args = sft_args(
        case,
        spec,
        steps,
        on_gpu,
        gradient_checkpointing=case.gradient_checkpointing,
        extra=distributed_args(case, model),
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[bare_window if bare_window is not None else _callback(recorder)],
    )
    train_timed(trainer, timeline, started)

    return {
        **({"bare_window": bare_window.window} if bare_window is not None else {}),
        "effective_config": _effective(case, trainer, args, build, on_gpu),
        "versions": library_versions(),
        "timeline": timeline,
        "device_name": torch.cuda.get_device_name(device) if on_gpu else "cpu",
    }


def train_timed(trainer: Any, timeline: dict[str, float], started: float) -> None:
    """Train, charging the set-up since ``started`` and then the training itself to ``timeline``."""
    timeline["setup_s"] = time.perf_counter() - started
    trainer.train()
    timeline["train_s"] = time.perf_counter() - started - timeline["setup_s"]


def _import_dependencies(case: Case) -> None:
    """Everything the run will import, first: a missing package is a skip in seconds, before a
    model is built on the GPU (on 2xH200 a missing `datasets` skipped only after Qwen3-8B had
    taken 15.3 GiB per GPU, and the table showed that as the skipped case's memory)."""
    import datasets  # noqa: F401
    import peft  # noqa: F401
    import trl  # noqa: F401

    if case.method == "qlora":
        # transformers reports a missing bitsandbytes as a plain ImportError deep in model set-up;
        # importing it here first makes it a ModuleNotFoundError the harness turns into a clear skip.
        import bitsandbytes  # noqa: F401


def _adapters(case: Case, model: Any) -> tuple[Any, Any]:
    """The model as it is trained (QLoRA: after peft's k-bit preparation) and the LoRA config
    (None for full fine-tuning)."""
    from peft import prepare_model_for_kbit_training

    if case.method == "qlora":
        # The published QLoRA recipe: peft's k-bit preparation (fp32 up-casts, input grads).
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=case.gradient_checkpointing)
    return model, lora_config(case) if case.method in ("lora", "qlora") else None


def lora_config(case: Case) -> Any:
    """E2's adapters: rank and alpha from the case, on every attention and MLP projection, no
    dropout, no bias."""
    from peft import LoraConfig

    return LoraConfig(
        r=case.lora_r,
        lora_alpha=case.lora_alpha,
        lora_dropout=0.0,
        bias="none",
        target_modules=LORA_TARGETS,
        task_type="CAUSAL_LM",
    )


def _effective(case: Case, trainer: Any, args: Any, build: Any, on_gpu: bool) -> dict[str, Any]:
    """The configuration the run actually trained with, as the result records it."""
    assert trainer.model is not None
    effective = effective_config(trainer.model, precision="bf16" if on_gpu else "fp32")
    effective["optimizer"] = getattr(args.optim, "value", str(args.optim))
    effective["gradient_checkpointing_kwargs"] = args.gradient_checkpointing_kwargs
    effective["model_source"] = build.source
    effective["dataset_source"] = case.dataset_path or f"synthetic:{case.profile}"
    if case.method == "qlora":
        effective["quantized_modules"] = build.quantized_modules
    if case.gpus > 1:  # recorded for multi-GPU cases only: single-GPU configurations stay as baselined
        effective["world_size"] = args.world_size
        effective["distributed"] = str(trainer.accelerator.distributed_type)
    return effective


def sft_args(
    case: Case,
    spec: ChildSpec,
    steps: int,
    on_gpu: bool,
    *,
    gradient_checkpointing: bool,
    extra: dict[str, Any] | None = None,
) -> Any:
    """E2's SFTConfig, shared by every SFT family (only who turns on gradient checkpointing differs)."""
    from trl import SFTConfig

    seed = spec.seed
    return SFTConfig(
        output_dir=trainer_output_dir(spec),
        max_steps=steps,
        per_device_train_batch_size=case.batch_size,
        gradient_accumulation_steps=case.grad_accum,
        learning_rate=case.learning_rate,
        max_grad_norm=0.3,
        gradient_checkpointing=gradient_checkpointing,
        max_length=case.max_seq_len,
        packing=False,
        include_num_input_tokens_seen="non_padding",
        **harness_trainer_args(seed, on_gpu),
        **(extra or {}),
    )


def distributed_args(case: Case, model: Any) -> dict[str, Any]:
    """SFTConfig arguments of a multi-GPU case (one rank per GPU under the launcher); none for one GPU,
    so that single-GPU cases keep exactly the configuration their baselines were measured with."""
    if case.gpus == 1:
        return {}
    # Reentrant checkpointing re-runs forward outside autograd's view, which DDP's reducer and
    # FSDP's hooks do not survive with frozen base weights (LoRA); every parameter that trains is used.
    args: dict[str, Any] = {
        "gradient_checkpointing_kwargs": {"use_reentrant": False},
        "ddp_find_unused_parameters": False,
    }
    if case.strategy == "fsdp":
        layer_classes = sorted(
            {type(m).__name__ for m in model.modules() if type(m).__name__.endswith("DecoderLayer")}
        )
        args["fsdp"] = "full_shard auto_wrap"
        args["fsdp_config"] = {"transformer_layer_cls_to_wrap": layer_classes}
    return args


def _callback(recorder: StepRecorder) -> Any:
    from transformers import TrainerCallback

    class StepEdges(TrainerCallback):
        """Step edges synchronised with the device; tokens from the Trainer's own counter."""

        def __init__(self) -> None:
            self._tokens_seen = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._tokens_seen = state.num_input_tokens_seen
            recorder.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            tokens = state.num_input_tokens_seen - self._tokens_seen
            self._tokens_seen = state.num_input_tokens_seen
            recorder.step_end(tokens)

    return StepEdges()


def _bare_window(device: torch.device, steps: int, after: int) -> Any:
    """The bare loop's only hook: two synchronised edges, after step ``after`` and after the last
    step, and the Trainer's own token counter at both (a CPU-side integer, no sync)."""
    from transformers import TrainerCallback

    if steps <= after + 1:
        raise ValueError(
            f"a bare run timed after step {after} needs more than {after + 1} steps, got {steps}"
        )

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    class BareWindow(TrainerCallback):
        def __init__(self) -> None:
            self.window: dict[str, float] = {}
            self._start = (0.0, 0)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == after:
                sync()
                self._start = (time.perf_counter(), state.num_input_tokens_seen)
            elif state.global_step == steps:
                sync()
                t0, tokens0 = self._start
                self.window = {
                    "after_step": after,
                    "steps": steps - after,
                    "seconds": time.perf_counter() - t0,
                    "tokens": state.num_input_tokens_seen - tokens0,
                }

    return BareWindow()


def _model_and_tokenizer(case: Case, device: torch.device, dtype: torch.dtype) -> tuple[Any, Any, Any]:
    from trainperf.synth.random_model import build_random_model, hf_config, load_local_model
    from trainperf.synth.tokenizer import build_tokenizer

    quantize = case.method == "qlora"
    if case.model_path:
        from transformers import AutoTokenizer

        model, build = load_local_model(
            case.model_path,
            device=device,
            dtype=dtype,
            quantize_4bit=quantize,
            attn_implementation=ATTN_IMPLEMENTATION,
        )
        tokenizer = AutoTokenizer.from_pretrained(case.model_path, local_files_only=True)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return model, tokenizer, build
    config = hf_config(case.model, dtype, ATTN_IMPLEMENTATION)
    model, build = build_random_model(config, device=device, dtype=dtype, quantize_4bit=quantize)
    return model, build_tokenizer(config.vocab_size), build


def _dataset(case: Case, tokenizer: Any, steps: int, vocab_size: int, seed: int) -> Any:
    import datasets

    if case.dataset_path:
        return _local_dataset(case.dataset_path)
    from trainperf.synth.profiles import load_profile, sample_lengths, synthetic_token_ids
    from trainperf.synth.tokenizer import FIRST_REGULAR_ID

    profile = load_profile(case.profile)
    count = steps * family_of(case.family).samples_per_step(case)
    lengths = sample_lengths(profile, count, case.max_seq_len)
    rows = synthetic_token_ids(lengths, vocab_size, FIRST_REGULAR_ID, seed=profile.seed + seed)
    return datasets.Dataset.from_dict({"input_ids": rows})


def _local_dataset(path: str) -> Any:
    """A local file: a ``text`` column, or alpaca-style ``instruction``/``input``/``output`` rows."""
    import datasets

    from trainperf.errors import TrainperfError

    suffix = os.path.splitext(path)[1].lower()
    loader = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}.get(suffix)
    if loader is None or not os.path.isfile(path):
        raise TrainperfError(f"dataset_path {path} must be an existing .jsonl, .json, .parquet or .csv file")
    dataset = datasets.load_dataset(loader, data_files=path, split="train")
    columns = set(dataset.column_names)
    if "text" in columns:
        return dataset.select_columns(["text"])
    if {"instruction", "output"} <= columns:

        def to_text(row: dict[str, Any]) -> dict[str, str]:
            parts = [row.get("instruction") or "", row.get("input") or "", row.get("output") or ""]
            return {"text": "\n".join(p for p in parts if p)}

        return dataset.map(to_text, remove_columns=sorted(columns))
    raise TrainperfError(
        f"dataset {path} has columns {sorted(columns)}: give it a 'text' column or instruction/output columns"
    )
