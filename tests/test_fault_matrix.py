"""The fault matrix: each row a fault a nightly meets, on real runs of the tiny CPU cases. For each:
what the user sees, the exit status, each case's verdict, that the run can be completed, and, as
measured by ``fault_drill.settle``, that no process of the run is left (by the suite's tag) and
that every result file reads back whole, those finished before the fault unchanged. Each row's
figures go to the file named by TRAINPERF_FAULT_MATRIX when it is set
(``benchmarks/fault_matrix.sh`` renders them for docs/)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import required
from fault_drill import (
    FIRST,
    MOST_NEIGHBOURS,
    SECOND,
    Drill,
    Row,
    busy_neighbours,
    kill_all,
    one_line_error,
    seconds_until_gone,
    settle,
    stored_runs,
    tagged_by,
    tagged_with,
    wait_for,
)

from trainperf.case_record import CaseRecord
from trainperf.measure.ownership import owner_tag
from trainperf.result import CaseResult
from trainperf.run_record import RunRecord
from trainperf.store.results import save_result


def _line_with(output: str, needle: str) -> str:
    return next((line.strip() for line in output.splitlines() if needle in line), "")


def test_kill_9_of_the_parent_mid_case_leaves_no_child_and_resume_completes(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    process = drill.start("--perf-steps", "2000", select=FIRST)
    try:
        wait_for(process, "run 1/", "step ")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        gone_s = seconds_until_gone(process.pid)
    except BaseException:
        kill_all(tagged_by(process.pid))  # the row failed on the way
        raise
    row(fault="kill -9 of pytest mid-case", exit_status=process.returncode, tree_gone_s=round(gone_s, 2))
    assert process.returncode == -signal.SIGKILL
    assert gone_s < 5.0, f"{tagged_by(process.pid)} still running {gone_s:.1f}s after kill -9"
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()), select=FIRST)
    row(resumed_exit=resumed.returncode, user_sees="(shell) Killed; the resumed run re-runs the cut case")
    settle(drill, row)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert drill.result(FIRST)["outcome"] == "ok"


def test_a_run_killed_between_cases_resumes_with_the_finished_case_kept(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    process = drill.start("--perf-steps", "3")
    try:
        wait_for(process, f"{SECOND} run 1/1: started")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        gone_s = seconds_until_gone(process.pid)
    except BaseException:
        kill_all(tagged_by(process.pid))  # the row failed on the way
        raise
    row(fault="kill -9 between cases", exit_status=process.returncode, tree_gone_s=round(gone_s, 2))
    assert process.returncode == -signal.SIGKILL
    kept = stored_runs(drill.run_dir())
    assert list(kept) == [FIRST]
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()))
    row(resumed_exit=resumed.returncode, user_sees="resumed: judged from the stored result, not re-run")
    settle(drill, row, kept)  # the finished case's runs unchanged: it was judged, not re-run
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "resumed: judged from the stored result" in json.dumps(drill.result(FIRST)["verdict"])
    assert drill.result(SECOND)["outcome"] == "ok"


@pytest.mark.parametrize(
    ("fault", "outcome", "says"),
    [
        ("segfault@2", "crash", "killed by signal 11"),
        ("oom@2", "oom", "out of memory (injected"),
        ("exit@2", "crash", "exit status 3 without a result"),
    ],
    ids=["segfault", "oom", "exit-without-result"],
)
def test_a_child_that_dies_fails_its_case_in_one_line_and_leaves_nothing(
    tmp_path: Path, row: Row, fault: str, outcome: str, says: str
) -> None:
    drill = Drill(tmp_path, env={"TRAINPERF_INJECT_FAULT": fault})
    done = drill.run("--perf-steps", "4", select=FIRST)
    result = drill.result(FIRST)
    row(
        fault=f"child {fault.split('@')[0]} at step 2",
        exit_status=done.returncode,
        user_sees=_line_with(done.stdout, f"{FIRST}: outcome-changed") or str(result["message"]),
    )
    settle(drill, row)
    assert done.returncode == 1, done.stdout[-3000:]
    assert result["outcome"] == outcome and says in str(result["message"]), result["message"]
    assert drill.result(FIRST)["verdict"]["verdict"] == "outcome-changed"  # type: ignore[index]
    assert one_line_error(done.stdout), done.stdout[-3000:]
    assert (drill.run_dir() / "summary.md").is_file()


def test_a_hung_child_is_killed_for_silence_with_its_stacks(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path, env={"TRAINPERF_INJECT_FAULT": "hang@2"})
    started = time.monotonic()
    done = drill.run("--perf-steps", "4", "--perf-silent-timeout", "10", select=FIRST)
    took = time.monotonic() - started
    result = drill.result(FIRST)
    row(
        fault="child hangs at step 2 (--perf-silent-timeout 10)",
        exit_status=done.returncode,
        run_s=round(took, 1),
        user_sees=str(result["message"]),
    )
    settle(drill, row)
    assert done.returncode == 1 and result["outcome"] == "timeout", done.stdout[-3000:]
    assert "hung: no step and no output" in str(result["message"])
    stderr = (drill.run_dir() / str(result["runs"][0]["dir"]) / "stderr.log").read_text()  # type: ignore[index]
    assert "most recent call first" in stderr and "at_step" in stderr, stderr[-2000:]


def test_a_corrupt_baseline_is_one_line_naming_the_file(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    baseline = tmp_path / "baselines" / "cpu" / f"{FIRST}.json"
    baseline.parent.mkdir(parents=True)
    truncated = '{"case_id": "' + FIRST + '", "metr'
    baseline.write_text(truncated)
    done = drill.run("--perf-steps", "3", select=FIRST)
    said = _line_with(done.stdout, str(baseline.name))
    row(fault="truncated baseline file", exit_status=done.returncode, user_sees=said)
    settle(drill, row)
    assert said and "is corrupt" in said, done.stdout[-3000:]
    assert one_line_error(done.stdout), done.stdout[-3000:]
    # The case cannot be judged: it fails, is not run (no result, no time spent), and the user's file
    # is left as it was for them to mend, never overwritten.
    assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout[-3000:]
    assert not (drill.run_dir() / "results" / f"{FIRST}.json").exists()
    assert baseline.read_text() == truncated


def test_a_truncated_result_in_a_resumed_folder_is_run_again(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    first = drill.run("--perf-steps", "3", select=FIRST)
    assert first.returncode == 0, first.stdout[-3000:]
    stored = drill.run_dir() / "results" / f"{FIRST}.json"
    stored.write_text(stored.read_text()[:200])
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()), select=FIRST)
    said = _line_with(resumed.stdout, "the stored result is unreadable")
    row(fault="truncated result file, then --perf-resume", exit_status=resumed.returncode, user_sees=said)
    settle(drill, row)  # readable again: the case was run again
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert said, resumed.stdout[-3000:]
    assert one_line_error(resumed.stdout)
    assert drill.result(FIRST)["outcome"] == "ok"


def test_a_corrupt_results_store_keeps_every_result_in_the_folder(tmp_path: Path, row: Row) -> None:
    store = tmp_path / "history.sqlite"
    store.write_bytes(b"this is not a database" * 100)
    drill = Drill(tmp_path, env={"TRAINPERF_STORE": f"sqlite:///{store}"})
    done = drill.run("--perf-steps", "3", select=FIRST)
    said = _line_with(done.stdout, "results history not written")
    row(fault="corrupt results store (SQLite)", exit_status=done.returncode, user_sees=said)
    settle(drill, row)
    assert done.returncode == 0, done.stdout[-3000:]
    assert said and "not a readable SQLite database" in said, done.stdout[-3000:]
    assert one_line_error(done.stdout), done.stdout[-3000:]
    assert drill.result(FIRST)["outcome"] == "ok"


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, check=False
    )
    return mounted.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 3 MiB filesystem (tmpfs): root and the mount command are needed, else the row is skipped."""
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _tmpfs(disk, "3m"):
        required.missing("the disk-full row", "needs root and mount(8) to make a small fixed-size filesystem")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass


