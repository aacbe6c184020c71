"""Trace analysis on hand-made Kineto traces with known gaps: the GPU logic, tested on the CPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from trainperf.errors import TrainperfError
from trainperf.stored_verdict import StoredMetricVerdict, StoredVerdict
from trainperf.trace_record import TraceRecord
from trainperf.traces.analysis import analyse, merge
from trainperf.traces.categories import categorise
from trainperf.traces.collect import attach_diff
from trainperf.traces.diff import describe, trace_diff
from trainperf.traces.kineto import load_trace
from trainperf.traces.profile import profile_summary
from trainperf.traces.profile_window import plan_trace

DATA = Path(__file__).parent / "data" / "traces"


def summary(name: str) -> dict:
    return analyse(load_trace(DATA / name))


def test_gpu_busy_fraction_and_idle_split_match_the_fixture() -> None:
    s = summary("gpu_step.json")
    assert s["kind"] == "gpu" and s["steps"] == 1
    assert s["window_ms"] == pytest.approx(1.0)
    assert s["busy_fraction"] == pytest.approx(0.75)
    # Host-bound: the leading 20 us, the 90 us before the flash kernel and the 50 us before the
    # optimizer kernel were all launched after the GPU went idle. Other: 40 us (launched early, yet
    # waited) and the 50 us tail of the step.
    assert s["idle_host_bound_ms"] == pytest.approx(0.160)
    assert s["idle_other_ms"] == pytest.approx(0.090)
    assert (s["gaps"], s["host_bound_gaps"]) == (5, 3)
    assert s["busy_ms"] + s["idle_host_bound_ms"] + s["idle_other_ms"] == pytest.approx(s["window_ms"])


def test_kernel_categories_top_kernels_and_launch_overhead() -> None:
    s = summary("gpu_step.json")
    assert s["categories_ms"] == pytest.approx(
        {
            "matmul": 0.3,
            "attention": 0.2,
            "elementwise": 0.1,
            "reduction/norm": 0.05,
            "memory": 0.05,
            "optimizer": 0.05,
        }
    )
    # The foreach kernel has no optimizer in its name: it counts as optimizer because it was
    # launched inside the Optimizer.step region.
    assert categorise("multi_tensor_apply_kernel<PointwiseOpScalarFunctor>") != "optimizer"
    top = s["top"][0]
    assert (
        top["name"].startswith("cutlass::Kernel2")
        and top["category"] == "matmul"
        and top["share"] == pytest.approx(0.4)
    )
    assert s["launch"]["kernels"] == 5 and s["launch"]["launch_calls"] == 5
    assert s["launch"]["runtime_us_per_kernel"] == pytest.approx(6.0)  # six 5 us API calls over five kernels


def test_a_launch_blocking_run_is_host_bound_and_a_slow_gemm_gpu_bound() -> None:
    base = summary("gpu_step.json")
    blocking = summary("gpu_step_host_bound.json")
    assert blocking["busy_fraction"] == pytest.approx(750 / 1070)
    assert blocking["idle_host_bound_ms"] == pytest.approx(0.270)
    diff = trace_diff(base, blocking)
    assert diff is not None and diff.verdict == "host-bound"
    assert diff.grown == ()  # no kernel category took longer

    slow = trace_diff(base, summary("gpu_step_slow_gemm.json"))
    assert slow is not None and slow.verdict == "GPU-bound"
    assert [g.category for g in slow.grown] == ["matmul"]
    text = "\n".join(describe(slow))
    assert "GPU-bound slowdown" in text and "matmul 0.30 -> 0.60 ms" in text


def test_diff_is_attached_only_to_a_timing_regression_with_traces_on_both_sides() -> None:
    base = TraceRecord.from_dict({"summary": summary("gpu_step.json")})
    current = TraceRecord.from_dict({"summary": summary("gpu_step_host_bound.json")})
    regressed = StoredVerdict("regressed", metrics=[StoredMetricVerdict("step_time_s", "regressed")])
    assert attach_diff(regressed, current, base) is None
    assert regressed.trace_diff is not None and regressed.trace_diff.verdict == "host-bound"
    passed = StoredVerdict("pass", metrics=[StoredMetricVerdict("step_time_s", "pass")])
    assert attach_diff(passed, current, base) is None and passed.trace_diff is None
    shown = StoredVerdict(
        "contaminated", metrics=[StoredMetricVerdict("step_time_s", "regressed", gated=False)]
    )
    assert attach_diff(shown, current, None) is None and shown.trace_diff is None  # contaminated
    note = attach_diff(
        StoredVerdict("regressed", metrics=[StoredMetricVerdict("step_time_s", "regressed")]), current, None
    )
    assert note is not None and "baseline has no trace" in note


def test_cpu_trace_reports_the_main_thread(tmp_path: Path) -> None:
    ops = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#3",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100,
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 15, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 70, "dur": 10},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 2,
            "ts": 0,
            "dur": 100,
        },  # another thread
    ]
    path = tmp_path / "w.pt.trace.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": ops}, handle)
    s = analyse(load_trace(path))
    assert s["kind"] == "cpu" and s["busy_fraction"] == pytest.approx(0.6)
    # Self time: linear keeps 10 us, addmm 40 us.
    assert s["categories_ms"] == pytest.approx({"matmul": 0.050, "elementwise": 0.010})


def test_an_autograd_nodes_own_time_is_host_side_on_the_cpu(tmp_path: Path) -> None:
    # A backward node of 60 us runs one 20 us mm: its other 40 us are the engine and the Python it
    # ran (a checkpoint's recompute sleeping, say), time outside any operator.
    def op(name: str, ts: int, dur: int, cat: str = "cpu_op") -> dict:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}

    ops = [
        op("ProfilerStep#3", 0, 100, "user_annotation"),
        op("aten::mul", 0, 10),
        op("autograd::engine::evaluate_function: MmBackward0", 20, 60),
        op("MmBackward0", 20, 60),
        op("aten::mm", 50, 20),
    ]
    path = tmp_path / "w.pt.trace.json.gz"
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": ops}, handle)
    s = analyse(load_trace(path))
    assert s["categories_ms"] == pytest.approx({"matmul": 0.020, "elementwise": 0.010})
    # The union of events stays the busy figure (as profiler viewers count CPU execution); the
    # engine's 40 us are apart, and the profile summary counts them as host-side.
    assert s["busy_ms"] == pytest.approx(0.070) and s["autograd_engine_ms"] == pytest.approx(0.040)
    assert [top["name"] for top in s["top"]] == ["aten::mm", "aten::mul"]
    profile = profile_summary(s, None)
    assert profile["busy_ms"] == pytest.approx(0.030) and profile["host_side_ms"] == pytest.approx(0.070)


def test_unreadable_trace_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.pt.trace.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(TrainperfError, match="cannot be read"):
        load_trace(bad)


def test_merge_and_plan() -> None:
    assert merge([(5, 7), (0, 2), (1, 3), (7, 8)]) == [(0, 3), (5, 8)]
    plan = plan_trace(Path("t"), "r1", 16)
    assert not isinstance(plan, str)
    assert (plan.first_profiled_step, plan.wait, plan.active) == (13, 12, 3)
    assert plan.profiled(13) and not plan.profiled(12)
    short = plan_trace(Path("t"), "r1", 6)
    assert not isinstance(short, str) and short.active == 2
    assert isinstance(plan_trace(Path("t"), "r1", 4), str)
