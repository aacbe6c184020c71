"""A nightly's shards on a Ray cluster a team already runs: one Ray task per shard (``pytest
--perf-shard K/N`` on a node with the GPUs Ray gives it), each run folder sent back through the
object store and written to ``RUNS/shard-K``, then ``trainperf merge`` into ``RUNS/merged``, as the
Slurm path does. Ray places and queues the shards; trainperf schedules nothing itself."""

from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.fleet import ray_task
from trainperf.fleet.nightly_runs import LOGS_DIR, MERGED_DIR, shard_folder
from trainperf.measure.hardware import CPU_CLASS

PROGRESS_EVERY_S = 300.0
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class RaySubmission:
    checkout: Path
    python: str
    gpu_class: str
    shards: int
    runs: Path
    """The nightly's folder: shard-K/ (each shard's run folder, as sent back), logs/, merged/."""
    address: str | None = None
    """The cluster (``HOST:PORT``, ``ray://...``); default RAY_ADDRESS, else the local node's."""
    selection: list[str] = field(default_factory=list)
    gpus: int | None = None
    """GPUs per shard; default 1 for a GPU class, none on the CPU."""
    cpus: float = 1.0
    node_base: str | None = None
    """Where shards write on their nodes (default: each node's temporary folder)."""
    nightly: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"))

    @property
    def gpus_per_shard(self) -> int:
        return self.gpus if self.gpus is not None else (0 if self.gpu_class == CPU_CLASS else 1)

    def pytest_command(self, index: int) -> list[str]:
        """The shard's pytest, less its --perf-output (the node folder, decided on the node)."""
        return [
            self.python, "-m", "pytest", "perf_tests", "-m", self.gpu_class, "-p", "no:cacheprovider", "-rA",
            "--perf-shard", f"{index}/{self.shards}", *self.selection,
        ]  # fmt: skip

    def spec(self, index: int) -> dict[str, Any]:
        """What the task on the node needs, in plain values (the node may lack trainperf)."""
        passed = {
            k: v for k, v in os.environ.items() if k.startswith("TRAINPERF_") or k in ray_task.RAY_PINNED
        }
        return {
            "index": index, "count": self.shards, "gpu_class": self.gpu_class, "checkout": str(self.checkout),
            "command": self.pytest_command(index), "nightly": f"{self.runs.name}-{self.nightly}",
            "node_base": self.node_base, "environment": passed,
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
        }  # fmt: skip


def check(submission: RaySubmission) -> None:
    if submission.shards < 1:
        raise TrainperfError(f"--shards {submission.shards}: give 1 or more")
    if not (submission.checkout / "perf_tests").is_dir():
        raise TrainperfError(
            f"no perf_tests/ under {submission.checkout}: run from the trainperf checkout or pass --checkout"
        )


def connect(address: str | None) -> ModuleType:
    """Ray, connected to the cluster; one line naming what is missing otherwise."""
    try:
        import ray
    except ImportError:
        raise TrainperfError(
            "Ray is not installed here: pip install 'trainperf[ray]' (or the Ray version your cluster runs)"
        ) from None
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    _reachable(target)
    try:
        ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TrainperfError(
            f"no Ray cluster at {target} ({first[:160]}): start one with `ray start --head` on the head "
            "node, or pass --address HOST:PORT"
        ) from None
    return ray


def _reachable(target: str) -> None:
    """A HOST:PORT that nothing answers on is said at once: Ray itself retries it for minutes."""
    host, _, port = target.rpartition(":")
    if "://" in target or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise TrainperfError(
            f"no Ray cluster at {target} ({exc.strerror or exc}): start one with `ray start --head "
            f"--port {port}` on {host}, or pass the head node's --address HOST:PORT"
        ) from None


def check_resources(ray: ModuleType, submission: RaySubmission) -> None:
    """A GPU shard asks Ray for GPUs: on a cluster that has fewer than one shard needs, Ray would
    queue the tasks for ever. Say so instead."""
    have = float(ray.cluster_resources().get("GPU", 0))
    need = submission.gpus_per_shard
    if need > have:
        ray.shutdown()
        raise TrainperfError(
            f"the Ray cluster has {have:g} GPU(s) and a shard of {submission.gpu_class} asks for {need}: "
            "add GPU nodes (ray start --num-gpus), or give --gpus"
        )


