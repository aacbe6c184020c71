"""A case runs in its family's environment: missing, it is skipped with the command that creates it;
pointed at an interpreter (--perf-env), the child runs there (unsloth on a CPU then skips, saying why)."""

from __future__ import annotations

import json
import sys

import pytest

from trainperf.families.envs import venv_python

CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

CASES = [
    Case(
        family="sft_unsloth", environment="unsloth", model="qwen3_tiny", method="qlora", profile="short",
        batch_size=4, gpu_classes=("cpu",),
    )
]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_catalogue=CATALOGUE)
    (pytester.path / "baselines").mkdir(exist_ok=True)
    return pytester.runpytest_subprocess(
        "-m",
        "cpu",
        "-rs",
        "--perf-steps",
        "2",
        "--perf-baselines",
        "baselines",
        "--perf-output",
        "reports",
        *args,
        timeout=120,
    )


@pytest.mark.skipif(venv_python("unsloth").exists(), reason=".venvs/unsloth exists in this checkout")
def test_missing_environment_skips_with_the_command(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAINPERF_ENV_UNSLOTH", raising=False)
    result = run(pytester)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*environment 'unsloth' does not exist*trainperf env create unsloth*"])
    assert not list(pytester.path.glob("reports/*/cases/*"))  # no child was started


def test_pointed_environment_runs_the_child_there(pytester: pytest.Pytester) -> None:
    result = run(pytester, f"--perf-env=unsloth={sys.executable}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*unsloth needs a CUDA GPU*"])
    run_info = json.loads(next(pytester.path.glob("reports/*/results/*.json")).read_text())["runs"][0]
    assert run_info["environment"] == "unsloth" and run_info["python"] == sys.executable
