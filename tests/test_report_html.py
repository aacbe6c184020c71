"""The run folder's reports from result files: summary.md, a self-contained index.html (rendered in
headless Chromium), benchmark.json read by pytest-benchmark itself, and ``trainperf report``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import required
from chromium import FLAGS as CHROMIUM_FLAGS

from trainperf.case_record import CaseRecord
from trainperf.cli import main as cli_main
from trainperf.cliff_record import CliffRecord
from trainperf.diagnosis_record import Diagnosis
from trainperf.limits_record import Limits
from trainperf.measure.nvml import Sample, write_samples
from trainperf.report.build import write_reports
from trainperf.report.export import step_stats
from trainperf.result import CaseResult, MetricValue
from trainperf.run_record import RunRecord
from trainperf.store.results import save_result
from trainperf.stored_verdict import StoredMetricVerdict, StoredVerdict
from trainperf.trace_record import TraceRecord
from trainperf.traces.analysis import analyse
from trainperf.traces.diff import trace_diff
from trainperf.traces.kineto import load_trace

TRACES = Path(__file__).parent / "data" / "traces"
T0 = 1_800_000_000.0


def _case(model: str, batch: int, **extra: object) -> CaseRecord:
    case = {"family": "sft_hf", "model": model, "method": "lora", "profile": "short", "batch_size": batch}
    return CaseRecord.from_dict({**case, **extra})


# type:
# ignore[assignment]
def _child(run_dir: Path, case_id: str, steps: list[dict], samples: list[Sample] = ()) -> str:
    folder = run_dir / "cases" / case_id / "r1"
    folder.mkdir(parents=True)
    (folder / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    if samples:
        write_samples(folder / "nvml.csv", samples)
    return str(folder.relative_to(run_dir))


def _steps(n: int, seconds: float, tokens: int = 400, **extra: object) -> list[dict]:
    return [
        {
            "step": k,
            "t_end": T0 + k * seconds,
            "duration_s": seconds,
            "tokens": tokens,
            "allocated_b": (2 + k / n) * 2**30,
            **extra,
        }
        for k in range(1, n + 1)
    ]


RL_CASE = (
    "rl_verl-qwen2_5_7b-full-gsm8k-b16-gpus2-alggrpo-dyn16384-engvllm-kl1-mini16-n1-offl1-p1024-r4096-tp2"
)
"""A verl id as long as the catalogue's longest: each plot titled with it must fit its frame."""


