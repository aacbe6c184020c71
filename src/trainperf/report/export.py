"""Machine-readable exports: ``benchmark.json`` in pytest-benchmark's format, and JUnit properties.

``benchmark.json`` holds one benchmark per measured case: its per-step times (seconds) as
``stats.data`` with pytest-benchmark's summary fields, everything else in ``extra_info``, so
``pytest-benchmark compare`` and dashboards that read that format work on a trainperf run.
Each case is its own ``group``: ``pytest-benchmark compare`` groups by it, so run files compared
side by side set a case beside itself in earlier runs, never beside another case. The summary
fields are computed as pytest-benchmark's ``Stats`` computes them (quartiles by Wikipedia's
methods 2 and 3, not linear interpolation), so a file reads the same as one it wrote itself.
"""

from __future__ import annotations

import platform
import statistics
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from trainperf.judge.metrics import STEP_TIME
from trainperf.redact import redact_argv
from trainperf.result import CaseResult

FORMAT_VERSION = "5.1.0"
"""The pytest-benchmark format written (its ``version`` key; read by 3.x to 5.x)."""


def step_stats(data: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` object for these samples."""
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if len(data) > 1 else 0.0
    q1, q3 = quartiles(data)
    iqr = q3 - q1
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_outliers = sum(1 for v in data if v < low or v > high)
    stddev_outliers = sum(1 for v in data if v < mean - stddev or v > mean + stddev)
    return {
        "min": min(data),
        "max": max(data),
        "mean": mean,
        "stddev": stddev,
        "rounds": len(data),
        "median": statistics.median(data),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": min(v for v in data if v >= low),
        "hd15iqr": max(v for v in data if v <= high),
        "ops": 1.0 / mean if mean else 0.0,
        "total": sum(data),
        "iterations": 1,
        "data": list(data),
    }


def quartiles(data: Sequence[float]) -> tuple[float, float]:
    """Q1 and Q3 the way pytest-benchmark reports them (Wikipedia, "Quartile", computing methods):
    an even count takes the medians of the lower and upper halves (method 2); an odd count
    n = 4k + 1 or 4k + 3 weighs the two order statistics around each quarter 1:3 (method 3)."""
    ordered = sorted(data)
    n = len(ordered)
    if n == 1:
        return ordered[0], ordered[0]
    if n % 2 == 0:
        return statistics.median(ordered[: n // 2]), statistics.median(ordered[n // 2 :])
    k = n // 4
    if n % 4 == 1:  # 1-based: Q1 = (x[k] + 3 x[k+1]) / 4, Q3 = (3 x[3k+1] + x[3k+2]) / 4
        return 0.25 * ordered[k - 1] + 0.75 * ordered[k], 0.75 * ordered[3 * k] + 0.25 * ordered[3 * k + 1]
    # n = 4k + 3, 1-based: Q1 = (3 x[k+1] + x[k+2]) / 4, Q3 = (x[3k+2] + 3 x[3k+3]) / 4
    return 0.75 * ordered[k] + 0.25 * ordered[k + 1], 0.25 * ordered[3 * k + 1] + 0.75 * ordered[3 * k + 2]


def key_figures(result: CaseResult) -> dict[str, Any]:
    """The figures worth carrying beside a test outcome (JUnit properties, ``extra_info``)."""
    figures: dict[str, Any] = {"verdict": result.verdict.verdict or None, "outcome": result.outcome}
    figures.update({name: round(value.value, 6) for name, value in result.metrics.items()})
    summary = result.trace.summary if result.trace else None
    if summary is not None:
        figures["trace_busy_fraction"] = round(summary.busy_fraction, 4)
        if summary.kind == "gpu":
            figures["trace_host_bound_idle_ms_per_step"] = round(
                summary.per_step(summary.idle_host_bound_ms), 3
            )
    if diff := result.verdict.trace_diff:
        figures["trace_diff_verdict"] = diff.verdict
    if (diagnosis := result.verdict.diagnosis) and diagnosis.line:
        figures["diagnosis"] = diagnosis.line
    if limits := result.limits:
        shown = {
            "mfu": limits.mfu,
            "framework_mfu": limits.framework_mfu,
            "achieved_tflops": limits.achieved_tflops,
            "model_flops_per_token": limits.model_flops_per_token,
            "kwh_per_mtok": limits.kwh_per_mtok,
        }
        figures.update({name: round(float(value), 6) for name, value in shown.items() if value is not None})
    return figures


def benchmark_json(results: Sequence[CaseResult], run_info: dict[str, Any]) -> dict[str, Any]:
    benchmarks = []
    for result in results:
        step_time = result.metrics.get(STEP_TIME)
        if step_time is None or not step_time.samples:
            continue  # OOM, skipped or cliff: nothing timed
        benchmarks.append(
            {
                # Its own group: pytest-benchmark compare's default (--group-by group) then sets
                # a case beside itself in other runs' files (the class is in machine_info).
                "group": result.case_id,
                "name": result.case_id,
                "fullname": f"trainperf::{result.case_id}",
                "params": {"case": result.case_id},
                "param": result.case_id,
                "extra_info": key_figures(result),
                "options": {
                    "timer": "synchronised step edges",
                    "min_rounds": 1,
                    "warmup": "detected, excluded",
                },
                "stats": step_stats(step_time.samples),
            }
        )
    fingerprint = run_info.get("fingerprint") or {}
    return {
        "machine_info": {
            "node": platform.node(),
            "machine": platform.machine(),
            "system": platform.system(),
            "python_version": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "cpu": {"brand_raw": fingerprint.get("cpu_model", "")},
            "gpu": fingerprint.get("gpu_name", ""),
            "trainperf_class": run_info.get("gpu_class"),
        },
        "commit_info": run_info.get("commit") or {},
        "benchmarks": benchmarks,
        "datetime": run_info.get("started") or datetime.now(timezone.utc).isoformat(),
        "version": FORMAT_VERSION,
        "argv": redact_argv(run_info.get("argv", sys.argv) or []),
    }
