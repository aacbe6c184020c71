"""What really ran: the effective configuration read off the live model, and library versions.

A hand-built QLoRA model once trained without gradient checkpointing because peft only
enables it on models flagged as 4-bit loaded; so the suite reads such facts from the model
after the trainer has set it up, never from what was asked for.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from trainperf.workloads.protocol import ChildSpec

PACKAGES = ("torch", "transformers", "peft", "trl", "accelerate", "datasets", "bitsandbytes", "tokenizers")


def _logical_numel(param: torch.Tensor) -> int:
    # A 4-bit parameter stores two values per byte; its quant_state holds the logical shape.
    quant_state = getattr(param, "quant_state", None)
    if quant_state is not None and getattr(quant_state, "shape", None) is not None:
        return int(torch.Size(quant_state.shape).numel())
    return int(param.numel())


def _base_model(model: nn.Module) -> nn.Module:
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def effective_config(model: nn.Module, *, precision: str) -> dict[str, Any]:
    base = _base_model(model)
    seen: set[int] = set()
    total = trainable = 0
    trainable_dtypes: set[str] = set()
    for param in model.parameters():
        if id(param) in seen:
            continue
        seen.add(id(param))
        count = _logical_numel(param)
        total += count
        if param.requires_grad:
            trainable += count
            trainable_dtypes.add(str(param.dtype).replace("torch.", ""))
    adapter_modules = sorted(
        {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if hasattr(m, "lora_A")}
    )
    lora_layers = sum(1 for _, m in model.named_modules() if hasattr(m, "lora_A"))
    return {
        "total_params": total,
        "trainable_params": trainable,
        "trainable_dtypes": sorted(trainable_dtypes),
        "quantized_modules": sum(
            1 for m in base.modules() if type(getattr(m, "weight", None)).__name__ == "Params4bit"
        ),
        "lora_layers": lora_layers,
        "adapter_targets": adapter_modules,
        "attn_implementation": getattr(base.config, "_attn_implementation", None),
        "gradient_checkpointing": bool(getattr(base, "is_gradient_checkpointing", False)),
        "loaded_in_4bit": bool(getattr(base, "is_loaded_in_4bit", False)),
        "precision": precision,
        "model_class": type(base).__name__,
    }


def library_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Installed versions of the training stack, plus a family's own ``extra`` packages."""
    versions = {}
    for package in (*PACKAGES, *extra):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    versions["torch_cuda"] = str(torch.version.cuda)
    return versions


def harness_trainer_args(seed: int, on_gpu: bool) -> dict[str, Any]:
    """TrainingArguments every family sets the same way: AdamW, bf16 on a GPU, no saving, no
    reporting, no progress bars, seeded data order, data loaded in the training process."""
    return {
        "optim": "adamw_torch",
        "bf16": on_gpu,
        "logging_steps": 10,
        "report_to": "none",
        "save_strategy": "no",
        "seed": seed,
        "data_seed": seed,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
        "use_cpu": not on_gpu,
    }


def trainer_output_dir(spec: ChildSpec) -> str:
    """The Trainer's ``output_dir``: inside the child's own folder, so that a run leaves nothing
    behind elsewhere (the Trainer saves nothing there: ``save_strategy`` is ``no``). A temporary
    folder per child used to stay in /tmp after every run."""
    return str(Path(spec.out_dir) / "trainer")
