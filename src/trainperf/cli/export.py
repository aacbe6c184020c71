"""``trainperf export --format bmf|openmetrics|textfile [--run KEY|latest|all] [--output PATH]``.

``bmf``: the Bencher Metric Format (``bencher run --adapter json``), with each metric's 95%
interval as lower and upper values; one report per run (a file, or with ``--run all`` a folder
holding ``<run start>-<runner>.json`` per run). ``openmetrics``: the runs as one OpenMetrics
exposition stamped with each run's start (stdout, or a ``.om`` file), or with ``--output
FOLDER`` one ``<run start>-<runner>.om`` per run; for ``promtool tsdb create-blocks-from
openmetrics``. ``textfile``: one run without timestamps in Prometheus' text format, written as
``trainperf.prom`` into node_exporter's textfile-collector folder (or the ``.prom`` file named).
Contaminated results' figures are left out of every format (``trainperf.report.interchange``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainperf.cli.output import PIPE_CLOSED, PipeClosed, emit
from trainperf.errors import TrainperfError
from trainperf.store.interface import HistoryStore, open_history_store, resolve_url

if TYPE_CHECKING:
    from trainperf.report.interchange import RunCases

TEXTFILE_NAME = "trainperf.prom"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "export",
        help="runs as Bencher Metric Format JSON, OpenMetrics, or a node_exporter textfile (.prom)",
    )
    parser.add_argument("--format", choices=("bmf", "openmetrics", "textfile"), required=True)
    parser.add_argument(
        "--run",
        default="latest",
        help="run key (or its first characters), 'latest' or 'all' (default latest; textfile: one run)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="default stdout. bmf: a file (--run all: a folder, one file per run); openmetrics: a .om "
        "file, or a folder of one .om per run; textfile: the collector's folder or a .prom file",
    )
    parser.add_argument(
        "--store", help="store URL (default: TRAINPERF_STORE, else the per-user history.sqlite)"
    )
    parser.set_defaults(func=run)
    return parser


def selected_runs(store: HistoryStore, which: str) -> list[dict[str, Any]]:
    stored = store.list_runs()
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


def _check(args: argparse.Namespace) -> None:
    """Refuse, before reading the store, what one format cannot hold."""
    if args.format == "bmf" and args.run == "all" and (args.output is None or args.output.suffix == ".json"):
        raise TrainperfError(
            "--format bmf --run all: a BMF report is one run; give --output FOLDER (one file per run)"
        )
    if args.format == "textfile" and args.run == "all":
        raise TrainperfError(
            "--format textfile: node_exporter exposes a textfile's values as current, so it holds one "
            "run; use --run latest (or a key), or --format openmetrics for the history"
        )


def run(args: argparse.Namespace) -> int:
    _check(args)
    with open_history_store(resolve_url(args.store), create=False) as store:
        chosen = [(r, store.run_cases(r["run_key"])) for r in selected_runs(store, args.run)]
    left_out = sum(case.verdict == "contaminated" for _run, found in chosen for case in found)
    if left_out:
        print(f"{left_out} contaminated result(s): their figures are not exported", file=sys.stderr)
    try:
        if args.format == "bmf":
            _bmf(chosen, args.output, per_run=args.run == "all" or bool(args.output and args.output.is_dir()))
        else:
            (_openmetrics if args.format == "openmetrics" else _textfile)(chosen, args.output)
    except PipeClosed:
        return PIPE_CLOSED
    return 0


def _bmf(chosen: Sequence[RunCases], output: Path | None, *, per_run: bool) -> None:
    from trainperf.report.interchange import bmf

    if output is None or not per_run:
        _write(output, json.dumps(bmf(chosen[0][1]), indent=1, sort_keys=True) + "\n")
        return
    for run_row, found in chosen:
        _write(output / _file_name(run_row, ".json"), json.dumps(bmf(found), indent=1, sort_keys=True) + "\n")


def _openmetrics(chosen: Sequence[RunCases], output: Path | None) -> None:
    from trainperf.report.interchange import openmetrics

    if output is None or output.suffix == ".om":
        _write(output, openmetrics(chosen))
        return
    for run_row, found in chosen:
        _write(output / _file_name(run_row, ".om"), openmetrics([(run_row, found)]))


def _textfile(chosen: Sequence[RunCases], output: Path | None) -> None:
    from trainperf.report.interchange import prometheus_text

    ((run_row, found),) = chosen
    text = prometheus_text(run_row, found)
    if output is None:
        emit(text)
        return
    target = output if output.suffix == ".prom" else output / TEXTFILE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written beside it and renamed: the collector never reads half a file (its docs ask for this).
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    partial.write_text(text)
    partial.replace(target)
    print(f"wrote {target}", file=sys.stderr)


def _file_name(run_row: dict[str, Any], suffix: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{run_row['started'][:19]}-{run_row['runner']}") + suffix


def _write(path: Path | None, text: str) -> None:
    if path is None:
        emit(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}", file=sys.stderr)
