"""Turns on a host that several runs share: a host-bound case measured with nothing beside it.

Shards of one night on the GPUs of one host, ``pytest -n`` workers one per GPU, or upgrade studies
side by side share the host's CPU, memory bandwidth and PCIe. A GPU-bound case does not feel it (on
two H200s, 2026-11-27, a GPU-bound LoRA case beside another study ran within 1.0% of itself); a
host-bound one does: short SFT steps, TRL GRPO's generation (on four H100s the same day a short
LoRA case ran 41% slower than its baseline beside three busy GPUs). The host-load watch cannot
see it either when the neighbours are the suite's own runs.

With ``--perf-host-lock FILE`` every child run on the host takes that file's lock shared, so the
runs go on side by side, and a case named by ``--perf-alone`` takes it exclusive: it waits for the
children running beside it to end and none starts while it runs. flock prefers no one, so a run
that wants the lock passes a turnstile first (a second file, held while it waits): a steady stream
of shared turns cannot starve an exclusive one. A killed run's locks end with its process.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import IO

from trainperf.errors import TrainperfError
from trainperf.run_checks_record import HostTurn


def parse_patterns(text: str) -> tuple[str, ...]:
    """``--perf-alone``: comma-separated globs over case ids."""
    patterns = tuple(part.strip() for part in text.split(",") if part.strip())
    if not patterns:
        raise ValueError("give case-id globs separated by commas, e.g. '*-short-*,rl_trl-*'")
    for pattern in patterns:
        if pattern.count("[") != pattern.count("]"):
            # fnmatch reads an unclosed '[' as a literal, which no case id holds: it would match nothing.
            raise ValueError(f"the glob {pattern!r} has an unclosed '[': close it, e.g. '*-b[48]'")
    return patterns


@dataclass(frozen=True, slots=True)
class HostTurns:
    lock: Path | None
    """The lock file the runs on this host share; None: no turns (every run as it comes)."""
    alone: Sequence[str] = ()
    """Globs of the case ids that run alone."""

    def is_alone(self, case_id: str) -> bool:
        return any(fnmatchcase(case_id, pattern) for pattern in self.alone)

    @contextmanager
    def turn(self, case_id: str, say: Callable[[str], None]) -> Iterator[HostTurn | None]:
        """Hold the host for one child run of ``case_id``; None without a lock file."""
        if self.lock is None:
            yield None
            return
        alone = self.is_alone(case_id)
        started = time.monotonic()
        with _opened(self.lock.with_name(self.lock.name + ".turnstile")) as gate, _opened(self.lock) as held:
            _flock(gate, fcntl.LOCK_EX, lambda: say(f"{case_id}: waiting for its turn on the host"))
            try:
                kind = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
                _flock(held, kind, lambda: say(f"{case_id}: waiting for the host's other runs to end"))
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield HostTurn(alone, round(time.monotonic() - started, 1))
            finally:
                fcntl.flock(held, fcntl.LOCK_UN)


def _flock(file: IO[str], kind: int, on_wait: Callable[[], None]) -> None:
    """Take the lock, saying once that it waits when it cannot at once."""
    try:
        fcntl.flock(file, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        on_wait()
        fcntl.flock(file, kind)


@contextmanager
def _opened(path: Path) -> Iterator[IO[str]]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        file = open(path, "a+")  # noqa: SIM115 - closed below, after the caller's turn
    except OSError as exc:
        raise TrainperfError(
            f"--perf-host-lock {path}: cannot open it ({exc.strerror or exc}): give a file every run on the "
            "host can write, e.g. /tmp/trainperf-host.lock"
        ) from exc
    with file:
        yield file
