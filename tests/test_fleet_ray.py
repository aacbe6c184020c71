"""The nightly's shards on a real Ray cluster (a head node started by the test, as a team runs one):
two tiny cpu cases as two Ray tasks, merged into the verdicts of one unsharded session; a Ctrl-C
that stops the shards and keeps what they measured; and the bad input of ``trainperf ray submit``."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from fleet_runs import ROOT, SELECTION, assert_every_case_trained, assert_merged_like_one_session
from ray_cluster import RayCluster, ray_cluster  # noqa: F401  (the fixture)

from trainperf.errors import TrainperfError
from trainperf.fleet import ray_shards
from trainperf.fleet.ray_shards import RaySubmission, unpack
from trainperf.fleet.ray_task import shard_environment
from trainperf.workloads.verl.environment import ray_home, verl_environment
from trainperf.workloads.verl.overrides import Attention
from trainperf.workloads.verl.teardown import end_session


def submit(cluster: RayCluster, runs: Path, *extra: str, env: dict[str, str] | None = None) -> list[str]:
    return [sys.executable, "-m", "trainperf.cli", "ray", "submit", "--class", "cpu", "--shards", "2",
            "--runs", str(runs), "--address", cluster.address, "--checkout", str(ROOT),
            "--node-folder", str(runs.parent / "nodes"), "--", "-k", SELECTION, *extra]  # fmt: skip


def test_a_nightly_on_a_real_ray_cluster(ray_cluster: RayCluster, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "nightly"
    env = {**os.environ, "TRAINPERF_STORE": f"sqlite:///{tmp_path}/history.sqlite"}
    done = subprocess.run(
        submit(ray_cluster, runs), env=env, capture_output=True, text=True, timeout=900, check=False
    )
    logs = "\n".join(f"{p.name}:\n{p.read_text()[-2500:]}" for p in sorted((runs / "logs").glob("*.log")))
    assert "2 shards of cpu submitted to Ray" in done.stdout, done.stdout + done.stderr + logs
    for k in (1, 2):
        assert f"trainperf: shard {k}/2 ended, exit" in done.stdout
        log = (runs / "logs" / f"shard-{k}.log").read_text()
        assert f"trainperf: shard {k}/2: 1 of 2 cases" in log
        # at the driver's niceness, not the nice 15 Ray runs its workers at
        assert f"nice {os.getpriority(os.PRIO_PROCESS, 0)})" in log.splitlines()[0]
    assert "merged 2 shard(s), 2 case(s)" in done.stdout, done.stdout
    merged = runs / "merged"
    assert_every_case_trained(merged, done.returncode)
    record = json.loads((merged / "run.json").read_text())["merged"]
    assert [(s["shard"], len(s["cases"])) for s in record["shards"]] == [("1/2", 1), ("2/2", 1)]
    assert_merged_like_one_session(merged, tmp_path)


def _alive(folder: Path) -> list[int]:
    """pytest sessions and training children whose command line names ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(folder) in line and ("pytest" in line or "trainperf.workloads" in line):
                found.append(int(entry.name))
    return found


