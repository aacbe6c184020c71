"""The diagnosis of a regression from two profile summaries (pure): each nature told apart on
hand-made profiles, a uniformly slower host not mistaken for extra work, the profile summary's
groups, the plant parser, and the option's wiring."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from trainperf.errors import TrainperfError
from trainperf.ground.settings import resolve
from trainperf.traces.diagnose import diagnose, uniform_scale
from trainperf.traces.plant import parse_plant
from trainperf.traces.profile import GROUPS, profile_summary

FLASH = "flash_fwd_kernel"


def profile(**changes: Any) -> dict[str, Any]:
    """A GPU step of 200 ms: 120 GEMM, 40 attention (one fused kernel), 30 elementwise, 10 host-side."""
    base: dict[str, Any] = {
        "kind": "gpu",
        "steps": 3,
        "step_ms": 200.0,
        "busy_ms": 190.0,
        "host_side_ms": 10.0,
        "device_ms": {**dict.fromkeys(GROUPS, 0.0), "GEMM": 120.0, "attention": 40.0},
        "top_kernels": [
            {"name": "sm90_xmma_gemm", "group": "GEMM", "ms": 120.0, "count": 300},
            {"name": FLASH, "group": "attention", "ms": 40.0, "count": 36},
            {"name": "vectorized_elementwise_kernel", "group": "elementwise/normalisation", "ms": 30.0},
        ],
        "memory": {"peak_allocated_b": 10 * 2**30, "allocated_b": 9 * 2**30, "blocks": []},
    }
    base["device_ms"]["elementwise/normalisation"] = 30.0
    for key, value in changes.items():
        base[key] = value
    return base


def test_extra_work_in_attention_is_named_with_its_figures() -> None:
    current = profile(step_ms=800.0, busy_ms=790.0)
    current["device_ms"] = {**current["device_ms"], "attention": 640.0, "GEMM": 132.0}
    current["top_kernels"] = copy.deepcopy(current["top_kernels"])
    current["top_kernels"][1]["ms"] = 640.0
    found = diagnose(profile(), current)
    assert found["nature"] == "device"
    line = found["line"]
    assert line.startswith("diagnosis: extra GPU work in attention: attention +600.0 ms/step (40.0 -> 640.0)")
    assert "GEMM +12.0 ms" in line and f"top grown kernel: {FLASH} +600.0 ms" in line
    assert "host-side +0.0 ms" in line


def composite_profile() -> dict[str, Any]:
    current = profile(step_ms=320.0, busy_ms=310.0)
    current["device_ms"] = {**current["device_ms"], "attention": 0.0, "GEMM": 200.0}
    current["device_ms"]["elementwise/normalisation"] = 90.0
    current["top_kernels"] = [
        {"name": "sm90_xmma_gemm", "group": "GEMM", "ms": 200.0},
        {"name": "vectorized_elementwise_kernel", "group": "elementwise/normalisation", "ms": 50.0},
        {"name": "softmax_warp_forward", "group": "elementwise/normalisation", "ms": 40.0},
    ]
    return current


def test_a_fused_kernel_replaced_by_its_composite() -> None:
    found = diagnose(profile(), composite_profile())
    assert found["nature"] == "composite"
    assert found["line"].startswith("diagnosis: a fused kernel replaced by a slower composite: ")
    assert f"gone: attention kernels 40.0 -> 0.0 ms ({FLASH} (40.0 ms))" in found["line"]
    assert "softmax_warp_forward +40.0 ms" in found["line"]


def test_a_composite_that_also_holds_more_memory_is_still_a_composite() -> None:
    # The composite keeps its score matrices: memory regresses too, and is named as its consequence.
    current = composite_profile()
    current["memory"] = {"peak_allocated_b": 16 * 2**30, "allocated_b": 9 * 2**30, "blocks": []}
    found = diagnose(profile(), current, memory=True)
    assert found["nature"] == "composite", found["line"]
    assert "peak allocated +6144 MiB" in found["line"]
    assert "every group" not in found["line"]  # the groups did not grow alike


def test_a_vanished_attention_group_counts_when_its_kernels_were_each_small() -> None:
    # Forward and backward kernels of 12 and 28 ms of a 1500 ms step: each under any per-kernel bar,
    # together the whole attention group, gone.
    base = profile(step_ms=1500.0, busy_ms=1400.0)
    base["device_ms"] = {**base["device_ms"], "GEMM": 900.0, "attention": 40.0}
    base["device_ms"]["elementwise/normalisation"] = 400.0
    base["top_kernels"] = [
        {"name": "sm90_xmma_gemm", "group": "GEMM", "ms": 900.0},
        {"name": "vectorized_elementwise_kernel", "group": "elementwise/normalisation", "ms": 400.0},
        {"name": "flash_bwd_kernel", "group": "attention", "ms": 28.0},
        {"name": FLASH, "group": "attention", "ms": 12.0},
    ]
    current = profile(step_ms=2400.0, busy_ms=2300.0)
    current["device_ms"] = {**base["device_ms"], "attention": 0.0, "GEMM": 1020.0}
    current["device_ms"]["elementwise/normalisation"] = 1180.0
    current["top_kernels"] = [
        {"name": "sm90_xmma_gemm", "group": "GEMM", "ms": 1020.0},
        {"name": "vectorized_elementwise_kernel", "group": "elementwise/normalisation", "ms": 700.0},
        {"name": "softmax_warp_forward", "group": "elementwise/normalisation", "ms": 480.0},
    ]
    found = diagnose(base, current)
    assert found["nature"] == "composite", found["line"]
    assert "(flash_bwd_kernel (28.0 ms), flash_fwd_kernel (12.0 ms)); grew in place" in found["line"]


def test_a_composite_in_a_window_mostly_spent_on_the_host_is_still_found() -> None:
    """As a verl update stage showed on an H100: 30 s profiled, 7 s of it device work, attention 76 ms.
    Judged against the window, the composite's kernels (+100 to +210 ms each) were all noise and the
    largest group's growth was called extra work in memcpy; judged against the work, they are not."""
    base = profile(step_ms=30400.0, busy_ms=7270.0, host_side_ms=22700.0, scope="verl actor update")
    base["device_ms"] = {**base["device_ms"], "GEMM": 350.0, "attention": 76.0, "memcpy/memset": 585.0}
    base["device_ms"]["elementwise/normalisation"] = 6230.0
    base["top_kernels"] = [
        {"name": "cunn_SoftMaxBackward", "group": "elementwise/normalisation", "ms": 3419.0},
        {"name": "unrolled_elementwise_kernel", "group": "memcpy/memset", "ms": 275.0},
        {"name": "nvjet_gemm", "group": "GEMM", "ms": 108.0},
        {"name": "flash_bwd_kernel", "group": "attention", "ms": 37.3},
        {"name": FLASH, "group": "attention", "ms": 31.7},
    ]
    current = copy.deepcopy(base)
    current.update(step_ms=30970.0, busy_ms=8260.0, host_side_ms=22300.0)
    current["device_ms"].update({"attention": 0.0, "memcpy/memset": 1194.0, "GEMM": 495.0})
    current["top_kernels"] = [
        {"name": "cunn_SoftMaxBackward", "group": "elementwise/normalisation", "ms": 3419.4},
        {"name": "unrolled_elementwise_kernel", "group": "memcpy/memset", "ms": 485.0},
        {"name": "elementwise_kernel", "group": "memcpy/memset", "ms": 197.0},
        {"name": "softmax_warp_forward", "group": "elementwise/normalisation", "ms": 123.0},
        {"name": "nvjet_gemm", "group": "GEMM", "ms": 106.0},
    ]
    found = diagnose(base, current)
    assert found["nature"] == "composite", found["line"]
    assert "gone: attention kernels 76.0 -> 0.0 ms" in found["line"]
    assert found["line"].endswith("(verl actor update 30400.0 -> 30970.0 ms profiled)")


