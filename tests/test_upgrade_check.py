"""The upgrade-check workflow's measuring step, run as GitHub runs it: a candidate that makes the
cases slower turns the job red (its status is trainperf ab's, not a pipe's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bisect_package import PACKAGE, build_versions
from required import missing

from trainperf.paths import REPO_ROOT

WORKFLOW = REPO_ROOT / "ci" / "workflows" / "upgrade-check.yml"


def _ab_step() -> str:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["ab"]["steps"]
    (step,) = [s for s in steps if s.get("name", "").startswith("trainperf ab")]
    assert step.get("shell") == "bash"
    return str(step["run"])


def test_a_slower_candidate_turns_the_job_red(tmp_path: Path) -> None:
    """B pins a version of a library that costs 1 s per forward (several times a tiny step): the
    step, run with GitHub's own bash flags for ``shell: bash``, exits non-zero and the table says
    regressed."""
    wheelhouse = build_versions(tmp_path / "pkg", ["1.0.0", "1.1.0"], "1.1.0", 1.0)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "GPU_CLASS": "cpu",
        "CANDIDATE_PINS": f"{PACKAGE}==1.1.0",
        "SELECTION": '-k "qwen3_tiny and lora and short and not qlora" --perf-steps 8',
        "ROUNDS": "1",
        "WHEELHOUSE": str(wheelhouse),
        "CANDIDATE_ENVS": str(tmp_path / "envs"),
        "AB_OUTPUT": str(tmp_path / "out"),
    }
    completed = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _ab_step()],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    output = completed.stdout[-3000:] + completed.stderr[-2000:]
    table = (tmp_path / "out" / "ab.txt").read_text() if (tmp_path / "out" / "ab.txt").is_file() else ""
    if completed.returncode == 3 and "not judged" in table:
        # A busy host (the CPU watch saw another job) left B's timing unjudged: red, as the job must
        # be, but the regression itself cannot be shown here.
        missing("the slower candidate's verdict", table.strip().splitlines()[-1])
    assert completed.returncode == 1, output
    assert "sft_hf-qwen3_tiny-lora-short-b4" in table and "regressed" in table, output
    assert f"candidate: {PACKAGE}==1.1.0" in table


@pytest.mark.parametrize("key", ["GPU_CLASS", "CANDIDATE_PINS", "SELECTION", "ROUNDS", "WHEELHOUSE"])
def test_inputs_reach_the_step_through_the_environment(key: str) -> None:
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["ab"]
    assert key in job["env"] and "${{" not in _ab_step()
