"""Exports for other tools: Bencher Metric Format (BMF) JSON, OpenMetrics, and Prometheus' text
format for node_exporter's textfile collector.

BMF: ``{benchmark: {measure: {value, lower_value, upper_value}}}`` for one run, one benchmark per
case, one measure per metric (its registry name as the slug); lower and upper are the 95% interval
of the median where the metric has samples, so Bencher's thresholds see the spread we saw.

OpenMetrics (``openmetrics``): one exposition for any number of runs, ending in one ``# EOF``: a
gauge family per metric, a series per case, variant, class and runner whose points are the runs,
each stamped with its run's start in seconds (OpenMetrics' unit for timestamps), oldest first. No
run label: a backfilled history then has one series per case and metric that goes on from night to
night, as the textfile's live series do, not one series per run. Two runs of one runner that start
in the same second would put two points at one time on a series; the later run's is kept. For
``promtool tsdb create-blocks-from openmetrics`` (backfilling a history) and any OpenMetrics reader.

Prometheus text format 0.0.4 (``prometheus_text``): one run, the same families without
timestamps or ``UNIT`` lines and without the run label (a series per case, metric and runner that
lives from one night to the next; the run is named once, by ``trainperf_last_run_info``), what
node_exporter's textfile collector reads from ``*.prom`` (it refuses timestamped samples) and
``promtool check metrics`` checks.

Names follow Prometheus' conventions: base units as a suffix (seconds, bytes, joules, watts; GiB
are converted to bytes, per hour to per second), rates as ``_per_second``. A contaminated result
(the GPU or host was shared while it ran) measured its neighbour: its figures are left out of
every export; OpenMetrics and the textfile keep its ``trainperf_case_ok`` and set
``trainperf_case_contaminated`` to 1, so it is seen, not silently dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainperf.case import Outcome
from trainperf.judge.metrics import METRICS
from trainperf.store.records import StoredCase

GIB = 2**30
CONTAMINATED = "contaminated"
# metric-name suffix -> (base unit, factor to that unit)
BASE_UNITS = {
    "_s": ("seconds", 1.0),
    "_gib": ("bytes", float(GIB)),
    "_j": ("joules", 1.0),
    "_w": ("watts", 1.0),
}
# Rates and counts whose registry names carry no suffix above: (exposed name, factor).
RATES = {
    "tokens_per_s": ("trainperf_tokens_per_second", 1.0),
    "throughput_per_gpu": ("trainperf_tokens_per_gpu_per_second", 1.0),
    "samples_per_hour": ("trainperf_samples_per_second", 1 / 3600),
}
RunCases = tuple[dict[str, Any], Sequence[StoredCase]]
"""A stored run (``list_runs``' row) and its cases."""


def bmf(cases: Sequence[StoredCase]) -> dict[str, dict[str, dict[str, float]]]:
    """The Bencher Metric Format of one run's cases (measured cases, contaminated ones left out)."""
    report: dict[str, dict[str, dict[str, float]]] = {}
    for case in cases:
        if case.outcome != Outcome.OK or not case.metrics or case.verdict == CONTAMINATED:
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
    if metric in RATES:
        name, factor = RATES[metric]
        return name, None, factor
    base = "trainperf_" + re.sub(r"[^a-zA-Z0-9_]", "_", metric)
    if metric.endswith("_per_s"):  # a rate a workload defines (samples/s ...), not a duration
        return base.removesuffix("_s") + "_second", None, 1.0
    for suffix, (unit, factor) in BASE_UNITS.items():
        if metric.endswith(suffix):
            return base[: -len(suffix)] + "_" + unit, unit, factor
    return base, None, 1.0


@dataclass(slots=True)
class _Family:
    unit: str | None
    help_text: str
    samples: list[tuple[str, float, float | None]] = field(default_factory=list)
    """(labels, value, timestamp in seconds or None)."""


def _families(runs: Sequence[RunCases], stamped: bool) -> dict[str, _Family]:
    """Every family of these runs, each family's samples in run order."""
    families: dict[str, _Family] = {
        "trainperf_case_ok": _Family(None, "1 when the case ran to its end (outcome ok), 0 otherwise"),
        "trainperf_case_contaminated": _Family(
            None, "1 when the GPU or host was shared while the case ran: its figures are not exported"
        ),
    }
    for run, cases in runs:
        stamp = _timestamp(str(run.get("started") or "")) if stamped else None
        for case in cases:
            labels = (
                f'case="{_label(case.case_id)}",variant="{_label(case.variant)}",'
                f'gpu_class="{_label(run.get("gpu_class") or "")}",runner="{_label(case.runner)}"'
            )
            contaminated = case.verdict == CONTAMINATED
            families["trainperf_case_ok"].samples.append((labels, float(case.outcome == Outcome.OK), stamp))
            families["trainperf_case_contaminated"].samples.append((labels, float(contaminated), stamp))
            for metric, value in sorted(case.metrics.items()) if not contaminated else ():
                name, unit, factor = openmetrics_name(metric)
                described = METRICS[metric].description if metric in METRICS else metric
                family = families.setdefault(name, _Family(unit, described))
                family.samples.append((labels, value.value * factor, stamp))
    return families


def _last_run(run: dict[str, Any]) -> dict[str, _Family]:
    """Which run the textfile's values come from: its key as an info metric's label (one series,
    replaced when the next run is written) and its start as a gauge, for an alert on a runner
    that stopped running."""
    where = f'gpu_class="{_label(run.get("gpu_class") or "")}",runner="{_label(run.get("runner") or "")}"'
    started = _timestamp(str(run.get("started") or ""))
    info = _Family(None, "The run the other trainperf values come from, by its key: always 1")
    info.samples.append((f'{where},run="{_label(str(run.get("run_key") or "")[:12])}"', 1.0, None))
    start = _Family(None, "When the run the other trainperf values come from started (seconds, Unix time)")
    start.samples.extend([(where, started, None)] if started is not None else [])
    return {"trainperf_last_run_info": info, "trainperf_last_run_start_timestamp_seconds": start}


def _series_oldest_first(
    samples: Sequence[tuple[str, float, float | None]],
) -> list[tuple[str, float, float | None]]:
    """The samples grouped by series (OpenMetrics wants a series' points together, in time order),
    series in the order they first appear; of two points at one time, the later run's."""
    series: dict[str, dict[float | None, float]] = {}
    for labels, value, stamp in samples:
        series.setdefault(labels, {})[stamp] = value
    return [
        (labels, points[stamp], stamp)
        for labels, points in series.items()
        for stamp in sorted(points, key=lambda t: -math.inf if t is None else t)
    ]


def openmetrics(runs: Sequence[RunCases]) -> str:
    """These runs as one OpenMetrics exposition (a single ``# EOF``), stamped with each run's start."""
    lines: list[str] = []
    for name, family in sorted(_families(runs, stamped=True).items()):
        lines.append(f"# TYPE {name} gauge")
        if family.unit:
            lines.append(f"# UNIT {name} {family.unit}")
        lines.append(f"# HELP {name} {_label(family.help_text)}")
        for labels, value, stamp in _series_oldest_first(family.samples):
            stamped = f" {stamp:.3f}" if stamp is not None else ""
            lines.append(f"{name}{{{labels}}} {_number(value)}{stamped}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def prometheus_text(run: dict[str, Any], cases: Sequence[StoredCase]) -> str:
    """One run in Prometheus' text format 0.0.4 without timestamps (node_exporter's textfile
    collector). A series is a case's metric on a runner, the same every night: the collector shows
    a file's values as current, so a run label on each sample would start a new series per run
    and per case and metric (a store of unbounded size); the run is named once, by
    ``trainperf_last_run_info``."""
    lines: list[str] = []
    families = _families([(run, cases)], stamped=False) | _last_run(run)
    for name, family in sorted(families.items()):
        lines.append(f"# HELP {name} {_help(family.help_text)}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f"{name}{{{labels}}} {_number(value)}" for labels, value, _ in family.samples)
    return "\n".join(lines) + "\n"


def _label(value: Any) -> str:
    """A label value (and OpenMetrics' HELP): backslash, quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str) -> str:
    """HELP in the 0.0.4 text format escapes only backslash and newline (a quote stays as it is)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else repr(float(value))


def _timestamp(started: str) -> float | None:
    try:
        return datetime.fromisoformat(started).timestamp()
    except ValueError:
        return None
