"""A neighbour on the host CPU: seen in /proc while a run runs, and a run it crowded is not judged."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_drill import MOST_NEIGHBOURS, busy_neighbours, kill_all
from required import missing

from trainperf.launch.guard import contamination
from trainperf.measure.host_load import HostLoadWatch, HostTimes, read_host_times
from trainperf.run_checks_record import RunContamination


def _ticks_seen(watch: HostLoadWatch) -> dict[int, int]:
    """CPU ticks the watch has seen each foreign process use, by pid."""
    return {pid: last - first for (pid, _), (first, last, _) in watch.foreign.items()}


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
    # The host's CPU is not the GPU: the device-wide memory and the kernel time stay the case's own.
    assert record == RunContamination(tuple(reasons), foreign_process=False, on_gpu=False)


def test_a_neighbour_on_a_host_with_idle_cores_took_nothing() -> None:
    assert _watch(cores=16, busy=0.3, foreign_cores=4.0).reasons() == []
    assert _watch(cores=16, busy=0.85, foreign_cores=2.0).reasons() == []  # 2.4 cores idle


def test_a_small_host_with_under_half_a_core_idle_is_saturated() -> None:
    """On 2 cores, 88.9% busy leaves 0.22 of a core idle: a neighbour's 0.59 cores is contention
    (a tiny case ran 4.9x slower beside it), though the host was under 90% busy."""
    reasons = _watch(cores=2, busy=0.889, foreign_cores=0.59).reasons()
    assert reasons == ["host CPU: other processes used 0.6 of 2 cores on a host 89% busy (compile pid 4242)"]
    assert _watch(cores=2, busy=0.7, foreign_cores=0.59).reasons() == []  # 0.6 of a core idle


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
    if (os.cpu_count() or 1) > MOST_NEIGHBOURS:
        missing("a check that fills every core", f"this host has over {MOST_NEIGHBOURS} cores")
    # One busy loop per core beside a busy child of the run's own: the host is saturated whatever
    # else runs on it, so the watch must call it crowded. No wall-clock bound: the watch reads on
    # until every loop has used a second of CPU, however slowly a loaded host gives it that.
    burners = busy_neighbours(os.cpu_count() or 1)
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    own = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        watch = HostLoadWatch(interval_s=0.2)
        watch.begin()
        began = time.monotonic()
        while min(_ticks_seen(watch).get(pid, 0) for pid in burners) < ticks_per_s:
            assert time.monotonic() - began < 240, f"the loops got {_ticks_seen(watch)} ticks in 240 s"
            watch(time.monotonic() - began)
            time.sleep(0.05)
        watch.finish()
    finally:
        kill_all([*burners, own.pid])
    assert own.pid not in _ticks_seen(watch) and os.getpid() not in _ticks_seen(watch)
    assert all(_ticks_seen(watch)[pid] >= ticks_per_s for pid in burners)
    # The heaviest foreign processes are named; on a shared host they need not be the loops.
    assert " pid " in watch.top_foreign()
    assert set(watch.figures()) == {"busy", "steal", "foreign_cores", "cores"}
    reasons = watch.reasons()  # the hypervisor's steal may add a second reason on a virtual machine
    assert any(reason.startswith("host CPU: other processes used") for reason in reasons), reasons