def test_a_like_for_like_kernel_swap_beside_a_host_delay_is_not_a_composite() -> None:
    # cuBLAS picked another GEMM kernel of the same cost while the host got slower: nothing was
    # replaced by a composite, the device waited on the host.
    current = profile(step_ms=300.0, host_side_ms=110.0)
    current["top_kernels"] = copy.deepcopy(current["top_kernels"])
    current["top_kernels"][0]["name"] = "sm90_xmma_gemm_other_tile"
    found = diagnose(profile(), current)
    assert found["nature"] == "host", found["line"]


def test_a_kernel_pushed_out_of_a_full_top_list_has_not_vanished() -> None:
    from trainperf.traces.profile import TOP_KERNELS

    base = profile()
    small = [{"name": f"k{i}", "group": "other", "ms": 5.0} for i in range(TOP_KERNELS - 3)]
    base["top_kernels"] = [*base["top_kernels"], *small]
    current = copy.deepcopy(base)
    # k0 drops out of the full list behind a grown newcomer; attention grew: extra work, no composite.
    current["top_kernels"] = [k for k in current["top_kernels"] if k["name"] != "k0"]
    current["top_kernels"].append({"name": "extra_attention", "group": "attention", "ms": 30.0})
    current["top_kernels"][1]["ms"] = 60.0
    current["device_ms"] = {**base["device_ms"], "attention": 90.0}
    current.update(step_ms=250.0, busy_ms=240.0)
    found = diagnose(base, current)
    assert found["nature"] == "device", found["line"]


def test_a_synchronisation_that_idles_the_device_is_host_side_delay() -> None:
    current = profile(step_ms=290.0, idle_other_ms=90.0)
    found = diagnose(profile(idle_other_ms=0.0), current)
    assert found["nature"] == "host", found["line"]
    assert "idle on a synchronisation or dependency +90.0 ms (0.0 -> 90.0)" in found["line"]


