"""Kernel time and host time apart, end to end on the CPU: children's records with a faked device
timeline go through the parent's measurement and pooling, a comparison of two runs, its rendering and
the summary's lines, as a GPU run's would."""

from __future__ import annotations

from trainperf.case_record import CaseRecord
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import Verdict
from trainperf.judge.verdict import OWN_RUNNER
from trainperf.measure.hardware import load_classes
from trainperf.measure.measurement import measure_run, pool_runs
from trainperf.measure.step_parts import pool_kernels
from trainperf.report.compare_runs import compare_runs, render
from trainperf.report.summary import details
from trainperf.result import CaseResult
from trainperf.traces.kernel_steps import MARKER_KERNEL, DeviceActivity, kernel_times

MS = 1_000_000
CASE = "sft_hf-qwen3_8b-qlora-short-b4"
MARK = f"at::cuda::(anonymous namespace)::{MARKER_KERNEL}(long)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
CAST = (
    "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda, LoadWithCast<1>, StoreWithCast<1>>"
)


def child(step_s: float, gemm_ms: float, cast_ms: float, jitter: float) -> dict[str, object]:
    """A child of 20 steps whose window (steps 3 and 4) ran a GEMM and a cast on the device."""
    steps, t = [], 1000.0
    for number in range(1, 21):
        duration = (3.0 if number == 1 else step_s) * (1 + jitter * ((number * 7) % 5 - 2) / 100)
        record = {"step": number, "t_start": t, "t_end": t + duration, "duration_s": duration, "tokens": 300}
        if number in (3, 4):
            record["kernel_window"] = True
        steps.append(record)
        t += duration + (1.0 if number == 4 else 0.0)
    activities = [DeviceActivity(MARK, "kernel", 0, 1000)]
    for edge in (1, 2):
        start = int((edge - 1) * 1000 * MS)
        activities.append(DeviceActivity(GEMM, "kernel", start + MS, start + MS + int(gemm_ms * MS)))
        cast_at = start + 2 * MS + int(gemm_ms * MS)
        activities.append(DeviceActivity(CAST, "kernel", cast_at, cast_at + int(cast_ms * MS)))
        activities.append(DeviceActivity(MARK, "kernel", edge * 1000 * MS, edge * 1000 * MS + 1000))
    return {
        "steps": steps,
        "kernel_time": kernel_times(activities, first_step=3).to_dict(),
        "host_index": {"index": 1.0},
    }


def result(
    runner: str, step_s: float, gemm_ms: float = 150.0, cast_ms: float = 50.0, runs: int = 2
) -> CaseResult:
    measured = [
        measure_run(child(step_s, gemm_ms, cast_ms, jitter=run), [], samples_per_step=4, idle_mem_b=None)
        for run in range(runs)
    ]
    return CaseResult(
        case_id=CASE,
        case=CaseRecord(id=CASE),
        gpu_class="h100",
        outcome="ok",
        metrics=pool_runs(measured),
        fingerprint=Fingerprint(runner=runner, gpu_name="NVIDIA H100 80GB HBM3"),
        runs=[m.info for m in measured],
        kernels=pool_kernels([m.info for m in measured]),
    )


BASE = result("host-a/GPU-0", 1.0)


def judged(b: CaseResult):  # type: ignore[no-untyped-def]
    return compare_runs([BASE], [b], classes=load_classes(), tolerances={})


def test_a_dtype_conversion_that_grew_is_a_kernel_regression_named_on_any_runner() -> None:
    comparison = judged(result("host-b/GPU-3", 1.0, cast_ms=53.0))  # +3 ms of 200: +1.5%
    case = comparison.cases[0]
    assert case.verdict.verdict is Verdict.REGRESSED and case.fails
    assert case.verdict.parts.startswith("step +0.0% = kernels +1.5% (dtype conversion +3.0 ms)")
    text = render(comparison)
    assert "B/A kernel" in text and "+1.5% [+1.5%, +1.5%]" in text
    assert "regressed: kernel_ms +1.5%" in text


def test_a_slower_host_elsewhere_is_shown_with_its_reason_and_one_line_under_the_table() -> None:
    comparison = judged(result("host-b/GPU-3", 1.3))
    case = comparison.cases[0]
    assert case.verdict.verdict is Verdict.PASS and OWN_RUNNER in case.verdict.reason
    assert case.verdict.parts.startswith("step +30.0% = kernels +0.0% + host +37.5% shown")
    b = case.b
    b.verdict = case.verdict.stored()
    lines = details([b], {}, {})
    assert lines[0] == f"{CASE}: {case.verdict.parts}"
    assert lines[-1].startswith(
        "host time of 1 case(s) shown, not gated (kernel time judged against the class)"
    )


def test_the_same_slowdown_on_its_own_runner_is_a_host_regression() -> None:
    comparison = judged(result("host-a/GPU-0", 1.3))
    case = comparison.cases[0]
    assert case.verdict.verdict is Verdict.REGRESSED and case.verdict.confirm
    assert case.verdict.parts == "step +30.0% = kernels +0.0% + host +37.5% (host index +0.0%)"
