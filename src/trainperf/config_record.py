"""What a case's child actually ran with, as its result keeps it (``CaseResult.effective_config``): the
configuration the first child that ran reported (``workloads.effective``).

The keys that say what work was done (the model's class and size, what trains and in which dtype, the
adapters, attention, checkpointing, 4-bit loading, precision, and what unsloth picks on its own) are
one set for every family, read as fields: a change in any of them is other work, which the judge
gates on (``judge.comparability``). Each family reports facts of its own beside them (verl's rule set
and engine, TRL's generation settings): those, and a value that does not read as its field, are kept
as the file had them and written back, so a rewritten result loses nothing of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import (
    listed,
    read_fields,
    stored_flag,
    stored_int,
    stored_text,
    unread_keys,
    written_back,
)


def _names(value: Any) -> tuple[str, ...] | None:
    """A stored list of names (modules, dtypes) as a tuple, or None where it is not one: its items are
    kept as written, so a list of anything else stays unread."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(value)


WORK_READERS: dict[str, Callable[[Any], Any]] = {
    "model_class": stored_text,
    "total_params": stored_int,
    "trainable_params": stored_int,
    "trainable_dtypes": _names,
    "quantized_modules": stored_int,
    "lora_layers": stored_int,
    "adapter_targets": _names,
    "attn_implementation": stored_text,
    "gradient_checkpointing": stored_flag,
    "loaded_in_4bit": stored_flag,
    "precision": stored_text,
    # What unsloth decides on its own (sft_unsloth): attention kernel, activation offload, and
    # which kind of modules got adapters (gpt-oss: attention only, or the experts too).
    "attention_backend": stored_text,
    "gradient_offload": stored_text,
    "adapter_scope": stored_text,
}
"""The keys that say what work was done, each with what reads its stored value."""
WORK_KEYS = tuple(WORK_READERS)
"""The keys whose change means "not the same work any more" (the judge's ``GATED_CONFIG_KEYS``): each
is a field."""


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    """The work a child did, as it reported it; a field is None where the child did not report it."""

    model_class: str | None = None
    total_params: int | None = None
    trainable_params: int | None = None
    trainable_dtypes: tuple[str, ...] | None = None
    quantized_modules: int | None = None
    """Linear layers loaded in 4 bits (QLoRA)."""
    lora_layers: int | None = None
    adapter_targets: tuple[str, ...] | None = None
    attn_implementation: str | None = None
    gradient_checkpointing: bool | None = None
    loaded_in_4bit: bool | None = None
    precision: str | None = None
    attention_backend: str | None = None
    gradient_offload: str | None = None
    adapter_scope: str | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)
    """The family's own facts, and values that do not read as their field, as the file had them:
    written back, and stored with the result in the history."""

    def to_dict(self) -> dict[str, Any]:
        recorded = {
            "model_class": self.model_class,
            "total_params": self.total_params,
            "trainable_params": self.trainable_params,
            "trainable_dtypes": listed(self.trainable_dtypes),
            "quantized_modules": self.quantized_modules,
            "lora_layers": self.lora_layers,
            "adapter_targets": listed(self.adapter_targets),
            "attn_implementation": self.attn_implementation,
            "gradient_checkpointing": self.gradient_checkpointing,
            "loaded_in_4bit": self.loaded_in_4bit,
            "precision": self.precision,
            "attention_backend": self.attention_backend,
            "gradient_offload": self.gradient_offload,
            "adapter_scope": self.adapter_scope,
        }
        return written_back(recorded, self.unread)

    @classmethod
    def from_dict(cls, data: Any) -> EffectiveConfig:
        """Read a stored configuration; anything but an object reads as an empty one."""
        stored = data if isinstance(data, dict) else {}
        read = read_fields(stored, WORK_READERS)
        return cls(**read, unread=unread_keys(stored, read))