def test_host_side_delay_while_the_device_is_no_busier() -> None:
    current = profile(step_ms=290.0, host_side_ms=100.0)
    found = diagnose(profile(), current)
    assert found["nature"] == "host"
    assert "host-side +90.0 ms (10.0 -> 100.0)" in found["line"]


def test_a_memory_regression_names_the_new_blocks() -> None:
    block = {"size_b": 4096 * 2**20, "frame": "plants.py:97 after_edge"}
    memory = {"peak_allocated_b": 14 * 2**30, "allocated_b": 13 * 2**30, "blocks": [block]}
    found = diagnose(profile(), profile(memory=memory), memory=True)
    assert found["nature"] == "memory"
    assert "peak allocated +4096 MiB (10240 -> 14336)" in found["line"]
    assert "new large blocks: 4096 MiB at plants.py:97 after_edge" in found["line"]


def test_a_cpu_memory_regression_says_the_blocks_are_not_available() -> None:
    cpu = profile(kind="cpu", memory={"n/a": "CPU run"})
    found = diagnose(cpu, cpu, memory=True)
    assert found["nature"] == "memory" and "allocator blocks n/a (CPU run)" in found["line"]
    assert "outside any operator" in found["line"]


def test_a_uniformly_slower_host_is_not_taken_for_extra_work() -> None:
    # Everything 10x slower (a contended CPU), and attention 30x: attention is what changed,
    # though GEMM grew more in milliseconds.
    current = profile(step_ms=2500.0, busy_ms=2490.0)
    current["device_ms"] = {**current["device_ms"], "GEMM": 1200.0, "attention": 1200.0}
    current["device_ms"]["elementwise/normalisation"] = 300.0
    assert uniform_scale(profile(), current) == pytest.approx(10.0)
    found = diagnose(profile(), current)
    assert found["line"].startswith("diagnosis: extra GPU work in attention: ")
    # One cause: attention; the uniform x10 is what its growth is measured beyond, not a second cause.
    assert "sizes beyond the x10.0 every group grew alike" in found["line"]
    assert "contended host)" not in found["line"]


def test_no_change_beyond_noise_is_said_plainly() -> None:
    assert diagnose(profile(), profile())["nature"] == "unclear"


def test_the_profile_summary_maps_categories_to_the_eight_groups() -> None:
    summary = {
        "kind": "gpu",
        "steps": 2,
        "window_ms": 400.0,
        "busy_ms": 300.0,
        "idle_host_bound_ms": 60.0,
        "idle_other_ms": 40.0,
        "categories_ms": {"matmul": 200.0, "reduction/norm": 20.0, "elementwise": 40.0, "memory": 10.0},
        "top": [{"name": "gemm", "category": "matmul", "total_ms": 200.0, "count": 4}],
    }
    found = profile_summary(summary, None)
    assert list(found["device_ms"]) == list(GROUPS)
    assert found["device_ms"]["GEMM"] == 100.0 and found["device_ms"]["elementwise/normalisation"] == 30.0
    assert found["device_ms"]["memcpy/memset"] == 5.0 and found["host_side_ms"] == 30.0
    assert found["step_ms"] == 200.0 and found["top_kernels"][0]["ms"] == 100.0
    assert "n/a" in found["memory"]


def test_plants_parse_and_reject_unknown_kinds() -> None:
    assert parse_plant("host") == ("host", None)
    assert parse_plant("Attention:3") == ("attention", 3.0)
    with pytest.raises(ValueError, match="attention, composite, host, memory"):
        parse_plant("cache")
    with pytest.raises(ValueError, match="> 0"):
        parse_plant("memory:0")


def test_the_options_resolve_and_a_bad_plant_is_one_line(tmp_path: Path) -> None:
    def ini(_: str) -> None:
        return None

    settings = resolve({"plant": "host:0.5", "diagnose": "off"}, ini, tmp_path)
    assert settings.plant == "host:0.5" and settings.diagnose is False
    assert resolve({}, ini, tmp_path).diagnose is True
    with pytest.raises(TrainperfError, match="--perf-plant='slow' is not valid"):
        resolve({"plant": "slow"}, ini, tmp_path)


def test_regressed_kinds_are_named() -> None:
    from trainperf.judge.compare import CaseVerdict, MetricVerdict, Verdict
    from trainperf.run.diagnosis import regressed_kinds

    verdict = CaseVerdict(
        Verdict.REGRESSED,
        True,
        "regressed",
        [
            MetricVerdict("step_time_s", Verdict.REGRESSED, 2.0, 1.0, 2.0),
            MetricVerdict("peak_allocated_gib", Verdict.REGRESSED, 2.0, 1.0, 2.0),
            MetricVerdict("power_mean_w", Verdict.REGRESSED, 2.0, 1.0, 2.0, gated=False),
        ],
    )
    assert regressed_kinds(verdict) == {"timing", "memory"}
