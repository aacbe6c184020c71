"""Child side of ``--perf-plant``: a regression of one known nature, done for real (``traces.plant``).

``attention``, ``composite`` and ``host`` replace ``torch.nn.functional.scaled_dot_product_attention``,
which Hugging Face's SDPA attention looks up at each call: the first adds real extra SDPA passes
(their outputs are discarded, the kernels still run), the second computes attention as its composite
of matmul, softmax and matmul instead of the fused kernel, the third makes the host wait for the
device and sleep at each call (Python-side delay inside the step). ``memory`` holds a filled buffer
through the next step; ``gpu`` launches matrix products worth a fixed GPU time at each step's start,
``python`` spends a fixed time in busy Python there.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from trainperf.traces.plant import DEFAULT_AMOUNT, MEMORY_DEFAULT_MIB, parse_plant

GPU_PLANT_SIZE = 2048
"""bf16 products of this size take about 25 us on an H100: a planted time is met to within one of them."""
CPU_PLANT_SIZE = 256
CALIBRATION_PRODUCTS = 50


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
        # The device plant's operands and how many products make its time (set by ``calibrate``).
        self._operands: tuple[torch.Tensor, torch.Tensor] | None = None
        self._products = 0
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

    def calibrate(self) -> None:
        """The device plant's product count: time a batch of products once, before the first step."""
        if self.kind != "gpu" or self._operands is not None:
            return
        size = GPU_PLANT_SIZE if self.device.type == "cuda" else CPU_PLANT_SIZE
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        a = torch.randn(size, size, device=self.device, dtype=dtype)
        b = torch.randn(size, size, device=self.device, dtype=dtype)
        self._operands = (a, b)
        for _ in range(3):  # warm-up: the library picks its kernel
            torch.matmul(a, b)
        each_ms = self._time_products(CALIBRATION_PRODUCTS) / CALIBRATION_PRODUCTS
        self._products = max(1, round(self.amount / each_ms)) if each_ms > 0 else 1

    def _time_products(self, count: int) -> float:
        """Milliseconds ``count`` products take on the device (events on a GPU, the clock on the CPU)."""
        assert self._operands is not None
        a, b = self._operands
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(count):
                torch.matmul(a, b)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        started = time.perf_counter()
        for _ in range(count):
            torch.matmul(a, b)
        return (time.perf_counter() - started) * 1000.0

    def at_step_start(self) -> None:
        """At a step's start (after its left edge): the device plant's products, queued, not waited
        for; or the Python plant's busy milliseconds, while the device waits."""
        if self.kind == "gpu" and self._operands is not None:
            a, b = self._operands
            for _ in range(self._products):
                torch.matmul(a, b)
        elif self.kind == "python":
            until = time.perf_counter() + self.amount / 1000.0
            spins = 0
            while time.perf_counter() < until:
                spins += 1  # the interpreter's own work, not a sleep: a busy host thread

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
