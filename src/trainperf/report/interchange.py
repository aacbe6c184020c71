"""Exports for other tools: Bencher Metric Format (BMF) JSON and an OpenMetrics text file per run.

BMF: ``{benchmark: {measure: {value, lower_value, upper_value}}}``, one benchmark per case, one
measure per metric (its registry name as the slug); lower and upper are the 95% interval of the
median where the metric has samples, so Bencher's thresholds see the spread we saw.

OpenMetrics: one gauge family per metric, a sample per case labelled with case, class, runner and
run, stamped with the run's start. Names carry OpenMetrics base units (seconds, bytes, joules),
converting GiB to bytes; figures without a base unit keep their name and have no UNIT line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from trainperf.judge.metrics import METRICS
from trainperf.store.reads import StoredCase

GIB = 2**30
# metric-name suffix -> (OpenMetrics unit, factor to that unit)
BASE_UNITS = {
    "_s": ("seconds", 1.0),
    "_gib": ("bytes", float(GIB)),
    "_j": ("joules", 1.0),
    "_w": ("watts", 1.0),
}


def bmf(cases: Sequence[StoredCase]) -> dict[str, dict[str, dict[str, float]]]:
    """The Bencher Metric Format of one run's cases (measured cases only)."""
    report: dict[str, dict[str, dict[str, float]]] = {}
    for case in cases:
        if case.outcome != "ok" or not case.metrics:
            continue
        name = case.case_id if not case.variant else f"{case.case_id}[{case.variant}]"
        measures = report.setdefault(name, {})
        for metric, value in sorted(case.metrics.items()):
            entry = {"value": value.value}
            if metric in case.intervals:
                low, high = case.intervals[metric]
                entry.update(lower_value=min(low, value.value), upper_value=max(high, value.value))
            measures[metric.replace("_", "-")] = entry
    return report


def openmetrics_name(metric: str) -> tuple[str, str | None, float]:
    """The exposed family name, its unit (or None) and the factor from the stored value."""
    base = "trainperf_" + re.sub(r"[^a-zA-Z0-9_]", "_", metric)
    if metric.endswith("_per_s"):  # a rate (tokens/s), not a duration
        return base.removesuffix("_s") + "_second", None, 1.0
    for suffix, (unit, factor) in BASE_UNITS.items():
        if metric.endswith(suffix):
            return base[: -len(suffix)] + "_" + unit, unit, factor
    return base, None, 1.0


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(float(value))


def openmetrics(run: dict[str, Any], cases: Sequence[StoredCase]) -> str:
    """One run as an OpenMetrics text exposition (ends with ``# EOF``)."""
    stamp = _timestamp(str(run.get("started") or ""))
    families: dict[str, list[str]] = {}
    meta: dict[str, tuple[str | None, str]] = {}
    for case in cases:
        labels = (
            f'case="{_label(case.case_id)}",variant="{_label(case.variant)}",'
            f'gpu_class="{_label(run.get("gpu_class") or "")}",runner="{_label(case.runner)}",'
            f'run="{_label(case.run_key[:12])}"'
        )
        verdicts = families.setdefault("trainperf_case_ok", [])
        meta["trainperf_case_ok"] = (None, "1 when the case ran to its end (outcome ok), 0 otherwise")
        verdicts.append(f"trainperf_case_ok{{{labels}}} {1 if case.outcome == 'ok' else 0}{stamp}")
        for metric, value in sorted(case.metrics.items()):
            name, unit, factor = openmetrics_name(metric)
            described = METRICS[metric].description if metric in METRICS else metric
            meta[name] = (unit, described)
            families.setdefault(name, []).append(f"{name}{{{labels}}} {_number(value.value * factor)}{stamp}")
    lines: list[str] = []
    for name in sorted(families):
        unit, help_text = meta[name]
        lines.append(f"# TYPE {name} gauge")
        if unit:
            lines.append(f"# UNIT {name} {unit}")
        lines.append(f"# HELP {name} {_label(help_text)}")
        lines.extend(families[name])
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _timestamp(started: str) -> str:
    try:
        return f" {datetime.fromisoformat(started).timestamp():.3f}"
    except ValueError:
        return ""
