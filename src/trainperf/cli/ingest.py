"""``trainperf ingest RUN_DIR... [--store URL]``: load run folders into the results history.

Idempotent: a result already stored is skipped, so a folder can be ingested again after a run
could not reach the store, or to fill a new store with ``docs/measurements/``.

Each folder goes on its own: one that cannot be ingested is named with why (on stderr) and the
others are stored. Exit status: 0 when every folder was read and stored (a run with no case
result says why, and is no failure), 1 when some folder, result file or locked write was left
out, 2 when no folder named held a run at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainperf.store.interface import open_history_store, resolve_url, shown


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ingest",
        help="load run folders (or folders of them) into the results history; ingesting twice adds nothing",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument(
        "--store",
        help="store URL: sqlite:///PATH or postgresql://user@host:port/db (default: TRAINPERF_STORE, "
        "else the per-user history.sqlite)",
    )
    parser.add_argument(
        "--runner", help="runner label for these runs (default: TRAINPERF_RUNNER, else host/GPU UUID)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the total")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    # Imported here: the parser imports every subcommand, and only this one needs the run side.
    from trainperf.recording.ingest import ingest

    url = resolve_url(args.store)
    with open_history_store(url) as store:
        report = ingest(
            store,
            args.run_dirs,
            runner=args.runner,
            say=(lambda _line: None) if args.quiet else print,
            warn=lambda line: print(f"trainperf: {line}", file=sys.stderr),
        )
    print(f"{shown(url)}: {report.line()}")
    for line in report.skipped:
        print(f"  skipped: {line}")
    if report.complete:
        return 0
    return 2 if report.failed and not report.runs_seen else 1
