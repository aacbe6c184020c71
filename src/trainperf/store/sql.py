"""The SQL store's connection: its engine and URL, its transactions, and database errors as one line.

``store/db.py`` assembles the store from this base and its writes (``store/history_writes.py``) and
reads (``store/reads.py``, ``store/series_reads.py``), each of which runs in ``writing()`` or
``reading()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine

from trainperf.redact import redact_text
from trainperf.store.url import StoreBusy, StoreError, shown

if TYPE_CHECKING:  # typing.Self is Python 3.11's
    from typing_extensions import Self

READ_ONLY = "trainperf_read_only"


@dataclass
class SqlStoreBase:
    """An open store: its engine and URL. Writes go through ``writing()``, reads through ``reading()``."""

    engine: Engine
    url: str

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        with _translated(self.url), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with _translated(self.url), self.engine.connect().execution_options(**{READ_ONLY: True}) as conn:
            yield conn

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


@contextmanager
def _translated(url: str) -> Iterator[None]:
    """Database errors as one line naming the fix."""
    try:
        yield
    except exc.OperationalError as error:
        raise _operational(url, error) from None
    except exc.DatabaseError as error:
        detail = redact_text(str(error.orig or error).splitlines()[0])
        if "not a database" in detail or "malformed" in detail:
            raise _unreadable(url, detail) from None
        raise StoreError(f"results store {shown(url)}: {detail}") from None


def _operational(url: str, error: exc.OperationalError) -> StoreError:
    # A driver's message may quote the connection string it was given.
    detail = redact_text(str(error.orig or error).strip().splitlines()[0])
    if "database is locked" in detail:
        return StoreBusy(f"results store {shown(url)} stayed locked by another writer: {detail}")
    if "not a database" in detail or "malformed" in detail:
        return _unreadable(url, detail)
    if url.startswith("sqlite:"):
        return StoreError(
            f"cannot open the results store {shown(url)} ({detail}): check the path and its permissions"
        )
    return StoreError(
        f"cannot reach the results store {shown(url)} ({detail}): "
        "check the server, or the URL's host and port"
    )


def _unreadable(url: str, detail: str) -> StoreError:
    return StoreError(
        f"{shown(url)} is not a readable SQLite database ({detail}): "
        "move it away and re-ingest the run folders"
    )
