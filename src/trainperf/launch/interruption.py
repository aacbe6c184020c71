"""What a cut run leaves behind, said where the user looks.

A run stopped half-way (Ctrl-C, a CI job's time limit sending SIGINT, ``timeout --signal=INT``)
keeps every finished case's result, and the running child's files stay on disk; but pytest's
summary lists only the finished cases, so the cut case would vanish from view. The runner
records which child was running and how far it got, and the summary names it with the way on
(``--perf-resume``). Once that case has a result in the folder (a resumed run finished it), the
record no longer applies and is not shown; for a probe of an OOM-cliff search, which has no
result of its own there, that is the search's result.
"""

from __future__ import annotations

import json
import signal
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainperf.ground.folder import RunFolder
from trainperf.jsonio import write_json_atomic
from trainperf.judge import stats


@dataclass(frozen=True, slots=True)
class Interruption:
    case_id: str
    label: str
    """The child as the progress lines name it (``CASE run 1/3``)."""
    child_dir: str
    """The interrupted child's folder, relative to the run folder."""
    steps_done: int
    steps_requested: int
    ran_s: float | None = None
    """How long the child had run when it was cut."""
    needed_more_s: float | None = None
    """Its remaining steps at the median time of those it did (None before its first step)."""
    settled_by: str | None = None
    """The result whose arrival in the folder settles the cut: the search's id for a cliff probe
    (a resumed search that finished kept showing its cut probe as pending); None: ``case_id``."""
    measured: str | None = None
    """What its steady steps measured before the cut (``measured_so_far``): shown, never judged."""


def remaining_s(steps: list[dict[str, Any]], requested: int) -> float | None:
    """The time a run's remaining steps would take at its own pace (the median of its steps so
    far); None before its first step, when its pace is unknown."""
    durations = [float(s["duration_s"]) for s in steps if s.get("duration_s") is not None]
    if not durations:
        return None
    return max(0, requested - len(steps)) * stats.median(durations)


def measured_so_far(steps: list[dict[str, Any]]) -> str | None:
    """The cut run's steady steps, said: a verl step of two minutes cut at step 3 of 10 still
    measured two steady steps, which no result keeps (a cut run is not pooled). None before a
    steady step (the first is warm-up)."""
    timed = [s for s in steps if s.get("duration_s")]
    if len(timed) < 2:
        return None
    durations = [float(s["duration_s"]) for s in timed]
    tokens = [float(s.get("tokens") or 0) for s in timed]
    start = stats.steady_start(durations, tokens if all(tokens) else None)
    pace = stats.median(durations[start:])
    if start + 1 == len(timed):
        line = f"step {len(timed)} measured {pace:.4g} s"
    else:
        line = f"steps {start + 1}-{len(timed)} measured a median {pace:.4g} s a step"
    if all(tokens):
        rate = stats.median([t / d for t, d in zip(tokens[start:], durations[start:])])
        line += f", {rate:,.0f} tokens/s"
    return line + " (not judged)"


def cut_child(
    case_id: str,
    label: str,
    child_dir: str,
    steps: list[dict[str, Any]],
    requested: int,
    ran_s: float,
    settled_by: str | None,
) -> Interruption:
    """The record of a child cut after ``steps``: how far it got, its pace, what it measured."""
    return Interruption(
        case_id,
        label,
        child_dir,
        len(steps),
        requested,
        ran_s=ran_s,
        needed_more_s=remaining_s(steps, requested),
        settled_by=settled_by,
        measured=measured_so_far(steps),
    )


def record(run_dir: Path, interruption: Interruption) -> None:
    write_json_atomic(RunFolder(run_dir).interruption_path, asdict(interruption))


def pending(run_dir: Path) -> Interruption | None:
    """The interruption recorded in ``run_dir``, unless its case has a result there since."""
    try:
        data = json.loads(RunFolder(run_dir).interruption_path.read_text())
        interruption = Interruption(**data)
    except (OSError, ValueError, TypeError):
        return None
    if RunFolder(run_dir).has_result(interruption.settled_by or interruption.case_id):
        return None
    return interruption


def describe(run_dir: Path, interruption: Interruption) -> str:
    """The cut child, its pace, the case's runs that are kept, and how to go on."""
    pace = ""
    if interruption.ran_s is not None:
        pace = f", {interruption.ran_s:.0f}s in"
        if interruption.needed_more_s:
            pace += f"; at its pace it needed about {interruption.needed_more_s:.0f}s more"
    if interruption.measured:
        pace += f"; {interruption.measured}"
    kept = RunFolder(run_dir).finished_run_count(interruption.case_id)
    runs = f"; {interruption.case_id} keeps its {kept} finished run(s) and goes on from them" if kept else ""
    return (
        f"trainperf: interrupted during {interruption.label} after {interruption.steps_done}/"
        f"{interruption.steps_requested} steps{pace} (its files: {run_dir / interruption.child_dir}){runs}; "
        + resume_hint(run_dir)
    )


def resume_hint(run_dir: Path) -> str:
    """How to go on from an interrupted run: the option in the one form pytest cannot take for a path
    of its own (``--perf-resume <folder>`` would make the folder pytest's rootdir)."""
    return (
        f"finished cases are kept: run again with --perf-resume={run_dir} to judge them and re-run the rest"
    )


def keep_ctrl_c() -> None:
    """Take SIGINT back where the run was started with it ignored.

    A non-interactive shell starts background jobs with SIGINT ignored, and CI runners start
    steps that way; Python then installs no KeyboardInterrupt handler, so Ctrl-C or a time limit's
    SIGINT never stopped the run and its child trained on. The suite's own handling (the child's
    group killed, the cut case recorded for --perf-resume) needs the interrupt."""
    if (
        signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        and threading.current_thread() is threading.main_thread()
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)
