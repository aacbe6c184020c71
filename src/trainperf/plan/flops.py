"""Model FLOPs per trained token, from the shipped model config and the case (pure, no torch).

The figure is *model* FLOPs (what the training step must compute), not hardware FLOPs: the
forward pass that gradient checkpointing recomputes and the matmuls over padding are not
counted, so MFU compares like with like across settings (the convention of PaLM, appendix B,
and of Megatron-LM). One multiply-add counts 2 FLOPs. Per trained (non-padding) token:

- parameter matmuls, dense full training: ``6·N`` (forward 2·N, backward 2·N for the
  activation gradient and 2·N for the weight gradient), the familiar ``6·N·tokens`` per step.
- LoRA / QLoRA, base weights frozen: ``4·N + 6·N_lora``. The frozen weights still run the
  forward (2·N) and pass the activation gradient back to the layers below (2·N), but have no
  weight gradient; the adapters (``N_lora`` = r·(d_in + d_out) per adapted projection) are
  trained in full. Dequantising NF4 weights (QLoRA) is not a matmul: not counted.
- attention scores and values: ``12·L·d_attn·s``, with ``d_attn`` = heads·head_dim and ``s``
  the sequence length of the token's sample: QK^T and A·V are 2·2·s·d_attn FLOPs per token
  and layer in the forward, twice that in the backward (both operands are activations, so
  their gradients are computed under LoRA too). Causal masking is not halved (PaLM's
  convention), so figures compare with published MFU. Over a batch of samples of lengths
  ``s_i`` the term is 12·L·d_attn·Σ s_i² per step, i.e. ``s`` is ``Σ s_i² / Σ s_i`` per token.
- ``N`` counts the weights that multiply every token: the decoder's projections and the
  language-model head (the input embedding is a lookup, not a matmul). A mixture of experts
  counts the parameters a token is routed through: attention, the router, ``top_k`` experts
  (``num_experts_per_tok`` of ``num_local_experts``) and the head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from trainperf.plan.estimate import param_counts

MOE_EXPERTS_KEYS = ("num_local_experts", "num_experts")


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the FLOPs count needs from a model config."""

    matmul_params: int
    """``N``: parameters of the matmuls every token runs through (active experts only)."""
    lora_per_rank: int
    """Adapter parameters per unit of LoRA rank over the seven decoder projections."""
    layers: int
    attention_width: int
    """``d_attn`` = attention heads x head dimension."""
    experts: str = ""
    """For a mixture of experts, ``top_k of n`` (empty when dense)."""


@dataclass(frozen=True, slots=True)
class TokenFlops:
    """Model FLOPs of training on one token, split into its terms."""

    parameter_flops: float
    attention_flops: float
    formula: str

    @property
    def total(self) -> float:
        return self.parameter_flops + self.attention_flops

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total}


def _attention_dims(config: dict[str, Any]) -> tuple[int, int, int]:
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    return hidden, heads * head_dim, kv_heads * head_dim


def model_shape(config: dict[str, Any]) -> ModelShape | None:
    """The shape of a dense llama-style decoder or of a mixture of experts; None for others."""
    dense = param_counts(config)
    hidden, q, kv = _attention_dims(config)
    layers, vocab = int(config["num_hidden_layers"]), int(config["vocab_size"])
    attention = hidden * q + 2 * hidden * kv + q * hidden
    if dense is not None:
        return ModelShape(dense.linear + vocab * hidden, dense.lora_per_rank, layers, q)
    experts = next((int(config[k]) for k in MOE_EXPERTS_KEYS if config.get(k)), 0)
    top_k = int(config.get("num_experts_per_tok") or config.get("experts_per_token") or 0)
    if not experts or not top_k:
        return None
    inter = int(config.get("moe_intermediate_size") or config["intermediate_size"])
    per_expert = 3 * hidden * inter  # gate, up and down projections
    active_layer = attention + hidden * experts + top_k * per_expert
    lora_per_rank = layers * ((hidden + q) * 2 + (hidden + kv) * 2)  # attention projections
    return ModelShape(
        layers * active_layer + vocab * hidden, lora_per_rank, layers, q, f"top {top_k} of {experts}"
    )


def attention_length(lengths: Sequence[int]) -> float:
    """The per-token sequence length of the attention term over samples of ``lengths``:
    Σ s² / Σ s (a token of a long sample attends over more positions)."""
    total = sum(lengths)
    return sum(s * s for s in lengths) / total if total else 0.0


def token_flops(shape: ModelShape, *, method: str, lora_params: int, seq_len: float) -> TokenFlops:
    """Model FLOPs per trained token (see the module's docstring for each term)."""
    attention = 12.0 * shape.layers * shape.attention_width * seq_len
    attention_text = f"12·L·d_attn·s = 12·{shape.layers}·{shape.attention_width}·{seq_len:.1f}"
    moe = f" (active parameters, {shape.experts})" if shape.experts else ""
    if method == "full":
        return TokenFlops(
            6.0 * shape.matmul_params,
            attention,
            f"6·N + {attention_text}, N = {shape.matmul_params:,}{moe}",
        )
    return TokenFlops(
        4.0 * shape.matmul_params + 6.0 * lora_params,
        attention,
        f"4·N + 6·N_lora + {attention_text}, N = {shape.matmul_params:,}{moe}, N_lora = {lora_params:,} "
        "(base weights frozen: forward and activation gradient, no weight gradient)",
    )


def mfu(achieved_tflops: float, peak_tflops_per_gpu: float | None, gpus: int) -> tuple[float | None, str]:
    """Model FLOPs utilisation against the class's peak over the case's GPUs, or None and why."""
    if not peak_tflops_per_gpu:
        return None, "n/a: the class's hardware file gives no bf16_dense_tflops peak"
    return achieved_tflops / (peak_tflops_per_gpu * gpus), (
        f"{achieved_tflops:.1f} TFLOP/s of {peak_tflops_per_gpu * gpus:g} (bf16 dense peak x {gpus} GPU)"
    )


def kwh_per_million_tokens(energy_per_token_j: float) -> float:
    """J/token to kWh per million tokens: x 1e6 tokens / 3.6e6 J per kWh."""
    return energy_per_token_j * 1e6 / 3.6e6
