"""verl's per-step records (``workloads.verl.logs``) as a table: ``trainperf verl-metrics``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainperf.report.table import align, format_value
from trainperf.workloads.verl.logs import remainder_s


def render_records(records: Iterable[dict[str, Any]]) -> str:
    """A table: one row per step, phases as columns in first-seen order, then the remainder."""
    records = list(records)
    phases: list[str] = []
    for record in records:
        phases += [name for name in record.get("phases", {}) if name not in phases]
    header = ["step", "step s", *(f"{p} s" for p in phases), "rest s", "tokens", "tok/s/GPU", "alloc GiB"]
    body = []
    for r in records:
        body.append([
            str(r["step"]),
            format_value(r["duration_s"]),
            *(format_value(r["phases"][p]) if p in r.get("phases", {}) else "-" for p in phases),
            format_value(remainder_s(r)),
            format_value(r["tokens"]),
            format_value(r["throughput"]) if "throughput" in r else "-",
            format_value(r["max_allocated_gib"]) if "max_allocated_gib" in r else "-",
        ])  # fmt: skip
    return "\n".join(align(header, body))
