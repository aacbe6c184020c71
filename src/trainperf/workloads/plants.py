"""Child side of ``--perf-plant``: a regression of one known nature, done for real (``traces.plant``).

``attention``, ``composite`` and ``host`` replace ``torch.nn.functional.scaled_dot_product_attention``,
which Hugging Face's SDPA attention looks up at each call: the first adds real extra SDPA passes
(their outputs are discarded, the kernels still run), the second computes attention as its composite
of matmul, softmax and matmul instead of the fused kernel, the third makes the host wait for the
device and sleep at each call (Python-side delay inside the step). ``memory`` holds a filled buffer
through the next step.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from trainperf.traces.plant import DEFAULT_AMOUNT, MEMORY_DEFAULT_MIB, parse_plant


def composite_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """SDPA's own definition, op by op (what the fused kernel saves)."""
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(repeat, dim=-3), value.repeat_interleave(repeat, dim=-3)
    # Scaled before the product and masked in place: the composite's memory stays near two score
    # matrices per layer, as in PyTorch's own math backend, so a long sequence does not run out of it.
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query * scale, key.transpose(-2, -1))
    length, source = query.shape[-2], key.shape[-2]
    if is_causal:
        causal = torch.ones(length, source, dtype=torch.bool, device=query.device).tril(source - length)
        scores.masked_fill_(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores.masked_fill_(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p)
    return torch.matmul(weights, value)


class Plant:
    """The planted regression of a child, or nothing when none was asked for."""

    def __init__(self, spec: str | None, device: torch.device) -> None:
        self.kind: str | None = None
        amount: float | None = None
        if spec:
            self.kind, amount = parse_plant(spec)
        default = (
            MEMORY_DEFAULT_MIB[device.type]
            if self.kind == "memory"
            else DEFAULT_AMOUNT.get(self.kind or "", 0)
        )
        self.amount = amount if amount is not None else default
        self.device = device
        self._held: torch.Tensor | None = None
        # The host plant's bookkeeping: attention calls and seconds slept in the current step, and
        # the sleep per call that the previous step's own time sets.
        self._calls = 0
        self._slept_s = 0.0
        self._sleep_per_call_s = 0.0
        if self.kind in ("attention", "composite", "host"):
            self._wrap_sdpa()

    def _wrap_sdpa(self) -> None:
        fused = torch.nn.functional.scaled_dot_product_attention
        extra = max(1, round(self.amount))

        def more_attention(*args: Any, **kwargs: Any) -> torch.Tensor:
            with torch.no_grad():
                for _ in range(extra):
                    fused(*args, **kwargs)
            return fused(*args, **kwargs)

        def waiting_attention(*args: Any, **kwargs: Any) -> torch.Tensor:
            self._calls += 1
            if self._sleep_per_call_s > 0:
                self._wait_and_sleep(self._sleep_per_call_s)
            return fused(*args, **kwargs)

        replacement = {
            "attention": more_attention,
            "composite": composite_attention,
            "host": waiting_attention,
        }
        torch.nn.functional.scaled_dot_product_attention = replacement[self.kind or ""]

    def _wait_and_sleep(self, seconds: float) -> None:
        """The device drains its queue (a synchronisation), then the host sleeps while it idles."""
        started = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        time.sleep(seconds)
        self._slept_s += time.perf_counter() - started

    def after_edge(self, step_s: float) -> None:
        """At a step's synchronised edge: the next step's host delay set, or the held buffer renewed."""
        if self.kind == "host":
            own_s = max(0.0, step_s - self._slept_s)
            if self._calls:
                self._sleep_per_call_s = self.amount * own_s / self._calls
            else:  # a model without SDPA calls: the whole delay at the edge, while the device idles
                time.sleep(self.amount * own_s)
            self._calls, self._slept_s = 0, 0.0
        elif self.kind == "memory":
            self._held = None  # the previous step's buffer goes before the next one is taken
            elements = int(self.amount * 2**20) // 4
            self._held = torch.ones(elements, dtype=torch.float32, device=self.device)
