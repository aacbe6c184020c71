"""Fault-matrix rows for what a run hands to the next step or to its child: the resume line the suite
prints after an interrupt, taken as printed, must judge the kept case as it was judged, and a store's
credentials given to the session must never reach the training child's environment. Real runs of
the tiny CPU cases, like the other rows (``tests/test_fault_matrix.py``); their figures go to the
same table."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from fault_drill import (
    FIRST,
    SECOND,
    Drill,
    Row,
    case_verdicts,
    kill_all,
    one_line_error,
    settle,
    stored_runs,
    tagged_by,
    wait_for,
)

RESUME = re.compile(r"--perf-resume=(\S+)")
CHILD_MODULE = b"trainperf.workloads"


def test_the_resume_line_as_printed_judges_the_kept_case_as_before(tmp_path: Path, row: Row) -> None:
    drill = Drill(tmp_path)
    baseline = drill.run("--perf-steps", "3", "--perf-update-baselines", "--perf-baseline-repeats", "1")
    assert baseline.returncode == 0, baseline.stdout[-3000:]
    drill.output = tmp_path / "judged"
    process = drill.start("--perf-steps", "3")
    try:
        wait_for(process, f"{SECOND} run 1/1: started")
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    except BaseException:
        kill_all(tagged_by(process.pid))  # the row failed on the way
        raise
    printed = next((line.strip() for line in rest.splitlines() if RESUME.search(line)), "")
    row(fault="interrupt, then the resume line as printed", exit_status=process.returncode, user_sees=printed)
    match = RESUME.search(printed)
    assert match, rest[-3000:]
    before = case_verdicts(drill.run_dir())
    kept = stored_runs(drill.run_dir())
    assert list(kept) == [FIRST], before
    baselines = tmp_path / "baselines" / "cpu"
    if (baselines / f"{FIRST}.json").is_file():  # a crowded host writes no baseline
        assert before[FIRST] != "new", before
    resumed = drill.run("--perf-steps", "3", match.group(0))  # the option exactly as the line gives it
    row(resumed_exit=resumed.returncode)
    settle(drill, row, kept)
    after = case_verdicts(drill.run_dir())
    assert resumed.returncode in (0, 1), resumed.stdout[-3000:]  # 1: the second case may read a change
    assert after[FIRST] == before[FIRST], (before, after)
    if (baselines / f"{SECOND}.json").is_file():
        assert after[SECOND] != "new", after  # judged against its baseline, not taken for a first run
    assert one_line_error(resumed.stdout), resumed.stdout[-3000:]


def _child_environments(session: int, limit_s: float = 240) -> list[bytes]:
    """The environment of the session's training child, read from /proc while it runs."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for pid in tagged_by(session):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
                if CHILD_MODULE in command and b"launch.supervisor" not in command:
                    return [Path(f"/proc/{pid}/environ").read_bytes()]
            except OSError:
                continue
        time.sleep(0.05)
    return []


def test_store_credentials_never_reach_the_training_child(tmp_path: Path, row: Row) -> None:
    secret = "pw-" + os.urandom(6).hex()
    drill = Drill(tmp_path, env={"PGPASSWORD": secret, "PGPASSFILE": str(tmp_path / "pgpass")})
    # A server that is not there: the run goes on on its files and says the history was not read.
    store = f"postgresql://ci:{secret}@127.0.0.1:9/trainperf"
    process = drill.start("--perf-steps", "20", "--perf-store", store, select=FIRST)
    try:
        environments = _child_environments(process.pid)
        rest, _ = process.communicate(timeout=300)
    except BaseException:
        kill_all(tagged_by(process.pid))  # the row failed on the way
        raise
    said = next((line.strip() for line in rest.splitlines() if "history not" in line), "")
    row(fault="store password in PGPASSWORD and --perf-store", exit_status=process.returncode, user_sees=said)
    settle(drill, row)
    assert environments, "never saw the training child"
    (environment,) = environments
    names = {entry.split(b"=", 1)[0] for entry in environment.split(b"\0") if entry}
    assert secret.encode() not in environment
    assert not names & {b"PGPASSWORD", b"PGPASSFILE", b"TRAINPERF_STORE"}, names
    assert secret not in rest and process.returncode == 0, rest[-3000:]
