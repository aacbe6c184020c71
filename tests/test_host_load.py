"""A neighbour on the host CPU: seen in /proc while a run runs, and a run it crowded is not judged."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_drill import busy_neighbours, kill_all

from trainperf.measure.host_load import HostLoadWatch, HostTimes, read_host_times
from trainperf.run.guard import contamination

linux_only = pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="reads Linux's /proc")


def _watch(cores: int, busy: float, steal: float = 0.0, foreign_cores: float = 0.0) -> HostLoadWatch:
    """A watch over 10 s of a host of ``cores`` cores, at 100 ticks a second."""
    total = 1000 * cores
    watch = HostLoadWatch(cores=cores)
    watch.started = HostTimes(busy=0, steal=0, total=0)
    watch.ended = HostTimes(busy=int(busy * total), steal=int(steal * total), total=total)
    watch.foreign = {(4242, 1): (0, int(foreign_cores * 1000), "compile")}
    return watch


def test_a_neighbour_on_a_saturated_host_contaminates_the_run() -> None:
    reasons = _watch(cores=2, busy=0.97, foreign_cores=0.8).reasons()
    assert reasons == ["host CPU: other processes used 0.8 of 2 cores on a host 97% busy (compile pid 4242)"]
    record = contamination(None, None, {}, _watch(cores=2, busy=0.97, foreign_cores=0.8))
    # The host's CPU is not the GPU: the device-wide memory stays the case's own.
    assert record == {"reasons": reasons, "foreign_process": False}


def test_a_neighbour_on_a_host_with_idle_cores_took_nothing() -> None:
    assert _watch(cores=16, busy=0.3, foreign_cores=4.0).reasons() == []


def test_daemons_below_a_quarter_core_stay_quiet_and_steal_counts() -> None:
    assert _watch(cores=2, busy=0.99, foreign_cores=0.1).reasons() == []
    stolen = _watch(cores=2, busy=0.5, steal=0.08).reasons()
    assert stolen == ["host CPU: the hypervisor took 8% of the CPU time (steal)"]
    assert contamination(None, None, {}, _watch(cores=2, busy=0.5)) is None


def test_proc_stat_is_read_as_busy_steal_and_total(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 10 40 800 50 0 0 30 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    # busy: user, nice, system, irq, softirq; idle and iowait are idle; steal apart.
    assert read_host_times(tmp_path) == HostTimes(busy=150, steal=30, total=1030)
    (tmp_path / "stat").write_text("intr 1 2\n")
    assert read_host_times(tmp_path) is None


@linux_only
def test_a_real_busy_neighbour_is_found_and_the_runs_own_child_is_not() -> None:
    (burner,) = busy_neighbours(1)
    try:
        watch = HostLoadWatch(interval_s=0.2)
        watch.begin()
        own = subprocess.Popen(
            [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"]
        )
        began = time.monotonic()
        while own.poll() is None:
            watch(time.monotonic() - began)
            time.sleep(0.05)
        watch.finish()
    finally:
        kill_all([burner])
    by_pid = {pid: last - first for (pid, _), (first, last, _) in watch.foreign.items()}
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    assert by_pid.get(burner, 0) >= 0.5 * 1.5 * ticks_per_s
    assert own.pid not in by_pid and os.getpid() not in by_pid
    assert f"pid {burner}" in watch.top_foreign()
    assert set(watch.figures()) == {"busy", "steal", "foreign_cores", "cores"}
    busy = (watch.ended.busy - watch.started.busy) / (watch.ended.total - watch.started.total)  # type: ignore[union-attr]
    # Crowded or not is the host's business: on a 2-core host the two loops fill it.
    assert bool(watch.reasons()) == (busy >= 0.9)
