"""One shard of a nightly as a Ray task: ``pytest --perf-shard K/N`` in the checkout on whatever node
Ray placed it, its run folder packed and sent back to the driver through Ray's object store, so
the nodes need no shared file system.

Standard library only, and shipped to the workers by value (``ray_shards`` registers this module
with Ray's cloudpickle): a node's Ray runtime need not have trainperf installed, only the checkout
at the same path and the interpreter the shard runs with.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG_TAIL_BYTES = 200_000
STOP_GRACE_S = 120
"""After SIGINT, how long pytest gets to stop its case, write its summary and end its children."""
POLL_S = 5.0
# What Ray sets for its own worker, which a Ray started inside the shard must not take for its own.
RAY_WORKER_ONLY = ("RAY_JOB_ID", "RAY_RAYLET_PID", "RAY_CLIENT_MODE", "RAY_LD_PRELOAD_ON_WORKERS")
# What Ray pins for a task (OMP_NUM_THREADS: to its CPU count, which would slow a CPU case's
# threads): the shard has the driver's value, or none where the driver has none.
RAY_PINNED = ("OMP_NUM_THREADS",)


class StopFlag:
    """Set by the driver on Ctrl-C; the shards poll it (a Ray actor: no shared file system)."""

    def __init__(self) -> None:
        self.stopped = False

    def set(self) -> None:
        self.stopped = True

    def is_set(self) -> bool:
        return self.stopped


def shard_environment(drivers: dict[str, str]) -> dict[str, str]:
    """The worker's environment (with the GPUs Ray gave this task in CUDA_VISIBLE_DEVICES), less
    what Ray sets for its own workers, plus what the driver passes: its TRAINPERF_* variables and
    its values of what Ray pins."""
    env = {key: value for key, value in os.environ.items() if key not in (*RAY_WORKER_ONLY, *RAY_PINNED)}
    env.update(drivers)
    return env


def node_folder(spec: dict[str, Any]) -> Path:
    """Where the shard writes its run on its node (kept there: nothing measured is lost if the
    driver goes away before it has the folder)."""
    base = Path(spec.get("node_base") or tempfile.gettempdir())
    return base / "trainperf-ray" / str(spec["nightly"]) / f"shard-{spec['index']}"


def run_shard(spec: dict[str, Any], stop_flag: Any = None) -> dict[str, Any]:
    """Run one shard; its outcome: node, exit status, seconds, the log's tail and the packed run
    folder (``None`` when it wrote nothing; the folder is kept on the node either way)."""
    index = int(spec["index"])
    node = socket.gethostname()
    checkout = Path(spec["checkout"])
    folder = node_folder(spec)
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder.parent / f"shard-{index}.log"
    started = time.time()
    if not (checkout / "perf_tests").is_dir():
        message = (
            f"no trainperf checkout at {checkout} on node {node}: give every node the checkout at that path"
        )
        return _outcome(node, 2, started, message.encode(), None)
    if (refusal := _take_drivers_niceness(int(spec.get("niceness", 0)), node)) is not None:
        return _outcome(node, 2, started, refusal.encode(), None)
    command = [*spec["command"], "--perf-output", str(folder)]
    env = shard_environment(spec["environment"])
    with log_path.open("wb") as log:
        gpus = env.get("CUDA_VISIBLE_DEVICES", "unset")
        header = f"trainperf: shard {index}/{spec['count']} of class {spec['gpu_class']} on {node}"
        log.write(
            f"{header} (CUDA_VISIBLE_DEVICES={gpus}, nice {os.getpriority(os.PRIO_PROCESS, 0)})\n".encode()
        )
        log.flush()
        status = _run(command, checkout, env, log, lambda: _stop_requested(stop_flag))
    tail = _tail(log_path)
    packed = _pack(folder) if any(folder.iterdir()) else None
    return _outcome(node, status, started, tail, packed)


def _take_drivers_niceness(wanted: int, node: str) -> str | None:
    """Ray runs its workers at nice 15 (its ``worker_niceness``) and a training child inherits it,
    where a session of its own runs at the driver's niceness: on a busy host the niced child would
    lose CPU time to everything else, and host-bound steps would read slow. The shard takes the
    driver's niceness back, and refuses to run where the node does not allow it. Why not, in one
    line; None when done."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current <= wanted:
        return None
    try:
        os.setpriority(os.PRIO_PROCESS, 0, wanted)
    except PermissionError:
        return (
            f"Ray runs its tasks at nice {current} (its worker_niceness) and node {node} does not let the "
            f"shard run at nice {wanted}, as a session of its own would: its timings would read slow. "
            f"Start the node's Ray with RAY_worker_niceness={wanted} in its environment"
        )
    return None


def _run(command: list[str], cwd: Path, env: dict[str, str], log: Any, stop: Callable[[], bool]) -> int:
    """pytest in a process group of its own. When the driver asks the shards to stop, pytest gets
    SIGINT, as from a terminal: it stops its case, ends its training child and writes its
    summary; whatever is left after the grace period is killed, so no child outlives the shard."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        # A Ray worker's task runs on its main thread; the hook only calls async-signal-safe
        # pthread_sigmask, signal and prctl before exec.
        preexec_fn=_interrupt_when_orphaned,  # noqa: PLW1509
    )  # fmt: skip
    try:
        while True:
            try:
                return process.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                if stop():
                    _stop_group(process)
                    return process.returncode
    except BaseException:
        _stop_group(process)
        raise


def _stop_requested(stop_flag: Any) -> bool:
    if stop_flag is None:
        return False
    import ray

    try:
        return bool(ray.get(stop_flag.is_set.remote(), timeout=POLL_S))
    except ray.exceptions.RayError:  # the flag gone with its driver: PDEATHSIG or Ray ends the shard
        return False


def _interrupt_when_orphaned() -> None:
    """In the child before it runs pytest. Ray's task threads block SIGINT, and a blocked signal
    stays blocked across exec: unblock it, so that pytest stops on it as at a terminal. And SIGINT when
    the Ray worker dies (its driver went away and Ray ended the job's workers), so no shard goes
    on unseen on a GPU that Ray hands to others."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """``launch.process.kill_group``'s twin, with SIGINT first (pytest's summary, not SIGTERM's
    end): this module imports nothing of trainperf, which a node's Ray may not have."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=STOP_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _outcome(node: str, status: int, started: float, log: bytes, packed: bytes | None) -> dict[str, Any]:
    return {
        "node": node,
        "status": status,
        "seconds": round(time.time() - started, 1),
        "log": log,
        "packed": packed,
    }


def _tail(path: Path) -> bytes:
    data = path.read_bytes()
    return data if len(data) <= LOG_TAIL_BYTES else b"[...]\n" + data[-LOG_TAIL_BYTES:]


def _pack(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(folder.iterdir()):
            archive.add(path, arcname=path.name)
    return buffer.getvalue()
