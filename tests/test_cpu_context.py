"""The host index's CPU context: where its calibration ran and how busy the host was meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainperf.measure.host_load import HostTimes, read_cpu_times
from trainperf.workloads.cpu_context import context, parse_cpu_list, processor
from trainperf.workloads.host_index import measure_host_index

# user nice system idle iowait irq softirq steal
BEFORE = """cpu  400 0 100 1500 0 0 0 0 0 0
cpu0 100 0 0 400 0 0 0 0 0 0
cpu1 100 0 0 400 0 0 0 0 0 0
cpu2 100 0 50 350 0 0 0 0 0 0
cpu3 100 0 50 350 0 0 0 0 0 0
intr 12345
"""
# 50 jiffies later: cpu0 (the calibration) busy; its sibling cpu1 busy 45 of 50; cpu2/3 idle, 5 stolen.
AFTER = """cpu  0 0 0 0 0 0 0 0 0 0
cpu0 150 0 0 400 0 0 0 0 0 0
cpu1 145 0 0 405 0 0 0 0 0 0
cpu2 100 0 50 395 0 0 0 5 0 0
cpu3 100 0 50 400 0 0 0 0 0 0
"""


def _times(tmp_path: Path, text: str) -> dict[int, HostTimes]:
    (tmp_path / "stat").write_text(text)
    times = read_cpu_times(tmp_path)
    assert times is not None
    return times


def test_sysfs_cpu_lists_and_proc_stat_parse(tmp_path: Path) -> None:
    assert parse_cpu_list("0,8\n") == (0, 8)
    assert parse_cpu_list("2-3") == (2, 3)
    assert parse_cpu_list("5") == (5,)
    times = _times(tmp_path, BEFORE)
    assert sorted(times) == [0, 1, 2, 3] and times[2].busy == 150 and times[2].total == 500
    # Field 39 counted after the command's closing parenthesis (a name may hold spaces and parentheses).
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(
        "4242 (python (x) y) S " + " ".join(str(n) for n in range(4, 39)) + " 7 0 0"
    )
    assert processor(4242, tmp_path) == 7


def test_a_busy_sibling_is_told_apart_from_a_busy_host(tmp_path: Path) -> None:
    before, after = _times(tmp_path, BEFORE), _times(tmp_path, AFTER)
    found = context(before, after, 0, (0, 1))
    assert found.cpu == 0 and found.siblings == (1,)
    assert found.siblings_busy == pytest.approx(0.9)
    assert found.others_busy == 0.0  # cpu2 and cpu3 did nothing but idle (and be stolen from)
    assert found.steal == pytest.approx(5 / 200)
    alone = context(before, after, 2, (2,))
    assert alone.siblings == () and alone.siblings_busy is None


def test_every_child_records_it_beside_the_index() -> None:
    recorded = measure_host_index()["cpu_context"]
    assert recorded is not None  # Linux, as the runners are
    assert isinstance(recorded["cpu"], int) and 0 <= (recorded["others_busy"] or 0) <= 1
