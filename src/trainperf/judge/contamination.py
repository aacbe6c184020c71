"""A contaminated run never gives a timing verdict (no I/O).

When a foreign process shared a run's GPU, or the GPU was throttled by something the case did not
cause, the case's timing and energy are shown, not judged: the case is ``contaminated``, which
fails only under ``--perf-strict``. Memory from the case's own allocator is still judged; the
device-wide memory (NVML, every process on the GPU) only when no foreign process was there. An
out-of-memory beside a foreign process that held memory is contaminated too: the neighbour's
memory, not the case's, may have made the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainperf.judge.compare import CaseVerdict, MetricVerdict, Verdict
from trainperf.judge.metrics import device_wide_metrics
from trainperf.run_record import RunRecord

SOFTENED = (Verdict.PASS, Verdict.IMPROVED, Verdict.NOISY, Verdict.NEW)


@dataclass(frozen=True, slots=True)
class Contamination:
    reasons: tuple[str, ...]
    foreign_process: bool
    on_gpu: bool = True
    """Whether the GPU itself was shared or throttled; False when only the host's CPU was crowded, which
    leaves the GPU's kernel time the case's own (records from before the split read as True)."""

    @classmethod
    def of_runs(cls, runs: Sequence[RunRecord]) -> Contamination | None:
        """What contaminated any of a result's runs (their ``contamination`` records), or None."""
        records = [run.contamination for run in runs if run.contamination]
        if not records:
            return None
        reasons = tuple(dict.fromkeys(reason for record in records for reason in record.reasons or ()))
        on_gpu = any(record.touched_gpu for record in records)
        return cls(reasons, any(record.foreign_process for record in records), on_gpu)

    def note(self) -> str:
        return f"contaminated: {'; '.join(self.reasons)}"


def _own_regressions(metrics: Sequence[MetricVerdict], contamination: Contamination) -> list[MetricVerdict]:
    """Gated regressions that stand beside the contamination: memory of the case's own allocator."""
    regressed = [m for m in metrics if m.gated and m.verdict is Verdict.REGRESSED]
    if contamination.foreign_process:
        for metric in regressed:
            # Read by NVML for the whole GPU: a foreign process's use is in them.
            if metric.metric in device_wide_metrics():
                metric.gated, metric.note = False, f"not gated: {contamination.note()}"
        regressed = [m for m in regressed if m.gated]
    return regressed


def apply_contamination(
    verdict: CaseVerdict,
    contamination: Contamination | None,
    *,
    strict: bool,
    out_of_memory: bool = False,
    kernel_judged: bool = False,
) -> CaseVerdict:
    """The case's verdict once its runs' contamination is known. The verdict must have been reached
    with the timing it touched not comparable (shown, not gated) with ``contamination.note()``;
    ``kernel_judged``: the GPU's kernel time was judged all the same (only the host was crowded)."""
    if contamination is None:
        return verdict
    why = contamination.note()
    if out_of_memory and contamination.foreign_process and verdict.verdict is Verdict.OUTCOME_CHANGED:
        reason = f"{verdict.reason}; not judged: {why}"
    elif verdict.verdict is Verdict.REGRESSED and not _own_regressions(verdict.metrics, contamination):
        reason = f"{why}; timing, energy and device-wide memory shown, not judged"
    elif verdict.verdict in SOFTENED:
        if kernel_judged and not contamination.on_gpu:
            reason = f"{why}; host time, step time and energy shown, not judged; kernel time judged"
        else:
            reason = f"{why}; timing and energy shown, not judged"
    else:
        return verdict  # a crash, a changed configuration, an own-memory regression: they stand
    return CaseVerdict(
        Verdict.CONTAMINATED,
        strict,
        reason,
        verdict.metrics,
        verdict.config_changes,
        verdict.environment_changes,
    )
