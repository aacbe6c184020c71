"""Ending one verl run's processes and only them: every process of its session, those that left the
driver's process group included (Ray's workers take groups of their own), never another session's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from trainperf.workloads.verl.teardown import end_session, session_members, session_of

# A driver in a session of its own, which starts a "worker" in a process group of its own (as Ray's
# raylet does) that starts a grandchild, and prints the worker's pid.
DRIVER = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c",
    "import os, subprocess, sys, time; os.setpgrp(); "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); time.sleep(300)"])
print(worker.pid, flush=True)
time.sleep(300)
"""


def test_the_session_id_is_read_past_a_command_with_spaces_and_parentheses() -> None:
    assert session_of("4242 (ray::Worker (x) y) S 1 4242 4240 0 -1 4194560") == 4240
    assert session_of("garbage") is None


def test_a_worker_outside_the_drivers_group_survives_killpg_and_ends_with_the_session() -> None:
    bystander = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
    )
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert driver.stdout is not None
        worker = int(driver.stdout.readline())
        deadline = time.time() + 20
        while len(session_members(driver.pid)) < 4 and time.time() < deadline:
            time.sleep(0.1)  # driver, worker, grandchild (and the worker's interpreter start)
        os.killpg(driver.pid, signal.SIGKILL)  # what killing the driver's group alone reaches
        driver.wait(timeout=10)
        left = session_members(driver.pid)
        assert worker in left and len(left) >= 2  # the worker and its grandchild outlived it
        swept = end_session(driver.pid, grace_s=5.0)
        assert swept.terminated >= 2 and swept.left == 0
        assert session_members(driver.pid) == []
        assert bystander.poll() is None  # another session's process is untouched
    finally:
        for pid in session_members(driver.pid):
            os.kill(pid, signal.SIGKILL)
        bystander.kill()
        bystander.wait(timeout=10)