def test_disk_full_after_a_finished_case_keeps_it_and_says_so(
    tmp_path: Path, small_disk: Path, row: Row
) -> None:
    drill = Drill(tmp_path, output=small_disk / "reports")
    process = drill.start("--perf-steps", "3")
    try:
        wait_for(process, f"{SECOND} run 1/1: started")
        _fill(small_disk)
        rest, _ = process.communicate(timeout=300)
    except BaseException:
        kill_all(tagged_by(process.pid))  # the row failed on the way
        raise
    said = _line_with(rest, "cannot write")
    row(fault="disk full during the second case", exit_status=process.returncode, user_sees=said)
    kept = stored_runs(drill.run_dir())
    assert drill.result(FIRST)["outcome"] == "ok"
    assert process.returncode != 0
    assert one_line_error(rest), rest[-3000:]
    assert said, rest[-3000:]
    (small_disk / "filler").unlink()
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()))
    row(resumed_exit=resumed.returncode)
    settle(drill, row, {FIRST: kept[FIRST]})
    assert resumed.returncode == 0, resumed.stdout[-3000:]


def test_a_read_only_output_folder_is_one_line(tmp_path: Path, small_disk: Path, row: Row) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    drill = Drill(tmp_path, output=small_disk / "reports")
    done = drill.run("--perf-steps", "3", select=FIRST)
    # Refused at start, before any case (it was the first case's failure, after its set-up).
    said = _line_with(done.stdout, "cannot write run folders under")
    row(fault="read-only output folder", exit_status=done.returncode, user_sees=said)
    settle(drill, row)
    assert done.returncode != 0
    assert one_line_error(done.stdout), done.stdout[-3000:]
    assert said, done.stdout[-3000:]


