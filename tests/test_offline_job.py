"""scripts/offline-job.sh: a job outlives the connection that started it, and a later one collects it."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "offline-job.sh"


@pytest.fixture
def job_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ, "TRAINPERF_JOBS": str(tmp_path / "jobs"), "TRAINPERF_JOBS_POLL_S": "1", "OUT": str(tmp_path / "out"),
    }  # fmt: skip


def job(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_finished_job_hands_over_its_files_log_and_exit_code(
    job_env: dict[str, str], tmp_path: Path
) -> None:
    command = (
        'echo "[trainperf] step 1/1"; test -f pyproject.toml && echo packed > "$OUT/results.tgz"; exit 3'
    )
    assert job(job_env, "start", "j", command).returncode == 0
    waited = job(job_env, "wait", "j", "30")
    assert waited.returncode == 1, waited.stdout  # the job's own failure reaches the caller
    assert "finished" in waited.stdout and "rc 3" in waited.stdout
    out = tmp_path / "out"
    assert (out / "results.tgz").read_text() == "packed\n"  # it ran in a copy of the repo
    assert "[trainperf] step 1/1" in (out / "j.log").read_text()
    assert "finished, rc 3" in job(job_env, "list").stdout


def test_a_running_job_leaves_a_snapshot_and_keeps_running(job_env: dict[str, str], tmp_path: Path) -> None:
    # The job says when it has written its partial result and runs on until the test releases it
    # (at most 300 s): no sleep that a slow start on a loaded host could outlast.
    wrote, release = tmp_path / "wrote", tmp_path / "release"
    command = (
        f"mkdir -p reports/r baselines && echo partial > reports/r/summary.md && touch {wrote}; "
        f"for _ in $(seq 3000); do [ -e {release} ] && break; sleep 0.1; done; echo done"
    )
    try:
        job(job_env, "start", "slow", command)
        deadline = time.monotonic() + 120
        while not wrote.exists():
            assert time.monotonic() < deadline, job(job_env, "list").stdout
            time.sleep(0.1)
        waited = job(job_env, "wait", "slow", "2")
        assert waited.returncode == 0 and "still running" in waited.stdout
        with tarfile.open(tmp_path / "out" / "results-partial.tgz") as tar:
            assert "reports/r/summary.md" in tar.getnames()
        assert "running" in job(job_env, "list").stdout
        assert "already running" in job(job_env, "start", "slow", "true").stdout
    finally:
        release.touch()
    final = job(job_env, "wait", "slow", "30")
    assert final.returncode == 0 and "rc 0" in final.stdout


def test_waiting_for_an_unknown_job_names_the_fix(job_env: dict[str, str]) -> None:
    waited = job(job_env, "wait", "nope")
    assert waited.returncode == 2 and "start it first" in waited.stdout
