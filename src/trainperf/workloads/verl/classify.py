"""How a verl run failed, from its log text: out of memory (GPU, host, or the rollout engine's
start-up) or a crash (an environment that cannot run verl, a dead Ray worker, anything else).
Pure: text in, verdict out.

An OOM inside a Ray worker reaches the driver wrapped (``RayTaskError(OutOfMemoryError)``,
then ``ActorDiedError`` for the actors that go down with it), so memory markers are looked for
first and win over the dead-worker markers that follow them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Failure = Literal["oom", "crash"]

# (marker, lower-cased; what it means), most specific first.
OOM_MARKERS: tuple[tuple[str, str], ...] = (
    ("no available memory for the cache blocks", "vLLM start-up: no memory left for the KV cache"),
    (
        "is less than desired gpu memory utilization",
        "vLLM start-up: free memory below gpu_memory_utilization",
    ),
    # Not the bare word gpu_memory_utilization: verl prints its whole config at start-up.
    ("larger than the available kv cache memory", "vLLM start-up: the KV cache for one request does not fit"),
    ("not enough memory. please try to increase --mem-fraction-static", "SGLang start-up: not enough memory"),
    ("not enough memory", "SGLang start-up: not enough memory"),
    ("ray.exceptions.outofmemoryerror", "Ray killed a worker: the host ran low on memory"),
    ("torch.outofmemoryerror", "CUDA out of memory in a worker"),
    ("torch.cuda.outofmemoryerror", "CUDA out of memory in a worker"),
    ("cuda out of memory", "CUDA out of memory in a worker"),
    ("cuda error: out of memory", "CUDA out of memory in a worker"),
    ("outofmemoryerror", "out of memory in a worker"),
)
# Environments that cannot run verl at all, with the fix: looked for before the dead workers an
# import error in a worker leaves behind.
ENVIRONMENT_MARKERS: tuple[tuple[str, str], ...] = (
    (
        "cannot import name 'automodelforcausallmwithvaluehead' from 'trl'",
        (
            "the environment's TRL is too new for verl: verl (0.9.1 verl/models/transformers/monkey_patch.py"
            ":352-356) imports TRL's AutoModelForCausalLMWithValueHead whenever TRL is importable, and "
            "TRL 1.x no longer has it; keep TRL out of the verl environment (its lean set has none) or give "
            "it a TRL that still has the class"
        ),
    ),
)
DEAD_WORKER_MARKERS: tuple[tuple[str, str], ...] = (
    ("actordiederror", "a Ray actor died"),
    ("rayactorerror", "a Ray actor died"),
    ("the actor died unexpectedly", "a Ray actor died"),
    ("worker died", "a Ray worker died"),
    ("worker exit type: system_error", "a Ray worker died"),
    ("raysystemerror", "Ray failed"),
)


@dataclass(frozen=True, slots=True)
class Classified:
    outcome: Failure
    reason: str
    line: str
    """The log line that decided it (trimmed)."""

    @property
    def message(self) -> str:
        return f"{self.reason}: {self.line}"


def _first(lines: list[str], markers: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    for marker, reason in markers:
        for line in lines:
            if marker in line.lower():
                return reason, line.strip()[:300]
    return None


def classify_failure(text: str) -> Classified:
    """The failure a verl log shows; ``crash`` with its last error line when nothing is recognised."""
    lines = text.splitlines()
    found = _first(lines, OOM_MARKERS)
    if found:
        return Classified("oom", *found)
    found = _first(lines, ENVIRONMENT_MARKERS) or _first(lines, DEAD_WORKER_MARKERS)
    if found:
        return Classified("crash", *found)
    errors = [line for line in lines if "Error" in line or "error:" in line.lower()]
    last = (errors or [line for line in lines if line.strip()] or ["(no output)"])[-1]
    return Classified("crash", "verl failed", last.strip()[:300])
