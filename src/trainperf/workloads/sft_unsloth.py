"""SFT with unsloth QLoRA (E2): ``FastLanguageModel`` on a pre-quantised 4-bit checkpoint, TRL's SFTTrainer.

Runs in the 'unsloth' environment (``ci/envs/unsloth.txt``). The checkpoint is the suite's own
synthetic NF4 checkpoint (``synth/quantized_checkpoint.py``, cached by config hash) unless the
case names a local ``model_path``. Besides the usual effective configuration it records what
unsloth decides by itself and can change between versions without a word: the attention
kernel it picked (xformers cannot load under CUDA 13, so SDPA is expected there), the gradient
offload mode, which kind of modules got adapters, and the first step (Triton compilation) apart.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from trainperf.case import Case
from trainperf.workloads.effective import effective_config, library_versions
from trainperf.workloads.protocol import CACHED_INPUTS, CachedInput, ChildSpec, SkipCase
from trainperf.workloads.recorder import StepRecorder
from trainperf.workloads.sft_hf import LORA_TARGETS, _callback, _dataset, sft_args, train_timed

GRADIENT_CHECKPOINTING = "unsloth"
"""unsloth's own checkpointing: saved activations are offloaded to host memory."""
# Offline and quiet: read by unsloth/unsloth_zoo at import (checked in their sources).
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "UNSLOTH_DISABLE_STATISTICS": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_ENABLE_HF_TRANSFER": "0",
}
VERSION_PACKAGES = ("unsloth", "unsloth_zoo", "xformers", "triton", "torchao")


def run(spec: ChildSpec, recorder: StepRecorder) -> dict[str, Any]:
    with _compile_outside_the_run_folder():
        return _train(spec, recorder)


def _train(spec: ChildSpec, recorder: StepRecorder) -> dict[str, Any]:
    case = Case.from_dict(spec.case)
    device = torch.device(spec.device)
    _require_cuda_qlora(case, device)
    torch.cuda.set_device(device)
    os.environ.update(OFFLINE_ENV)
    steps = spec.steps
    seed = spec.seed
    timeline: dict[str, float] = {}
    started = time.perf_counter()

    # unsloth first: it patches transformers, peft and trl, which the checkpoint writer imports.
    FastLanguageModel = _import_unsloth()
    timeline["import_s"] = time.perf_counter() - started
    path, checkpoint, cached = _checkpoint(case, device, seed)
    loaded = time.perf_counter()
    timeline["checkpoint_s"] = loaded - started - timeline["import_s"]
    model, tokenizer = _load_with_adapters(FastLanguageModel, path, case, seed)
    timeline["load_s"] = time.perf_counter() - loaded
    dataset = _dataset(case, tokenizer, spec.dataset_steps, model.config.vocab_size, seed)

    from trl import SFTTrainer

    # unsloth turns checkpointing on itself (get_peft_model); the Trainer's own switch would replace it.
    args = sft_args(case, spec, steps, True, gradient_checkpointing=False)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[_callback(recorder)],
    )
    train_timed(trainer, timeline, started)
    if recorder.steps:
        # Mostly Triton JIT compilation on unsloth: reported apart from the steady state.
        timeline["first_step_s"] = float(recorder.steps[0]["duration_s"])

    return {
        "effective_config": _effective(case, trainer, args, checkpoint),
        "versions": library_versions(VERSION_PACKAGES),
        "timeline": timeline,
        "device_name": torch.cuda.get_device_name(device),
        CACHED_INPUTS: [record.to_dict() for record in cached],
    }


def _require_cuda_qlora(case: Case, device: torch.device) -> None:
    """Skip, saying why, a case unsloth cannot run: one off a CUDA GPU, or not QLoRA."""
    if device.type != "cuda":
        raise SkipCase(
            "unsloth needs a CUDA GPU (it refuses to import without one): sft_unsloth cases run on GPU "
            "runners only"
        )
    if case.method != "qlora":
        raise SkipCase(f"sft_unsloth runs unsloth QLoRA only (method {case.method} is sft_hf's)")


def _load_with_adapters(FastLanguageModel: Any, path: str, case: Case, seed: int) -> tuple[Any, Any]:
    """The 4-bit checkpoint loaded by unsloth, with its LoRA adapters and checkpointing, and its tokenizer."""
    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=path,
        max_seq_length=case.max_seq_len,
        dtype=torch.bfloat16,
        load_in_4bit=True,
        local_files_only=True,
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = FastLanguageModel.get_peft_model(
        model,
        r=case.lora_r,
        lora_alpha=case.lora_alpha,
        lora_dropout=0.0,
        bias="none",
        target_modules=LORA_TARGETS,
        use_gradient_checkpointing=GRADIENT_CHECKPOINTING if case.gradient_checkpointing else False,
        random_state=seed,
    )
    return model, tokenizer


