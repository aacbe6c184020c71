"""A nightly's shards on a Slurm cluster: an ``sbatch`` job array (task K runs ``--perf-shard K/N``)
and the merge as a job that depends on it (``--dependency=afterany``: it runs however the shards
ended, and names one that crashed). The job scripts are the checkout's ``ci/slurm/*.sbatch``;
what they need is passed in TRAINPERF_* variables, the pytest selection in a file."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.fleet.nightly_runs import prepare
from trainperf.measure.hardware import CPU_CLASS

TEMPLATE_DIR = Path("ci") / "slurm"
SHARDS_SCRIPT, MERGE_SCRIPT = "shards.sbatch", "merge.sbatch"


@dataclass(frozen=True, slots=True)
class Submission:
    checkout: Path
    python: str
    gpu_class: str
    shards: int
    runs: Path
    """The nightly's folder: shard-K/ (each shard's --perf-output), logs/, merged/."""
    selection: list[str] = field(default_factory=list)
    """Extra pytest arguments (-k ..., --perf-...)."""
    gpus: int | None = None
    """GPUs per shard (--gres=gpu:N); default 1 for a GPU class, none on the CPU."""
    sbatch_args: list[str] = field(default_factory=list)

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "TRAINPERF_CHECKOUT": str(self.checkout),
            "TRAINPERF_PYTHON": self.python,
            "TRAINPERF_CLASS": self.gpu_class,
            "TRAINPERF_SHARDS": str(self.shards),
            "TRAINPERF_RUNS": str(self.runs),
        }

    def shards_command(self, sbatch: str) -> list[str]:
        gpus = self.gpus if self.gpus is not None else (0 if self.gpu_class == CPU_CLASS else 1)
        return [
            sbatch, "--parsable", f"--array=1-{self.shards}", f"--chdir={self.checkout}",
            f"--output={self.runs}/logs/shard-%a.log", *([f"--gres=gpu:{gpus}"] if gpus else []),
            *self.sbatch_args, str(self.checkout / TEMPLATE_DIR / SHARDS_SCRIPT),
        ]  # fmt: skip

    def merge_command(self, sbatch: str, array_job: str, wait: bool) -> list[str]:
        return [
            sbatch, "--parsable", f"--dependency=afterany:{array_job}", f"--chdir={self.checkout}",
            f"--output={self.runs}/logs/merge.log", *(["--wait"] if wait else []),
            *self.sbatch_args, str(self.checkout / TEMPLATE_DIR / MERGE_SCRIPT),
        ]  # fmt: skip


def check(submission: Submission) -> str:
    """The sbatch to submit with; one line naming what is missing otherwise."""
    for name in (SHARDS_SCRIPT, MERGE_SCRIPT):
        if not (submission.checkout / TEMPLATE_DIR / name).is_file():
            raise TrainperfError(
                f"no {TEMPLATE_DIR / name} under {submission.checkout}: run from the trainperf checkout "
                "or pass --checkout"
            )
    if submission.shards < 1:
        raise TrainperfError(f"--shards {submission.shards}: give 1 or more")
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise TrainperfError(
            "sbatch is not on PATH: Slurm's client is missing (Debian: apt-get install slurm-client, or "
            "submit from the cluster's login node); --dry-run prints the commands"
        )
    return sbatch


def submit(submission: Submission, sbatch: str, *, wait: bool = False) -> tuple[str, str, int]:
    """Submit the shards, then the merge after them: (array job id, merge job id, merge's exit
    status: 0 unless waited for and it failed)."""
    prepare(submission.runs, submission.selection)
    array_job = _sbatch(submission.shards_command(sbatch), submission)
    merge = subprocess.run(
        submission.merge_command(sbatch, array_job, wait),
        env=submission.environment(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    merge_job = merge.stdout.strip().split(";")[0]
    if not merge_job:
        raise TrainperfError(f"sbatch refused the merge job: {merge.stderr.strip() or merge.returncode}")
    return array_job, merge_job, merge.returncode


def _sbatch(command: list[str], submission: Submission) -> str:
    done = subprocess.run(command, env=submission.environment(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TrainperfError(
            f"sbatch refused the shards' job array: {done.stderr.strip() or done.returncode}"
        )
    return done.stdout.strip().split(";")[0]
