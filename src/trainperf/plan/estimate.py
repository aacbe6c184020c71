"""Peak allocator memory estimated before launch, from the model config and the case (no torch).

The terms, each checked against the measured baselines (``trainperf estimate`` prints the
error per case):

- weights: bf16, 2 B/param; QLoRA linears in NF4 at 0.5 B/param plus double-quantised
  constants, 8/64 + 32/(64*256) bits = 0.127 bits/param (E4); the other parameters
  (embeddings, norms, lm_head) fp32 after peft's k-bit preparation up-casts them.
- trainable parameters (LoRA adapters: fp32 under peft, bf16 under QLoRA where TRL casts them;
  every parameter for full fine-tuning, bf16): the parameter, its gradient, AdamW's two
  states, and one parameter-sized temporary of the foreach AdamW step. Full fine-tuning of
  Qwen3-8B: 10 B/param = 76.3 GiB predicted, 76.4 measured, independent of sequence length.
- per padded token of the largest micro-batch: the logits (2 B per vocabulary entry in bf16,
  4 B when lm_head is fp32) and, with gradient checkpointing, each layer's saved input
  (2 B, or 4 B when the residual stream is fp32) plus one layer's working set while it is
  recomputed. Without checkpointing every layer keeps its working set (rougher: no such case
  has been measured).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainperf.case import Case
from trainperf.memory_estimate import MemoryEstimate
from trainperf.synth.model_configs import load_model_fixture
from trainperf.synth.nf4 import NF4_BYTES_PER_PARAM
from trainperf.synth.profiles import load_profile, sample_lengths

DENSE_TYPES = ("qwen2", "qwen3", "llama", "mistral", "phi3")


@dataclass(frozen=True, slots=True)
class ParamCounts:
    linear: int
    """Parameters of the decoder layers' projection matrices (what LoRA targets, what NF4 quantises)."""
    other: int
    """Embeddings, lm_head (unless tied), norms, biases."""
    lora_per_rank: int
    """Adapter parameters per unit of LoRA rank over the seven projections: sum of (d_in + d_out)."""
    hidden: int
    intermediate: int
    layers: int
    vocab: int
    embeddings_tied: bool = False
    """The language-model head shares the input embedding (counted once in ``other``)."""

    @property
    def total(self) -> int:
        return self.linear + self.other


