"""verl's memory floor at the actor's update: its arithmetic, every measured peak above it, and
the cliff search that launches nothing the floor rules out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.families.rl_verl.floor import over_the_floor, update_floor
from trainperf.ground.catalogue import load_catalogue
from trainperf.ground.settings import resolve
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.paths import REPO_ROOT
from trainperf.run.case_runner import CaseRunner
from trainperf.run.cliff import run_cliff
from trainperf.run.context import open_run
from trainperf.store.results import load_result

CATALOGUE = load_catalogue(REPO_ROOT)
PPO_3B_ONE_GPU = "rl_verl-qwen2_5_3b-full-gsm8k-b256-mb1-algppo-engvllm-mini128-n1-p1024-r1024-tp1"
PPO_7B_TWO_GPUS = "rl_verl-qwen2_5_7b-full-gsm8k-b256-gpus2-mb16-algppo-engvllm-mini128-n1-p1024-r1024-tp1"
PHI_4_GRPO = "rl_verl-phi_4-full-gsm8k-b16-gpus8-alggrpo-dyn39904-engvllm-kl1-mini16-n1-offl1-p1020-r8192-tp2"
QWEN2_5_3B_PARAMS = 3_085_938_688  # tests/test_estimate.py: as transformers builds it


def test_ppo_holds_the_actor_and_the_critic_in_fp32_with_adamw() -> None:
    floor = update_floor(CATALOGUE[PPO_3B_ONE_GPU])
    assert floor is not None
    assert floor.actor_b == QWEN2_5_3B_PARAMS * 16
    # tied embeddings: the value model is the same body plus a one-output head
    assert floor.critic_b == (QWEN2_5_3B_PARAMS + 2048) * 16
    assert floor.reference_b == 0  # no KL: no reference model
    assert floor.total_gib == pytest.approx(91.97, abs=0.01)
    assert "actor 46.0, critic 46.0" in floor.describe()


def test_the_floor_shards_over_the_gpus_and_offload_leaves_the_reference_off_the_gpu() -> None:
    floor = update_floor(CATALOGUE[PHI_4_GRPO])
    assert floor is not None and floor.critic_b == 0 and floor.reference_b == 0  # GRPO, offl=1
    assert floor.actor_b == 14_659_507_200 * 16 / 8
    without_offload = CATALOGUE[PHI_4_GRPO].replace(
        extra=tuple(kv for kv in CATALOGUE[PHI_4_GRPO].extra if kv[0] != "offl")
    )
    kept = update_floor(without_offload)
    assert kept is not None and kept.reference_b == 14_659_507_200 * 2 / 8


def test_e1s_published_ooms_are_over_the_floor_and_its_fits_under_it() -> None:
    classes = load_classes()
    floor_7b = update_floor(CATALOGUE[PPO_7B_TWO_GPUS])
    assert floor_7b is not None
    assert floor_7b.total_gib > classes["maxq"].memory_gib  # E1: 7B OOM at every micro-batch on 2 Max-Q
    floor_3b_two = update_floor(CATALOGUE[PPO_3B_ONE_GPU].replace(gpus=2))
    assert floor_3b_two is not None and floor_3b_two.total_gib < classes["maxq"].memory_gib  # E1: fit to 16


def test_no_floor_outside_verl_or_for_a_local_checkpoint() -> None:
    sft = Case(
        family="sft_hf", model="qwen3_8b", method="lora", profile="short", batch_size=4, gpu_classes=("h100",)
    )
    assert update_floor(sft) is None
    assert update_floor(CATALOGUE[PPO_3B_ONE_GPU].replace(model_path="/models/qwen2.5-3b")) is None


def _judged_verl_baselines() -> list[Path]:
    """verl baselines with a peak to compare, or a cliff that nothing fit: chosen at collection."""
    chosen = []
    for path in sorted((REPO_ROOT / "baselines").glob("h*/rl_verl-*.json")):
        baseline = load_result(path)
        has_peak = baseline.outcome == "ok" and "peak_allocated_gib" in baseline.metrics
        if has_peak or (baseline.cliff and baseline.cliff.largest_fit is None):
            chosen.append(path)
    return chosen


VERL_BASELINES = _judged_verl_baselines()


@pytest.mark.parametrize("path", VERL_BASELINES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_measured_verl_peak_lies_above_its_floor(path: Path) -> None:
    baseline = load_result(path)
    peak = baseline.metrics.get("peak_allocated_gib")
    floor = update_floor(baseline.case.as_case())
    assert floor is not None
    if baseline.outcome == "ok" and peak is not None:
        assert peak.value >= floor.total_gib, (
            f"measured {peak.value:.1f} GiB under the floor {floor.total_gib:.1f}"
        )
    else:  # a cliff search where nothing fit on this GPU
        assert floor.total_gib > load_classes()[baseline.gpu_class].memory_gib


def _h100_runner(
    tmp_path: Path, launched: list[int], fits_at: int | None, monkeypatch: pytest.MonkeyPatch
) -> CaseRunner:
    cli: dict[str, Any] = {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines")}
    context = open_run(
        resolve(cli, lambda _n: None, tmp_path), Detection(load_classes()["cpu"], None, None, False), tmp_path
    )
    context.say = lambda _line: None
    context.gpu_class, context.device = load_classes()["h100"], "0"  # as on an H100, without NVML here
    runner = CaseRunner(context)
    assert runner.ctx.on_gpu

    def fake_runs(
        case: Case, steps: int, result: Any, measurements: Any, count: int, purpose: str = "", **_kw: Any
    ) -> None:
        assert case.micro_batch_size is not None
        launched.append(case.micro_batch_size)
        if fits_at is None or case.micro_batch_size > fits_at:
            result.outcome, result.message = "oom", "out of memory (fake)"

    monkeypatch.setattr(runner, "add_runs", fake_runs)
    return runner


def test_the_3b_cliff_on_an_h100_launches_only_its_confirmation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: 8, 2 and 1 each ran out after 7 minutes of set-up; the floor rules all out."""
    launched: list[int] = []
    report = run_cliff(
        _h100_runner(tmp_path, launched, None, monkeypatch),
        CATALOGUE[PPO_3B_ONE_GPU],
        "micro_batch_size",
        1,
        512,
    )
    cliff = report.result.cliff
    assert cliff is not None and cliff.largest_fit is None and cliff.confirmed
    assert launched == [1]  # the confirmation at the low end, a real launch
    skipped = [p for p in cliff.probes if p.outcome == "skipped-by-estimate"]
    assert [p.value for p in skipped] == [8, 2, 1] and "critic 46.0" in skipped[0].note


