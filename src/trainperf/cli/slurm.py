"""``trainperf slurm submit``: a nightly's shards as a Slurm job array, then their merge."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "slurm", help="run a nightly's shards on a Slurm cluster: `trainperf slurm submit`"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    submit = actions.add_parser(
        "submit",
        help="submit the shards as an sbatch job array and the merge as a job that runs after them",
    )
    submit.add_argument("--class", dest="gpu_class", required=True, help="the runner class (-m CLASS)")
    submit.add_argument("--shards", type=int, required=True, help="N: the array runs --perf-shard 1/N .. N/N")
    submit.add_argument(
        "--runs", type=Path, required=True, help="the nightly's folder (shard-K/, logs/, merged/)"
    )
    submit.add_argument(
        "--checkout", type=Path, default=Path.cwd(), help="the trainperf checkout (default: here)"
    )
    submit.add_argument(
        "--python", default=sys.executable, help="interpreter with trainperf (default: this one)"
    )
    submit.add_argument("--gpus", type=int, help="GPUs per shard (default: 1 for a GPU class, none for cpu)")
    submit.add_argument(
        "--sbatch-arg", action="append", default=[], help="extra sbatch argument (repeatable)"
    )
    submit.add_argument(
        "--wait", action="store_true", help="return when the merge has ended, with its status"
    )
    submit.add_argument("--dry-run", action="store_true", help="print the sbatch commands, submit nothing")
    submit.add_argument("selection", nargs=argparse.REMAINDER, help="-- then extra pytest arguments (-k ...)")
    submit.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from trainperf.fleet.nightly_runs import MERGED_DIR
    from trainperf.fleet.slurm import Submission, check, submit

    selection = list(args.selection[1:] if args.selection[:1] == ["--"] else args.selection)
    submission = Submission(
        checkout=args.checkout.resolve(), python=args.python, gpu_class=args.gpu_class, shards=args.shards,
        runs=args.runs.resolve(), selection=selection, gpus=args.gpus, sbatch_args=list(args.sbatch_arg),
    )  # fmt: skip
    if args.dry_run:
        print(shlex.join(submission.shards_command("sbatch")))
        print(shlex.join(submission.merge_command("sbatch", "ARRAY_JOB_ID", args.wait)))
        return 0
    array_job, merge_job, status = submit(submission, check(submission), wait=args.wait)
    print(
        f"trainperf: {submission.shards} shards of {submission.gpu_class} as array job {array_job}, "
        f"the merge as job {merge_job} after them; merged run: {submission.runs / MERGED_DIR}, "
        f"logs: {submission.runs / 'logs'}"
    )
    return status
