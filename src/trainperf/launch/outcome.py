"""How one child ended: its outcome from its result file, exit status and stderr (no I/O)."""

from __future__ import annotations

import math
from typing import Any

from trainperf.case import Outcome
from trainperf.launch.interruption import remaining_s
from trainperf.workloads.protocol import EXIT_OK, OOM_MARKERS


def classify(
    returncode: int | None,
    timed_out: bool,
    child: dict[str, Any],
    stderr_tail: str,
    timeout_s: float,
    steps_requested: int = 0,
    silent_s: float | None = None,
) -> tuple[Outcome, str]:
    """The outcome of one child from its result file, exit status and stderr. ``silent_s``: the
    child was killed after writing nothing for that long (a hang, not a slow run)."""
    if silent_s is not None:
        done = len(child.get("steps") or [])
        return Outcome.TIMEOUT, (
            f"hung: no step and no output for {silent_s:.0f}s at step {done}/{steps_requested} "
            "(--perf-silent-timeout); its threads' stacks are at the end of its stderr"
        )
    if timed_out:
        advice = timeout_advice(child.get("steps") or [], steps_requested, timeout_s)
        return Outcome.TIMEOUT, f"killed after the {timeout_s:.0f}s limit (--perf-timeout){advice}"
    reported = child.get("outcome")
    if reported is not None:
        outcome = Outcome(reported)
        if outcome is Outcome.OK and returncode != EXIT_OK:
            return Outcome.CRASH, f"exit status {returncode} after reporting success"
        return outcome, str(child.get("message", ""))
    lowered = stderr_tail.lower()
    if any(marker in lowered for marker in OOM_MARKERS):
        return Outcome.OOM, "out of memory (from stderr; the child wrote no result)"
    if returncode is not None and returncode < 0:
        return Outcome.CRASH, (
            f"killed by signal {-returncode} (host out of memory if 9?); stderr: {_last_line(stderr_tail)}"
        )
    return Outcome.CRASH, f"exit status {returncode} without a result; stderr: {_last_line(stderr_tail)}"


def timeout_advice(steps: list[dict[str, Any]], requested: int, timeout_s: float) -> str:
    """What limit the cut run needed, from its own pace: the set-up and the steps it did, plus
    its remaining steps at their median time, a fifth more, in whole minutes. A verl case spends
    5-7 minutes before its first step, which a limit sized from step times alone misses."""
    more = remaining_s(steps, requested)
    if more is None:
        return (
            ": cut before its first step ended (set-up, or a first step slower than the limit); give a "
            "longer one"
        )
    if more == 0:
        return ""
    needed = timeout_s + more
    suggest = math.ceil(needed * 1.2 / 60) * 60
    return (
        f" at step {len(steps)}/{requested}; at its pace the run needs about {needed:.0f}s: "
        f"give --perf-timeout {suggest} or more"
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(empty)"


OUT_OF_SPACE_MARKERS = ("no space left on device", "[errno 28]", "disk quota exceeded", "[errno 122]")


def says_out_of_space(stderr_tail: str) -> bool:
    """Whether a failed child's stderr says it could not write its files: a harness fault (the run
    folder's disk), never the workload's outcome."""
    lowered = stderr_tail.lower()
    return any(marker in lowered for marker in OUT_OF_SPACE_MARKERS)
