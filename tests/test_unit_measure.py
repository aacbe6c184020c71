"""Unit tests of trainperf.measure.measurement on a synthetic child record and fake NVML samples.

Times are chosen to be exact in binary floating point (multiples of 1/8 s) so the steady
window's edges fall on sample times and the hand computations are exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.measure.measurement import GIB, measure_run, pool_runs
from trainperf.measure.nvml import Sample
from trainperf.workloads.protocol import CACHED_INPUTS

T0 = 1000.0
POWER_W = 300.0
IDLE_B = 2 * GIB
PEAK_B = 12 * GIB
# Two warm-up steps (4 s and 2 s for 1000 tokens), then steps taking 1 ms per token.
TOKENS = [1000, 1000, 1000, 1250, 750, 1000, 1000, 1250, 750, 1000, 1000, 1000]
DURATIONS = [4.0, 2.0] + [t / 1000 for t in TOKENS[2:]]


def _child(durations: list[float] = DURATIONS, tokens: list[int] = TOKENS) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    t = T0
    for index, (duration, count) in enumerate(zip(durations, tokens)):
        t += duration
        steps.append({"step": index, "duration_s": duration, "tokens": count, "t_end": t})
    return {
        "steps": steps,
        "memory": {"peak_allocated_b": 9 * GIB, "peak_reserved_b": 10 * GIB, "host_peak_rss_b": 3 * GIB},
    }


def _samples(end: float, *, energy: bool = True) -> list[Sample]:
    """A sample every 1/8 s from 1 s before T0 to 1 s after ``end``; energy grows linearly."""
    samples: list[Sample] = []
    k = 0
    while True:
        t = T0 - 1.0 + k / 8
        if t > end + 1.0:
            return samples
        mem = PEAK_B if k == 40 else IDLE_B + GIB
        energy_mj = int(5_000_000 + POWER_W * 1000 * (t - T0)) if energy else None
        samples.append(Sample(t, mem, POWER_W, energy_mj, 1800, 60, 0))
        k += 1


def _end() -> float:
    return T0 + sum(DURATIONS)


def test_measure_run_steady_state_figures() -> None:
    run = measure_run(_child(), _samples(_end()), samples_per_step=4, idle_mem_b=IDLE_B)
    steady_time, steady_tokens = sum(DURATIONS[2:]), sum(TOKENS[2:])
    assert run.info.warmup_steps == 2
    assert run.metrics["warmup_s"] == 6.0
    assert run.step_samples == DURATIONS[2:]
    assert run.metrics["step_time_s"] == 1.0
    assert run.metrics["tokens_per_s"] == pytest.approx(steady_tokens / steady_time)
    assert run.metrics["samples_per_hour"] == pytest.approx(10 * 4 * 3600 / steady_time)
    assert run.throughput_samples == pytest.approx([1000.0] * 10)


def test_measure_run_energy_from_counter() -> None:
    run = measure_run(_child(), _samples(_end()), samples_per_step=4, idle_mem_b=IDLE_B)
    # 300 W over the steady window (10 s) for its 10000 tokens: 0.3 J per token.
    expected = POWER_W * sum(DURATIONS[2:]) / sum(TOKENS[2:])
    assert run.info.energy_method == "nvml_energy_counter"
    assert run.metrics["energy_per_token_j"] == pytest.approx(expected, rel=0.01)
    assert run.info.energy_samples == pytest.approx([0.3] * 10, rel=0.01)
    assert run.metrics["power_mean_w"] == POWER_W


def test_measure_run_power_integral_fallback() -> None:
    run = measure_run(_child(), _samples(_end(), energy=False), samples_per_step=4, idle_mem_b=IDLE_B)
    assert run.info.energy_method == "power_integral"
    assert run.metrics["energy_per_token_j"] == pytest.approx(0.3, rel=0.01)
    assert run.info.energy_samples is None  # per-step energy needs the counter


def test_measure_run_memory() -> None:
    run = measure_run(_child(), _samples(_end()), samples_per_step=4, idle_mem_b=IDLE_B)
    assert run.metrics["device_mem_peak_gib"] == pytest.approx(10.0)  # 12 GiB peak - 2 GiB idle
    assert run.metrics["peak_allocated_gib"] == 9.0
    assert run.metrics["peak_reserved_gib"] == 10.0
    assert run.metrics["host_peak_rss_gib"] == 3.0
    assert run.metrics["power_peak_w"] == POWER_W


def test_measure_run_keys_are_step_and_tokens_of_steady_steps() -> None:
    run = measure_run(_child(), [], samples_per_step=4, idle_mem_b=None)
    assert run.step_keys == [f"{i}:{TOKENS[i]}" for i in range(2, len(TOKENS))]
    assert "energy_per_token_j" not in run.metrics
    assert "device_mem_peak_gib" not in run.metrics


def test_measure_run_without_steps_keeps_memory() -> None:
    """An OOM at step 0 still reports the memory it reached."""
    run = measure_run(
        {"steps": [], "memory": {"peak_allocated_b": GIB, "peak_reserved_b": 2 * GIB}},
        [],
        samples_per_step=1,
        idle_mem_b=None,
    )
    assert run.metrics == {"peak_allocated_gib": 1.0, "peak_reserved_gib": 2.0}
    assert run.step_keys == []


def _scaled_run(scale: float, allocated_gib: float) -> Any:
    child = _child([d * scale for d in DURATIONS])
    child["memory"]["peak_allocated_b"] = int(allocated_gib * GIB)
    return measure_run(child, [], samples_per_step=4, idle_mem_b=None)


def test_pool_runs_concatenates_and_takes_median() -> None:
    runs = [_scaled_run(1.0, 10.0), _scaled_run(2.0, 12.0), _scaled_run(1.5, 11.0)]
    pooled = pool_runs(runs)
    step = pooled["step_time_s"]
    assert step.samples == runs[0].step_samples + runs[1].step_samples + runs[2].step_samples
    assert step.keys == runs[0].step_keys * 3
    assert step.value == 1.5  # median of the 30 pooled steps
    assert step.unit == "s"
    assert pooled["peak_allocated_gib"].value == 11.0
    assert pooled["peak_allocated_gib"].per_run == [10.0, 12.0, 11.0]
    tps = pooled["tokens_per_s"]
    assert tps.samples is not None and len(tps.samples) == 30
    assert tps.keys == step.keys


def test_a_profiled_run_leaves_its_host_memory_peak_out_of_the_figures() -> None:
    """The profiler keeps its records in the child until they are read back: the process's peak is
    the profiler's, so a baseline pooled with it would call every later unprofiled run improved."""
    child = _child()
    child["steps"][-1]["profiled"] = True
    child["memory"]["host_peak_rss_b"] = 7 * GIB
    profiled = measure_run(child, [], samples_per_step=4, idle_mem_b=None)
    plain = measure_run(_child(), [], samples_per_step=4, idle_mem_b=None)
    assert "host_peak_rss_gib" not in profiled.metrics
    assert profiled.info.host_peak_rss_profiled_gib == 7.0
    assert profiled.metrics["peak_allocated_gib"] == 9.0  # the device's figures stay
    pooled = pool_runs([plain, profiled])
    assert pooled["host_peak_rss_gib"].value == 3.0
    assert pooled["host_peak_rss_gib"].per_run == [3.0]


