"""Planted regressions of a known nature (``--perf-plant KIND[:AMOUNT]``), to check that a diagnosis
names them; the child does the real work (``workloads.plants``). Never baselined.

- ``attention[:N]``: every attention call also computes N more real SDPA passes (default 2);
- ``composite``: the fused SDPA op replaced by its composite (matmul, softmax, matmul);
- ``host[:F]``: a Python-side sleep of F of the step after each step's synchronised edge, while the
  device idles (default 0.3);
- ``memory[:MIB]``: a buffer of MIB MiB allocated, filled and held through each next step (default
  4096 on a GPU, 256 on the CPU).
"""

from __future__ import annotations

KINDS = ("attention", "composite", "host", "memory")
DEFAULT_AMOUNT = {"attention": 2.0, "composite": 0.0, "host": 0.3}
MEMORY_DEFAULT_MIB = {"cuda": 4096.0, "cpu": 256.0}


def parse_plant(text: str) -> tuple[str, float | None]:
    """``KIND[:AMOUNT]`` -> (kind, amount or None for the default); ValueError names the kinds."""
    kind, _, amount = str(text).strip().lower().partition(":")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)} (KIND[:AMOUNT])")
    if not amount:
        return kind, None
    value = float(amount)
    if value <= 0:
        raise ValueError("the amount must be > 0")
    return kind, value
