"""The ``trainperf`` command's parser: one subcommand per module of ``trainperf.cli``."""

from __future__ import annotations

import argparse

from trainperf.cli import (
    ab,
    baselines,
    bisect,
    compare,
    cost,
    dashboard,
    engines,
    env,
    estimate,
    export,
    fidelity,
    history,
    ingest,
    merge,
    ray_submit,
    report,
    side_by_side,
    slurm,
    upgrade_report,
    verl_metrics,
)

COMMANDS = (
    env, baselines, estimate, report, side_by_side, engines, ab, bisect, upgrade_report, compare, fidelity,
    verl_metrics, ingest, history, dashboard, export, merge, slurm, ray_submit, cost,
)  # fmt: skip


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainperf", description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser
