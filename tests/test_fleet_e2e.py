"""Shards for real: two tiny cpu cases run as shards 1/2 and 2/2 (real training steps), merged,
and the merged verdicts checked against one unsharded session judging the same results; then
the same nightly submitted to a real single-node Slurm cluster as a job array and a merge job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_runs import (
    CASES,
    ROOT,
    SELECTION,
    TIMING_VERDICTS,
    assert_every_case_trained,
    assert_merged_like_one_session,
    pytest_run,
)
from slurm_cluster import SlurmCluster, slurm  # noqa: F401  (the fixture)


def test_two_real_shards_merge_into_the_verdicts_of_one_session(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/history.sqlite"
    shards = []
    for k in (1, 2):
        done = pytest_run(
            "--perf-shard", f"{k}/2", "--perf-output", str(tmp_path / f"shard-{k}"), "--perf-store", store
        )
        assert f"trainperf: shard {k}/2: 1 of 2 cases" in done.stdout, (
            done.stdout[-3000:] + done.stderr[-2000:]
        )
        (folder,) = (tmp_path / f"shard-{k}").iterdir()
        (result,) = (folder / "results").glob("*.json")
        case = json.loads(result.read_text())
        assert case["outcome"] == "ok", f"shard {k}: {case['outcome']}: {case['message'][:300]}"
        assert case["verdict"]["verdict"] in TIMING_VERDICTS, case["verdict"]
        assert done.returncode == int(case["verdict"]["fails"]), done.stdout[-3000:] + done.stderr[-2000:]
        shards.append(tmp_path / f"shard-{k}")
    merged = tmp_path / "merged"
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.cli", "merge", *map(str, shards), "--output", str(merged),
         "--store", store],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert "merged 2 shard(s), 2 case(s)" in done.stdout and "nightly " in done.stdout, (
        done.stdout + done.stderr
    )
    assert_every_case_trained(merged, done.returncode)
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
    assert "as array job" in done.stdout and "the merge as job" in done.stdout, (
        done.stdout + done.stderr + logs
    )
    for k in (1, 2):
        assert f"trainperf: shard {k}/2: 1 of 2 cases" in (runs / "logs" / f"shard-{k}.log").read_text()
    merged = runs / "merged"
    assert "merged 2 shard(s), 2 case(s)" in (runs / "logs" / "merge.log").read_text(), logs
    assert_every_case_trained(merged, done.returncode)  # --wait: the status is the merge's
    record = json.loads((merged / "run.json").read_text())["merged"]
    assert [(s["shard"], len(s["cases"])) for s in record["shards"]] == [("1/2", 1), ("2/2", 1)]
    assert_merged_like_one_session(merged, tmp_path)


def test_the_fleet_check_fails_a_run_whose_child_crashed(tmp_path: Path) -> None:
    """The checks above fail when training did not happen: a crashed child's case is
    `outcome-changed` in the sharded and the unsharded run alike, and that agreement is no pass."""
    merged = tmp_path / "merged"
    (merged / "results").mkdir(parents=True)

    def write(case: str, outcome: str, verdict: str, fails: bool, message: str = "") -> None:
        result = {"case_id": case, "outcome": outcome, "message": message,
                  "verdict": {"verdict": verdict, "fails": fails, "reason": message}}  # fmt: skip
        (merged / "results" / f"{case}.json").write_text(json.dumps(result))

    for case in CASES:
        write(case, "ok", "pass", False)
    assert_every_case_trained(merged, 0)  # two cases that trained: the check passes
    write(CASES[0], "crash", "outcome-changed", True, "crash: exit status 3 without a result")
    with pytest.raises(AssertionError, match=f"{CASES[0]}: crash: crash: exit status 3"):
        assert_every_case_trained(merged, 1)
    with pytest.raises(AssertionError, match=f"{CASES[0]}: crash"):
        assert_merged_like_one_session(merged, tmp_path)  # fails before judging anything again
    write(CASES[0], "ok", "regressed", True)
    with pytest.raises(AssertionError, match="exit status 0 for verdicts"):
        assert_every_case_trained(merged, 0)  # a failing verdict with a green exit status
