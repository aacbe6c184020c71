"""A synthetic pre-quantised 4-bit checkpoint on disk, for loaders that want files (unsloth's
``FastLanguageModel.from_pretrained``): random weights in bitsandbytes' serialized NF4 format.

Written layer by layer: the model's skeleton is built on the ``meta`` device, and each linear's
weight is drawn in bf16 on the given device, NF4-quantised by bitsandbytes (block 64, double
quantisation) and moved to the CPU as packed bytes at once, so the bf16 model never sits whole
in memory (Qwen3-32B: ~65 GB in bf16, ~19 GB in NF4). Other parameters (embeddings, norms,
``lm_head``, which transformers' quantizer keeps unquantised) get the architecture's own
initialisation in bf16. Tensors go to safetensors shards with an index, ``config.json`` carries
``quantization_config`` (bnb 4-bit, NF4, double quantisation, bf16 compute) and the local
tokenizer is saved beside them.

Fused mixture-of-experts tensors are written in the layout their loader expects where that is
established (``synth/moe_checkpoint.py``: gpt-oss's experts as unsloth's per-expert NF4 linears);
other fused-expert architectures are refused in one line.

Cached by a hash of everything that shapes the files, under ``TRAINPERF_CACHE_DIR/checkpoints``
(default ``~/.cache/trainperf``), through ``synth/cache.py``: a run killed half-way leaves no
entry that could be loaded, and a disk too small is one line before any writing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainperf.errors import TrainperfError
from trainperf.synth import cache, moe_checkpoint
from trainperf.synth.cache import COMPLETE_MARKER, NotEnoughDisk, require_room
from trainperf.synth.nf4 import NF4_BYTES_PER_PARAM

__all__ = [
    "COMPLETE_MARKER",
    "NotEnoughDisk",
    "UnsupportedArchitecture",
    "ensure_checkpoint",
    "write_checkpoint",
]

FORMAT_VERSION = 1
"""Bump when the files written change, so that older cache entries are not reused."""
BLOCK_SIZE = 64
SHARD_BYTES = 2 << 30
QUANTIZATION_CONFIG: dict[str, Any] = {
    "quant_method": "bitsandbytes",
    "load_in_4bit": True,
    "load_in_8bit": False,
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "bnb_4bit_compute_dtype": "bfloat16",
    "bnb_4bit_quant_storage": "uint8",
    "llm_int8_skip_modules": ["lm_head"],
}
UNQUANTISED = ("lm_head",)


class UnsupportedArchitecture(TrainperfError):
    """The model has parameters this writer cannot quantise (fused experts of an unknown layout)."""


# Serialized NF4 with double quantisation: per quantised weight element, the memory estimate's
# figure (the packed 4-bit value, a uint8 absmax per block of 64, an fp32 absmax per 256 of those);
# per quantised tensor, the two code books (16 and 256 fp32) and the packed quant-state record
# (~160 bytes).
NF4_BYTES_PER_TENSOR = 16 * 4 + 256 * 4 + 160


def checkpoint_bytes(parameters: list[tuple[str, int, bool]]) -> int:
    """Bytes the shards will take: ``(name, elements, quantised)`` per parameter; the rest is bf16."""
    return int(
        sum(
            count * NF4_BYTES_PER_PARAM + NF4_BYTES_PER_TENSOR if quantised else count * 2
            for _name, count, quantised in parameters
        )
    )


def cache_root() -> Path:
    return cache.cache_root("checkpoints")


def cache_key(name: str, config: dict[str, Any], seed: int) -> str:
    """``<name>-<hash>``: the hash covers the config, the quantisation, the seed, the format and the
    experts' layout (only where the model has one, so that dense models' entries keep their keys)."""
    material: dict[str, Any] = {
        "config": config,
        "quantization": QUANTIZATION_CONFIG,
        "block": BLOCK_SIZE,
        "seed": seed,
        "format": FORMAT_VERSION,
    }
    layout = moe_checkpoint.layout_of(str(config.get("model_type")))
    if layout is not None:
        material["experts"] = layout
    return cache.entry_key(name, material)


def ensure_checkpoint(
    name: str,
    config: dict[str, Any],
    *,
    device: torch.device,
    seed: int = 0,
    root: Path | None = None,
    say: Callable[[str], None] = print,
) -> cache.CacheEntry:
    """The cached checkpoint of ``config`` (a model's config.json as a dict), written first if
    needed; its marker holds ``quantized_linears``, the number of NF4 linears."""
    key = cache_key(name, config, seed)

    def build(folder: Path) -> dict[str, Any]:
        return {
            "quantized_linears": write_checkpoint(folder, config, device=device, seed=seed),
            "format": FORMAT_VERSION,
        }

    return cache.ensure_entry(root or cache_root(), key, build, say=say)


@torch.no_grad()
def write_checkpoint(folder: Path, config: dict[str, Any], *, device: torch.device, seed: int = 0) -> int:
    """Write the shards, index, config and tokenizer of a random NF4 model into ``folder``; return #4-bit
    linears."""
    from safetensors.torch import save_file

    from trainperf.synth.tokenizer import build_tokenizer

    hf_config, model, model_type = _meta_model(config)
    moe_checkpoint.apply_layout(model, hf_config, model_type)
    _refuse_fused_experts(model, model_type)
    planned = [
        (
            f"{module_name}.{name}" if module_name else name,
            param.numel(),
            name == "weight" and _quantised(module_name, module),
        )
        for module_name, module in model.named_modules()
        for name, param in module.named_parameters(recurse=False)
    ]
    require_room(
        folder,
        checkpoint_bytes(planned),
        f"the synthetic 4-bit checkpoint of {model_type} ({len(planned)} tensors)",
        instead="a local pre-quantised model_path",
    )
    quantized = _write_shards(_ShardWriter(folder, save_file), model, hf_config, device, seed)
    _write_config(folder, hf_config, model)
    build_tokenizer(int(hf_config.vocab_size)).save_pretrained(str(folder))
    return quantized


def _meta_model(config: dict[str, Any]) -> tuple[Any, Any, str]:
    """The model's transformers config (bf16) and its skeleton on the ``meta`` device, and its type."""
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = {
        k: v
        for k, v in config.items()
        if k not in ("architectures", "transformers_version", "quantization_config")
    }
    model_type = raw.pop("model_type")
    raw.pop("torch_dtype", None)
    raw.pop("dtype", None)
    hf_config = AutoConfig.for_model(model_type, **raw)
    hf_config.dtype = torch.bfloat16
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
    return hf_config, model, model_type


def _refuse_fused_experts(model: Any, model_type: str) -> None:
    """Fused expert tensors left after the layout's swap: no loader's 4-bit layout is known for them."""
    unsupported = [n for n, p in model.named_parameters() if p.dim() > 2]
    if unsupported:
        known = ", ".join(moe_checkpoint.LAYOUTS)
        raise UnsupportedArchitecture(
            f"synthetic 4-bit checkpoint of {model_type}: {len(unsupported)} parameters such as "
            f"{unsupported[0]} are fused 3-D tensors (mixture-of-experts) that bitsandbytes does not "
            f"quantise, and their pre-quantised layout is known only for {known}: "
            "give the case a local pre-quantised model_path"
        )


def _write_shards(shards: _ShardWriter, model: Any, hf_config: Any, device: torch.device, seed: int) -> int:
    """Each module's own parameters into the shards, NF4 for the quantised linears; returns their number."""
    std = float(getattr(hf_config, "initializer_range", 0.02) or 0.02)
    quantized = 0
    for module_name, module in model.named_modules():
        own = list(module.named_parameters(recurse=False))
        if not own:
            continue
        prefix = f"{module_name}." if module_name else ""
        if _quantised(module_name, module):
            shards.add(_quantised_linear(prefix, module, device, std, seed))
            quantized += 1
        elif moe_checkpoint.is_drawn(module):
            shards.add(_drawn(prefix, module, device, std, seed))
        else:
            shards.add(_initialised(prefix, module, model, seed))
    shards.close()
    return quantized


def _write_config(folder: Path, hf_config: Any, model: Any) -> None:
    """``config.json`` as a pre-quantised checkpoint carries it: bnb 4-bit ``quantization_config``, bf16."""
    saved = hf_config.to_dict()
    saved["architectures"] = [type(model).__name__]
    saved["quantization_config"] = dict(QUANTIZATION_CONFIG)
    saved["dtype"] = "bfloat16"
    saved["use_cache"] = False
    (folder / "config.json").write_text(json.dumps(saved, indent=1, sort_keys=True))


def _quantised(module_name: str, module: nn.Module) -> bool:
    """Whether a module's weight is written NF4 (linears but ``lm_head``, as transformers' quantizer does)."""
    return isinstance(module, nn.Linear) and not module_name.endswith(UNQUANTISED)


def draw_weight(name: str, shape: torch.Size, device: torch.device, std: float, seed: int) -> torch.Tensor:
    """The bf16 weight drawn for parameter ``name``: deterministic per name and seed (tests redraw it)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed * 1_000_003 + int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))
    return torch.empty(shape, dtype=torch.bfloat16, device=device).normal_(0.0, std, generator=generator)


def _quantised_linear(
    prefix: str, module: nn.Linear, device: torch.device, std: float, seed: int
) -> dict[str, torch.Tensor]:
    import bitsandbytes.functional as bnb_functional

    name = f"{prefix}weight"
    weight = draw_weight(name, module.weight.shape, device, std, seed)
    packed, state = bnb_functional.quantize_4bit(
        weight, blocksize=BLOCK_SIZE, compress_statistics=True, quant_type="nf4", quant_storage=torch.uint8
    )
    del weight
    # The keys transformers writes for a Linear4bit: weight, weight.absmax, weight.quant_map,
    # weight.nested_absmax, weight.nested_quant_map, weight.quant_state.bitsandbytes__nf4.
    tensors = {name: packed.cpu()}
    tensors.update({f"{name}.{key}": value.cpu() for key, value in state.as_dict(packed=True).items()})
    if module.bias is not None:
        tensors[f"{prefix}bias"] = torch.zeros(module.bias.shape, dtype=torch.bfloat16)
    return tensors


def _drawn(
    prefix: str, module: nn.Module, device: torch.device, std: float, seed: int
) -> dict[str, torch.Tensor]:
    """A module's own parameters drawn in bf16 with ``std`` (gpt-oss initialises its router so)."""
    return {
        f"{prefix}{n}": draw_weight(f"{prefix}{n}", p.shape, device, std, seed).cpu()
        for n, p in module.named_parameters(recurse=False)
    }


def _initialised(prefix: str, module: nn.Module, model: Any, seed: int) -> dict[str, torch.Tensor]:
    """A non-quantised module materialised on the CPU with the architecture's own initialisation."""
    torch.manual_seed(seed + len(prefix))
    module.to_empty(device="cpu", recurse=False)
    model._init_weights(module)
    return {
        f"{prefix}{n}": p.detach().to(torch.bfloat16).contiguous()
        for n, p in module.named_parameters(recurse=False)
    }


class _ShardWriter:
    """Safetensors shards of at most ``SHARD_BYTES`` each, and the index that maps names to shards."""

    def __init__(self, folder: Path, save: Callable[..., None]) -> None:
        self.folder, self.save = folder, save
        self.pending: dict[str, torch.Tensor] = {}
        self.pending_bytes = 0
        self.weight_map: dict[str, str] = {}
        self.total_bytes = 0
        self.count = 0

    def add(self, tensors: dict[str, torch.Tensor]) -> None:
        size = sum(t.numel() * t.element_size() for t in tensors.values())
        if self.pending and self.pending_bytes + size > SHARD_BYTES:
            self._flush()
        self.pending.update(tensors)
        self.pending_bytes += size

    def _flush(self) -> None:
        self.count += 1
        shard = f"model-{self.count:05d}.safetensors"
        self.save(self.pending, str(self.folder / shard), metadata={"format": "pt"})
        self.weight_map.update({name: shard for name in self.pending})
        self.total_bytes += self.pending_bytes
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> None:
        if self.pending:
            self._flush()
        index = {
            "metadata": {"total_size": self.total_bytes},
            "weight_map": dict(sorted(self.weight_map.items())),
        }
        (self.folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
