"""Faults on purpose, for drills: ``TRAINPERF_INJECT_FAULT=KIND@STEP`` makes every child of the run
fail that way when it ends step STEP. It checks what a nightly does when a case crashes, hangs or
runs out of memory (the self-tests' fault matrix uses it): each is then reported as it would be
for real. Never set it for a measurement: a result with an injected fault is no baseline.

Kinds: ``segfault`` (SIGSEGV to itself), ``hang`` (sleeps, writing nothing, until killed),
``oom`` (raises an out-of-memory error as torch would), ``exit`` (exits with status 3, no result).
"""

from __future__ import annotations

import os
import signal
import time

FAULT_ENV = "TRAINPERF_INJECT_FAULT"
KINDS = ("segfault", "hang", "oom", "exit")


class InjectedOutOfMemoryError(MemoryError):
    """Named as torch's error is, so the child classifies it as an OOM by the same rule."""


def planned(environ: dict[str, str] | None = None) -> tuple[str, int] | None:
    """(kind, step) from the environment, or None; a malformed value is ignored with no fault."""
    value = (environ if environ is not None else dict(os.environ)).get(FAULT_ENV, "")
    kind, _, step = value.partition("@")
    if kind not in KINDS or not step.isdigit():
        return None
    return kind, int(step)


def at_step(step: int, plan: tuple[str, int] | None) -> None:
    """Fail now if the plan says so for ``step``."""
    if plan is None or plan[1] != step:
        return
    kind = plan[0]
    if kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "oom":
        raise InjectedOutOfMemoryError(f"out of memory (injected by {FAULT_ENV} at step {step})")
    elif kind == "exit":
        os._exit(3)
