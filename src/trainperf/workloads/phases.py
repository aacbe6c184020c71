"""Per-phase time inside a step (child side): exclusive seconds per named phase, reset at each step.

Phases may nest (TRL's ``training_step`` calls ``_prepare_inputs``, which calls ``_generate``):
time is charged to the innermost open phase only, so the phases of a step are disjoint and
their sum never exceeds the step. The step record carries them as ``phases={name: s}``; the
parent derives ``phase_<name>_s`` and the unexplained remainder from them.

Edges are synchronised with the device through ``sync`` (``torch.cuda.synchronize`` on a GPU):
without it, kernels queued in one phase would be charged to whichever later phase first waits
for the device (the log-probability kernels of the preparation would land in the update). At
TRL's other edges the queue is already empty (generation ends by copying the ids to the host, the
reward runs on the host), so there a synchronisation costs microseconds: a few per step, against
steps of seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class PhaseClock:
    def __init__(self, sync: Callable[[], None] = lambda: None) -> None:
        self._sync = sync
        self._totals: dict[str, float] = {}
        self._open: list[str] = []
        self._edge = time.perf_counter()
        """The last synchronised edge: when the innermost open phase (or the gap) began to be charged."""

    def _charge(self) -> float:
        """Close the running interval at a synchronised edge and charge it to the innermost open phase."""
        self._sync()
        now = time.perf_counter()
        if self._open:
            name = self._open[-1]
            self._totals[name] = self._totals.get(name, 0.0) + (now - self._edge)
        self._edge = now
        return now

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Charge the time inside the block (less any nested phase) to ``name``."""
        self._charge()
        self._open.append(name)
        try:
            yield
        finally:
            self._charge()
            self._open.pop()

    def charge_since_last_edge(self, name: str) -> None:
        """Charge the time since the last phase edge to ``name`` (the optimizer step after the last
        ``training_step``, up to the step's end)."""
        if self._open:
            raise RuntimeError(f"phase {self._open[-1]!r} is still open")
        started = self._edge
        now = self._charge()
        self._totals[name] = self._totals.get(name, 0.0) + (now - started)

    def take(self) -> dict[str, float]:
        """This step's phases, and start the next step's from zero."""
        totals, self._totals = self._totals, {}
        return totals
