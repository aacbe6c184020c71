"""Shards for real: two tiny cpu cases run as shards 1/2 and 2/2 (real training steps), merged,
and the merged verdicts checked against one unsharded session judging the same results; then
the same nightly submitted to a real single-node Slurm cluster as a job array and a merge job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fleet_runs import CASES, ROOT, SELECTION, assert_merged_like_one_session, pytest_run, verdicts
from slurm_cluster import SlurmCluster, slurm  # noqa: F401  (the fixture)


def test_two_real_shards_merge_into_the_verdicts_of_one_session(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/history.sqlite"
    shards = []
    for k in (1, 2):
        done = pytest_run(
            "--perf-shard", f"{k}/2", "--perf-output", str(tmp_path / f"shard-{k}"), "--perf-store", store
        )
        assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
        assert f"trainperf: shard {k}/2: 1 of 2 cases" in done.stdout
        shards.append(tmp_path / f"shard-{k}")
    merged = tmp_path / "merged"
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "merge", *map(str, shards), "--output", str(merged),
         "--store", store],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "merged 2 shard(s), 2 case(s)" in done.stdout and "nightly " in done.stdout
    assert sorted(verdicts(merged)) == CASES
    for name in ("summary.md", "index.html", "benchmark.json", "junit.xml"):
        assert (merged / name).is_file(), name
    benchmarks = json.loads((merged / "benchmark.json").read_text())["benchmarks"]
    assert sorted(b["name"] for b in benchmarks) == CASES
    assert_merged_like_one_session(merged, tmp_path)


def test_a_nightly_on_a_real_slurm_cluster(slurm: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "nightly"
    env = {**slurm.env, "TRAINPERF_STORE": f"sqlite:///{tmp_path}/history.sqlite"}
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "slurm", "submit", "--class", "cpu", "--shards", "2",
         "--runs", str(runs), "--checkout", str(ROOT), "--wait", "--", "-k", SELECTION],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    logs = "\n".join(f"{p.name}:\n{p.read_text()[-2500:]}" for p in sorted((runs / "logs").glob("*.log")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    assert "as array job" in done.stdout and "the merge as job" in done.stdout
    for k in (1, 2):
        assert f"trainperf: shard {k}/2: 1 of 2 cases" in (runs / "logs" / f"shard-{k}.log").read_text()
    merged = runs / "merged"
    assert "merged 2 shard(s), 2 case(s)" in (runs / "logs" / "merge.log").read_text(), logs
    assert sorted(verdicts(merged)) == CASES
    record = json.loads((merged / "run.json").read_text())["merged"]
    assert [(s["shard"], len(s["cases"])) for s in record["shards"]] == [("1/2", 1), ("2/2", 1)]
    assert_merged_like_one_session(merged, tmp_path)