HOLDER = """
import sys, time
from trainperf.measure.placement import reserve
with reserve(("0",), ("0",), on_wait=lambda gpu: print("waiting", flush=True)):
    print("start", time.time(), flush=True)
    if sys.argv[1] == "hold":
        sys.stdin.readline()  # held until the test says: no sleep that a slow start could outlast
    print("end", time.time(), flush=True)
"""


def test_two_pytest_processes_on_one_gpu_are_serialised(tmp_path: Path, row: Row) -> None:
    # Two separate processes (two pytest sessions on one runner), not two xdist workers of one.
    # Their tag is not a pid: no run of the suite takes them for its orphans; the row counts them by it.
    tag = f"fault-matrix-{uuid.uuid4().hex}"
    env = {**os.environ, "TRAINPERF_GPU_LOCK_DIR": str(tmp_path / "locks"), "TRAINPERF_OWNER": tag}
    holder = [sys.executable, "-c", HOLDER]
    pipes: dict[str, Any] = {"env": env, "stdout": subprocess.PIPE, "text": True}
    first = subprocess.Popen([*holder, "hold"], stdin=subprocess.PIPE, **pipes)
    second = None
    try:
        assert first.stdout is not None and first.stdout.readline().startswith("start")
        second = subprocess.Popen([*holder, "go"], **pipes)
        assert second.stdout is not None
        # Returns once the second has found the GPU taken; should it wait without a word, the
        # watchdog ends the first, and the second's first line is then "start", which fails below.
        watchdog = threading.Timer(120, first.kill)
        watchdog.start()
        said_first = second.stdout.readline().strip()
        watchdog.cancel()
        first_out = first.communicate("release\n", timeout=60)[0]
        second_out = second.communicate(timeout=60)[0]
    finally:
        kill_all([p.pid for p in (first, second) if p is not None and p.poll() is None])
    first_end = float(first_out.split()[-1])
    second_start = float(
        next(line for line in second_out.splitlines() if line.startswith("start")).split()[1]
    )
    left = tagged_with(tag)
    kill_all(left)
    row(
        fault="two pytest sessions on one GPU",
        exit_status=max(first.returncode, second.returncode),
        processes_left=len(left),
        results="no results (no case runs)",
        user_sees="[trainperf] <case>: waiting for GPU 0",
        overlap_s=round(max(0.0, first_end - second_start), 3),
    )
    assert said_first == "waiting" and second_start >= first_end, (said_first, second_out)
    assert first.returncode == second.returncode == 0 and left == []


