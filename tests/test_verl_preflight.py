"""verl's batch-size errors predicted before launch, per rule set, against the releases' sources.

Rule sets (read from the published wheels and tags):
- ``workers``, verl 0.6.1 and 0.7.0: ``verl/workers/fsdp_workers.py`` normalises the actor's
  mini-batch in place (0.6.1 :235-236, 0.7.0 :242-243: ``*= rollout.n``, ``//= world // sp``)
  and asserts ``normalized ppo_mini_batch_size X should be divisible by
  ppo_micro_batch_size_per_gpu Y`` (0.6.1 :249-251, 0.7.0 :256-258); the critic likewise.
- ``engine``, verl 0.8.0 and 0.9.1: ``ray_trainer.py`` multiplies by rollout.n (0.9.1 :1353),
  ``engine_workers.py`` ``train_mini_batch`` asserts divisibility by the data-parallel size
  (0.9.1 :267), ``engine/utils.py`` ``prepare_micro_batches`` asserts ``data size must be
  divisible by force_group_size * micro_batch_size_per_gpu`` (0.9.1 :124-127).
- both: ``utils/config.py`` ``validate_config`` (real_train_batch_size divisible by the GPU
  count, 0.9.1 :124-126), ``workers/config/actor.py`` ``validate`` (train batch >= mini-batch,
  0.9.1 :227), rollout TP against the world size (0.7.0 fsdp_workers.py:618, 0.9.1
  engine_workers.py:659), dynamic batch budget (``utils/seqlen_balancing.py`` :384).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families import preflight
from trainperf.families.rl_verl.knobs import knobs_of
from trainperf.families.rl_verl.preflight import check, check_case
from trainperf.families.rl_verl.versions import CATALOGUE_VERL_VERSION, effective_version, rule_set
from trainperf.ground.catalogue import load_catalogue
from trainperf.ground.settings import resolve
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.run.case_runner import CaseRunner
from trainperf.run.context import open_run
from trainperf.run.step_count import StepCount

WORKERS = ("0.6.1", "0.7.0")
ENGINE = ("0.8.0", "0.9.1")


ROOT = Path(__file__).resolve().parents[1]


def rl_case(batch: int = 256, mini: int = 128, micro: int | None = 16, gpus: int = 2, **knobs: Any) -> Case:
    extra = {
        "alg": "ppo",
        "eng": "vllm",
        "mini": str(mini),
        "tp": "1",
        **{k: str(v) for k, v in knobs.items()},
    }
    return Case(
        family="rl_verl", model="qwen2_5_3b", method="full", profile="gsm8k", batch_size=batch,
        micro_batch_size=micro, gpus=gpus, extra=tuple(extra.items()),
    )  # fmt: skip


def problem(version: str, **kw: Any) -> str | None:
    return check(knobs_of(rl_case(**kw)), rule_set(version))[1]


@pytest.mark.parametrize("version", WORKERS + ENGINE)
@pytest.mark.parametrize("micro", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
def test_e1_sweep_micro_batches_of_128_and_more_are_rejected_on_two_gpus(version: str, micro: int) -> None:
    """E1 (published with 0.6.1): mini-batch 128 on 2 GPUs normalises to 64 per GPU."""
    found = problem(version, micro=micro)
    assert (found is not None) == (micro >= 128)


def test_the_published_message_of_the_workers_rule_set() -> None:
    found = problem("0.6.1", micro=128)
    assert found is not None
    assert (
        "normalized ppo_mini_batch_size 64 should be divisible by ppo_micro_batch_size_per_gpu 128" in found
    )


def test_the_engine_rule_set_names_its_own_assertion() -> None:
    found = problem("0.9.1", micro=128)
    assert found is not None and "force_group_size * micro_batch_size_per_gpu" in found


@pytest.mark.parametrize(("version", "rejected"), [(v, False) for v in WORKERS] + [(v, True) for v in ENGINE])
def test_a_mini_batch_not_divisible_by_the_gpus_is_floored_by_workers_and_rejected_by_the_engine(
    version: str, rejected: bool
) -> None:
    """0.7.0 floors (``//=``, 5 // 2 = 2); 0.9.1 asserts ``mini_batch_size % dp == 0``."""
    assert (problem(version, batch=6, mini=5, micro=1) is not None) == rejected


@pytest.mark.parametrize(("version", "rejected"), [(v, False) for v in WORKERS] + [(v, True) for v in ENGINE])
def test_log_prob_micro_batches_must_divide_each_gpus_share_only_under_the_engine(
    version: str, rejected: bool
) -> None:
    """Train batch 40 on 1 GPU at micro 16: the engine's log-prob pass splits 40 by 16 through the
    same prepare_micro_batches; the 0.7 workers split with a remainder (DataProto.split)."""
    assert (problem(version, batch=40, mini=16, micro=16, gpus=1) is not None) == rejected


@pytest.mark.parametrize("version", WORKERS + ENGINE)
def test_rollout_n_scales_the_mini_batch(version: str) -> None:
    """GRPO n=4: mini-batch 16 x 4 / 2 GPUs = 32 responses per GPU."""
    assert problem(version, batch=16, mini=16, micro=32, alg="grpo", n=4) is None
    assert problem(version, batch=16, mini=16, micro=64, alg="grpo", n=4) is not None


@pytest.mark.parametrize("version", WORKERS + ENGINE)
@pytest.mark.parametrize(
    ("knobs", "words"),
    [
        ({"gpus": 1, "tp": 2}, "rollout world_size: 1 is not divisible by infer_world_size: 2"),
        ({"batch": 255, "mini": 255, "micro": 1}, "real_train_batch_size (255) must be divisible"),
        ({"batch": 64, "mini": 128}, "must be >= actor.ppo_mini_batch_size (128)"),
        ({"micro": None, "dyn": 1500}, "max_token_len must be greater than the sequence length"),
    ],
)
def test_rules_shared_by_every_release(version: str, knobs: dict[str, Any], words: str) -> None:
    found = problem(version, **knobs)
    assert found is not None and words in found


@pytest.mark.parametrize("version", WORKERS + ENGINE)
def test_dynamic_batch_size_skips_the_micro_batch_rules(version: str) -> None:
    assert problem(version, batch=16, mini=16, micro=None, gpus=2, tp=2, dyn=16384, alg="grpo") is None


def test_versions_map_to_rule_sets_and_old_ones_are_refused() -> None:
    assert [rule_set(v) for v in ("0.6.1", "0.7.1", "0.8.0", "0.9.1", "1.0.0")] == [
        "workers", "workers", "engine", "engine", "engine",
    ]  # fmt: skip
    with pytest.raises(TrainperfError, match="older than"):
        rule_set("0.4.1")
    with pytest.raises(TrainperfError, match="cannot read"):
        rule_set("main")


def test_without_verl_installed_the_catalogue_version_is_assumed_and_named() -> None:
    version, source = effective_version(None)
    assert (version, source.split()[0]) == (CATALOGUE_VERL_VERSION, "assumed")
    with pytest.raises(
        TrainperfError, match=r"^verl 0\.9\.1 \(assumed .*\) would reject this case: actor micro-batch 128"
    ):
        check_case(rl_case(micro=128))
    assert check_case(rl_case(micro=16))["mini_batch_per_gpu"] == 64


PREFLIGHT_ALONE = """
import json, sys, time
from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families import preflight
case = Case.from_dict(json.loads(sys.argv[1]))
started = time.process_time()
for _ in range(100):
    try:
        preflight(case)
    except TrainperfError as exc:
        refusal = str(exc)
print(json.dumps({"cpu_s_per_call": (time.process_time() - started) / 100, "refusal": refusal,
                  "imported": sorted(m for m in ("verl", "ray", "torch", "vllm") if m in sys.modules)}))
"""


def test_the_runner_preflight_classifies_in_milliseconds_without_verl_or_ray() -> None:
    # In an interpreter of its own, where nothing else has imported torch: what the runner's
    # pre-flight loads, and the CPU time it takes (a loaded host stretches wall time, not CPU time).
    case = json.dumps(rl_case(micro=256).to_dict())
    done = subprocess.run(
        [sys.executable, "-c", PREFLIGHT_ALONE, case], capture_output=True, text=True, timeout=300, check=True
    )
    figures = json.loads(done.stdout)
    assert "actor micro-batch 256" in figures["refusal"]
    assert figures["imported"] == []
    assert figures["cpu_s_per_call"] < 0.01, figures  # about 0.1 ms on a 2-core CPU host


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"alg": "dpo"}, "alg='dpo'"),
        ({"speed": "1"}, "unknown verl knob(s) speed"),
        ({"mini": "x"}, "mini='x' is not an integer"),
        ({"offl": "yes"}, "offl='yes'"),
    ],
)
def test_malformed_knobs_are_one_line_errors(change: dict[str, str], words: str) -> None:
    case = rl_case()
    case = case.replace(extra=tuple({**dict(case.extra), **change}.items()))
    with pytest.raises(TrainperfError, match=words.replace("(", r"\(").replace(")", r"\)")):
        knobs_of(case)