def test_a_floor_proved_wrong_by_the_confirmation_leaves_the_cliff_unconfirmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[int] = []
    report = run_cliff(
        _h100_runner(tmp_path, launched, 4, monkeypatch),
        CATALOGUE[PPO_3B_ONE_GPU],
        "micro_batch_size",
        1,
        512,
    )
    assert report.result.cliff is not None and not report.result.cliff.confirmed
    assert report.verdict.verdict.value == "noisy"


def test_the_reason_names_the_floor_and_the_limit() -> None:
    """(On the CPU class the search ignores the floor: tests/test_cliff_resume.py runs the same
    3B cliff there and launches 8, 32 and 16.)"""
    reason = over_the_floor(CATALOGUE[PPO_3B_ONE_GPU], 79.2)
    assert reason == (
        "verl's states at the actor update need at least 92.0 GiB per GPU (actor 46.0, critic 46.0) > 79.2 "
        "GiB"
    )
    assert over_the_floor(CATALOGUE[PPO_3B_ONE_GPU], 139.4) is None  # an H200 may fit it
    malformed = CATALOGUE[PPO_3B_ONE_GPU].replace(extra=(*CATALOGUE[PPO_3B_ONE_GPU].extra, ("offl", "2")))
    assert over_the_floor(malformed, 79.2) is None  # left to pre-flight's config_error


def test_a_case_over_its_floor_says_so_beside_its_oom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launched: list[int] = []
    report = _h100_runner(tmp_path, launched, None, monkeypatch).run(
        CATALOGUE[PPO_3B_ONE_GPU].replace(micro_batch_size=16)
    )
    assert launched == [16] and report.result.outcome == "oom"  # still launched: the user asked for it
    assert any(
        note.startswith("expected to run out of memory at any micro-batch: verl's states")
        for note in report.notes
    )