def _effective(case: Case, trainer: Any, args: Any, checkpoint: str) -> dict[str, Any]:
    """The configuration the run trained with, and what unsloth decided by itself."""
    assert trainer.model is not None
    effective = effective_config(trainer.model, precision="bf16")
    effective.update(
        optimizer=getattr(args.optim, "value", str(args.optim)),
        model_source=checkpoint,
        dataset_source=case.dataset_path or f"synthetic:{case.profile}",
        attention_backend=attention_backend(),
        gradient_offload=gradient_offload(trainer.model, case),
        adapter_scope=adapter_scope(trainer.model),
    )
    return effective


def _checkpoint(case: Case, device: torch.device, seed: int) -> tuple[str, str, tuple[CachedInput, ...]]:
    """(path, description, the cache's record of it) of the 4-bit checkpoint to load."""
    if case.model_path:
        return case.model_path, f"local:{case.model_path}", ()
    from trainperf.synth.model_configs import load_model_fixture
    from trainperf.synth.quantized_checkpoint import NotEnoughDisk, UnsupportedArchitecture, ensure_checkpoint

    try:
        info = ensure_checkpoint(
            case.model, load_model_fixture(case.model)["config"], device=device, seed=seed
        )
    except (UnsupportedArchitecture, NotEnoughDisk) as exc:  # cannot run on this machine as it is: say why
        raise SkipCase(str(exc)) from None
    print(
        f"[trainperf] synthetic 4-bit checkpoint {info.path} ({info.state()}, "
        f"{info.marker['quantized_linears']} NF4 linears)",
        flush=True,
    )
    return str(info.path), f"synthetic-nf4:{info.path.name}", (info.record(),)


@contextmanager
def _compile_outside_the_run_folder() -> Iterator[None]:
    """unsloth_zoo writes the modules it generates (about 9 MB for an 8B case) to
    ``UNSLOTH_COMPILE_LOCATION``, by default ``unsloth_compiled_cache`` in the working directory,
    which is the case's run folder: every run's folder grew by it. A folder of this run's own keeps
    each run compiling afresh, as before, and is removed once it trained (the child ends with
    ``os._exit``, so no exit hook would); a location the user set is kept."""
    if os.environ.get("UNSLOTH_COMPILE_LOCATION"):
        yield
        return
    folder = tempfile.mkdtemp(prefix="trainperf-unsloth-compiled-")
    os.environ["UNSLOTH_COMPILE_LOCATION"] = folder
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        del os.environ["UNSLOTH_COMPILE_LOCATION"]


def _import_unsloth() -> Any:
    """``FastLanguageModel``; an unsloth that refuses this GPU or stack is one line, not a traceback."""
    try:
        import unsloth  # noqa: F401 - must come first: it patches transformers, peft and trl
        from unsloth import FastLanguageModel
    except ModuleNotFoundError:
        raise  # the harness names the environment and the missing module
    except Exception as exc:  # noqa: BLE001 - unsloth raises NotImplementedError/RuntimeError/ImportError
        version = library_versions(("unsloth",)).get("unsloth", "?")
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise RuntimeError(
            f"unsloth {version} refused this GPU or stack at import ({type(exc).__name__}: {line})"
        ) from None
    return FastLanguageModel


def attention_backend() -> str:
    """The attention kernel unsloth dispatches to for training on CUDA; 'unknown' where it does not say."""
    try:
        from unsloth.utils.attention_dispatch import select_attention_backend

        chosen: str | None = str(select_attention_backend(False, device_type="cuda"))
    except Exception:  # noqa: BLE001 - older/newer unsloth: fall back to its capability flags below
        chosen = None
    if chosen is not None:
        return chosen
    try:
        from unsloth.models import _utils as unsloth_utils
    except Exception:  # noqa: BLE001
        return "unknown"
    if getattr(unsloth_utils, "HAS_FLASH_ATTENTION", False):
        return "flash_attn"
    if getattr(unsloth_utils, "HAS_XFORMERS", getattr(unsloth_utils, "xformers", None) is not None):
        return "xformers"
    return "sdpa"


def gradient_offload(model: Any, case: Case) -> str:
    """The checkpointing mode asked of unsloth, and whether the model really checkpoints."""
    if not case.gradient_checkpointing:
        return "off"
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    active = bool(getattr(base, "is_gradient_checkpointing", False)) or any(
        getattr(m, "gradient_checkpointing", False) is True for m in base.modules()
    )
    return f"{GRADIENT_CHECKPOINTING}:{'active' if active else 'inactive'}"


def adapter_scope(model: Any) -> str:
    """Which kinds of modules carry LoRA adapters: attention, mlp, experts (a MoE's), joined by '+'."""
    kinds = set()
    for name, module in model.named_modules():
        if not hasattr(module, "lora_A"):
            continue
        if ".experts" in name:
            kinds.add("experts")
        elif any(part in name for part in ("self_attn", ".attn", "attention")):
            kinds.add("attention")
        else:
            kinds.add("mlp")
    return "+".join(sorted(kinds)) or "none"