def make_run(run_dir: Path) -> list[CaseResult]:
    """A run folder with a traced, regressed GPU case; an OOM cliff with probes; an RL case with phases."""
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(
        json.dumps({"sessions": [{"gpu_class": "h100", "started": "2026-11-21", "idle_mem_b": 2**29}]})
    )
    samples = [
        Sample(T0 + i * 0.5, int((3 + i / 10) * 2**30), 300.0 + i, None, 1900, 60, 0) for i in range(20)
    ]
    base, slow = (
        analyse(load_trace(TRACES / name)) for name in ("gpu_step.json", "gpu_step_host_bound.json")
    )
    step_times = [0.80, 0.82, 0.81, 0.83, 0.80]
    lora = CaseResult(
        case_id="sft_hf-qwen3_8b-lora-short-b4",
        case=_case("qwen3_8b", 4),
        gpu_class="h100",
        outcome="ok",
        metrics={
            "step_time_s": MetricValue(0.81, "s", step_times, keys=[f"{k}:400" for k in range(4, 9)]),
            "tokens_per_s": MetricValue(490.0, "tok/s"),
        },
        limits=Limits(
            model_flops_per_token=52.1e9,
            formula="4·N + 6·N_lora + 12·L·d_attn·s",
            achieved_tflops=25.5,
            mfu=0.0258,
            mfu_note="25.5 TFLOP/s of 989 (bf16 dense peak x 1 GPU)",
            kwh_per_mtok=0.21,
        ),
        runs=[RunRecord(dir=_child(run_dir, "sft_hf-qwen3_8b-lora-short-b4", _steps(8, 0.8), samples))],
        verdict=StoredVerdict(
            verdict="regressed",
            reason="step_time_s +12%",
            metrics=[
                StoredMetricVerdict(
                    "step_time_s", "regressed", current=0.81, baseline=0.72, ratio=1.12, interval=(1.08, 1.15)
                ),
                StoredMetricVerdict("device_mem_peak_gib", "pass", ratio=1.01),
                StoredMetricVerdict("energy_per_token_j", "pass", ratio=1.09, interval=(1.02, 1.15)),
            ],
            baseline_step_times=[[k, 0.72] for k in range(4, 9)],
            diagnosis=Diagnosis(
                line="diagnosis: host-side +90 ms/step (GPU idle while the host prepares the batch)"
            ),
            trace_diff=trace_diff(base, slow),
        ),
        trace=TraceRecord.from_dict(
            {"summary": slow, "file": "traces/x/r1.pt.trace.json.gz", "bytes": 3 * 2**20}
        ),
    )
    probes = [
        {"value": v, "fits": v <= 8, "outcome": "ok" if v <= 8 else "oom", "note": ""}
        for v in (1, 4, 8, 9, 16)
    ]
    for probe in probes:
        if probe["fits"]:
            _child(
                run_dir,
                f"sft_hf-qwen3_tiny-lora-short-b{probe['value']}",
                _steps(3, 0.1 + 0.01 * probe["value"], tokens=100 * probe["value"]),
            )
    cliff = CaseResult(
        case_id="sft_hf-qwen3_tiny-lora-short-b4-cliff-batch_size",
        case=_case("qwen3_tiny", 4),
        gpu_class="h100",
        outcome="ok",
        cliff=CliffRecord.from_dict(
            {
                "axis": "batch_size",
                "low": 1,
                "high": 16,
                "probes": probes,
                "largest_fit": 8,
                "smallest_oom": 9,
                "launched": 5,
                "confirmed": True,
                "summary": "batch_size 8 fits, 9 runs out of memory",
            }
        ),
        verdict=StoredVerdict(verdict="pass"),
    )
    rl_steps = _steps(4, 2.0, phases={"generate": 1.4, "update_actor": 0.4, "reference": 0.1})
    rl = CaseResult(
        case_id=RL_CASE,
        case=_case("qwen3_tiny", 4, family="grpo"),
        gpu_class="h100",
        outcome="ok",
        metrics={"step_time_s": MetricValue(2.0, "s", [2.0, 2.0, 2.0])},
        runs=[RunRecord(dir=_child(run_dir, RL_CASE, rl_steps))],
        verdict=StoredVerdict(verdict="new"),
    )
    (run_dir / "compare.json").write_text(
        json.dumps(
            {
                "cases": [
                    {
                        "case_id": lora.case_id,
                        "metrics": [{"metric": "step_time_s", "ratio": 0.97, "interval": [0.95, 1.01]}],
                    }
                ]
            }
        )
    )
    results = [lora, cliff, rl]
    for result in results:
        save_result(run_dir / "results" / f"{result.case_id}.json", result)
    return results


