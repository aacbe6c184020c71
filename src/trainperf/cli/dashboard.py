"""``trainperf dashboard --output DIR [--store URL]``: the static trend site of the results history."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.paths import PAGE_FILE
from trainperf.store.interface import open_history_store, resolve_url


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dashboard",
        help="write a static site: what is red and every change point first, then a page per case",
    )
    parser.add_argument("--output", type=Path, required=True, help="folder for index.html and cases/")
    parser.add_argument(
        "--store", help="store URL (default: TRAINPERF_STORE, else the per-user history.sqlite)"
    )
    parser.add_argument(
        "--reports-url",
        help="where the run folders are published (each point links to <URL>/<run>/index.html); "
        "default: a path relative to the site",
    )
    parser.add_argument(
        "--runs",
        type=Path,
        help="folder that holds the run folders now, where they moved since they were stored: the "
        "first page reads each red run's reason and diagnosis from its result file, and links to it",
    )
    parser.add_argument(
        "--since",
        help="the window: runs started on or after this date (YYYY-MM-DD) or this many days back (90d); "
        "default: every stored run",
    )
    parser.set_defaults(func=run)
    return parser


def since_of(text: str | None, now: datetime | None = None) -> str | None:
    """``--since`` as the ISO start it compares with; a one-line error for anything else."""
    if not text:
        return None
    if text.endswith("d") and text[:-1].isdigit():
        start = (now or datetime.now(timezone.utc)) - timedelta(days=int(text[:-1]))
        return start.isoformat(timespec="seconds")
    try:
        return (
            datetime.fromisoformat(text).date().isoformat()
            if len(text) == 10
            else datetime.fromisoformat(text).isoformat()
        )
    except ValueError:
        raise TrainperfError(
            f"--since {text!r} is not a date: use YYYY-MM-DD or a number of days such as 90d"
        ) from None


def run(args: argparse.Namespace) -> int:
    # Imported here: the parser imports every subcommand, and only this one draws the site.
    from trainperf.report.dashboard import build_site

    since = since_of(args.since)
    if args.runs is not None and not args.runs.is_dir():
        raise TrainperfError(
            f"--runs {args.runs} is not a folder: name the folder that holds the run folders"
        )
    with open_history_store(resolve_url(args.store), create=False) as store:
        count = build_site(store, args.output, reports_url=args.reports_url, runs_root=args.runs, since=since)
    print(f"{args.output / PAGE_FILE}: {count} case page(s)")
    return 0
