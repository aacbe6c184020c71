"""Parent side of ``--perf-trace``: plan each child's trace, analyse what it wrote, keep the size capped,
and attach a trace diff to a case whose step time regressed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.stored_verdict import StoredVerdict
from trainperf.trace_record import TraceRecord
from trainperf.traces.analysis import analyse
from trainperf.traces.diff import trace_diff
from trainperf.traces.kineto import load_trace
from trainperf.traces.profile import profile_summary
from trainperf.traces.profile_window import TracePlan


def collect(captured: dict[str, Any], plan: TracePlan, run_dir: Path) -> dict[str, Any]:
    """The analysis of the trace a child wrote, with its size; a trace over the cap is analysed, then
    deleted."""
    kept = (
        "raw_bytes",
        "bytes",
        "activities",
        "profiled_steps",
        "environment",
        "stop_error",
        "error",
        "scope",
    )
    record: dict[str, Any] = {k: v for k, v in captured.items() if k in kept}
    path = plan.path
    if not path.is_file():
        record.setdefault("error", "the child wrote no trace (it ended before the profiled steps)")
        return record
    try:
        record["summary"] = analyse(load_trace(path))
        record["profile"] = profile_summary(
            record["summary"], captured.get("memory"), scope=captured.get("scope")
        )
    except TrainperfError as exc:
        record["error"] = str(exc)
    record["cap_mb"] = plan.cap_mb
    kept_file, deleted = _keep_within_cap(path, plan.cap_mb, run_dir)
    record.update({"file": kept_file} if kept_file else {"deleted": deleted})
    # A multi-GPU child's other ranks wrote their own traces beside it (not analysed here: they
    # open beside rank 0's in TensorBoard or Perfetto); the same cap holds for them.
    rank_traces = []
    for other in plan.rank_paths():
        kept_path, why = _keep_within_cap(other, plan.cap_mb, run_dir, analysed=False)
        rank_traces.append(kept_path or f"{other.name}: {why}")
    if rank_traces:
        record["rank_traces"] = rank_traces
    return record


def _keep_within_cap(path: Path, cap_mb: float, run_dir: Path, *, analysed: bool = True) -> tuple[str, str]:
    """(the trace's path under the run folder, '') where it is within the cap; else it is deleted
    and ('', why)."""
    size_mb = path.stat().st_size / 2**20
    if size_mb > cap_mb:
        path.unlink()
        done = "analysed, then deleted" if analysed else "deleted"
        return "", f"{size_mb:.1f} MB compressed is over the {cap_mb:g} MB cap: {done}"
    return str(path.relative_to(run_dir)), ""


def attach_diff(
    verdict: StoredVerdict, current: TraceRecord | None, baseline: TraceRecord | None
) -> str | None:
    """For a timing regression with traces on both sides, store the diff in the verdict (the failure
    detail shows it); otherwise return why there is none (None when no diff was wanted)."""
    timing = {"step_time_s", "tokens_per_s", "samples_per_hour"}
    regressed = any(
        m.verdict == "regressed" and m.metric in timing and m.gated for m in verdict.metrics
    )  # a contaminated run's timing is shown, not gated: nothing for a diff to explain
    if not regressed:
        return None
    current_summary = current.summary if current else None
    baseline_summary = baseline.summary if baseline else None
    if current_summary is None or baseline_summary is None:
        missing = "this run" if current_summary is None else "the baseline"
        return f"no trace diff: {missing} has no trace (write the baseline and run with --perf-trace)"
    diff = trace_diff(baseline_summary.to_dict(), current_summary.to_dict())
    if diff is None:
        return "no trace diff: one trace is a GPU trace, the other a CPU trace"
    verdict.trace_diff = diff
    return None
