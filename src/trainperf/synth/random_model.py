"""Random-weight models built directly on the target device (child side: imports torch).

Built on the ``meta`` device first, then materialised module by module on the target device
with the architecture's own ``_init_weights``. For QLoRA, transformers' own bitsandbytes
quantizer converts the skeleton's linears to ``Linear4bit`` and each weight is drawn in bf16
and quantised at once, so the bf16 model never sits whole in memory (a Qwen3-32B needs
~65 GB in bf16 but ~19 GB in NF4). A full CPU init of an 8B model took 306 s on an H100
host; this path is ready in seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainperf.synth.model_configs import load_model_fixture


@dataclass(frozen=True, slots=True)
class BuildInfo:
    seconds: float
    quantized_modules: int
    source: str


def hf_config(name: str, dtype: torch.dtype, attn_implementation: str) -> Any:
    """A transformers config from ``fixtures/models/<name>.json``."""
    from transformers import AutoConfig

    raw = dict(load_model_fixture(name)["config"])
    model_type = raw.pop("model_type")
    for key in ("architectures", "transformers_version", "torch_dtype", "dtype", "quantization_config"):
        raw.pop(key, None)
    config = AutoConfig.for_model(model_type, **raw)
    config.dtype = dtype
    config._attn_implementation = attn_implementation
    config.use_cache = False  # training: no KV cache
    return config


def nf4_config() -> Any:
    """QLoRA as published: NF4, double quantisation, bf16 compute."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def build_random_model(
    config: Any, *, device: torch.device, dtype: torch.dtype, quantize_4bit: bool, seed: int = 0
) -> tuple[nn.Module, BuildInfo]:
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    torch.manual_seed(seed)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    quantizer = None
    if quantize_4bit:
        from transformers.quantizers import AutoHfQuantizer

        quantizer = AutoHfQuantizer.from_config(nf4_config(), pre_quantized=False)
        quantizer.preprocess_model(model=model, device_map={"": device}, dtype=dtype)
    quantized = _materialise(model, device)
    model.tie_weights()
    if quantizer is not None:
        quantizer.postprocess_model(model)
        model.hf_quantizer = quantizer
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return model, BuildInfo(time.perf_counter() - started, quantized, "random")


def load_local_model(
    path: str, *, device: torch.device, dtype: torch.dtype, quantize_4bit: bool, attn_implementation: str
) -> tuple[nn.Module, BuildInfo]:
    """The real loading path: a local checkpoint folder, quantised on load for QLoRA."""
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=dtype,
        device_map={"": device},
        quantization_config=nf4_config() if quantize_4bit else None,
        attn_implementation=attn_implementation,
        local_files_only=True,
    )
    model.config.use_cache = False
    return model, BuildInfo(time.perf_counter() - started, count_4bit_modules(model), f"local:{path}")


def count_4bit_modules(model: nn.Module) -> int:
    return sum(1 for m in model.modules() if _is_4bit_linear(m))


def _is_4bit_linear(module: nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return type(weight).__name__ == "Params4bit"


@torch.no_grad()
def _materialise(model: nn.Module, device: torch.device) -> int:
    """Replace every meta tensor by an initialised one on ``device``; return #4-bit linears."""
    init_module: Any = model._init_weights  # the architecture's own initialisation
    std = float(getattr(model.config, "initializer_range", 0.02) or 0.02)
    quantized = 0
    for module in model.modules():
        meta_params = [n for n, p in module.named_parameters(recurse=False) if p.is_meta]
        meta_buffers = [n for n, b in module.named_buffers(recurse=False) if b is not None and b.is_meta]
        if not meta_params and not meta_buffers:
            continue
        for name in meta_buffers:
            buffer = module._buffers[name]
            assert buffer is not None
            module._buffers[name] = torch.empty_like(buffer, device=device)
        if _is_4bit_linear(module):
            _quantize_random_linear(module, device, std)
            quantized += 1
            continue
        for name in meta_params:
            old = module._parameters[name]
            assert old is not None
            module._parameters[name] = nn.Parameter(torch.empty_like(old, device=device), old.requires_grad)
        init_module(module)
    return quantized


def _quantize_random_linear(module: Any, device: torch.device, std: float) -> None:
    import bitsandbytes as bnb

    old = module.weight
    compute_dtype = getattr(module, "compute_dtype", None) or torch.bfloat16
    weight = torch.empty(old.shape, dtype=compute_dtype, device=device).normal_(0.0, std)
    # Same construction as transformers' Bnb4bitQuantize: quantisation happens in .to(device).
    module.weight = bnb.nn.Params4bit(weight, requires_grad=False, **old.__dict__).to(device)  # type: ignore[misc]
    del weight
    if module.bias is not None:
        module.bias = nn.Parameter(torch.zeros_like(module.bias, device=device), requires_grad=False)
