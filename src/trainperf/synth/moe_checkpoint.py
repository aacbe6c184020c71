"""Mixture-of-experts layouts of the synthetic 4-bit checkpoint: gpt-oss as unsloth loads it.

transformers 5.17 holds gpt-oss's experts as fused 3-D parameters (``GptOssExperts``:
``gate_up_proj`` [E, H, 2I], ``down_proj`` [E, I, H] and their biases), which bitsandbytes does
not quantise. unsloth's pre-quantised gpt-oss checkpoints (``unsloth/gpt-oss-*-unsloth-bnb-4bit``)
split them into one NF4 linear per expert and projection, and unsloth-zoo swaps transformers'
expert and router classes for ones of that layout before a 4-bit load. Written here that way:

- ``model.layers.N.mlp.experts.gate_up_projs.K`` (``nn.Linear(H, 2I)``, weight [2I, H]) and
  ``...experts.down_projs.K`` (``nn.Linear(I, H)``, weight [H, I]): weight in bitsandbytes'
  serialized NF4 (``weight`` packed uint8, ``weight.absmax``, ``weight.quant_map``,
  ``weight.nested_absmax``, ``weight.nested_quant_map``, ``weight.quant_state.bitsandbytes__nf4``),
  one block size and double quantisation for every expert; ``bias`` in bf16;
- ``model.layers.N.mlp.router.linear.weight`` [E, H] and ``.bias`` [E] in bf16, never quantised;
- attention (with its ``sinks``), embeddings, norms and ``lm_head`` as for a dense model.

Sources, read from the wheels of the versions ``ci/envs/unsloth.txt`` pins (unsloth 2026.10.9,
unsloth-zoo 2026.10.9) and from transformers 5.17.0:

- unsloth_zoo/temporary_patches/gpt_oss.py: ``_RouterLinearParams`` (l. 1101, a weight/bias
  holder that is not an ``nn.Linear`` "so BitsAndBytes will NOT quantize it", keys
  ``router.linear.weight/bias``), ``GptOssTopKRouter`` (l. 1116, ``self.linear``),
  ``GptOssExpertsBnb4bit`` (l. 1162: ``gate_up_projs``/``down_projs`` ModuleLists of biased
  ``nn.Linear``; the fused names survive only as empty non-persistent buffers),
  ``_grouped_bnb4bit_ready`` (l. 1205: the grouped expert kernel needs every expert Params4bit
  with one block size, nesting and code book, and its bias), ``patch_gpt_oss_bnb4bit`` (l. 1425,
  installs both classes into transformers' modeling_gpt_oss) and ``patch_gpt_oss_bnb4bit_auto``
  (l. 1796, on when UNSLOTH_MODEL_NAME carries ``_load_in_4bit_``, l. 1553);
- unsloth/models/loader_utils.py: ``_gpt_oss_bnb_checkpoint_expert_layout`` (l. 4338: keys with
  ``.experts.gate_up_projs.``/``.experts.down_projs.`` are the "split" layout) and
  ``gpt_oss_checkpoint_has_fused_experts`` (l. 4357); unsloth/models/loader.py (l. 2697-2748):
  ``_load_in_4bit_`` is set only for a bitsandbytes checkpoint that is not fused, and a fused one
  loads with its experts unquantised, which does not fit gpt-oss-120b on one GPU;
- unsloth_zoo/peft_utils.py ``SKIP_QUANTIZATION_MODULES`` (l. 102) keeps ``router`` out of 4-bit;
- transformers integrations/bitsandbytes.py ``replace_with_bnb_linear`` (l. 189: only modules of
  type ``nn.Linear`` become Linear4bit) and quantizers/quantizer_bnb_4bit.py
  ``get_weight_conversions`` (l. 168: the six ``weight.*`` keys per Linear4bit).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

LAYOUTS: dict[str, str] = {"gpt_oss": "unsloth-split-experts-nf4"}
"""Architectures with fused experts whose pre-quantised layout is established, and its name."""


def layout_of(model_type: str) -> str | None:
    return LAYOUTS.get(model_type)


class SplitExperts(nn.Module):
    """One biased linear per expert and projection in place of the fused tensors (unsloth's layout)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        hidden, inner, experts = config.hidden_size, config.intermediate_size, config.num_local_experts
        self.gate_up_projs = nn.ModuleList(
            nn.Linear(hidden, 2 * inner, dtype=torch.bfloat16) for _ in range(experts)
        )
        self.down_projs = nn.ModuleList(
            nn.Linear(inner, hidden, dtype=torch.bfloat16) for _ in range(experts)
        )
        # Where this class stands in for transformers' own (a load in tests), gpt-oss's _init_weights
        # finds the fused names: empty, and kept out of the state dict.
        for name in ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"):
            self.register_buffer(name, torch.empty(0, dtype=torch.bfloat16), persistent=False)


class RouterParams(nn.Module):
    """A router's weight [E, H] and bias [E]; not an ``nn.Linear``, so that no quantizer converts it."""

    def __init__(self, hidden: int, experts: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(experts, hidden, dtype=torch.bfloat16))
        self.bias = nn.Parameter(torch.empty(experts, dtype=torch.bfloat16))


class SplitRouter(nn.Module):
    """The router as unsloth's 4-bit gpt-oss holds it: its parameters under ``linear``."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.linear = RouterParams(config.hidden_size, config.num_local_experts)

    # gpt-oss's _init_weights initialises a router through these, where this class stands in for its own.
    @property
    def weight(self) -> nn.Parameter:
        return self.linear.weight

    @property
    def bias(self) -> nn.Parameter:
        return self.linear.bias


# The classes of transformers' gpt-oss that the layout replaces, by name (no import of the model).
REPLACED = {"GptOssExperts": SplitExperts, "GptOssTopKRouter": SplitRouter}


def apply_layout(model: nn.Module, hf_config: Any, model_type: str) -> str | None:
    """Swap the fused experts and routers of a ``meta`` skeleton for the layout's modules; its name."""
    layout = layout_of(model_type)
    if layout is None:
        return None
    with torch.device("meta"):
        for name, module in list(model.named_modules()):
            replacement = REPLACED.get(type(module).__name__)
            if replacement is not None:
                model.set_submodule(name, replacement(hf_config))
    return layout


def is_drawn(module: nn.Module) -> bool:
    """Parameters the writer draws itself: the router's, which the architecture's init does not reach."""
    return isinstance(module, RouterParams)