def param_counts(config: dict[str, Any]) -> ParamCounts | None:
    """Exact counts for dense llama-style decoders; None for other architectures (MoE, ...)."""
    if config.get("model_type") not in DENSE_TYPES:
        return None
    hidden, inter = int(config["hidden_size"]), int(config["intermediate_size"])
    layers, vocab = int(config["num_hidden_layers"]), int(config["vocab_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    q, kv = heads * head_dim, kv_heads * head_dim
    # (d_in, d_out) of q, k, v, o, gate, up, down
    shapes = [
        (hidden, q),
        (hidden, kv),
        (hidden, kv),
        (q, hidden),
        (hidden, inter),
        (hidden, inter),
        (inter, hidden),
    ]
    linear = layers * sum(d_in * d_out for d_in, d_out in shapes)
    per_layer_other = 2 * hidden
    if config["model_type"] == "qwen3":
        per_layer_other += 2 * head_dim  # q_norm, k_norm
    if config["model_type"] == "qwen2" or config.get("attention_bias"):
        per_layer_other += q + 2 * kv  # q/k/v biases
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    other = layers * per_layer_other + hidden + embeddings
    lora_per_rank = layers * sum(d_in + d_out for d_in, d_out in shapes)
    return ParamCounts(
        linear, other, lora_per_rank, hidden, inter, layers, vocab, bool(config.get("tie_word_embeddings"))
    )


def max_tokens_per_microbatch(case: Case, steps: int, samples_per_step: int) -> int:
    """Padded tokens of the largest micro-batch the run can meet: batch x the longest sample."""
    lengths = sample_lengths(load_profile(case.profile), steps * samples_per_step, case.max_seq_len)
    return case.batch_size * max(lengths)


def estimate_case(case: Case, steps: int, samples_per_step: int) -> MemoryEstimate | None:
    """The estimate for a single-process training case on a GPU; None where the model is not
    covered. Which families it describes is theirs to say (``Family.memory_estimate``)."""
    if case.model_path or case.dataset_path or case.strategy == "fsdp":
        return None  # FSDP shards weights and optimizer states across ranks: not modelled
    counts = param_counts(load_model_fixture(case.model)["config"])
    if counts is None:
        return None
    tokens = max_tokens_per_microbatch(case, steps, samples_per_step)
    return estimate(counts, case, tokens)


def estimate(counts: ParamCounts, case: Case, tokens: int) -> MemoryEstimate:
    qlora = case.method == "qlora"
    if qlora:
        weights = counts.linear * NF4_BYTES_PER_PARAM + counts.other * 4.0
    else:
        weights = counts.total * 2.0
    if case.method == "full":
        trainable, dtype_bytes = counts.total, 2.0
        states = trainable * dtype_bytes * 4  # grad, 2 AdamW states, foreach temporary
    else:
        trainable = counts.lora_per_rank * case.lora_r
        dtype_bytes = 2.0 if qlora else 4.0
        states = trainable * dtype_bytes * 5  # the adapter itself, grad, 2 states, temporary
    wide = 4.0 if qlora else 2.0  # fp32 lm_head and residual stream after the k-bit up-cast
    working_set = 2.0 * (2 * counts.hidden + 2 * counts.intermediate)
    if case.gradient_checkpointing:
        per_token = wide * counts.vocab + wide * counts.hidden * counts.layers + working_set
    else:
        per_token = wide * counts.vocab + counts.layers * (working_set + 2.0 * 8 * counts.hidden)
    activations = tokens * per_token
    if case.method == "full":
        # The optimizer step (weights, grads, states, temporary) outweighs the activations.
        total = max(weights + states, weights + states * 3 / 4 + activations)
    else:
        total = weights + states + activations
    return MemoryEstimate(weights, states, activations, tokens, total)


@dataclass(frozen=True, slots=True)
class EstimateCheck:
    """An estimate judged against a baseline's peak. Where the case ran out of memory, the
    allocation when it did is a lower bound of the peak it needed, not the peak: the estimate
    is then consistent or not, and it has no error to pool with measured peaks."""

    estimated_gib: float
    measured_gib: float
    lower_bound: bool = False
    gpu_gib: float | None = None
    """The device memory of the class the case ran out of memory on (None: not known)."""

    @property
    def error(self) -> float | None:
        return None if self.lower_bound else self.estimated_gib / self.measured_gib - 1

    @property
    def consistent(self) -> bool:
        """For a lower bound: the estimate predicts the out-of-memory (it exceeds the GPU, or,
        the GPU unknown, at least the lower bound)."""
        if not self.lower_bound:
            return True
        return self.estimated_gib > (self.gpu_gib if self.gpu_gib is not None else self.measured_gib)

    def verdict(self) -> str:
        """The row's last column: the signed error, or what a lower bound says of the estimate."""
        error = self.error
        if error is not None:
            return f"{error:+7.1%}"
        limit = f"the {self.gpu_gib:g} GiB GPU" if self.gpu_gib is not None else "the lower bound"
        if self.consistent:
            return f"lower bound (OOM): consistent, the estimate exceeds {limit}"
        return f"lower bound (OOM): INCONSISTENT, the estimate fits {limit} it ran out of"


def error_summary(checks: list[EstimateCheck]) -> str:
    """One line: the error statistics over measured peaks only; the OOM lower bounds counted apart."""
    errors = [abs(error) for check in checks if (error := check.error) is not None]
    bounds = [check for check in checks if check.lower_bound]
    line = f"{len(checks)} cases"
    if errors:
        line += f": {len(errors)} measured peaks, mean |error| {sum(errors) / len(errors):.1%}, "
        line += f"max {max(errors):.1%}"
    if bounds:
        consistent = sum(check.consistent for check in bounds)
        line += f"; {len(bounds)} OOM lower bound(s), {consistent} consistent with the estimate"
    return line
