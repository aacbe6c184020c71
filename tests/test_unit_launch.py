"""Unit tests of trainperf.launch.process.run_child: timeouts kill the whole process group."""

from __future__ import annotations

import os
import time
from pathlib import Path

from trainperf.launch.process import run_child


def _dead(pid: int) -> bool:
    """True once ``pid`` no longer runs (gone, or a zombie awaiting its reaper)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_dead(pid: int, within_s: float = 3.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _dead(pid):
            return True
        time.sleep(0.05)
    return _dead(pid)


def test_timeout_kills_child_and_grandchild(tmp_path: Path) -> None:
    script = "sleep 1000 & echo $! > grandchild.pid; echo $$ > child.pid; sleep 1000"
    started = time.monotonic()
    exit_ = run_child(["bash", "-c", script], log_dir=tmp_path, env=dict(os.environ), timeout_s=1.0)
    elapsed = time.monotonic() - started
    assert exit_.timed_out is True
    assert exit_.returncode is not None and exit_.returncode < 0  # ended by a signal
    assert elapsed < 8.0  # SIGTERM was enough: no wait for the 10 s grace period
    child = int((tmp_path / "child.pid").read_text())
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert _wait_dead(child)
    assert _wait_dead(grandchild), f"grandchild {grandchild} outlived the timeout"


def test_normal_exit_returns_code_and_stderr_tail(tmp_path: Path) -> None:
    script = "echo to-stdout; for i in $(seq 1 40); do echo line$i >&2; done; exit 3"
    ticks: list[float] = []
    exit_ = run_child(
        ["bash", "-c", script], log_dir=tmp_path, env=dict(os.environ), timeout_s=10.0, on_tick=ticks.append
    )
    assert exit_.returncode == 3
    assert exit_.timed_out is False
    lines = exit_.stderr_tail.splitlines()
    assert lines[-1] == "line40"
    assert len(lines) == 30  # only the tail
    assert "to-stdout" not in exit_.stderr_tail
    assert (tmp_path / "stdout.log").read_text() == "to-stdout\n"


def test_straggler_left_by_a_finished_child_is_killed(tmp_path: Path) -> None:
    """A background process the child leaves behind (a dataloader worker) must not outlive the case."""
    script = "sleep 1000 >/dev/null 2>&1 & echo $! > straggler.pid; exit 0"
    exit_ = run_child(["bash", "-c", script], log_dir=tmp_path, env=dict(os.environ), timeout_s=10.0)
    assert exit_.returncode == 0 and exit_.timed_out is False
    assert _wait_dead(int((tmp_path / "straggler.pid").read_text()))
