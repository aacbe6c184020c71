"""A case's report lines read from what its runs recorded: the GPUs before each run, per-GPU
figures, a framework's start-up, the published references. The case runner gathers them into
the verdict's ``notes``; the summary, the HTML page and the test's outcome show them as written.
"""

from __future__ import annotations

from trainperf.measure.multi_gpu import per_gpu_note
from trainperf.reference_record import ReferenceLine
from trainperf.run_checks_record import GpuCheck
from trainperf.run_record import RunRecord


def gpu_notes(runs: list[RunRecord]) -> list[str]:
    """Report lines from the runs' GPU records: what was wrong before a run, and per-GPU figures."""
    notes = []
    for number, run in enumerate(runs, 1):
        before = run.gpu_before or GpuCheck()
        for device, procs in (before.foreign_processes or {}).items():
            pids = ", ".join(str(pid) for pid, _ in procs)
            notes.append(
                f"run {number}: GPU {device} held by foreign process(es) {pids} before it started (noisy "
                "neighbour?)"
            )
        for device, reasons in (before.throttled or {}).items():
            notes.append(f"run {number}: GPU {device} throttled before it started ({', '.join(reasons)})")
    per_gpu = per_gpu_note(runs)
    if per_gpu:
        notes.append(per_gpu)
    return notes


def setup_notes(runs: list[RunRecord]) -> list[str]:
    """A line per run that recorded where a framework's start-up went (verl)."""
    return [f"run {n}: {run.setup.line}" for n, run in enumerate(runs, 1) if run.setup and run.setup.line]


def turn_notes(runs: list[RunRecord]) -> list[str]:
    """A line per run that took turns on a shared host (``--perf-host-lock``): alone or beside the
    others, and how long it waited, so a slower night can be read against the turns it got."""
    return [run.host_turn.note(number) for number, run in enumerate(runs, 1) if run.host_turn]


def reference_notes(references: list[ReferenceLine] | None) -> list[str]:
    """A line per published figure the result was set beside (``store.references``): never a gate.
    A line without its figures (a stored one that lacks them) has nothing to say."""
    return [
        f"vs published: {ref.metric} {ref.measured:,.4g} = {ref.ratio:.2f}x {ref.source}'s "
        f"{ref.published:,.4g} (provisional, never gates)"
        for ref in references or []
        if ref.measured is not None and ref.ratio is not None and ref.published is not None
    ]
