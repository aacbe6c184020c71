"""``trainperf history CASE [--metric M] [--store URL] [--json]``: a case's series and its change points.

For each runner: every run's value, oldest first, the change points, and at each change point
what changed in the environment between the runs on either side (driver, CUDA, torch,
transformers, peft, trl, bitsandbytes, vllm ...). The verdict beside each value is the shown
metric's own (a memory-only regression leaves step time ``pass``). Results kept out of the series
(contaminated runs, planted slowdowns) are counted, never silently dropped. ``--json`` prints one
object whose ``runs`` is the list of runs, oldest first.
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.case import Outcome
from trainperf.cli.output import PIPE_CLOSED, PipeClosed, emit
from trainperf.errors import TrainperfError
from trainperf.judge.changepoints import MIN_SEGMENT
from trainperf.judge.fingerprint import environment_changes
from trainperf.judge.metrics import STEP_TIME
from trainperf.store.interface import HistoryStore, open_history_store, resolve_url
from trainperf.store.records import LeftOut, Point
from trainperf.store.series import Series, series_of
from trainperf.stored_verdict import StoredVerdict

DEFAULT_METRIC = STEP_TIME
RUNS_FOR_A_CHANGE_POINT = 2 * MIN_SEGMENT
# A case's verdict that holds for every metric (nothing was compared metric by metric).
CASE_WIDE_VERDICTS = ("outcome-changed", "config-changed", "contaminated", "not-compared", "expected-oom")


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


@dataclass(slots=True)
class CaseHistory:
    """What ``history`` shows of a case: its series of one metric, each run's verdict on that
    metric, and the stored results kept out of the series."""

    metric: str
    found: list[Series]
    verdicts: dict[tuple[str, str], str | None] = field(default_factory=dict)
    """(run key, created) -> the metric's own verdict in that run."""
    left_out: list[LeftOut] = field(default_factory=list)


def case_series(args: argparse.Namespace) -> CaseHistory:
    with open_history_store(resolve_url(args.store), create=False) as store:
        points = store.history_points([args.metric] if args.metric else _all_metrics(), case_id=args.case)
        left_out = [r for r in store.left_out(args.case) if args.runner in (None, r.runner)]
        if not points:
            raise TrainperfError(_no_series(store, args.case, left_out))
        metric = args.metric or _default_metric(points)
        verdicts = metric_verdicts(store, args.case, metric)
    found = [s for s in series_of(points, metric) if args.runner in (None, s.runner)]
    if not found:
        have = sorted({name for p in points for name in p.values})
        raise TrainperfError(
            f"{args.case} has no stored {metric}{' on runner ' + args.runner if args.runner else ''}; "
            f"it has: {', '.join(have) or 'no metric (not measured)'}"
        )
    return CaseHistory(metric, found, verdicts, left_out)


def _all_metrics() -> list[str]:
    from trainperf.judge.metrics import METRICS

    return list(METRICS)


def _default_metric(points: list[Point]) -> str:
    have = {name for p in points for name in p.values}
    if DEFAULT_METRIC in have:
        return DEFAULT_METRIC
    cliffs = sorted(name for name in have if name.startswith("cliff_"))
    return cliffs[0] if cliffs else min(have, default=DEFAULT_METRIC)


def _no_series(store: HistoryStore, case_id: str, left_out: list[LeftOut]) -> str:
    """Why a case has no series: every stored result was kept out of it, or no such case."""
    if left_out:
        kinds = ", ".join(f"{n} {why}" for why, n in sorted(Counter(r.why for r in left_out).items()))
        last = left_out[-1]
        return (
            f"{case_id} has {len(left_out)} stored result(s), none in its series ({kinds}: "
            f"kept out of every series and baseline); the latest: {last.created[:19]} on runner "
            f"{last.runner}{' in ' + last.run_dir if last.run_dir else ''}. Re-run it on an idle "
            "runner to start its series"
        )
    return _unknown_case(store, case_id)