def run_shards(ray: ModuleType, submission: RaySubmission, say: Callable[[str], None]) -> None:
    """Start every shard as a Ray task and write each outcome as it arrives. Ctrl-C asks the
    shards still running to stop, and writes what they send back."""
    ray.cloudpickle.register_pickle_by_value(ray_task)
    task = ray.remote(ray_task.run_shard)
    stop_flag = ray.remote(num_cpus=0)(ray_task.StopFlag).remote()
    pending: dict[Any, int] = {}
    for index in range(1, submission.shards + 1):
        options = task.options(
            num_gpus=submission.gpus_per_shard, num_cpus=submission.cpus, max_retries=1,
            name=f"trainperf-shard-{index}",
        )  # fmt: skip
        pending[options.remote(submission.spec(index), stop_flag)] = index
    say(
        f"trainperf: {submission.shards} shards of {submission.gpu_class} submitted to Ray "
        f"({submission.gpus_per_shard} GPU(s) each); run folders: {submission.runs}/shard-K"
    )
    started = time.monotonic()
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=PROGRESS_EVERY_S)
            if not done:
                minutes = (time.monotonic() - started) / 60
                say(f"trainperf: {len(pending)} of {submission.shards} shards running, {minutes:.0f} min")
                continue
            collect(ray, done[0], pending.pop(done[0]), submission, say)
    except KeyboardInterrupt:
        stop_flag.set.remote()
        say(_stopping_line(sorted(pending.values()), submission))
        # Each shard stops its case and writes its summary; what they send back is written as
        # usual (a second Ctrl-C ends at once, leaving it on the nodes).
        done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=ray_task.STOP_GRACE_S + 60)
        for ref in done:
            collect(ray, ref, pending.pop(ref), submission, say)
        raise


def collect(
    ray: ModuleType, ref: Any, index: int, submission: RaySubmission, say: Callable[[str], None]
) -> None:
    """One finished task: its run folder into RUNS/shard-K, its log into RUNS/logs."""
    log = submission.runs / LOGS_DIR / f"shard-{index}.log"
    folder = shard_folder(submission.runs, index)
    # The shard's folder exists whatever happened, so that the merge names a shard that wrote
    # nothing as such, not as a folder mistyped.
    folder.mkdir(parents=True, exist_ok=True)
    try:
        outcome = ray.get(ref)
    except ray.exceptions.RayError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        log.write_text(f"the Ray task of shard {index}/{submission.shards} failed: {exc}\n")
        say(f"trainperf: shard {index}/{submission.shards} failed in Ray ({first[:160]}); see {log}")
        return
    log.write_bytes(outcome["log"])
    shard, status = f"shard {index}/{submission.shards}", outcome["status"]
    where = f"node {outcome['node']}, {outcome['seconds'] / 60:.1f} min"
    if outcome["packed"] is None:
        say(f"trainperf: {shard} wrote nothing ({where}, exit {status}); see {log}")
        return
    unpack(outcome["packed"], folder)
    say(f"trainperf: {shard} ended, exit {status} ({where}): {folder}")


def unpack(packed: bytes, folder: Path) -> None:
    """A shard's run folder from its archive; members that would land outside it are refused."""
    folder.mkdir(parents=True, exist_ok=True)
    root = folder.resolve()
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as archive:
        for member in archive.getmembers():
            target = (folder / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise TrainperfError(
                    f"a shard's archive holds {member.name!r}, outside its run folder: not unpacked"
                )
        archive.extractall(folder)


def merge(submission: RaySubmission, say: Callable[[str], None]) -> int:
    """``trainperf merge`` of RUNS/shard-1..N into RUNS/merged: it names a shard that is missing
    or wrote nothing; its status is the nightly's."""
    shards = [str(shard_folder(submission.runs, k)) for k in range(1, submission.shards + 1)]
    command = [
        sys.executable,
        "-m",
        "trainperf.cli",
        "merge",
        *shards,
        "--output",
        str(submission.runs / MERGED_DIR),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    (submission.runs / LOGS_DIR / "merge.log").write_text(done.stdout + done.stderr)
    for line in (done.stdout + done.stderr).strip().splitlines()[-12:]:
        say(line)
    return done.returncode


def _stopping_line(indexes: list[int], submission: RaySubmission) -> str:
    names = ", ".join(f"{k}/{submission.shards}" for k in indexes)
    base = submission.node_base or "the node's temporary folder"
    return (
        f"trainperf: interrupted: stopping shards {names} (each stops its case, writes its summary and "
        f"sends its folder back; a second Ctrl-C leaves them under {base}/trainperf-ray/ on their nodes)"
    )
