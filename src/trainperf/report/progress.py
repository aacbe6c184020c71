"""The session's own progress line: how many cases, how many done, how long so far and about how
long is left, said at the start and as each case ends (each child's own progress lines say how far
its steps are).

A night of 17 cases on four GPUs prints a line a case; the remaining time is the cases left at the
mean time of those done, spread over the workers: a pace, said as one, never a promise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

PREFIX = "[trainperf]"


def clock(seconds: float) -> str:
    """``45s``, ``12m03s``, ``1h02m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@dataclass(slots=True)
class SessionProgress:
    """Cases of one session (or of an xdist run, on its controller) as they end."""

    total: int
    workers: int = 1
    skipped_at_start: dict[str, int] = field(default_factory=dict)
    """Cases skipped before any starts (not counted in ``total``), by reason."""
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    ran: int = 0
    """Cases that ended other than skipped: the pace is theirs (a skip takes no time)."""
    spent_s: float = 0.0
    """The cases that ran, their own durations summed (their pace)."""
    outcomes: dict[str, int] = field(default_factory=dict)

    def start_line(self) -> str:
        spread = f" on {self.workers} workers" if self.workers > 1 else ""
        skipped = "".join(
            f"; {count} skipped ({reason})" for reason, count in sorted(self.skipped_at_start.items())
        )
        return f"{PREFIX} session: {self.total} case(s) to run{spread}{skipped}"

    def ended(self, label: str, outcome: str, duration_s: float, now: float | None = None) -> str:
        """Count a case that ended; the line that says so, with the session's elapsed and left."""
        self.done += 1
        if outcome != "skipped":
            self.ran += 1
            self.spent_s += max(0.0, duration_s)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        elapsed = (time.monotonic() if now is None else now) - self.started
        left = max(0, self.total - self.done)
        pace = ""
        if left and self.ran:
            ahead = left * (self.spent_s / self.ran) / max(1, min(self.workers, left))
            pace = f", ~{clock(ahead)} left at this pace"
        tally = ", ".join(f"{n} {name}" for name, n in sorted(self.outcomes.items()))
        return (
            f"{PREFIX} case {self.done}/{self.total} done: {label} {outcome} ({clock(duration_s)}); "
            f"{clock(elapsed)} in{pace} [{tally}]"
        )
