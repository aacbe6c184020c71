"""Case: one measured configuration of a workload, frozen and typed, with a stable id.

A case id is readable and stable across releases, because it names result files and
baseline files: ``sft_hf-qwen3_8b-lora-long-b4`` (only non-default knobs are appended,
e.g. ``-ga2``, ``-nogc``, ``-gpus2``). Changing what an id means would orphan baselines,
so new knobs must default to "absent from the id".
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

Method = Literal["lora", "qlora", "full"]
Strategy = Literal["ddp", "fsdp"]
STRATEGIES = ("ddp", "fsdp")
Expectation = Literal["ok", "oom", "config_error", "unknown"]
Tier = Literal["core", "rotating"]
TIERS = ("core", "rotating")


class Outcome(str, Enum):
    """How a case ended. ``config_error`` is predicted before launch (no GPU time spent)."""

    OK = "ok"
    OOM = "oom"
    CONFIG_ERROR = "config_error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    SKIPPED = "skipped"

    @property
    def is_failure_to_run(self) -> bool:
        return self in (Outcome.OOM, Outcome.CONFIG_ERROR, Outcome.TIMEOUT, Outcome.CRASH)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A workload configuration to measure. Everything that changes the work is a field."""

    family: str
    """Workload family: selects the child entry point and the Python environment (``sft_hf``)."""
    model: str
    """Model config name in ``fixtures/models/`` (random weights) unless ``model_path`` is set."""
    method: Method
    profile: str
    """Sequence-length profile in ``fixtures/datasets/`` (``short``, ``long``)."""
    batch_size: int
    grad_accum: int = 1
    gradient_checkpointing: bool = True
    gpus: int = 1
    strategy: Strategy = "ddp"
    """How a multi-GPU case splits the work: ``ddp`` (replicas) or ``fsdp`` (sharded); in the id only when not
    ``ddp``."""
    environment: str = "hf"
    """Name of the Python environment the family runs in (``ci/envs/<name>.txt``)."""
    gpu_classes: tuple[str, ...] = ()
    """GPU classes whose runners run this case (their pytest markers)."""
    expected: tuple[tuple[str, Expectation], ...] = ()
    """Expected outcome per GPU class; a class not listed expects ``ok``."""
    steps: int | None = None
    """Optimizer steps to run; None takes the run's default (``--perf-steps``)."""
    max_seq_len: int = 2048
    lora_r: int = 8
    lora_alpha: int = 16
    learning_rate: float = 2e-4
    model_path: str | None = None
    """A local checkpoint folder that replaces the random-weight model (same config expected)."""
    dataset_path: str | None = None
    """A local dataset file (.jsonl/.json/.parquet) that replaces the synthetic profile."""
    micro_batch_size: int | None = None
    """Micro-batch per GPU where the family separates it from ``batch_size`` (verl's
    ``ppo_micro_batch_size_per_gpu``); None (absent from the id) where it does not."""
    memory_cap_gib: float | None = None
    """Cap the child's memory (GPU: the allocator's share of the device; CPU: its address space),
    so that a smaller device can be emulated and a CPU can run out of memory for a cliff."""
    prompt_len: int | None = None
    """RL: tokens per synthetic prompt (fixed); None for families that train on a length profile."""
    completion_len: int | None = None
    """RL: tokens generated per completion; the ``fixed`` profile forces generation to run to it."""
    num_generations: int | None = None
    """RL: completions sampled per prompt (GRPO's group size)."""
    slow: bool = False
    trace: bool = False
    """Profile the last steps of every run of this case (as ``--perf-trace`` does for all cases).
    How a case is observed, not what it does: never part of the id."""
    notes: str = ""
    tier: Tier | None = None
    """How often a nightly plan (``--perf-night``) runs the case: ``core`` every night, ``rotating``
    once a week; None takes the suite's rule (``plan.tiers``). How a case is scheduled, not what it
    does: never part of the id."""
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """Family-specific knobs as sorted (key, value) pairs; appended to the id when present."""

    def __post_init__(self) -> None:
        # Stored sorted so that equality, to_dict/from_dict round trips and the id do not depend
        # on the order a catalogue wrote the pairs in (an id change would orphan baselines).
        object.__setattr__(self, "expected", tuple(sorted(dict(self.expected).items())))
        object.__setattr__(self, "extra", tuple(sorted(dict(self.extra).items())))
        if self.batch_size < 1 or self.grad_accum < 1 or self.gpus < 1 or (self.micro_batch_size or 1) < 1:
            raise ValueError(
                f"case {self.model}/{self.method}: batch sizes, accumulation and GPUs must be >= 1"
            )
        if self.method not in ("lora", "qlora", "full"):
            raise ValueError(f"unknown method {self.method!r}: use lora, qlora or full")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}: use {' or '.join(STRATEGIES)}")
        if self.tier is not None and self.tier not in TIERS:
            raise ValueError(f"unknown tier {self.tier!r}: use core, rotating or leave it to the rule (None)")

    @property
    def id(self) -> str:
        parts = [self.family, self.model, self.method, self.profile, f"b{self.batch_size}"]
        if self.grad_accum != 1:
            parts.append(f"ga{self.grad_accum}")
        if not self.gradient_checkpointing:
            parts.append("nogc")
        if self.gpus != 1:
            parts.append(f"gpus{self.gpus}")
        if self.strategy != "ddp":
            parts.append(self.strategy)
        if self.max_seq_len != 2048:
            parts.append(f"len{self.max_seq_len}")
        if self.micro_batch_size is not None:
            parts.append(f"mb{self.micro_batch_size}")
        if self.memory_cap_gib is not None:
            parts.append(f"cap{self.memory_cap_gib:g}g")
        if self.model_path:
            parts.append("localmodel")
        if self.dataset_path:
            parts.append("localdata")
        # RL shape: prompt and completion tokens, completions per prompt (absent for SFT: ids unchanged).
        for prefix, value in (
            ("p", self.prompt_len),
            ("c", self.completion_len),
            ("g", self.num_generations),
        ):
            if value is not None:
                parts.append(f"{prefix}{value}")
        parts.extend(f"{k}{v}" for k, v in self.extra)
        return "-".join(parts)

    def expectation(self, gpu_class: str) -> Expectation:
        return dict(self.expected).get(gpu_class, "ok")

    def replace(self, **changes: Any) -> Case:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["gpu_classes"] = list(self.gpu_classes)
        data["expected"] = dict(self.expected)
        data["extra"] = dict(self.extra)
        data["id"] = self.id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Case:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["gpu_classes"] = tuple(kwargs.get("gpu_classes", ()))
        kwargs["expected"] = tuple(sorted(dict(kwargs.get("expected", {})).items()))
        kwargs["extra"] = tuple(sorted(dict(kwargs.get("extra", {})).items()))
        return cls(**kwargs)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)
