"""A 2-rank case on the CPU: the launcher starts two gloo ranks of the tiny model (about 15 s).

Checks the multi-GPU path end to end as far as a CPU can: one rank per process, rank 0 records
steps with the token count summed over ranks, every rank leaves its own result.
"""

from __future__ import annotations

import json

import pytest
import required

CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

CASES = [Case(family="sft_hf", model="qwen3_tiny", method="lora", profile="short", batch_size=2, gpus=2,
              gpu_classes=("cpu",))]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""


def test_two_ranks_on_the_cpu(pytester: pytest.Pytester) -> None:
    required.module("trl", "pip install -e '.[hf]'")
    pytester.makepyfile(test_catalogue=CATALOGUE)
    pytester.mkdir("baselines")
    result = pytester.runpytest_subprocess(
        "-m",
        "cpu",
        "--perf-steps",
        "4",
        "--perf-output",
        "reports",
        "--perf-baselines",
        "baselines",
        timeout=240,
    )
    result.assert_outcomes(passed=1)
    (run_dir,) = (pytester.path / "reports").iterdir()
    case_dir = run_dir / "cases" / "sft_hf-qwen3_tiny-lora-short-b2-gpus2" / "r1"
    rank0 = json.loads((case_dir / "result.json").read_text())
    rank1 = json.loads((case_dir / "result.rank1.json").read_text())
    assert rank0["rank"] == 0 and rank1["rank"] == 1 and rank0["pid"] != rank1["pid"]
    assert rank0["effective_config"]["world_size"] == 2
    # The Trainer sums each step's tokens over ranks, so both ranks saw the same (global) counts.
    assert [s["tokens"] for s in rank0["steps"]] == [s["tokens"] for s in rank1["steps"]]
    stored = json.loads((run_dir / "results" / "sft_hf-qwen3_tiny-lora-short-b2-gpus2.json").read_text())
    assert stored["outcome"] == "ok" and stored["case"]["gpus"] == 2
