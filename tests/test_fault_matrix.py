"""The fault matrix: each row a fault a nightly meets, on real runs of the tiny CPU cases. For each:
what the user sees, the exit status, that finished results are intact, that the run can be
completed, and that no process is left behind. Each row's figures go to the file named by
TRAINPERF_FAULT_MATRIX when it is set (``scripts/fault-matrix.sh`` renders them for docs/)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_drill import (
    FIRST,
    SECOND,
    Drill,
    busy_neighbours,
    kill_all,
    one_line_error,
    seconds_until_gone,
    tagged_by,
    wait_for,
)

Row = Callable[..., None]


@pytest.fixture
def row(request: pytest.FixtureRequest) -> Iterator[Row]:
    """Record the row's figures (fault, what the user saw, exit status, ...) for the published table."""
    figures: dict[str, Any] = {"row": request.node.name}

    def note(**values: Any) -> None:
        figures.update(values)

    yield note
    target = os.environ.get("TRAINPERF_FAULT_MATRIX")
    if target:
        with open(target, "a") as handle:
            handle.write(json.dumps(figures) + "\n")


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
        left = tagged_by(process.pid)
    finally:
        kill_all(tagged_by(process.pid))
    assert left == [] and gone_s < 5.0, f"{left} still running {gone_s:.1f}s after kill -9"
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()), select=FIRST)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert drill.result(FIRST)["outcome"] == "ok"
    row(
        fault="kill -9 of pytest mid-case",
        exit_status=-9,
        processes_left=len(left),
        tree_gone_s=round(gone_s, 2),
        resumed_exit=resumed.returncode,
        user_sees="(shell) Killed; the resumed run re-runs the cut case",
    )


def test_a_run_killed_between_cases_resumes_with_the_finished_case_kept(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    process = drill.start("--perf-steps", "3")
    try:
        wait_for(process, f"{SECOND} run 1/1: started")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        gone_s = seconds_until_gone(process.pid)
    finally:
        kill_all(tagged_by(process.pid))
    kept = json.loads((drill.run_dir() / "results" / f"{FIRST}.json").read_text())
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()))
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "resumed: judged from the stored result" in json.dumps(drill.result(FIRST)["verdict"])
    assert drill.result(FIRST)["runs"] == kept["runs"]  # the finished case was not re-run
    assert drill.result(SECOND)["outcome"] == "ok"
    row(
        fault="kill -9 between cases",
        exit_status=-9,
        processes_left=0,
        tree_gone_s=round(gone_s, 2),
        resumed_exit=resumed.returncode,
        user_sees="resumed: judged from the stored result, not re-run",
    )


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
    assert done.returncode == 1, done.stdout[-3000:]
    assert result["outcome"] == outcome and says in str(result["message"]), result["message"]
    assert one_line_error(done.stdout), done.stdout[-3000:]
    assert (drill.run_dir() / "summary.md").is_file()
    row(
        fault=f"child {fault.split('@')[0]} at step 2",
        exit_status=done.returncode,
        processes_left=0,
        user_sees=_line_with(done.stdout, f"{FIRST}: outcome-changed") or str(result["message"]),
    )


def test_a_hung_child_is_killed_for_silence_with_its_stacks(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path, env={"TRAINPERF_INJECT_FAULT": "hang@2"})
    started = time.monotonic()
    done = drill.run("--perf-steps", "4", "--perf-silent-timeout", "10", select=FIRST)
    took = time.monotonic() - started
    result = drill.result(FIRST)
    assert done.returncode == 1 and result["outcome"] == "timeout", done.stdout[-3000:]
    assert "hung: no step and no output" in str(result["message"])
    stderr = (drill.run_dir() / str(result["runs"][0]["dir"]) / "stderr.log").read_text()  # type: ignore[index]
    assert "most recent call first" in stderr and "at_step" in stderr, stderr[-2000:]
    row(
        fault="child hangs at step 2 (--perf-silent-timeout 10)",
        exit_status=done.returncode,
        processes_left=0,
        run_s=round(took, 1),
        user_sees=str(result["message"]),
    )


def test_a_corrupt_baseline_is_one_line_naming_the_file(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    baseline = tmp_path / "baselines" / "cpu" / f"{FIRST}.json"
    baseline.parent.mkdir(parents=True)
    baseline.write_text('{"case_id": "' + FIRST + '", "metr')
    done = drill.run("--perf-steps", "3", select=FIRST)
    assert one_line_error(done.stdout), done.stdout[-3000:]
    said = _line_with(done.stdout, str(baseline.name))
    assert said, done.stdout[-3000:]
    row(fault="truncated baseline file", exit_status=done.returncode, processes_left=0, user_sees=said)


def test_a_truncated_result_in_a_resumed_folder_is_run_again(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    first = drill.run("--perf-steps", "3", select=FIRST)
    assert first.returncode == 0, first.stdout[-3000:]
    stored = drill.run_dir() / "results" / f"{FIRST}.json"
    stored.write_text(stored.read_text()[:200])
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()), select=FIRST)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert one_line_error(resumed.stdout)
    assert drill.result(FIRST)["outcome"] == "ok"  # readable again: the case was re-run
    row(
        fault="truncated result file, then --perf-resume",
        exit_status=resumed.returncode,
        processes_left=0,
        user_sees=_line_with(resumed.stdout, "unreadable") or "the case is run again",
    )