def test_a_micro_batch_or_a_dynamic_budget_is_required() -> None:
    with pytest.raises(TrainperfError, match="give micro_batch_size"):
        knobs_of(rl_case(micro=None))


def test_the_runner_models_the_verl_of_the_cases_environment_not_the_suites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the H100 the verl-vllm environment had verl 0.9.1 while pre-flight said 'assumed': it
    asked the suite's interpreter. An environment with verl 0.6.1 must be modelled as 0.6.1."""
    site = tmp_path / "site"
    (site / "verl-0.6.1.dist-info").mkdir(parents=True)
    (site / "verl-0.6.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: verl\nVersion: 0.6.1\n"
    )
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    settings = resolve(
        {"output": str(tmp_path / "reports"), "env": f"verl-vllm={python}"}, lambda _name: None, tmp_path
    )
    runner = CaseRunner(open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path))
    case = rl_case(micro=256).replace(environment="verl-vllm")
    result = runner.new_result(case)
    runner.add_runs(case, StepCount(2), result, [], 1)
    assert result.outcome == "config_error"
    assert result.message.startswith("verl 0.6.1 (installed) would reject this case"), result.message


CATALOGUE = {case_id: case for case_id, case in load_catalogue(ROOT).items() if case.family == "rl_verl"}


# By id, not by Case: the plugin deselects Case parameters of other GPU classes on this machine.
@pytest.mark.parametrize("case_id", sorted(CATALOGUE))
def test_every_catalogue_case_passes_pre_flight_unless_a_config_error_is_expected(case_id: str) -> None:
    """A case mis-specified for verl 0.9.1 would cost a GPU loan to find out (the E3-scale case: 8
    GPUs, TP 2, a 39,904-token dynamic batch over 9,212-token sequences)."""
    case = CATALOGUE[case_id]
    expect_rejection = "config_error" in dict(case.expected).values()
    if expect_rejection:
        with pytest.raises(TrainperfError, match="would reject this case"):
            preflight(case)
    else:
        preflight(case)
