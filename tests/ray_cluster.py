"""A real single-node Ray cluster for the fleet's tests: ``ray start --head --block`` in a temporary
folder on a free port, with this machine's CPUs and no GPU, as a team's head node would be
started (the suite only connects to it).

Ray comes with the ``ray`` extra (``make setup`` installs it). Without it the tests skip with the
reason, except under CI (``CI=true``), where they fail. Import the fixture into a test module:
``from ray_cluster import ray_cluster``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ports import free_port
from required import missing


@dataclass(frozen=True)
class RayCluster:
    address: str
    folder: Path


def _ray_command() -> str:
    command = Path(sys.executable).with_name("ray")
    if command.is_file():
        return str(command)
    found = shutil.which("ray")
    if found is None:
        missing("the Ray tests", "Ray is not installed: pip install -e '.[ray]'")
    return found


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _leftovers(folder: Path) -> list[int]:
    """Processes of this cluster still alive (their command lines name its session folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder) in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    ray = _ray_command()
    # Ray's UNIX sockets live under its temp folder: the path must stay short (at most 107 bytes).
    folder = Path(tempfile.mkdtemp(prefix="tp-ray-", dir="/tmp"))
    port = free_port()
    command = [ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--num-gpus=0",
               f"--temp-dir={folder}", "--include-dashboard=false", "--disable-usage-stats",
               "--object-store-memory=200000000"]  # fmt: skip
    log = folder / "ray-start.log"
    head = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not _answers(port):
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not come up:\n{log.read_text()[-2000:]}", pytrace=False)
            time.sleep(0.5)
        yield RayCluster(f"127.0.0.1:{port}", folder)
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
        for pid in _leftovers(folder):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(folder, ignore_errors=True)
