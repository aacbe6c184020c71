"""The results history behind one interface: where it is, how it is opened, what it answers.

Everything outside ``store/`` reads and writes the history through ``HistoryStore``; no SQL
leaves ``store/``. The one implementation is the SQL store (``store/db.py``: SQLAlchemy Core
over a SQLite file or PostgreSQL); ``open_history_store`` chooses it by the URL. This module
imports no database library, so the command's parser and the parent's modules can name the
interface without loading one.

Where the store is and its one-line errors are in ``store/url.py``, which both this interface and
the implementation import; the names are given here too, for the callers of the interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from trainperf.result import CaseResult
from trainperf.store.records import (
    EVERY_RESULT,
    CaseItem,
    LeftOut,
    MetricVerdict,
    Point,
    ResultFilter,
    RunInfo,
    StoredCase,
    StoredRun,
    TimelineRow,
)
from trainperf.store.url import (
    DEFAULT_LOCK_TIMEOUT_S,
    STORE_ENV,
    StoreBusy,
    StoreError,
    default_store_path,
    normalise_url,
    resolve_url,
    shown,
)

__all__ = [
    "DEFAULT_LOCK_TIMEOUT_S",
    "STORE_ENV",
    "HistoryStore",
    "StoreBusy",
    "StoreError",
    "default_store_path",
    "normalise_url",
    "open_history_store",
    "resolve_url",
    "shown",
]

if TYPE_CHECKING:  # typing.Self is Python 3.11's
    from typing_extensions import Self


class HistoryStore(Protocol):
    """An open results history. Each call is its own transaction; failures are ``StoreError``
    (``StoreBusy`` where a writer waited too long for the lock), one line naming the fix."""

    url: str

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...

    # Writes. A run is keyed by when and where it started, a case result by its case, creation
    # time and machine: the same result reached twice (live, then from its run folder) is kept once.

    def record_case(self, run: RunInfo, result: CaseResult, result_path: str | None = None) -> bool:
        """Write one finished case (and its run on first use). True when it was new to the store."""
        ...

    def write_run(self, run: RunInfo) -> None:
        """Insert the run when it is new; a known run gets its end time moved on."""
        ...

    def write_cases(self, run: RunInfo, items: Sequence[CaseItem]) -> int:
        """The run and those of its case results not stored yet, in one transaction; how many were added."""
        ...

    def stored_case_count(self, run_key: str) -> int:
        """How many case results the run with this key has in the store (0 for an unknown run)."""
        ...

    # Reads of cases and runs.

    def stored_cases(self, case_id: str, which: ResultFilter = EVERY_RESULT) -> list[StoredCase]:
        """The stored results of a case, oldest first: all, or those ``which`` names."""
        ...

    def run_cases(self, run_key: str) -> list[StoredCase]:
        """Every case result of one run, in the order they ended."""
        ...

    def list_runs(self) -> list[dict[str, Any]]:
        """Every stored run, oldest first: key, kind, start, runner, class, folder and fingerprint."""
        ...

    def class_timeline(self, gpu_class: str, *, before: str, last_runs: int = 30) -> list[TimelineRow]:
        """The case results of a class's last ``last_runs`` runs (every runner's) that started before
        ``before``, in run order and, within a run, in the order the cases started."""
        ...

    def class_verdicts(self, gpu_class: str, *, before: str) -> list[tuple[str, str, str]]:
        """Each case result of the class's runs (every runner) that started before ``before``, oldest
        first: case id, when it was made, its verdict ("" when none); what a nightly's promotion reads
        (``plan.tiers.promoted``). Planted slowdowns and emulated runs are left out."""
        ...

    def case_ids(self) -> list[str]:
        """Every case id with a stored result."""
        ...

    # The series reads: ``trainperf history``, the dashboard.

    def stored_runs(
        self, metric_names: Sequence[str], *, since: str | None = None, case_id: str | None = None
    ) -> list[StoredRun]:
        """Every stored result of the nightly cases (A/B arms and other variants are experiments,
        not history), kept out of the series or not, with the named metrics, oldest first."""
        ...

    def history_points(self, metric_names: Sequence[str], case_id: str | None = None) -> list[Point]:
        """The results the series are made of (of one case, or all), with the named metrics, oldest first."""
        ...

    def left_out(self, case_id: str) -> list[LeftOut]:
        """The case's stored results that no series holds (contaminated, planted), oldest first."""
        ...

    def metric_verdicts(self, case_id: str, metric: str) -> list[MetricVerdict]:
        """Each stored result's own verdict on one metric, as stored with the metric."""
        ...


def open_history_store(
    url: str, *, create: bool = True, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
) -> HistoryStore:
    """Open the store at ``url`` (``resolve_url``'s): create its schema on first use or migrate an
    older one; ``create=False`` refuses a SQLite file that is not there. One line for any failure."""
    # The SQL store's libraries load here, once a store is opened (ImportError where not installed).
    from trainperf.store.db import open_store

    return open_store(url, create=create, lock_timeout_s=lock_timeout_s)