def _unknown_case(store: HistoryStore, case_id: str) -> str:
    known = store.case_ids()
    close = difflib.get_close_matches(case_id, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}" if close else f" ({len(known)} cases stored)"
    return (
        f"no stored result of case {case_id!r} in the store{hint}: give a stored case id, or record its runs "
        "first (every pytest run records them; trainperf ingest reports/<run> loads older ones)"
    )


def metric_verdicts(store: HistoryStore, case_id: str, metric: str) -> dict[tuple[str, str], str | None]:
    """(run key, created) -> the metric's own verdict: as stored with the metric, else read from
    the result file (results stored before the metric's verdict was kept), else None."""
    return {
        (found.run_key, found.created): found.verdict
        if found.stored
        else _verdict_in_file(found.result_path, metric)
        for found in store.metric_verdicts(case_id, metric)
    }


def _verdict_in_file(result_path: str | None, metric: str) -> str | None:
    try:
        data = json.loads(Path(result_path).read_text()) if result_path else {}
        judged = StoredVerdict.from_dict(data.get("verdict")).metrics if isinstance(data, dict) else []
    except (OSError, ValueError, TypeError):
        return None
    return next((m.verdict for m in judged if m.metric == metric), None)


def shown_verdict(history: CaseHistory, point: Point) -> str:
    """The metric's own verdict; a case-wide one where nothing was judged metric by metric."""
    own = history.verdicts.get((point.run_key, point.created))
    if own:
        return own
    if point.verdict in CASE_WIDE_VERDICTS or point.outcome != Outcome.OK:
        return point.verdict or point.outcome
    return f"case {point.verdict}" if point.verdict else "not judged"


def as_json(case_id: str, history: CaseHistory) -> dict[str, Any]:
    metric, found = history.metric, history.found
    points = []
    for series in found:
        for position, point in enumerate(series.points):
            points.append((point.started, series, position, point))
    runs = [
        {
            "run": point.run_key,
            "started": started,
            "created": point.created,
            "runner": series.runner,
            "value": point.values[metric],
            "outcome": point.outcome,
            "verdict": point.verdict,
            "metric_verdict": history.verdicts.get((point.run_key, point.created)),
            "run_dir": point.run_dir,
            "environment_change": [list(c) for c in series.environment.get(position, [])],
        }
        for started, series, position, point in sorted(points, key=lambda item: item[0])
    ]
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
    left_out = [
        {"created": r.created, "runner": r.runner, "run_dir": r.run_dir, "why": r.why}
        for r in history.left_out
    ]
    return {
        "case": case_id,
        "metric": metric,
        "runs": runs,
        "change_points": change_points,
        "runs_for_a_change_point": RUNS_FOR_A_CHANGE_POINT,
        "left_out": left_out,
    }


def _series_line(series: Series) -> str:
    count = len(series.points)
    if count < RUNS_FOR_A_CHANGE_POINT:
        return (
            f"runner {series.runner}: {count} run(s), too few to look for change points "
            f"(needs at least {RUNS_FOR_A_CHANGE_POINT}: {MIN_SEGMENT} on each side)"
        )
    return f"runner {series.runner}: {count} run(s), {len(series.change_points)} change point(s)"


def render(case_id: str, history: CaseHistory) -> str:
    metric = history.metric
    lines = [f"{case_id}  {metric}  (verdict: {metric}'s own)"]
    if history.left_out:
        kinds = ", ".join(f"{n} {why}" for why, n in sorted(Counter(r.why for r in history.left_out).items()))
        lines.append(f"left out of the series: {kinds} (`--json` lists them)")
    for series in history.found:
        lines.append(_series_line(series))
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
                f"{shown_verdict(history, point):<16s} {point.run_dir or ''}"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    history = case_series(args)
    if args.json:
        text = json.dumps(as_json(args.case, history), indent=1, default=str)
    else:
        text = render(args.case, history)
    try:
        emit(text + "\n")
    except PipeClosed:
        return PIPE_CLOSED
    return 0
