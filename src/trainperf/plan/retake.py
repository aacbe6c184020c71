"""Which of a class's baselines predate what the suite now reads from them, and the command that
re-takes them (no I/O).

A baseline file is a run of its day: one written before the suite recorded a figure cannot serve
the features that read it, and nothing says so until a run needs it. Each gap names the feature it
leaves without input, so a runner's owner can tell which re-takes matter to them; re-taking a case
(``--perf-update-baselines``) writes every figure the suite records today.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainperf.case import Outcome
from trainperf.judge.metrics import KERNEL_TIME
from trainperf.result import CaseResult


@dataclass(frozen=True, slots=True)
class Gap:
    name: str
    lacks: str
    """What goes without it (a clause)."""
    present: Callable[[CaseResult], bool]


def _profiled(result: CaseResult) -> bool:
    return result.profile is not None


def _peak_step(result: CaseResult) -> bool:
    return any(run.memory_peak_step is not None for run in result.runs)


def _wall_time(result: CaseResult) -> bool:
    return bool(result.runs) and all(run.wall_s for run in result.runs)


def _cpu_identity(result: CaseResult) -> bool:
    return bool(result.fingerprint.cpu_id)


def _kernel_time(result: CaseResult) -> bool:
    """Kernel time where a GPU run could record it (every family records it: verl in its own
    processes)."""
    return (
        KERNEL_TIME in result.metrics
        or result.outcome != Outcome.OK
        or result.gpu_class == "cpu"
        or result.cliff is not None
    )


GAPS = (
    Gap(
        "kernel time",
        "its runs are judged on wall time against every runner of the class, host and all (false reds on "
        "a slower host)",
        _kernel_time,
    ),
    Gap("profile", "the diagnosis has no profile to compare a slower run's with", _profiled),
    Gap("memory-peak step", "--perf-plan-steps cannot keep a shortened run's memory peak", _peak_step),
    Gap("wall time", "trainperf cost and the shard split leave the case out", _wall_time),
    Gap("CPU identity", "a run on another host is judged as if on the baseline's", _cpu_identity),
)


def gaps_of(result: CaseResult) -> list[str]:
    """The names of the gaps a baseline has, in ``GAPS`` order."""
    return [gap.name for gap in GAPS if not gap.present(result)]


def stale_baselines(results: Sequence[CaseResult]) -> dict[str, list[str]]:
    """Case id -> its gaps, for every baseline with at least one."""
    return {result.case_id: gaps for result in results if (gaps := gaps_of(result))}


def retake_command(gpu_class: str, case_ids: Sequence[str]) -> str:
    """The pytest command that writes these cases' baselines again, on a runner of the class."""
    selection = " or ".join(sorted(case_ids))
    return f"pytest perf_tests -m {gpu_class} --perf-update-baselines -k {shlex.quote(selection)}"
