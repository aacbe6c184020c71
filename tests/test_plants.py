"""The child's planted regressions do what they say, for real: the composite computes what the fused
SDPA op computes, the attention plant runs more SDPA passes, host sleeps, memory holds a buffer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import required

torch = required.module("torch", "make setup (torch from ci/envs/cpu.txt or ci/envs/hf.txt)")

from trainperf.workloads import plants
from trainperf.workloads.plants import Plant, composite_attention


@pytest.fixture
def restore_sdpa() -> Iterator[Any]:
    fused = torch.nn.functional.scaled_dot_product_attention
    yield fused
    torch.nn.functional.scaled_dot_product_attention = fused


def qkv(heads: int = 4, kv_heads: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, heads, 7, 8, generator=generator)
    k = torch.randn(2, kv_heads, 7, 8, generator=generator)
    v = torch.randn(2, kv_heads, 7, 8, generator=generator)
    return q, k, v


def test_the_composite_computes_what_the_fused_op_computes() -> None:
    q, k, v = qkv()
    fused = torch.nn.functional.scaled_dot_product_attention
    torch.testing.assert_close(composite_attention(q, k, v, is_causal=True), fused(q, k, v, is_causal=True))
    mask = torch.rand(7, 7, generator=torch.Generator().manual_seed(1)) > 0.3
    mask.fill_diagonal_(True)
    torch.testing.assert_close(composite_attention(q, k, v, attn_mask=mask), fused(q, k, v, attn_mask=mask))
    q, k, v = qkv(heads=4, kv_heads=2)
    torch.testing.assert_close(
        composite_attention(q, k, v, is_causal=True, enable_gqa=True),
        fused(q, k, v, is_causal=True, enable_gqa=True),
    )


def test_attention_and_composite_replace_sdpa_and_profile_as_such(restore_sdpa: Any) -> None:
    q, k, v = qkv()
    Plant("attention:3", torch.device("cpu"))
    with torch.profiler.profile() as prof:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    calls = [e for e in prof.events() if e.name == "aten::scaled_dot_product_attention"]
    assert len(calls) == 4  # the result's pass and 3 more
    torch.nn.functional.scaled_dot_product_attention = restore_sdpa
    Plant("composite", torch.device("cpu"))
    with torch.profiler.profile() as prof:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    names = {e.name for e in prof.events()}
    assert "aten::scaled_dot_product_attention" not in names and "aten::softmax" in names


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every sleep the plant asks for (and sleeps for real): what it asked is checked exactly, what
    it took only from below, as a loaded host may stretch a sleep but never shorten it."""
    asked: list[float] = []

    def sleep(seconds: float) -> None:
        asked.append(seconds)
        time.sleep(seconds)

    monkeypatch.setattr(plants, "time", SimpleNamespace(sleep=sleep, perf_counter=time.perf_counter))
    return asked


def test_host_waits_at_each_attention_call_a_fraction_of_the_previous_step(
    restore_sdpa: Any, sleeps: list[float]
) -> None:
    q, k, v = qkv()
    host = Plant("host:0.5", torch.device("cpu"))
    for _ in range(4):  # the first step only counts the calls: nothing to scale the delay by yet
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    host.after_edge(0.2)
    assert sleeps == []  # no sleep at the edge when attention calls were seen
    started = time.perf_counter()
    for _ in range(4):  # 0.5 of the 0.2 s step spread over its 4 calls: 25 ms each
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert sleeps == pytest.approx([0.025] * 4)
    assert time.perf_counter() - started >= 0.1
    # The next delay is scaled by the step's own time, not by the time the plant itself slept.
    host.after_edge(0.2 + host._slept_s)
    assert host._sleep_per_call_s == pytest.approx(0.025)


def test_host_without_attention_calls_sleeps_at_the_edge_and_memory_holds_a_buffer(
    restore_sdpa: Any, sleeps: list[float]
) -> None:
    host = Plant("host:0.5", torch.device("cpu"))
    started = time.perf_counter()
    host.after_edge(0.2)
    assert sleeps == [pytest.approx(0.1)] and time.perf_counter() - started >= 0.1
    memory = Plant("memory:8", torch.device("cpu"))
    memory.after_edge(0.0)
    assert memory._held is not None and memory._held.numel() * 4 == 8 * 2**20
    assert Plant(None, torch.device("cpu")).kind is None
