"""``trainperf cost FOLDER...``: a nightly's GPU-minutes from the wall times its results record
(``run.cost``), by family, and its wall time spread over 2 and 4 GPUs of one host.

FOLDER: run folders (reports/<run>, the shards of one nightly, or a merged one), or a baselines class
folder (baselines/<class>: one run per case, as a nightly would make). Give the folders of one
nightly together; run it once per nightly to compare two.
"""

from __future__ import annotations

import argparse
import json
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


def run(args: argparse.Namespace) -> int:
    from trainperf.run.cost import cost_lines, nightly_cost
    from trainperf.run.folder import RunFolder, load_results

    counts = _gpu_counts(args.gpus)
    results = []
    for folder in args.folders:
        one_run = not RunFolder(folder).is_run()  # a baselines class folder stands for one nightly
        results += [(result, one_run) for result in load_results([folder])]
    if not results:
        raise TrainperfError(f"no case results in {', '.join(map(str, args.folders))}")
    cost = nightly_cost(results, counts)
    if args.json:
        print(
            json.dumps(
                {
                    "gpu_minutes": round(cost.total_min, 2),
                    "by_family": {k: round(v, 2) for k, v in cost.by_family.items()},
                    "wall_minutes_on": {str(k): round(v, 2) for k, v in cost.makespan_min.items()},
                    "cases": [
                        {"case_id": c.case_id, "gpus": c.gpus, "launches": c.launches, "wall_s": c.wall_s}
                        for c in cost.cases
                    ],
                },
                indent=1,
            )
        )
    else:
        print("\n".join(cost_lines(cost)))
    return 0
