"""``trainperf cost FOLDER...``: a nightly's GPU-minutes from the wall times its results record
(``fleet.cost``), by family, and its wall time spread over 2 and 4 GPUs of one host.

FOLDER: run folders (reports/<run>, the shards of one nightly, or a merged one), or a baselines class
folder (baselines/<class>: one run per case, as a nightly would make). Give the folders of one
nightly together; run it once per nightly to compare two.

It also lists the synthetic inputs the cases take from the cache (``fleet.fresh_runner``): what a
fresh runner's first night writes, and what this machine's cache (``TRAINPERF_CACHE_DIR``) lacks.

``--night DATE``: a baselines class folder's week of nights from DATE as ``--perf-night`` plans them
(``fleet.night``): each case's tier and detection latency, each night's GPU-minutes; exit 1 when a night
is projected over ``--night-budget``.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cost", help="a nightly's GPU-minutes from its run folders or a class's baselines, by family"
    )
    parser.add_argument("folders", nargs="+", type=Path, metavar="FOLDER")
    parser.add_argument(
        "--gpus", default="1,2,4", help="GPU counts of one host to spread the cases over (default 1,2,4)"
    )
    parser.add_argument(
        "--plan-steps",
        action="store_true",
        help="a baselines folder's cost if the nightly ran with --perf-plan-steps (each case's planned "
        "steps, the steps left out at the baseline's step time)",
    )
    parser.add_argument(
        "--night",
        metavar="DATE",
        help="the week of nights from DATE (YYYY-MM-DD or today) as --perf-night plans them: each case's "
        "tier and detection latency, each night's GPU-minutes (a baselines class folder)",
    )
    parser.add_argument(
        "--night-budget",
        type=float,
        metavar="GPU_MINUTES",
        help="with --night: the GPU-minutes a night may take; exit 1 when a night is projected over it",
    )
    parser.add_argument(
        "--night-promote",
        metavar="SOURCE",
        help="with --night: count the cases these promote on every night (a run folder, a folder of run "
        "folders, a file of case ids, or store: the results history)",
    )
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    parser.set_defaults(func=run)
    return parser


def _gpu_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        counts = ()
    if not counts or any(count < 1 for count in counts):
        raise TrainperfError(f"--gpus {text!r}: give GPU counts such as 1,2,4")
    return counts


def _plans(baselines: list[Any]) -> dict[str, Any]:
    from trainperf.run.step_count import projected_plans

    if not baselines:
        raise TrainperfError(
            "--plan-steps projects a baselines folder (baselines/<class>); a run folder "
            "already records the steps it ran"
        )
    return projected_plans(baselines, Path.cwd())


def run(args: argparse.Namespace) -> int:
    from trainperf.fleet.cost import cost_lines, nightly_cost
    from trainperf.fleet.fresh_runner import fresh_runner_lines
    from trainperf.ground.folder import RunFolder, load_results

    counts = _gpu_counts(args.gpus)
    results = []
    for folder in args.folders:
        one_run = not RunFolder(folder).is_run()  # a baselines class folder stands for one nightly
        results += [(result, one_run) for result in load_results([folder])]
    if not results:
        raise TrainperfError(f"no case results in {', '.join(map(str, args.folders))}")
    plans = _plans([result for result, one_run in results if one_run]) if args.plan_steps else {}
    cost = nightly_cost(results, counts, {case_id: plan.steps for case_id, plan in plans.items()})
    if plans and not args.json:
        print("\n".join(f"{case_id}: {plan.note}" for case_id, plan in sorted(plans.items()) if plan.note))
    week = _week(args, results) if args.night else None
    fresh, cache_dir = _fresh_runner([result for result, _one_run in results])
    if args.json:
        print(
            json.dumps(
                {
                    **({"night": week.figures} if week else {}),
                    "gpu_minutes": round(cost.total_min, 2),
                    "by_family": {k: round(v, 2) for k, v in cost.by_family.items()},
                    "fresh_runner": _fresh_runner_json(fresh),
                    "wall_minutes_on": {str(k): round(v, 2) for k, v in cost.makespan_min.items()},
                    "cases": [
                        {"case_id": c.case_id, "gpus": c.gpus, "launches": c.launches, "wall_s": c.wall_s}
                        | ({"planned_steps": plans[c.case_id].steps} if c.case_id in plans else {})
                        for c in cost.cases
                    ],
                },
                indent=1,
            )
        )
    else:
        lines = cost_lines(cost) + fresh_runner_lines(fresh, cache_dir) + (week.lines if week else [])
        print("\n".join(lines))
    return 1 if week and week.over else 0


def _fresh_runner(results: list[Any]) -> tuple[Any, str]:
    """What the cases' cached inputs cost a fresh runner, against what this runner's cache holds."""
    import shutil

    from trainperf.fleet.fresh_runner import fresh_runner_cost, inputs_needed
    from trainperf.synth.cache import cache_dir, holds

    needs = inputs_needed(results)
    present = {need.name for need in needs if holds(need.kind, need.key)}
    root = cache_dir()
    existing = next((folder for folder in (root, *root.parents) if folder.is_dir()), None)
    free_b = shutil.disk_usage(existing).free if existing else None
    return fresh_runner_cost(needs, present, free_b), str(root)


def _fresh_runner_json(fresh: Any) -> dict[str, Any]:
    missing = {need.name for need in fresh.missing}
    return {
        "free_bytes": fresh.free_b,
        "inputs": [
            {
                "name": need.name,
                "bytes": need.bytes,
                "build_s": need.build_s,
                "cases": list(need.case_ids),
                "in_this_runners_cache": need.name not in missing,
            }
            for need in fresh.needs
        ],
    }


def _week(args: argparse.Namespace, results: list[Any]) -> Any:
    from trainperf.fleet.night import project_week
    from trainperf.plan.tiers import parse_night

    folders = {folder.resolve() for folder in args.folders}
    if len(folders) != 1 or not all(one_run for _result, one_run in results) or args.plan_steps:
        raise TrainperfError(
            "--night projects one baselines class folder (baselines/<class>) at full length: give one, "
            "without --plan-steps"
        )
    try:
        night = parse_night(args.night, datetime.now(timezone.utc).date())
    except ValueError as exc:
        raise TrainperfError(f"--night {exc}") from None
    if args.night_budget is not None and args.night_budget <= 0:
        raise TrainperfError(f"--night-budget {args.night_budget:g}: give the GPU-minutes a night may take")
    return project_week(
        [result for result, _ in results], folders.pop().name, night, args.night_budget, args.night_promote,
        Path.cwd(),
    )  # fmt: skip
