"""No part of a case outlives the suite: the supervisor under every child, and the orphans a
killed run left, found by their tag and ended (real processes; Linux /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainperf.launch import process
from trainperf.launch.process import SilenceWatch, supervised
from trainperf.measure.ownership import OWNER_ENV, find_orphans, owner_alive, owner_tag, sweep_orphans, tag_of

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")

# A sleep, one in a session of its own (as Ray's daemons start), and one that ignores SIGTERM (as
# a process busy in a CUDA call or with a handler of its own may).
TREE = (
    "sleep 311 & setsid sleep 312 & "
    "python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(313)'"
)
PARENT = f"""
import os, subprocess, sys, time
from trainperf.launch.process import supervised
subprocess.Popen(supervised(["sh", "-c", {TREE!r}]), start_new_session=True)
print("started", flush=True)
time.sleep(300)
"""


LEAVES = (["sleep", "311"], ["sleep", "312"])


def _tree_pids(leaves_only: bool = False) -> list[int]:
    """The test tree's processes, known by their whole argument list: a substring such as "311"
    also matches a process of another test (a PostgreSQL server on port 54311), which the test
    would then kill."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")[:-1]
                state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            leaf = argv in LEAVES or (
                argv[1:2] == ["-c"]
                and Path(argv[0]).name.startswith("python")
                and "time.sleep(313)" in argv[-1]
            )
            holder = bool(argv) and argv[-1] == TREE  # the sh and the supervisor above the leaves
            if state != "Z" and (leaf or (holder and not leaves_only)):
                found.append(int(entry.name))
    return found


def test_kill_9_of_the_parent_ends_the_whole_tree_within_seconds() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        _wait_until(
            lambda: len(_tree_pids(leaves_only=True)) == 3
        )  # two sleeps (one in a session of its own), a python
        parent.kill()
        parent.wait()
        killed_at = time.monotonic()
        while _tree_pids() and time.monotonic() - killed_at < 10:
            time.sleep(0.05)
        assert _tree_pids() == [] and time.monotonic() - killed_at < 5.0
    finally:  # a failed test leaves nothing behind either
        parent.kill()
        for pid in _tree_pids():
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("script", "status"), [("exit 7", 7), ("kill -SEGV $$", -11), ("true", 0)])
def test_the_supervisor_exits_as_the_command_did(script: str, status: int) -> None:
    assert subprocess.run(supervised(["sh", "-c", script]), check=False).returncode == status


def test_a_command_that_cannot_start_is_one_line() -> None:
    done = subprocess.run(supervised(["/nonexistent/python"]), capture_output=True, text=True, check=False)
    assert done.returncode == 127 and done.stderr.strip().startswith(
        "trainperf: cannot start /nonexistent/python"
    )


def test_orphans_are_found_by_their_tag_only_and_ended() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_owner = f"{gone.stdout.strip()}:1"  # that process has exited: whatever it started is an orphan
    orphan = subprocess.Popen(["sleep", "321"], env={**os.environ, OWNER_ENV: dead_owner})
    adopted = subprocess.Popen(["sleep", "322"], env={**os.environ, OWNER_ENV: owner_tag(os.getppid())})
    untagged = subprocess.Popen(["sleep", "323"])
    try:
        # Each process shows its tag once it has exec'd: wait for that, however long a loaded host takes.
        _wait_until(lambda: tag_of(orphan.pid) == dead_owner and tag_of(adopted.pid) is not None)
        assert not owner_alive(dead_owner)
        found = {o.pid for o in find_orphans()}
        assert orphan.pid in found and adopted.pid not in found and untagged.pid not in found
        ended = sweep_orphans()
        assert orphan.pid in {o.pid for o in ended}
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert adopted.poll() is None and untagged.poll() is None
    finally:
        for process in (orphan, adopted, untagged):
            process.kill()


def test_silence_is_counted_from_the_last_byte_and_longer_before_the_first_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]  # the watch's clock, moved by the test: no real sleep for a loaded host to stretch
    monkeypatch.setattr(process, "time", SimpleNamespace(monotonic=lambda: now[0]))
    watch = SilenceWatch(tmp_path, limit_s=10)
    (tmp_path / "stderr.log").write_text("loading")
    assert not watch.expired()
    now[0] += 15
    assert not watch.expired()  # before the first step: three times the limit
    now[0] += 16
    assert watch.expired()
    (tmp_path / "steps.jsonl").write_text('{"step": 1}\n')
    assert not watch.expired()  # a byte more: alive again
    now[0] += 9
    assert not watch.expired()
    now[0] += 2
    assert watch.expired()
    assert not SilenceWatch(tmp_path, limit_s=0).expired()


def _wait_until(condition: Callable[[], bool], limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"not so after {limit_s} s"
        time.sleep(0.02)
