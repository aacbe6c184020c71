"""The CI workflow files: valid against GitHub's workflow schema, and wired to this repository."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import required
import yaml

from trainperf.measure.hardware import CPU_CLASS, load_classes

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted([*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("ci/workflows/*.yml")])


def load(name: str) -> dict:
    (path,) = [p for p in WORKFLOWS if p.name == name]
    data: dict = yaml.safe_load(path.read_text())
    return data


def test_there_are_the_three_workflows() -> None:
    assert {p.name for p in WORKFLOWS} == {"pr.yml", "nightly-gpu.yml", "upgrade-check.yml"}


def test_workflows_validate_against_the_github_schema() -> None:
    checker = required.program("check-jsonschema", install="pip install -e '.[dev]'")
    done = subprocess.run(
        [checker, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_nightly_covers_every_gpu_class_on_its_own_runner_label() -> None:
    job = load("nightly-gpu.yml")["jobs"]["gpu"]
    classes = {name for name in load_classes() if name != CPU_CLASS}
    assert set(job["strategy"]["matrix"]["gpu_class"]) == classes
    assert job["runs-on"] == ["self-hosted", "linux", "${{ matrix.gpu_class }}"]
    script = "\n".join(step.get("run", "") for step in job["steps"])
    assert '-m "$GPU_CLASS" -n "$gpus"' in script  # one worker per GPU
    shard_step = next(step for step in job["steps"] if "pytest perf_tests" in step.get("run", ""))
    assert shard_step["env"]["GPU_CLASS"] == "${{ matrix.gpu_class }}"  # through the environment, not spliced
    assert "GITHUB_STEP_SUMMARY" in script
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in job["steps"])


def test_nightly_runs_each_class_in_shards_and_merges_them() -> None:
    workflow = load("nightly-gpu.yml")
    gpu, merge = workflow["jobs"]["gpu"], workflow["jobs"]["merge"]
    shards = gpu["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and gpu["env"]["SHARDS"] == str(len(shards))
    assert merge["env"]["SHARDS"] == gpu["env"]["SHARDS"]
    script = "\n".join(step.get("run", "") for step in gpu["steps"])
    shard_step = next(step for step in gpu["steps"] if "pytest perf_tests" in step.get("run", ""))
    assert '--perf-shard "$SHARD/$SHARDS"' in script and shard_step["env"]["SHARD"] == "${{ matrix.shard }}"
    assert merge["needs"] == "gpu" and merge["if"] == "always()"
    assert set(merge["strategy"]["matrix"]["gpu_class"]) == set(gpu["strategy"]["matrix"]["gpu_class"])
    uploaded = next(s for s in gpu["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    downloaded = next(s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert (
        uploaded["with"]["name"] == "shard-${{ matrix.gpu_class }}-${{ matrix.shard }}-${{ github.run_id }}"
    )
    assert downloaded["with"]["pattern"] == "shard-${{ matrix.gpu_class }}-*-${{ github.run_id }}"
    merge_script = "\n".join(step.get("run", "") for step in merge["steps"])
    assert 'trainperf" merge "${folders[@]}" --output merged' in merge_script


def test_upgrade_check_builds_the_current_environment_and_runs_ab_on_the_candidate() -> None:
    """A is the current pins' environment; trainperf ab builds B from it with the candidate's pins
    (its measuring step is run for real in test_upgrade_check.py)."""
    workflow = load("upgrade-check.yml")
    inputs = workflow[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads the key 'on' as True
    assert {"gpu_class", "candidate_pins", "wheelhouse"} <= set(inputs)
    script = "\n".join(step.get("run", "") for step in workflow["jobs"]["ab"]["steps"])
    assert ".venvs/current" in script and 'trainperf ab "${pins[@]}"' in script and "--pin-b" in script


def test_pr_workflow_runs_the_ci_script_that_exists() -> None:
    steps = load("pr.yml")["jobs"]["cpu"]["steps"]
    assert any(step.get("run") == ".ci/run" for step in steps)
    assert (ROOT / ".ci" / "run").is_file()


def test_pr_workflow_lints_once() -> None:
    """``.ci/run`` lints before the tests; the workflow does not lint a second time."""
    steps = load("pr.yml")["jobs"]["cpu"]["steps"]
    ci_script = (ROOT / ".ci" / "run").read_text()
    lint_in_ci = len(re.findall(r"^make lint$", ci_script, flags=re.MULTILINE))
    lint_in_steps = sum("make lint" in step.get("run", "") for step in steps)
    assert lint_in_ci + lint_in_steps == 1


def _zizmor() -> str:
    return required.program("zizmor", install="pip install -e '.[dev]'")


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_zizmor_offline_finds_nothing_high(path: Path) -> None:
    """zizmor's offline audits (template injection, unpinned actions, permissions, persisted
    credentials ...) at high severity: none."""
    done = subprocess.run(
        [_zizmor(), "--offline", "--no-config", "--min-severity", "high", "--format", "json", str(path)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 10, 11, 12, 13, 14), done.stderr  # 1x: findings, by severity
    findings = json.loads(done.stdout or "[]")
    assert [(f["ident"], f["determinations"]["severity"]) for f in findings] == [], done.stderr


ACCEPTED_AUDITS = {
    "self-hosted-runner": "the GPU workflows run on the team's own GPU runners: that is their point",
    "anonymous-definition": "a workflow's file name is its name",
    "secrets-outside-env": "the results store's URL is the one secret, read by the step that needs it",
    "concurrency-limits": "a dispatch-only upgrade check: its runner's queue is the limit",
}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_zizmor_auditor_persona_finds_only_what_is_accepted_and_why(path: Path) -> None:
    """Under the auditor persona (everything, low confidence included), every finding is one the
    templates accept, for the reason written here: no template expansion spliced into a script."""
    done = subprocess.run(
        [_zizmor(), "--offline", "--no-config", "--persona", "auditor", "--format", "json", str(path)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, *range(10, 15)), done.stderr
    found = {f["ident"] for f in json.loads(done.stdout or "[]")}
    assert found <= set(ACCEPTED_AUDITS), found - set(ACCEPTED_AUDITS)


@pytest.mark.parametrize("name", ["pr.yml", "nightly-gpu.yml"])
def test_workflows_pin_actions_scope_the_token_and_keep_no_credentials(name: str) -> None:
    workflow = load(name)
    assert workflow["permissions"] == {"contents": "read"}
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            uses = step.get("uses")
            if uses:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", uses), uses
            if uses and uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False
            assert "${{ inputs." not in step.get("run", "")


def test_nightly_takes_the_store_url_from_a_secret_in_the_environment() -> None:
    """A PostgreSQL URL may carry a password: never on a command line, where ``ps`` and logs show it."""
    workflow = load("nightly-gpu.yml")
    text = (ROOT / "ci" / "workflows" / "nightly-gpu.yml").read_text()
    shard = next(s for s in workflow["jobs"]["gpu"]["steps"] if "pytest" in s.get("run", ""))
    merge = next(s for s in workflow["jobs"]["merge"]["steps"] if "merge" in s.get("run", ""))
    for step in (shard, merge):  # both write to the results store
        assert step["env"]["TRAINPERF_STORE"] == "${{ secrets.TRAINPERF_STORE }}"
    assert "--perf-store" not in text and "--store" not in text
    assert shard["env"]["SELECTION"] == "${{ inputs.selection }}" and '"${selection[@]}"' in shard["run"]
