"""A run that shared its GPU or was throttled from outside is contaminated, never regressed; what the
case's own allocator used is still judged; such runs stay out of the history's baselines and series."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_data import GPU, make_result, nightly

from trainperf.judge.compare import Verdict, compare_case
from trainperf.judge.contamination import Contamination, apply_contamination
from trainperf.judge.metrics import with_tolerances
from trainperf.measure.contamination import ForeignWatch, throttled_during, wait_until_clean
from trainperf.measure.hygiene import GpuState, judge
from trainperf.measure.nvml import Sample
from trainperf.measure.ownership import OWNER_ENV, owner_tag, tag_of
from trainperf.result import MetricValue
from trainperf.run_checks_record import RunContamination
from trainperf.run_record import RunRecord
from trainperf.store.db import open_store
from trainperf.store.history_writes import record_case
from trainperf.store.records import RunInfo, accepted, run_key
from trainperf.store.series_reads import history_points

CASE = "sft_hf-qwen3_8b-lora-maxlen-b4"
FOREIGN = {
    "reasons": ["GPU 0: foreign process pid 4242 (23.6 GiB) appeared during the run"],
    "foreign_process": True,
}
THROTTLED = {
    "reasons": ["GPU 0 throttled (hw_slowdown) in 40% of the run's samples"],
    "foreign_process": False,
}


def _verdict(current: Any, baseline: Any, record: dict[str, Any] | None, strict: bool = False) -> Any:
    current.runs = [RunRecord(contamination=RunContamination.from_dict(record))]
    contamination = Contamination.of_runs(current.runs)
    verdict = compare_case(
        current,
        baseline,
        with_tolerances({}),
        expectation="ok",
        timing_comparable=contamination is None,
        timing_note=contamination.note() if contamination else "",
        strict=strict,
    )
    return apply_contamination(verdict, contamination, strict=strict, out_of_memory=current.outcome == "oom")


def _pair(slower: float = 1.262, memory: float = 21.5, device_gib: float | None = None) -> tuple[Any, Any]:
    baseline = make_result(CASE, nightly(0), 0.5, seed=1)
    current = make_result(CASE, nightly(1), 0.5 * slower, seed=2)
    current.metrics["peak_allocated_gib"] = MetricValue(memory, "GiB", None, [memory])
    if device_gib is not None:
        baseline.metrics["device_mem_peak_gib"] = MetricValue(30.0, "GiB", None, [30.0])
        current.metrics["device_mem_peak_gib"] = MetricValue(device_gib, "GiB", None, [device_gib])
    return current, baseline


def test_the_same_slowdown_is_regressed_when_clean_and_contaminated_beside_a_foreign_process() -> None:
    current, baseline = _pair()
    assert _verdict(current, baseline, None).verdict is Verdict.REGRESSED
    contaminated = _verdict(current, baseline, FOREIGN)
    assert contaminated.verdict is Verdict.CONTAMINATED and not contaminated.fails
    assert "pid 4242" in contaminated.reason and "not judged" in contaminated.reason
    assert _verdict(current, baseline, FOREIGN, strict=True).fails  # --perf-strict fails it


def test_external_throttling_contaminates_even_a_pass() -> None:
    current, baseline = _pair(slower=1.0)
    verdict = _verdict(current, baseline, THROTTLED)
    assert verdict.verdict is Verdict.CONTAMINATED and "hw_slowdown" in verdict.reason


def test_the_cases_own_memory_regression_still_fails_a_contaminated_run() -> None:
    current, baseline = _pair(memory=30.0)
    verdict = _verdict(current, baseline, FOREIGN)
    assert verdict.verdict is Verdict.REGRESSED and "peak_allocated_gib" in verdict.reason


def test_device_wide_memory_is_judged_only_without_a_foreign_process() -> None:
    current, baseline = _pair(slower=1.0, device_gib=55.0)  # +25 GiB: the neighbour's, not the case's
    assert _verdict(current, baseline, FOREIGN).verdict is Verdict.CONTAMINATED
    assert _verdict(current, baseline, THROTTLED).verdict is Verdict.REGRESSED


def test_an_oom_beside_a_foreign_process_is_contaminated_not_an_outcome_change() -> None:
    baseline = make_result(CASE, nightly(0), 0.5)
    current = make_result(CASE, nightly(1), 0.5, outcome="oom")
    current.message = "CUDA out of memory"
    assert _verdict(current, baseline, None).verdict is Verdict.OUTCOME_CHANGED
    assert _verdict(current, baseline, FOREIGN).verdict is Verdict.CONTAMINATED


def test_contaminated_runs_stay_out_of_history_baselines_and_series(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "h.sqlite"))
    for day, verdict in enumerate(("pass", "contaminated", "pass")):
        started = nightly(day)
        run = RunInfo(run_key(started, GPU), "pytest", started, GPU, "h100-a", "h100")
        record_case(store, run, make_result(CASE, started, 0.5, seed=day, verdict=verdict))
    assert not accepted(make_result(CASE, nightly(5), 0.5, verdict="contaminated"))
    # A planted regression (--perf-plant) reads pass where its gate is widened or ungated: a drill,
    # never pooled as the runner's normal.
    drill = make_result(CASE, nightly(6), 2.25, verdict="pass")
    drill.planted = "host:4.5"
    assert accepted(make_result(CASE, nightly(6), 0.5, verdict="pass")) and not accepted(drill)
    points = history_points(store, ["step_time_s"], CASE)
    assert [point.verdict for point in points] == ["pass", "pass"]
    store.close()


def _sample(reasons: int) -> Sample:
    return Sample(0.0, 100.0, 1 << 30, 1980, 50, 60, reasons)  # type: ignore[call-arg]


def test_only_external_throttling_in_enough_samples_counts() -> None:
    power_cap = [_sample(0x4)] * 100  # the case's own load at the power limit
    assert throttled_during({"0": power_cap}) == []
    flicker = [_sample(0x8)] + [_sample(0)] * 99
    assert throttled_during({"0": flicker}) == []
    slowed = [_sample(0x8)] * 10 + [_sample(0)] * 90
    assert throttled_during({"0": slowed}) == ["GPU 0 throttled (hw_slowdown) in 10% of the run's samples"]


def _stranger() -> int:
    """A process that is neither tagged nor below this one (its parent shell has exited): another
    job's, as far as this session can tell."""
    env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    shell = subprocess.run(
        ["sh", "-c", "sleep 30 > /dev/null 2>&1 & echo $!"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(shell.stdout.strip())
    # Until its exec of sleep completes, /proc may read its environment empty (is_ours: cannot tell).
    _wait_until(lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"))
    return pid


def _state(pid: int) -> str:
    """A process's state letter in /proc (``Z``: exited, not yet reaped)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _wait_until(condition: Callable[[], bool], limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"not so after {limit_s} s"
        time.sleep(0.02)


def test_the_watch_tells_our_processes_from_foreign_and_unseen_ones() -> None:
    ours = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], env={**os.environ, OWNER_ENV: owner_tag()}
    )
    stranger = _stranger()
    try:
        _wait_until(lambda: tag_of(ours.pid) == owner_tag())  # its environment is readable once exec is done
        watch = ForeignWatch(("0",), owner_tag())
        watch.see("0", ours.pid, 20 << 30)
        watch.see("0", stranger, 3 << 30)
        watch.see("0", 2**22 + 12345, 1 << 30)  # not in this pid namespace
        ours.kill()
        # Dead but not reaped (a zombie), as NVML may still list it while /proc shows no environment.
        _wait_until(lambda: _state(ours.pid) == "Z")
        watch.see("0", ours.pid, 20 << 30)
    finally:
        ours.kill()
        os.kill(stranger, signal.SIGKILL)
    assert list(watch.foreign) == [stranger]
    assert watch.unresolved == {2**22 + 12345}
    assert watch.reasons() == [f"GPU 0: foreign process pid {stranger} (3.0 GiB) appeared during the run"]


def test_the_wait_for_a_clean_gpu_ends_when_the_neighbour_leaves_and_is_bounded() -> None:
    busy = judge([GpuState("0", processes=((4242, 1 << 30),))])
    clean = judge([GpuState("0")])
    readings = iter([busy, busy, clean])
    said: list[str] = []
    hygiene, _ = wait_until_clean(("0",), 30.0, said.append, read=lambda _d: next(readings), sweep=list)
    assert hygiene.clean and said and "waiting up to 30s" in said[0]
    hygiene, waited = wait_until_clean(("0",), 0.0, said.append, read=lambda _d: busy, sweep=list)
    assert not hygiene.clean and waited < 1.0


@pytest.mark.parametrize("record", [FOREIGN, THROTTLED])
def test_a_contamination_record_reads_back(record: dict[str, Any]) -> None:
    found = Contamination.of_runs(
        [RunRecord(), *[RunRecord(contamination=RunContamination.from_dict(record))] * 2]
    )
    assert found is not None and list(found.reasons) == record["reasons"]
    assert found.foreign_process is record["foreign_process"]
