"""Where the results history is and how its errors read: the store URL by precedence, its default
file, the one-line errors. No database library is imported here, so the command's parser and every
module of the store (the interface and the SQL implementation alike) can name them.

The URL is read straight down: ``--perf-store`` / ``--store`` > ``TRAINPERF_STORE`` > ini
``perf_store`` > the default file. The default file lives in the per-user data directory
(``~/.local/share/trainperf/history.sqlite`` on Linux, via platformdirs): a nightly runner keeps it
between runs, where the checkout and its ``reports/`` are wiped by CI and ``/tmp`` by a reboot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.redact import redact_text

STORE_ENV = "TRAINPERF_STORE"
DEFAULT_LOCK_TIMEOUT_S = 30.0


class StoreError(TrainperfError):
    """The store cannot be used: unreachable, newer schema, corrupt, locked. One line."""


class StoreBusy(StoreError):
    """A SQLite writer did not get the lock in time; the run folder stays for a later ingest."""


STORE_OFF = ("off", "none")
"""``--perf-store off``: no results history at all (the run folder only)."""


def store_off(url: str | None) -> bool:
    """The store is switched off (``off`` or ``none``, any case)."""
    return (url or "").strip().lower() in STORE_OFF


def default_store_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("trainperf", appauthor=False)) / "history.sqlite"


def resolve_url(cli: str | None = None, ini: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The store URL by precedence: command line > ``TRAINPERF_STORE`` > ini > the default file."""
    environ = os.environ if env is None else env
    for value in (cli, environ.get(STORE_ENV), ini):
        if value:
            return normalise_url(value)
    return normalise_url(str(default_store_path()))


def normalise_url(text: str) -> str:
    """``sqlite:///PATH`` and ``postgresql://...`` as given (psycopg 3 as the driver); a bare path
    is a SQLite file."""
    text = text.strip()
    if text.startswith(("postgresql://", "postgres://", "postgresql+")):
        _check_server_url(text)
    if text.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if text.startswith(("postgresql+", "sqlite:")):
        return text
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"store URL scheme '{scheme}' is not supported: use sqlite:///PATH or postgresql://user@host:port/db"
        )
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _check_server_url(text: str) -> None:
    """A server URL whose port parses (a malformed one was a traceback from the database library, the
    URL's password in its frames): one line naming the URL without its secret."""
    from urllib.parse import urlsplit

    try:
        urlsplit(text).port  # noqa: B018 - reading it is the check
    except ValueError as exc:
        raise StoreError(
            f"store URL {shown(text)} does not parse ({exc}): give postgresql://user@host:port/db, its port "
            "a number"
        ) from None


def shown(url: str) -> str:
    """The URL without its password, fit for a message (``trainperf.redact``'s rule, as every record)."""
    return redact_text(url)
