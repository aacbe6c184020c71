"""Planted regressions of a known nature (``--perf-plant KIND[:AMOUNT]``), to check that a diagnosis
names them; the child does the real work (``workloads.plants``). Never baselined.

- ``attention[:N]``: every attention call also computes N more real SDPA passes (default 8: on a
  long-sequence case of a 1.5 s step the default adds about a tenth, beyond the timing tolerance);
- ``composite``: the fused SDPA op replaced by its composite (matmul, softmax, matmul);
- ``host[:F]``: at every attention call the host waits for the device (a synchronisation, as an
  ``.item()`` would) and then sleeps, the sleeps of a step adding up to F of the previous step's own
  time (default 0.3): Python-side delay inside the step that the device waits on, the way a library's
  new per-layer check or logging call costs; never hidden behind work the host had queued;
- ``memory[:MIB]``: a buffer of MIB MiB allocated, filled and held through each next step (default
  4096 on a GPU, 256 on the CPU);
- ``gpu[:MS]``: MS milliseconds of extra device work in every step (default 2): real matrix products
  launched at the step's start, as many as a calibration at the first edge says take MS ms. On a
  host-bound step the device absorbs them in its idle time, so the step's wall time barely moves while
  its kernel time grows by MS: what the kernel-time gate exists to catch. To plant a share of a case's
  kernel time, take MS from its baseline (``kernel_ms`` x 0.01 for 1%);
- ``python[:MS]``: MS milliseconds of busy Python at every step's start (default 50), while the device
  waits: host-side time that the GPU's kernels do not see.
"""

from __future__ import annotations

KINDS = ("attention", "composite", "host", "memory", "gpu", "python")
DEFAULT_AMOUNT = {"attention": 8.0, "composite": 0.0, "host": 0.3, "gpu": 2.0, "python": 50.0}
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
