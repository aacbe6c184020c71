"""The dashboard's label of which part of a step moved: a wall-clock step with kernel time level is the
host's, one with kernel time stepping too is the GPU's work; no label without kernel time on both sides."""

from __future__ import annotations

from store_data import make_result, nightly

from trainperf.report.step_side import holds_the_host, step_side
from trainperf.report.trend_model import build_trends, change_findings, red_streaks
from trainperf.store.records import StoredRun

CASE = "sft_hf-qwen3_8b-qlora-short-b4"


def _stored(day: int, step_s: float, kernel_ms: float | None, verdict: str = "pass") -> StoredRun:
    values = {name: value.value for name, value in make_result(CASE, nightly(day), step_s).metrics.items()}
    if kernel_ms is not None:
        values["kernel_ms"] = kernel_ms
    return StoredRun(
        run_key=f"night-{day}", started=nightly(day), runner="h100-a", runner_env="h100-a", case_id=CASE,
        created=nightly(day), outcome="ok", verdict=verdict, run_dir=None, fingerprint={}, steps=12,
        values=values,
    )  # fmt: skip


def _history(
    step_after: float, kernel_after: float | None, kernel_before: float | None = 196.5
) -> list[StoredRun]:
    """Twenty nights at 1.00 s a step, then ten at ``step_after``; kernel time with a 0.05% wobble."""
    runs = []
    for day in range(30):
        later = day >= 20
        wobble = 1 + 0.0005 * (-1) ** day
        kernel = kernel_after if later else kernel_before
        runs.append(
            _stored(day, (step_after if later else 1.0) * wobble, kernel * wobble if kernel else None)
        )
    return runs


def test_a_step_time_step_with_level_kernel_time_reads_host_side() -> None:
    trends = build_trends(_history(1.25, 196.6), ["step_time_s", "kernel_ms"])
    (finding,) = [f for f in change_findings(trends) if f.changes[0][0] == "step_time_s"]
    assert finding.run == 20
    assert step_side(finding.trend, finding.run, finding.changes) == (
        "host side: kernel time +0.2%, inside its ±0.8%"
    )


def test_a_step_time_step_with_kernel_time_stepping_reads_the_gpus_work() -> None:
    trends = build_trends(_history(1.05, 206.3), ["step_time_s", "kernel_ms"])
    found = change_findings(trends)
    step = next(f for f in found if f.changes[0][0] == "step_time_s" or "kernel_ms" in dict(f.changes))
    changes = [("step_time_s", 0.05)]
    assert step_side(step.trend, 20, changes) == "kernels +5.1%: the GPU's work changed"


def test_no_label_without_kernel_time_on_both_sides_or_for_a_figure_of_one_part() -> None:
    trends = build_trends(_history(1.25, None, kernel_before=None), ["step_time_s", "kernel_ms"])
    assert step_side(trends[0], 20, [("step_time_s", 0.25)]) == ""
    with_kernels = build_trends(_history(1.25, 196.6), ["step_time_s", "kernel_ms"])[0]
    assert step_side(with_kernels, 20, [("peak_allocated_gib", 0.1)]) == ""
    assert holds_the_host("step_time_s") and holds_the_host("tokens_per_s")
    assert not holds_the_host("kernel_ms") and not holds_the_host("host_ms") and not holds_the_host("nope")


def test_a_red_streak_of_step_time_is_labelled_from_its_first_run() -> None:
    runs = _history(1.0, 196.5)[:20] + [_stored(20 + k, 1.2, 196.6, "regressed") for k in range(3)]
    (finding,) = red_streaks(build_trends(runs, ["step_time_s", "kernel_ms"]))
    assert finding.since == 20
    assert step_side(finding.trend, finding.run, finding.changes, finding.since).startswith("host side")
