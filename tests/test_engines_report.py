"""verl's rollout engines side by side: pairs by engine alone, SGLang/vLLM per figure, E3's ratio beside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.cli import main
from trainperf.errors import TrainperfError
from trainperf.report.engines import pairs, render, table
from trainperf.result import CaseResult, MetricValue
from trainperf.store.references import load_references
from trainperf.store.results import save_result

PUBLISHED = Path(__file__).resolve().parents[1] / "baselines" / "published"


def verl(
    engine: str, gen: float, model: str = "qwen2_5_0_5b", gpus: int = 2, gpu_class: str = "h200", **kw: Any
) -> CaseResult:
    extra = {"alg": "grpo", "eng": engine, "tp": "2", "n": "1", **kw}
    case = Case(
        family="rl_verl", model=model, method="full", profile="gsm8k", batch_size=16, gpus=gpus,
        environment=f"verl-{engine}", extra=tuple(extra.items()), gpu_classes=(gpu_class,),
    )  # fmt: skip
    metrics = {
        "step_time_s": MetricValue(gen + 20.0, "s"),
        "phase_gen_s": MetricValue(gen, "s"),
        "phase_update_actor_s": MetricValue(10.0, "s"),
    }
    return CaseResult(
        case_id=case.id, case=CaseRecord.of(case), gpu_class=gpu_class, outcome="ok", metrics=metrics
    )


def test_cases_pair_when_only_the_engine_differs() -> None:
    results = [
        verl("vllm", 4.0), verl("sglang", 5.0),
        verl("vllm", 4.0, r="2048"),  # another shape, no SGLang twin
        verl("sglang", 5.0, gpu_class="h100"),  # another class
    ]  # fmt: skip
    found = pairs(results)
    assert len(found) == 1
    assert (
        found[0].shape.startswith("qwen2_5_0_5b grpo, 2 GPU(s), TP 2 on h200 (")
        and "-eng*-" in found[0].shape
    )
    rows = {row[0]: row for row in table(found[0])}
    assert rows["gen s"][1:4] == ["4.000", "5.000", "1.25"]
    assert rows["update_actor s"][3] == "1.00"
    assert "ref s" not in rows  # a phase neither run has is left out


def test_a_failed_engine_shows_its_outcome_and_no_ratio() -> None:
    sglang = verl("sglang", 5.0)
    sglang.outcome = "oom"
    rows = table(pairs([verl("vllm", 4.0), sglang])[0])
    assert rows[0] == ["outcome", "ok", "oom", "-", "-"]
    assert {row[0]: row for row in rows}["gen s"][2:4] == ["-", "-"]


def test_e3s_published_ratio_is_set_beside_the_e3_shape() -> None:
    references = load_references(PUBLISHED)
    results = [verl("vllm", 700.0, model="phi_4", gpus=8), verl("sglang", 300.0, model="phi_4", gpus=8)]
    rows = {row[0]: row for row in table(pairs(results)[0], references)}
    assert rows["gen s"][3] == "0.43"
    assert rows["gen s"][4].startswith("0.45 (") and "h100" in rows["gen s"][4]  # E3: 382.91 / 849.20
    assert rows["update_actor s"][4].startswith("0.84 (")
    small = {row[0]: row for row in table(pairs([verl("vllm", 4.0), verl("sglang", 5.0)])[0], references)}
    assert small["gen s"][4] == "-"  # E3's figures are for phi_4 on 8 GPUs only


def test_nothing_to_pair_is_one_line() -> None:
    with pytest.raises(TrainperfError, match="no verl case measured with both rollout engines"):
        render([verl("vllm", 4.0)])


def test_cli_reads_baselines_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for result in (verl("vllm", 4.0), verl("sglang", 5.0)):
        save_result(tmp_path / f"{result.case_id}.json", result)
    assert main(["engines", str(tmp_path), "--baselines", str(PUBLISHED.parent)]) == 0
    assert "SGLang/vLLM" in capsys.readouterr().out
    assert main(["engines", str(tmp_path / "nope")]) == 2
