"""A real single-node Slurm cluster for the fleet's tests: munged, slurmctld and slurmd started in a
temporary folder, on free ports, with this machine as the one node, as root or as the user
running the tests (both daemons run as that user: its jobs are its own).

Debian's packages ``slurm-wlm`` and ``munge`` (``.ci/run`` installs them). No cgroup: processes
are tracked by ``proctrack/linuxproc``, so it runs in a container as in a VM. Without the binaries
the test skips with the reason, except under CI (``CI=true``), where it fails: CI must never be
where it silently skips. Import the fixture into a test module: ``from slurm_cluster import slurm``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from ports import free_port
from required import missing

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")


@dataclass(frozen=True)
class SlurmCluster:
    folder: Path
    env: dict[str, str]
    """The environment a client (sbatch, squeue) needs: SLURM_CONF."""


def _missing(reason: str) -> NoReturn:
    missing("the Slurm test", reason)


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(Path(d) / name) for d in ("/usr/sbin", "/usr/bin") if (Path(d) / name).is_file()), None
    )


def _config(folder: Path, node_line: str) -> str:
    host = socket.gethostname()
    user = pwd.getpwuid(os.geteuid()).pw_name  # root, or (a CI runner) the user running the tests
    return f"""ClusterName=trainperftest
SlurmctldHost={host}(127.0.0.1)
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmdSpoolDir={folder}/spool
StateSaveLocation={folder}/state
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PlugStackConfig={folder}/plugstack.conf
{node_line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _wait_for(what: str, ready: object, timeout_s: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(ready) and ready():
            return
        time.sleep(0.3)
    tails = "\n".join(f"{p}: {p.read_text()[-1500:]}" for p in logs if p.is_file())
    pytest.fail(f"{what} did not come up in {timeout_s:.0f} s\n{tails}", pytrace=False)


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    found = {name: _binary(name) for name in BINARIES}
    if absent := [name for name, path in found.items() if path is None]:
        _missing(f"{', '.join(absent)} not installed: apt-get install slurm-wlm munge")
    # The munge socket's path must stay short (a UNIX socket path is at most 107 bytes).
    folder = Path(tempfile.mkdtemp(prefix="tp-slurm-", dir="/tmp"))
    folder.chmod(0o711)  # munged refuses a socket whose folders others cannot traverse
    for sub in ("munge", "state", "spool"):
        (folder / sub).mkdir(mode=0o700)
    (folder / "munge").chmod(0o711)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (folder / "plugstack.conf").write_text("")
    node_line = subprocess.run(
        [str(found["slurmd"]), "-C"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, node_line))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    socket_path = folder / "munge" / "munge.socket"
    munge = [str(found["munged"]), "-F", "--force", f"--key-file={key}", f"--socket={socket_path}",
             f"--log-file={folder}/munge/munged.log", f"--pid-file={folder}/munge/munged.pid",
             f"--seed-file={folder}/munge/seed"]  # fmt: skip
    daemons = [subprocess.Popen(munge, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)]
    try:
        _wait_for("munged", socket_path.exists, 20, [folder / "munge" / "munged.log"])
        for name in ("slurmctld", "slurmd"):
            command = [str(found[name]), "-D", "-f", str(conf)]
            daemons.append(
                subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            )

        def idle() -> bool:
            done = subprocess.run(
                [str(found["sinfo"]), "-h", "-o", "%T"], env=env, capture_output=True, text=True, check=False
            )
            return done.returncode == 0 and done.stdout.strip() == "idle"

        _wait_for("the Slurm node", idle, 60, [folder / "slurmctld.log", folder / "slurmd.log"])
        yield SlurmCluster(folder, env)
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                daemon.kill()
        shutil.rmtree(folder, ignore_errors=True)