def test_a_corrupt_results_store_keeps_every_result_in_the_folder(tmp_path: Path, row: Row) -> None:
    store = tmp_path / "history.sqlite"
    store.write_bytes(b"this is not a database" * 100)
    drill = Drill(tmp_path, env={"TRAINPERF_STORE": f"sqlite:///{store}"})
    done = drill.run("--perf-steps", "3", select=FIRST)
    assert done.returncode == 0, done.stdout[-3000:]
    assert one_line_error(done.stdout), done.stdout[-3000:]
    assert drill.result(FIRST)["outcome"] == "ok"
    said = _line_with(done.stdout, "history")
    row(fault="corrupt results store (SQLite)", exit_status=done.returncode, processes_left=0, user_sees=said)


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
        pytest.skip("needs root and mount(8) to make a small fixed-size filesystem")
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
    finally:
        kill_all(tagged_by(process.pid))
    kept = json.loads((drill.run_dir() / "results" / f"{FIRST}.json").read_text())
    assert kept["outcome"] == "ok"
    assert process.returncode != 0
    assert one_line_error(rest), rest[-3000:]
    said = _line_with(rest, "cannot write")
    assert said, rest[-3000:]
    (small_disk / "filler").unlink()
    resumed = drill.run("--perf-steps", "3", "--perf-resume", str(drill.run_dir()))
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    row(
        fault="disk full during the second case",
        exit_status=process.returncode,
        processes_left=0,
        resumed_exit=resumed.returncode,
        user_sees=said,
    )


def test_a_read_only_output_folder_is_one_line(tmp_path: Path, small_disk: Path, row: Row) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    drill = Drill(tmp_path, output=small_disk / "reports")
    done = drill.run("--perf-steps", "3", select=FIRST)
    assert done.returncode != 0
    assert one_line_error(done.stdout), done.stdout[-3000:]
    said = _line_with(done.stdout, "cannot create the run folder")
    assert said, done.stdout[-3000:]
    row(fault="read-only output folder", exit_status=done.returncode, processes_left=0, user_sees=said)


HOLDER = """
import sys, time
from trainperf.measure.placement import reserve
with reserve(("0",), ("0",), on_wait=lambda gpu: print("waiting", flush=True)):
    print("start", time.time(), flush=True)
    time.sleep(float(sys.argv[1]))
    print("end", time.time(), flush=True)
"""


def test_two_pytest_processes_on_one_gpu_are_serialised(tmp_path: Path, row: Row) -> None:
    # Two separate processes (two pytest sessions on one runner), not two xdist workers of one.
    env = {**os.environ, "TRAINPERF_GPU_LOCK_DIR": str(tmp_path / "locks")}
    first = subprocess.Popen([sys.executable, "-c", HOLDER, "2"], env=env, stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None and first.stdout.readline().startswith("start")
    second = subprocess.run(
        [sys.executable, "-c", HOLDER, "0"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    first_out = first.communicate(timeout=60)[0]
    first_end = float(first_out.split()[-1])
    lines = second.stdout.split("\n")
    second_start = float(next(line for line in lines if line.startswith("start")).split()[1])
    assert lines[0] == "waiting" and second_start >= first_end
    row(
        fault="two pytest sessions on one GPU",
        exit_status=0,
        processes_left=0,
        user_sees="[trainperf] <case>: waiting for GPU 0",
        overlap_s=max(0.0, first_end - second_start),
    )


MOST_NEIGHBOURS = 16


@pytest.mark.skipif((os.cpu_count() or 1) > MOST_NEIGHBOURS, reason="fills at most 16 cores with busy loops")
def test_a_neighbour_filling_the_host_cpu_makes_the_run_contaminated(tmp_path: Path, row: Row) -> None:
    neighbours = busy_neighbours(os.cpu_count() or 1)
    try:
        done = Drill(tmp_path).run("--perf-steps", "4", "--perf-confirm", "0", select=FIRST)
    finally:
        kill_all(neighbours)
    result = Drill(tmp_path).result(FIRST)
    verdict = result["verdict"]
    assert isinstance(verdict, dict) and verdict["verdict"] == "contaminated", done.stdout[-3000:]
    assert "host CPU: other processes used" in verdict["reason"], verdict["reason"]
    assert done.returncode == 0, done.stdout[-3000:]
    row(
        fault=f"{len(neighbours)} busy loops beside the run, one per core",
        exit_status=done.returncode,
        processes_left=0,
        user_sees=_line_with(done.stdout, "host CPU:"),
    )