def test_a_neighbour_filling_the_host_cpu_makes_the_run_contaminated(tmp_path: Path, row: Row) -> None:
    if (os.cpu_count() or 1) > MOST_NEIGHBOURS:
        required.missing("a drill that fills every core", f"this host has over {MOST_NEIGHBOURS} cores")
    neighbours = busy_neighbours(os.cpu_count() or 1)
    drill = Drill(tmp_path)
    try:
        done = drill.run("--perf-steps", "4", "--perf-confirm", "0", select=FIRST)
    finally:
        kill_all(neighbours)
    row(
        fault=f"{len(neighbours)} busy loops beside the run, one per core",
        exit_status=done.returncode,
        user_sees=_line_with(done.stdout, "host CPU:"),
    )
    settle(drill, row)
    verdict = drill.result(FIRST)["verdict"]
    assert isinstance(verdict, dict) and verdict["verdict"] == "contaminated", done.stdout[-3000:]
    assert "host CPU: other processes used" in verdict["reason"], verdict["reason"]
    assert done.returncode == 0, done.stdout[-3000:]


# The row check itself: a row planted to leave a process or damage a result must go red.


def _case_result(case_id: str, runs: list[dict[str, Any]]) -> CaseResult:
    records = [RunRecord.from_dict(run) for run in runs]
    return CaseResult(
        case_id=case_id, case=CaseRecord(family="sft_hf"), gpu_class="cpu", outcome="ok", runs=records
    )


def test_the_row_check_fails_a_row_that_left_a_process(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    session = subprocess.Popen(["sleep", "60"])  # stands for a pytest session the drill started
    planted = subprocess.Popen(["sleep", "60"], env={**os.environ, "TRAINPERF_OWNER": owner_tag(session.pid)})
    drill.sessions.append(session.pid)
    figures: dict[str, Any] = {}
    try:
        with pytest.raises(
            AssertionError, match=rf"processes left by the run: \['pid {planted.pid} \(sleep 60"
        ):
            settle(drill, figures.update, grace_s=0.5)
    finally:
        kill_all([session.pid, planted.pid])
    assert figures["processes_left"] == 1 and figures["results"] == "no run folder"
    assert planted.wait(timeout=10) == -signal.SIGKILL  # the check ended what it found
    session.wait(timeout=10)


def test_the_row_check_fails_a_row_that_damaged_a_result(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    results = tmp_path / "reports" / "20260101-000000-cpu" / "results"
    save_result(results / f"{FIRST}.json", _case_result(FIRST, [{"returncode": 0, "steps": 3}]))
    kept = stored_runs(results.parent)
    figures: dict[str, Any] = {}
    settle(drill, figures.update, kept, grace_s=0)
    assert figures["results"] == "1 of 1 intact (1 finished before the fault)"
    assert figures["verdicts"] == {FIRST: "ok"}

    save_result(results / f"{FIRST}.json", _case_result(FIRST, [{"returncode": 0, "steps": 2}]))
    with pytest.raises(AssertionError, match="the runs measured before the fault changed"):
        settle(drill, figures.update, kept, grace_s=0)
    save_result(results / f"{SECOND}.json", _case_result(SECOND, []))
    truncated = (results / f"{SECOND}.json").read_text()[:40]
    (results / f"{SECOND}.json").write_text(truncated)
    with pytest.raises(AssertionError, match=rf"results damaged: .*{SECOND}.json unreadable"):
        settle(drill, figures.update, grace_s=0)
    assert figures["results"].startswith("damaged: ") and figures["processes_left"] == 0
    (results / f"{SECOND}.json").unlink()
    (results / f"{FIRST}.json").unlink()
    with pytest.raises(AssertionError, match="finished before the fault, now missing"):
        settle(drill, figures.update, kept, grace_s=0)