def test_a_run_whose_peak_memory_holds_a_cache_build_leaves_it_out_of_the_figures() -> None:
    """Where the child could not clear its peak after writing a cache entry, the peak is the build's:
    kept aside, and the case's figure pools the other runs."""
    child = _child()
    child["memory"]["host_peak_rss_b"] = 2 * GIB
    child[CACHED_INPUTS] = [{"kind": "models", "key": "m-1", "hit": False, "build_in_peak_rss": True}]
    built = measure_run(child, [], samples_per_step=4, idle_mem_b=None)
    assert "host_peak_rss_gib" not in built.metrics
    assert built.info.host_peak_rss_with_build_gib == 2.0
    cleared = _child()
    cleared[CACHED_INPUTS] = [{"kind": "models", "key": "m-1", "hit": False}]
    assert "host_peak_rss_gib" in measure_run(cleared, [], samples_per_step=4, idle_mem_b=None).metrics


def test_the_hosts_speed_at_each_steps_edge_is_the_mean_of_the_steady_steps() -> None:
    """A host that flips between two speeds reads as its mix (the mean), with one sample a steady step;
    steps without the probe (an older child, a framework timing its own steps) give no figure."""
    child = _child()
    speeds = [1.0, 1.0] + [1.2, 0.6, 0.6, 0.6, 1.2, 0.6, 0.6, 0.6, 1.2, 0.6]
    for step, speed in zip(child["steps"], speeds):
        step["host_speed"] = speed
    run = measure_run(child, _samples(_end()), samples_per_step=4, idle_mem_b=IDLE_B)
    assert run.metrics["host_speed"] == pytest.approx(0.78)  # 3 of 10 fast
    assert run.extra_samples["host_speed"] == speeds[2:]
    del child["steps"][5]["host_speed"]
    assert "host_speed" not in measure_run(child, [], samples_per_step=4, idle_mem_b=None).metrics
