"""``trainperf dashboard --output DIR [--store URL]``: the static trend site of the results history."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trainperf.paths import PAGE_FILE


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dashboard", help="write a static site: a sparkline per case, a page per case with change points"
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
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    # Imported here: the parser imports every subcommand, and the store's modules pull in SQLAlchemy.
    from trainperf.report.dashboard import build_site
    from trainperf.store.db import open_store, resolve_url

    store = open_store(resolve_url(args.store), create=False)
    try:
        count = build_site(store, args.output, reports_url=args.reports_url)
    finally:
        store.close()
    print(f"{args.output / PAGE_FILE}: {count} case page(s)")
    return 0
