"""End to end on the CPU with --perf-trace: a real tiny TRL run is profiled, the trace loads in the
TensorBoard profiler plugin, its analysis lands in the result, baseline, reports and JUnit XML,
and a planted slowdown is explained by the trace diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import required
from crowded import crowding, planted_verdict, written_baseline
from required import missing
from test_e2e_cpu import write_catalogue

CASE_ID = "sft_hf-qwen3_tiny-lora-short-b4"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-m",
        "cpu",
        "--perf-steps",
        "10",
        "--perf-trace",
        "--perf-baselines",
        "baselines",
        "--perf-output",
        "reports",
        *args,
        timeout=300,
    )


def tensorboard_plugin_step_split(trace: Path) -> dict[str, float]:
    """The TensorBoard profiler plugin's own parse of the trace: its overview's share per step phase."""
    data_mod = required.module(
        "torch_tb_profiler.profiler.data", "pip install -e '.[dev]' (torch-tb-profiler)"
    )
    from torch_tb_profiler import consts
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    match = consts.WORKER_PATTERN.match(trace.name)
    assert match is not None and match.group(1) == "r1"  # the plugin sees worker r1
    data = data_mod.RunProfileData.parse("r1", None, str(trace), str(trace.parent / ".cache"))
    profile = RunGenerator("r1", None, data).generate_run_profile()
    assert {"Overview", "Operator", "Trace"} <= {view.display_name for view in profile.views}
    average = profile.overview["performance"][0]
    return {child["name"]: child["extra"] / 100 for child in average["children"]}


def test_traced_cpu_run_and_a_planted_slowdown_explained(pytester: pytest.Pytester) -> None:
    write_catalogue(pytester)
    first = run(
        pytester, "--perf-update-baselines", "--perf-baseline-repeats", "1", "--junitxml", "junit.xml"
    )
    first.assert_outcomes(passed=1)
    assert "profiling steps 7-10" in first.stdout.str()
    (run_dir,) = (pytester.path / "reports").iterdir()
    trace = run_dir / "traces" / CASE_ID / "r1.pt.trace.json.gz"
    assert trace.is_file()
    result = json.loads((run_dir / "results" / f"{CASE_ID}.json").read_text())
    record = result["trace"]
    assert (
        record["file"] == f"traces/{CASE_ID}/r1.pt.trace.json.gz" and record["bytes"] == trace.stat().st_size
    )
    summary = record["summary"]
    assert summary["kind"] == "cpu" and summary["steps"] == 3
    assert 0.3 < summary["busy_fraction"] <= 1.0 and "matmul" in summary["categories_ms"]
    # Where a profiled step's time goes, as gated figures: the busy and the host-side shares.
    profile, metrics = record["profile"], result["metrics"]
    busy, host_side = metrics["busy_pct"]["value"], metrics["host_side_pct"]["value"]
    assert busy == pytest.approx(100 * profile["busy_ms"] / profile["step_ms"]) and 30 < busy <= 100
    assert host_side == pytest.approx(100 * profile["host_side_ms"] / profile["step_ms"])
    assert "busy %" in (run_dir / "summary.md").read_text()
    # The profiled steps are marked and never timed.
    steps = [
        json.loads(line)
        for line in (run_dir / "cases" / CASE_ID / "r1" / "steps.jsonl").read_text().splitlines()
    ]
    assert [s["step"] for s in steps if s.get("profiled")] == [7, 8, 9, 10]
    assert result["runs"][0]["profiled_steps"] == 4
    assert len(result["metrics"]["step_time_s"]["samples"]) <= 6
    # The trace summary is stored with the baseline, for later diffs.
    baseline = written_baseline(pytester.path / "baselines", run_dir, CASE_ID)
    assert baseline["trace"]["summary"]["busy_fraction"] == summary["busy_fraction"]
    # The plugin's "CPU Exec" share agrees with our main-thread busy fraction.
    split = tensorboard_plugin_step_split(trace)
    assert split["CPU Exec"] == pytest.approx(summary["busy_fraction"], abs=0.05)
    assert all((run_dir / name).is_file() for name in ("summary.md", "index.html", "benchmark.json"))
    assert "## Traces (profiled steps, not timed)" in (run_dir / "summary.md").read_text()
    assert '/trainperf_trace_busy_fraction"' in (pytester.path / "junit.xml").read_text()

    # A planted slowdown sleeps inside each step: the main thread idles, and the diff says so.
    slowed = run(pytester, "--perf-plant-slowdown", "4.0", "--perf-confirm", "0")
    # `regressed` and failed; or, where the host CPU watch saw another job crowd the run,
    # `contaminated`: shown, never judged, so its trace is not diffed (crowded.py).
    slowed_dir = max((pytester.path / "reports").iterdir())
    if planted_verdict(slowed, slowed_dir, CASE_ID) == "contaminated":
        crowded = crowding(json.loads((slowed_dir / "results" / f"{CASE_ID}.json").read_text()))
        missing("the trace diff checks", f"the host was crowded during the planted run ({crowded})")
    output = slowed.stdout.str()
    assert "trace diff: idle slowdown" in output, output[-3000:]
    slowed_metrics = json.loads((slowed_dir / "results" / f"{CASE_ID}.json").read_text())["metrics"]
    assert slowed_metrics["busy_pct"]["value"] < busy and slowed_metrics["host_side_pct"]["value"] > host_side