def test_reports_are_written_and_say_what_was_measured(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    results = make_run(run_dir)
    write_reports(run_dir, results, "trainperf h100: run")
    summary = (run_dir / "summary.md").read_text()
    assert "## Traces (profiled steps, not timed)" in summary and "| gpu | 70.1% |" in summary
    assert "host-bound slowdown" in summary and "## OOM cliffs" in summary
    page = (run_dir / "index.html").read_text()
    # Self-contained: no external script, stylesheet or image.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    titles = re.findall(r'aria-label="([^"]+)"', page)
    for wanted in (
        "memory: sft_hf-qwen3_8b-lora-short-b4",
        "board power",
        "throughput vs batch size: sft_hf qwen3_tiny lora short",
        "seconds per step by phase (RL)",
        "this run / baseline (95% interval)",
        "compare.json: B / A (95% interval)",
        "busy / idle per profiled step",
        "time by category per profiled step",
        "step time vs baseline: sft_hf-qwen3_8b-lora-short-b4",
    ):
        assert wanted in titles
    # A one-case configuration is a point, not a plot; labels are whole (not cut at 44 characters).
    assert "throughput vs batch size: sft_hf qwen3_8b lora short" not in titles
    assert ">device_mem_peak_gib<" in page and ">energy_per_token_j<" in page
    assert 'class="diagnosis">sft_hf-qwen3_8b-lora-short-b4: diagnosis: host-side +90 ms/step' in page
    assert "MFU 2.6% (25.5 TFLOP/s of 989" in page and "How far from the limit" in summary
    assert page.count('class="mark"') >= 3  # the OOM probes and the cliff line


def test_trainperf_report_rebuilds_from_result_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    make_run(run_dir)
    assert cli_main(["report", str(run_dir)]) == 0
    assert "host-bound slowdown" in capsys.readouterr().out
    assert all((run_dir / name).is_file() for name in ("summary.md", "index.html", "benchmark.json"))


def test_benchmark_json_is_read_by_pytest_benchmark(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_reports(run_dir, make_run(run_dir), "t")
    data = json.loads((run_dir / "benchmark.json").read_text())
    assert [b["name"] for b in data["benchmarks"]] == [
        "sft_hf-qwen3_8b-lora-short-b4",
        RL_CASE,
    ]
    stats = data["benchmarks"][0]["stats"]
    assert stats["median"] == pytest.approx(0.81) and stats["rounds"] == 5
    assert data["benchmarks"][0]["extra_info"]["trace_diff_verdict"] == "host-bound"
    assert data["benchmarks"][0]["extra_info"]["mfu"] == 0.0258  # JUnit properties carry the same figures
    benchmark_install = "pip install -e '.[dev]' (pytest-benchmark)"
    storage_mod = required.module("pytest_benchmark.storage.file", benchmark_install)
    from pytest_benchmark.logger import Logger

    storage = storage_mod.FileStorage(str(run_dir), default_machine_id="m", logger=Logger(Logger.QUIET))
    loaded = list(storage.load_benchmarks(str(run_dir / "benchmark.json")))
    assert {b["name"] for b in loaded} == {"sft_hf-qwen3_8b-lora-short-b4", RL_CASE}
    # Its own command line compares the file (as a CI step would).
    cli = required.program("pytest-benchmark", install=benchmark_install)
    compare = [cli, "compare", str(run_dir / "benchmark.json")]
    shown = subprocess.run(compare, capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "sft_hf-qwen3_8b-lora-short-b4" in shown.stdout


def test_step_stats_follow_pytest_benchmark_fields() -> None:
    s = step_stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s["min"], s["max"], s["median"], s["rounds"]) == (1.0, 100.0, 3.0, 5)
    assert s["iqr_outliers"] == 1 and s["hd15iqr"] == 4.0 and s["outliers"] == "1;1"


def test_html_renders_in_headless_chromium_without_script_errors(tmp_path: Path) -> None:
    chromium = required.chromium()
    run_dir = tmp_path / "run"
    write_reports(run_dir, make_run(run_dir), "trainperf h100: run")
    page = (run_dir / "index.html").resolve().as_uri()
    base = [chromium, *CHROMIUM_FLAGS]
    dom = subprocess.run(
        [
            *base,
            f"--user-data-dir={tmp_path / 'profile-dom'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    html_tag = re.search(r"<html[^>]*>", dom.stdout)
    assert html_tag is not None
    assert 'data-report="rendered"' in html_tag.group(0), html_tag.group(0)
    assert "data-script-error" not in html_tag.group(0)
    # Every label of every plot lies inside its SVG's view box (measured by the browser's layout).
    assert 'data-labels-outside="0"' in html_tag.group(0), html_tag.group(0)
    plots = int(re.search(r'data-plots="(\d+)"', html_tag.group(0)).group(1))  # type: ignore[union-attr]
    assert plots >= 8
    shot = tmp_path / "report.png"
    taken = subprocess.run(
        [
            *base,
            f"--user-data-dir={tmp_path / 'profile-shot'}",
            f"--screenshot={shot}",
            "--window-size=1280,2400",
            page,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_ratio_dots_are_red_for_the_worse_whatever_the_metrics_direction() -> None:
    """Tokens/s up 18% is better, step time up 5% and kernel time up 1% worse: the dot's colour follows
    each metric's direction, not whether its ratio is above 1."""
    from trainperf.report.html import _ratios

    result = CaseResult(
        case_id="sft_hf-qwen3_8b-lora-short-b4", case=CaseRecord(), gpu_class="h100", outcome="ok",
        verdict=StoredVerdict(verdict="pass", metrics=[
            StoredMetricVerdict("tokens_per_s", "pass", ratio=1.18, interval=(1.1, 1.2)),
            StoredMetricVerdict("step_time_s", "pass", ratio=1.05),
            StoredMetricVerdict("kernel_ms", "pass", ratio=1.01, interval=(1.005, 1.015)),
            StoredMetricVerdict("peak_allocated_gib", "pass", ratio=0.9),
        ]),
    )  # fmt: skip
    svg = _ratios([result])
    colours = {name: colour for colour, name in re.findall(r'fill="(#[0-9a-f]{6})"><title>\S+ (\w+): ', svg)}
    assert colours == {
        "tokens_per_s": "#2ca02c",
        "step_time_s": "#d62728",
        "kernel_ms": "#d62728",
        "peak_allocated_gib": "#2ca02c",
    }
