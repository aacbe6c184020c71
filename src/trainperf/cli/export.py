"""``trainperf export --format bmf|openmetrics [--run KEY|latest|all] [--output PATH]``.

``bmf``: the Bencher Metric Format of one run (``bencher run --adapter json``), with each
metric's 95% interval as lower and upper values. ``openmetrics``: one text file per run
(``<run start>-<runner>.om``) for Prometheus' textfile collector or ``promtool``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainperf.errors import TrainperfError

if TYPE_CHECKING:
    from trainperf.store.db import Store


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "export", help="a run as Bencher Metric Format JSON, or OpenMetrics text files per run"
    )
    parser.add_argument("--format", choices=("bmf", "openmetrics"), required=True)
    parser.add_argument(
        "--run",
        default="latest",
        help="run key (or its first characters), 'latest' or 'all' (default latest)",
    )
    parser.add_argument(
        "--output", type=Path, help="bmf: a file (default stdout); openmetrics: a folder (default stdout)"
    )
    parser.add_argument(
        "--store", help="store URL (default: TRAINPERF_STORE, else the per-user history.sqlite)"
    )
    parser.set_defaults(func=run)
    return parser


def selected_runs(store: Store, which: str) -> list[dict[str, Any]]:
    from trainperf.store.reads import list_runs

    stored = list_runs(store)
    if not stored:
        raise TrainperfError("the results store holds no run: `trainperf ingest RUN_DIR` first")
    if which == "latest":
        return stored[-1:]
    if which == "all":
        return stored
    chosen = [r for r in stored if r["run_key"].startswith(which)]
    if len(chosen) != 1:
        raise TrainperfError(
            f"--run {which}: {'no' if not chosen else len(chosen)} stored run(s) match; "
            "give more of the key (`trainperf history CASE --json` lists them) or 'latest'"
        )
    return chosen


def run(args: argparse.Namespace) -> int:
    # Imported here: the parser imports every subcommand, and the store's modules pull in SQLAlchemy.
    from trainperf.report.interchange import bmf, openmetrics
    from trainperf.store.db import open_store, resolve_url
    from trainperf.store.reads import run_cases

    store = open_store(resolve_url(args.store), create=False)
    try:
        chosen = [(r, run_cases(store, r["run_key"])) for r in selected_runs(store, args.run)]
    finally:
        store.close()
    if args.format == "bmf":
        merged: dict[str, Any] = {}
        for _run, found in chosen:
            merged.update(bmf(found))
        text = json.dumps(merged, indent=1, sort_keys=True) + "\n"
        _write(args.output, text)
        return 0
    for run_row, found in chosen:
        text = openmetrics(run_row, found)
        if args.output is None:
            sys.stdout.write(text)
            continue
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{run_row['started'][:19]}-{run_row['runner']}") + ".om"
        _write(args.output / name, text)
    return 0


def _write(path: Path | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)
