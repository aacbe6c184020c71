"""``trainperf history CASE [--metric M] [--store URL] [--json]``: a case's series and its change points.

For each runner: every run's value, oldest first, the change points, and at each change point
what changed in the environment between the runs on either side (driver, CUDA, torch,
transformers, peft, trl, bitsandbytes, vllm ...). ``--json`` prints one object whose ``runs``
is the list of runs, oldest first.
"""

from __future__ import annotations

import argparse
import difflib
import json
from typing import TYPE_CHECKING, Any

from trainperf.errors import TrainperfError
from trainperf.judge.fingerprint import environment_changes

if TYPE_CHECKING:
    from trainperf.store.series import Series

DEFAULT_METRIC = "step_time_s"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "history", help="a case's stored series, its change points and the environment diff at each"
    )
    parser.add_argument("case", metavar="CASE", help="case id (as in the report)")
    parser.add_argument(
        "--metric", help=f"metric to show (default {DEFAULT_METRIC}; a cliff case: its cliff)"
    )
    parser.add_argument(
        "--store", help="store URL (default: TRAINPERF_STORE, else the per-user history.sqlite)"
    )
    parser.add_argument("--runner", help="only this runner's series")
    parser.add_argument(
        "--json", action="store_true", help="one JSON object; its key 'runs' lists the runs, oldest first"
    )
    parser.set_defaults(func=run)
    return parser


def case_series(args: argparse.Namespace) -> tuple[str, list[Series]]:
    # Imported here: the parser imports every subcommand, and the store's modules pull in SQLAlchemy.
    from trainperf.store.db import open_store, resolve_url
    from trainperf.store.series import history_points, series_of

    store = open_store(resolve_url(args.store), create=False)
    try:
        points = history_points(store, [args.metric] if args.metric else _all_metrics(), case_id=args.case)
        if not points:
            raise TrainperfError(_unknown_case(store, args.case))
    finally:
        store.close()
    metric = args.metric or _default_metric(points)
    found = [s for s in series_of(points, metric) if args.runner in (None, s.runner)]
    if not found:
        have = sorted({name for p in points for name in p.values})
        raise TrainperfError(
            f"{args.case} has no stored {metric}{' on runner ' + args.runner if args.runner else ''}; "
            f"it has: {', '.join(have) or 'no metric (not measured)'}"
        )
    return metric, found


def _all_metrics() -> list[str]:
    from trainperf.judge.metrics import METRICS

    return list(METRICS)


def _default_metric(points: list[Any]) -> str:
    have = {name for p in points for name in p.values}
    if DEFAULT_METRIC in have:
        return DEFAULT_METRIC
    cliffs = sorted(name for name in have if name.startswith("cliff_"))
    return cliffs[0] if cliffs else min(have, default=DEFAULT_METRIC)


def _unknown_case(store: Any, case_id: str) -> str:
    import sqlalchemy as sa

    from trainperf.store.db import cases

    with store.reading() as conn:
        known = [row[0] for row in conn.execute(sa.select(cases.c.case_id).distinct())]
    close = difflib.get_close_matches(case_id, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}" if close else f" ({len(known)} cases stored)"
    return f"no stored result of case {case_id!r} in the store{hint}"


def as_json(case_id: str, metric: str, found: list[Series]) -> dict[str, Any]:
    runs = []
    points = []
    for series in found:
        for position, point in enumerate(series.points):
            points.append((point.started, series, position, point))
    for started, series, position, point in sorted(points, key=lambda item: item[0]):
        runs.append(
            {
                "run": point.run_key,
                "started": started,
                "created": point.created,
                "runner": series.runner,
                "value": point.values[metric],
                "outcome": point.outcome,
                "verdict": point.verdict,
                "run_dir": point.run_dir,
                "environment_change": [list(c) for c in series.environment.get(position, [])],
            }
        )
    change_points = [
        {
            "runner": series.runner,
            "run": series.points[cp.index].run_key,
            "started": series.points[cp.index].started,
            "before": cp.before,
            "after": cp.after,
            "change": cp.ratio - 1,
            "p_value": cp.p_value,
            "environment": [
                list(c)
                for c in environment_changes(
                    series.points[cp.index - 1].fingerprint, series.points[cp.index].fingerprint
                )
            ],
        }
        for series in found
        for cp in series.change_points
    ]
    return {"case": case_id, "metric": metric, "runs": runs, "change_points": change_points}


def render(case_id: str, metric: str, found: list[Series]) -> str:
    lines = [f"{case_id}  {metric}"]
    for series in found:
        lines.append(
            f"runner {series.runner}: {len(series.points)} run(s), "
            f"{len(series.change_points)} change point(s)"
        )
        starts = {cp.index: cp for cp in series.change_points}
        for position, point in enumerate(series.points):
            if position in starts:
                cp = starts[position]
                diff = environment_changes(series.points[position - 1].fingerprint, point.fingerprint)
                listed = ", ".join(f"{k} {a} -> {b}" for k, a, b in diff) or "no environment change"
                lines.append(
                    f"  ---- change point {(cp.ratio - 1) * 100:+.1f}% (p={cp.p_value:.1g}): {listed}"
                )
            elif position in series.environment:
                listed = ", ".join(f"{k} {a} -> {b}" for k, a, b in series.environment[position])
                lines.append(f"  .... environment: {listed}")
            lines.append(
                f"  {point.created[:19]}  {point.values[metric]:>12.6g}  "
                f"{point.verdict or point.outcome:<16s} {point.run_dir or ''}"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    metric, found = case_series(args)
    if args.json:
        print(json.dumps(as_json(args.case, metric, found), indent=1, default=str))
    else:
        print(render(args.case, metric, found))
    return 0
