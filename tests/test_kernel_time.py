"""Kernel time per step on the CPU: the device's activity records are faked (no GPU here), the cut at
the step-edge markers, the union of overlapping streams, the groups, and the split of each steady step
into kernel and host time that the parent measures from them."""

from __future__ import annotations

from trainperf.judge.metrics import HOST_TIME, KERNEL_TIME
from trainperf.measure.measurement import measure_run, run_metrics
from trainperf.measure.step_parts import pool_kernels, step_parts
from trainperf.traces.kernel_steps import (
    MARKER_KERNEL,
    DeviceActivity,
    KernelTimes,
    kernel_times,
    kernel_window,
    union_ms,
)

MS = 1_000_000  # nanoseconds


def marker(at_ms: float) -> DeviceActivity:
    """The step-edge marker as CUPTI names it: with its namespace and signature."""
    name = f"at::cuda::(anonymous namespace)::{MARKER_KERNEL}(long)"
    return DeviceActivity(name, "kernel", int(at_ms * MS), int(at_ms * MS) + 1000)


def kernel(name: str, start_ms: float, length_ms: float, kind: str = "kernel") -> DeviceActivity:
    return DeviceActivity(name, kind, int(start_ms * MS), int((start_ms + length_ms) * MS))


def fake_run() -> list[DeviceActivity]:
    """Three steps: the markers at 0, 100, 200 and 300 ms; step 2 runs two streams that overlap."""
    return [
        marker(0),
        kernel("ampere_bf16_s16816gemm_relu", 1, 40),
        kernel("void at::native::vectorized_elementwise_kernel<4, FillFunctor>", 50, 10),
        marker(100),
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 101, 40),
        kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 120, 30),  # overlaps the GEMM by 21 ms
        kernel("Memcpy HtoD (Pageable -> Device)", 160, 5, kind="gpu_memcpy"),
        marker(200),
        kernel(
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda, "
            "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >",
            201,
            7,
        ),
        kernel("flash_fwd_kernel", 210, 20),
        marker(300),
        kernel("after the last edge", 301, 50),
    ]


def test_the_markers_cut_the_device_timeline_into_steps_and_overlapping_streams_count_once() -> None:
    times = kernel_times(fake_run())
    assert not times.error
    steps = times.by_step()
    assert sorted(steps) == [1, 2, 3]
    assert round(steps[1].busy_ms, 3) == 50.0
    # 101..141 (GEMM) + 5 ms copy: the all-reduce (120..150) waits for a peer and is not kernel time.
    assert round(steps[2].busy_ms, 3) == 45.0
    assert round(steps[2].groups_ms["GEMM"], 3) == 40.0
    assert round(steps[2].groups_ms["communication"], 3) == 30.0
    assert round(steps[2].groups_ms["memcpy/memset"], 3) == 5.0
    assert round(steps[3].busy_ms, 3) == 27.0  # nothing after the last marker belongs to a step
    assert steps[3].groups_ms["dtype conversion"] == 7.0
    assert steps[3].groups_ms["attention"] == 20.0
    # The top kernels leave out the first step (warm-up) and name a cast as a dtype conversion.
    assert times.top_steps == 2
    assert {k.group for k in times.top} >= {"dtype conversion", "GEMM", "communication"}
    assert "ampere_bf16_s16816gemm_relu" not in {k.name for k in times.top}


def test_without_two_markers_no_step_is_framed_and_the_record_says_why() -> None:
    times = kernel_times([marker(0), kernel("gemm", 1, 5)])
    assert times.steps == []
    assert "marker" in times.error
    assert KernelTimes.from_dict(times.to_dict()) == times
    assert KernelTimes.from_dict({"steps": [{"step": "x"}]}).error  # type: ignore[union-attr]


def test_union_of_intervals() -> None:
    assert union_ms([(0, 2 * MS), (1 * MS, 3 * MS), (5 * MS, 6 * MS)]) == 4.0
    assert union_ms([]) == 0.0


def steps_of(
    durations_s: list[float], tokens: int = 100, window: tuple[int, int] = (3, 4)
) -> list[dict[str, object]]:
    """Step records as the child writes them, the kernel window's steps marked."""
    edges, t = [], 1000.0
    for number, duration in enumerate(durations_s, start=1):
        record = {
            "step": number,
            "t_start": t,
            "t_end": t + duration,
            "duration_s": duration,
            "tokens": tokens,
        }
        if window[0] <= number <= window[1]:
            record["kernel_window"] = True
            t += 1.5  # the records are read back after the window's last edge: between two steps
        t += duration
        edges.append(record)
    return edges


def child_with_kernels(durations_s: list[float], kernel_ms: list[float]) -> dict[str, object]:
    """A child's result whose device ran ``kernel_ms`` in each step of the window (steps 3 and 4)."""
    activities, at = [marker(0)], 0.0
    for busy in kernel_ms:
        activities.append(kernel("gemm", at + 0.5, busy))
        at += 1000
        activities.append(marker(at))
    return {"steps": steps_of(durations_s), "kernel_time": kernel_times(activities, first_step=3).to_dict()}


def test_the_window_gives_kernel_time_keyed_by_its_steps_and_the_timed_steps_the_hosts_share() -> None:
    durations = [3.0, 0.8, 1.2, 1.1, 0.7, 0.75, 0.7, 0.8, 0.72]
    run = measure_run(child_with_kernels(durations, [200.0, 210.0]), [], samples_per_step=4, idle_mem_b=None)
    assert run.metrics[KERNEL_TIME] == 205.0
    metrics = run_metrics(run)
    assert metrics[KERNEL_TIME].keys == ["3:100", "4:100"]
    assert metrics[KERNEL_TIME].samples == [200.0, 210.0]
    # The window's steps are not timed; the host's share is the timed median less the kernel median.
    assert "3:100" not in (metrics["step_time_s"].keys or []) and run.info.kernel_window_steps == 2
    timed = sorted([0.8, 0.7, 0.75, 0.7, 0.8, 0.72])
    assert abs(run.metrics[HOST_TIME] - ((timed[2] + timed[3]) / 2 * 1000 - 205.0)) < 1e-6
    assert run.info.kernel_groups_ms == {"GEMM": 205.0}
    summary = pool_kernels([run.info, run.info])
    assert summary is not None and summary.groups_ms == {"GEMM": 205.0} and summary.runs == 2


def test_a_window_step_without_a_kernel_record_leaves_the_run_without_kernel_time() -> None:
    child = child_with_kernels([3.0, 0.8, 1.2, 1.1, 0.7, 0.75, 0.7], [200.0, 210.0])
    record = dict(child["kernel_time"])  # type: ignore[call-overload]
    record["steps"] = record["steps"][:1]
    steps = child["steps"]
    window = [s for s in steps if s.get("kernel_window")]  # type: ignore[union-attr]
    parts, why = step_parts(steps[4:], window, record)  # type: ignore[index]
    assert parts is None and "not recorded for window step(s) 4" in why
    run = measure_run({**child, "kernel_time": record}, [], samples_per_step=4, idle_mem_b=None)
    assert KERNEL_TIME not in run.metrics and "not recorded" in (run.info.kernel_time or "")


def test_the_window_sits_early_keeps_five_timed_steps_and_gives_way_to_a_trace() -> None:
    assert kernel_window(40, 2) == (3, 4)
    assert kernel_window(20, 2) == (3, 4)
    assert kernel_window(8, 2) == (3, 3)  # at most one step in ten: a short run's steps are long ones
    assert kernel_window(6, 1) == (3, 3)
    assert kernel_window(5, 2) is None  # four timed steps would be left: fewer than five
    assert kernel_window(40, 0) is None
    assert kernel_window(24, 2, trace_first=20) == (3, 4)
    assert kernel_window(12, 2, trace_first=8) == (3, 3)
    assert kernel_window(9, 2, trace_first=5) is None  # the trace's steps start where the window would
