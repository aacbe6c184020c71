"""Fault-matrix row for the disk that fills exactly when a training child writes its result: the steps
ran, the child's last write fails. That must be the run folder's fault (the case not judged, one line
naming the way on, nothing recorded as the workload's crash in the results history), and the run
completed with ``--perf-resume`` must record the case once, as measured then.

A filesystem that fills at that instant cannot be timed from outside without a race, so the fault is
put exactly there: a ``sitecustomize`` on the drill's ``PYTHONPATH``, which the child inherits, makes
the write of that one case's ``result.json`` fail as a full disk fails it (``OSError`` ENOSPC, "No space
left on device" in the child's stderr). Everything else is real: the tiny CPU cases, the suite's
launcher, a SQLite results history. The figures go to the fault matrix's table like the other rows'
(``tests/test_fault_matrix.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from fault_drill import FIRST, SECOND, Drill, Row, one_line_error, settle, stored_runs

from trainperf.store.db import open_store

FULL_AT_THE_RESULT = '''
"""The fault matrix's injected fault: {case}'s result write meets a full disk."""
import errno
import os

import trainperf.jsonio as jsonio

_write = jsonio.write_json_atomic


def _full_disk_at_the_result(path, data):
    if path.name == "result.json" and {case!r} in path.parts:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    _write(path, data)


jsonio.write_json_atomic = _full_disk_at_the_result
'''


def _history(url: str, case: str) -> list[str]:
    """The case's outcomes as the results history holds them."""
    return [str(stored.outcome) for stored in open_store(url).stored_cases(case)]


def test_a_full_disk_at_the_childs_result_write_is_the_folders_fault_and_resume_records_it_once(
    tmp_path: Path, row: Row
) -> None:
    injected = tmp_path / "inject"
    injected.mkdir()
    (injected / "sitecustomize.py").write_text(FULL_AT_THE_RESULT.format(case=SECOND))
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    python_path = os.pathsep.join(p for p in (str(injected), os.environ.get("PYTHONPATH", "")) if p)
    drill = Drill(tmp_path, env={"PYTHONPATH": python_path, "TRAINPERF_STORE": url})
    done = drill.run("--perf-steps", "3")
    said = next((line.strip() for line in done.stdout.splitlines() if "cannot write" in line), "")
    row(fault="disk full at the child's result write", exit_status=done.returncode, user_sees=said)
    kept = stored_runs(drill.run_dir())
    history = {case: _history(url, case) for case in (FIRST, SECOND)}
    row(history_after_fault=history)
    settle(drill, row, {FIRST: kept[FIRST]})
    assert done.returncode != 0, done.stdout[-3000:]
    assert one_line_error(done.stdout), done.stdout[-3000:]
    assert "No space left on device" in said and "--perf-resume" in said, done.stdout[-3000:]
    assert history == {FIRST: ["ok"], SECOND: []}, history  # no crash recorded for the folder's fault
    assert SECOND not in kept, kept
    drill.env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # room again: the write succeeds
    resumed = drill.run("--perf-steps", "3", f"--perf-resume={drill.run_dir()}")
    history = {case: _history(url, case) for case in (FIRST, SECOND)}
    row(resumed_exit=resumed.returncode, history_after_resume=history)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert drill.result(SECOND)["outcome"] == "ok"
    assert history == {FIRST: ["ok"], SECOND: ["ok"]}, history  # each case once
