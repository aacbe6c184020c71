"""``trainperf ray submit``: a nightly's shards as Ray tasks on a Ray cluster, then their merge."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ray", help="run a nightly's shards on a Ray cluster: `trainperf ray submit`"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    submit = actions.add_parser(
        "submit", help="run the shards as Ray tasks (one GPU each by default), then merge their run folders"
    )
    submit.add_argument("--class", dest="gpu_class", required=True, help="the runner class (-m CLASS)")
    submit.add_argument("--shards", type=int, required=True, help="N: the tasks run --perf-shard 1/N .. N/N")
    submit.add_argument(
        "--runs", type=Path, required=True, help="the nightly's folder here (shard-K/, logs/, merged/)"
    )
    submit.add_argument(
        "--address",
        help="the Ray cluster (HOST:PORT or ray://HOST:PORT; default: RAY_ADDRESS, else this node's)",
    )
    submit.add_argument(
        "--checkout", type=Path, default=Path.cwd(),
        help="the trainperf checkout, at the same path on every node (default: here)",
    )  # fmt: skip
    submit.add_argument(
        "--python", default=sys.executable, help="interpreter with trainperf on the nodes (default: this one)"
    )
    submit.add_argument("--gpus", type=int, help="GPUs per shard (default: 1 for a GPU class, none for cpu)")
    submit.add_argument("--cpus", type=float, default=1.0, help="CPUs Ray reserves per shard (default 1)")
    submit.add_argument(
        "--node-folder", help="where shards write on their nodes (default: each node's temporary folder)"
    )
    submit.add_argument("--dry-run", action="store_true", help="print the shards' commands, submit nothing")
    submit.add_argument("selection", nargs=argparse.REMAINDER, help="-- then extra pytest arguments (-k ...)")
    submit.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from trainperf.fleet.nightly_runs import prepare
    from trainperf.fleet.ray_shards import (
        RaySubmission,
        check,
        check_resources,
        connect,
        merge,
        run_shards,
    )

    selection = list(args.selection[1:] if args.selection[:1] == ["--"] else args.selection)
    submission = RaySubmission(
        checkout=args.checkout.resolve(), python=args.python, gpu_class=args.gpu_class, shards=args.shards,
        runs=args.runs.resolve(), address=args.address, selection=selection, gpus=args.gpus, cpus=args.cpus,
        node_base=args.node_folder,
    )  # fmt: skip
    check(submission)
    if args.dry_run:
        for index in range(1, submission.shards + 1):
            resources = f"{submission.gpus_per_shard} GPU(s), {submission.cpus:g} CPU(s)"
            print(f"shard {index}: {resources}: {shlex.join(submission.pytest_command(index))}")
        return 0
    ray = connect(submission.address)
    check_resources(ray, submission)
    prepare(submission.runs, submission.selection)
    try:
        run_shards(ray, submission, print)
    except KeyboardInterrupt:
        return 130
    finally:
        ray.shutdown()
    return merge(submission, print)
