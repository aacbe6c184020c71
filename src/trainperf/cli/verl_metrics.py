"""``trainperf verl-metrics``: verl's per-step metrics of a run made anywhere."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_verl_metrics(args: argparse.Namespace) -> int:
    """verl's per-step metrics of a run made anywhere, as this suite reads them."""
    from trainperf.report.verl_steps import render_records
    from trainperf.workloads.verl.logs import read_records

    records = read_records(Path(args.logfile))
    print(json.dumps(records, indent=1) if args.json else render_records(records))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verl_metrics = sub.add_parser(
        "verl-metrics",
        help="per-step phases, throughput and memory from a verl file-logger JSONL or console log",
    )
    verl_metrics.add_argument(
        "logfile",
        metavar="LOGFILE",
        help="VERL_FILE_LOGGER_PATH's JSONL, verl's console output, or a verl case's run folder "
        "(cases/CASE/rN: its verl_metrics.jsonl)",
    )
    verl_metrics.add_argument("--json", action="store_true", help="print the step records as JSON")
    verl_metrics.set_defaults(func=cmd_verl_metrics)