def test_ctrl_c_stops_the_shards_and_keeps_what_they_measured(
    ray_cluster: RayCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    runs, nodes = tmp_path / "nightly", tmp_path / "nodes"
    driver = subprocess.Popen(
        submit(ray_cluster, runs, "--perf-repeats", "5", "--perf-store", "off"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not list(nodes.glob("trainperf-ray/*/shard-*/*/cases/*/r1")):  # a case has begun in a shard
        assert driver.poll() is None and time.monotonic() < deadline, "no shard began a case"
        time.sleep(1)
    driver.send_signal(signal.SIGINT)
    out, _ = driver.communicate(timeout=300)
    assert driver.returncode == 130, out
    assert "interrupted: stopping shards 1/2, 2/2" in out
    for k in (1, 2):
        assert f"trainperf: shard {k}/2 ended" in out, out
        # pytest was stopped as at a terminal: it named the cut case, and the folder came back.
        assert "trainperf: interrupted during" in (runs / "logs" / f"shard-{k}.log").read_text()
        assert list((runs / f"shard-{k}").glob("*/run.json"))
    assert _alive(nodes) == []


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "trainperf.cli", "ray", "submit", "--class", "cpu", "--runs", str(tmp_path)]
    for extra, expected in (
        (["--shards", "0"], "--shards 0: give 1 or more"),
        (["--shards", "2", "--checkout", str(tmp_path)], "no perf_tests/ under"),
        (["--shards", "2", "--address", "127.0.0.1:1"], "no Ray cluster at 127.0.0.1:1"),
    ):
        done = subprocess.run(
            [*base, *extra], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_gpu_class_on_a_cluster_without_gpus_is_refused(ray_cluster: RayCluster, tmp_path: Path) -> None:  # noqa: F811
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "ray", "submit", "--class", "h100", "--shards", "2",
         "--runs", str(tmp_path / "n"), "--address", ray_cluster.address, "--checkout", str(ROOT)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the Ray cluster has 0 GPU(s) and a shard of h100 asks for 1" in done.stderr


def test_ray_missing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(TrainperfError, match="Ray is not installed here"):
        ray_shards.connect(None)


def test_dry_run_prints_each_shard_and_its_resources(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "ray", "submit", "--class", "h100", "--shards", "3",
         "--runs", str(tmp_path), "--dry-run", "--", "-k", "qwen3_8b"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 3, done.stdout + done.stderr
    assert lines[2].startswith("shard 3: 1 GPU(s), 1 CPU(s): ")
    assert "--perf-shard 3/3 -k qwen3_8b" in lines[2]


def test_the_shard_sees_the_drivers_settings_not_rays(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def on_a_ray_worker(spec: dict[str, Any]) -> dict[str, str]:
        """The shard's environment built where Ray pins OMP_NUM_THREADS and names its job."""
        with monkeypatch.context() as worker:
            worker.setenv("OMP_NUM_THREADS", "1")
            worker.setenv("RAY_JOB_ID", "01000000")
            return shard_environment(spec["environment"])

    monkeypatch.setenv("TRAINPERF_STORE", "postgresql://db/trainperf")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    spec = RaySubmission(ROOT, "python3", "h100", 2, tmp_path).spec(1)
    assert spec["environment"]["TRAINPERF_STORE"] == "postgresql://db/trainperf"
    shard = on_a_ray_worker(spec)
    assert shard["TRAINPERF_STORE"] == "postgresql://db/trainperf" and "RAY_JOB_ID" not in shard
    # Ray pins OMP_NUM_THREADS to a task's CPUs; a driver without it gets a shard without it.
    assert "OMP_NUM_THREADS" not in shard
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    spec = RaySubmission(ROOT, "python3", "h100", 2, tmp_path).spec(1)
    assert spec["environment"]["OMP_NUM_THREADS"] == "8" and on_a_ray_worker(spec)["OMP_NUM_THREADS"] == "8"


def test_an_archive_reaching_outside_the_shard_folder_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        member = tarfile.TarInfo("../outside.txt")
        member.size = 2
        archive.addfile(member, io.BytesIO(b"hi"))
    with pytest.raises(TrainperfError, match="outside its run folder"):
        unpack(buffer.getvalue(), tmp_path / "shard-1")
    assert not (tmp_path / "outside.txt").exists()


DRIVER = """
import json, os, sys, time
import ray
info = ray.init(num_cpus=1, include_dashboard=False)
@ray.remote
class Worker:
    def session(self):
        return os.getsid(0)
worker = Worker.remote()
print(json.dumps({"gcs": info.address_info["gcs_address"], "session_dir": info.address_info["session_dir"],
                  "worker_session": ray.get(worker.session.remote())}), flush=True)
time.sleep(600)
"""


def test_a_verl_run_starts_a_ray_of_its_own_and_ending_it_leaves_the_hosts_cluster_running(
    ray_cluster: RayCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """verl's driver calls ray.init() without an address: with RAY_ADDRESS set (a shard in a Ray task,
    a developer's shell) it would join that cluster, and `ray stop --force` would end it. A run's own
    folder and no address give it a Ray of its own; ending its session ends that Ray alone."""
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    folder = ray_home()
    env = verl_environment(tmp_path / "m.jsonl", tmp_path, Attention((), "sdpa", None), ray_folder=folder)
    assert "RAY_ADDRESS" not in env and len(str(folder)) <= 40
    token_file = Path.home() / ".ray" / "auth_token"
    had_token_file = token_file.exists()
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        said = json.loads(driver.stdout.readline() if driver.stdout else "{}")
    finally:
        swept = end_session(driver.pid)
        driver.wait(timeout=30)
    port = ray_cluster.address.rsplit(":", 1)[1]
    assert not said["gcs"].endswith(f":{port}")  # its own Ray, not the cluster it was pointed at
    assert said["session_dir"].startswith(str(folder)) and said["worker_session"] == driver.pid
    assert swept.terminated > 0 and swept.left == 0
    assert not any(str(folder) in " ".join(p) for p in _command_lines())  # nothing of its Ray is left
    assert socket.create_connection(("127.0.0.1", int(port)), timeout=5)  # the cluster still answers
    assert token_file.exists() == had_token_file  # its token was its own: none written for the others


def _command_lines() -> list[list[str]]:
    lines = []
    for entry in Path("/proc").iterdir():
        try:
            lines.append((entry / "cmdline").read_bytes().decode(errors="replace").split("\0"))
        except OSError:
            continue
    return lines


def test_a_shard_takes_the_drivers_niceness_or_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's workers run at nice 15; a shard's training child must not inherit that."""
    from trainperf.fleet import ray_task

    set_to: list[int] = []
    monkeypatch.setattr(ray_task.os, "getpriority", lambda which, who: 15)
    monkeypatch.setattr(ray_task.os, "setpriority", lambda which, who, value: set_to.append(value))
    assert ray_task._take_drivers_niceness(0, "gpu-07") is None and set_to == [0]

    def refused(which: int, who: int, value: int) -> None:
        raise PermissionError("not permitted")

    monkeypatch.setattr(ray_task.os, "setpriority", refused)
    refusal = ray_task._take_drivers_niceness(0, "gpu-07")
    assert refusal is not None and "nice 15" in refusal and "RAY_worker_niceness=0" in refusal
    assert ray_task._take_drivers_niceness(15, "gpu-07") is None  # a driver niced alike: nothing to do
