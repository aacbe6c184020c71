"""The side-by-side report: HF LoRA / HF QLoRA / unsloth QLoRA rows per model and profile, ratios to HF
QLoRA."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.cli import main
from trainperf.errors import TrainperfError
from trainperf.report.side_by_side import render, table
from trainperf.result import CaseResult, MetricValue
from trainperf.store.results import save_result


def result(
    family: str, method: str, batch: int, tokens: float, peak: float, gpu_class: str = "h100"
) -> CaseResult:
    case = Case(
        family=family,
        model="qwen3_8b",
        method=method,
        profile="long",
        batch_size=batch,
        gpu_classes=(gpu_class,),
    )  # type: ignore[arg-type]
    metrics = {
        "tokens_per_s": MetricValue(tokens, "tok/s"),
        "peak_allocated_gib": MetricValue(peak, "GiB"),
        "samples_per_hour": MetricValue(tokens * 4.18, "samples/h"),
        "step_time_s": MetricValue(batch * 861 / tokens, "s"),
    }
    return CaseResult(
        case_id=case.id, case=CaseRecord.of(case), gpu_class=gpu_class, outcome="ok", metrics=metrics
    )


RESULTS = [
    result("sft_unsloth", "qlora", 4, 4088.0, 7.95),
    result("sft_hf", "qlora", 4, 2044.0, 15.9),
    result("sft_hf", "lora", 4, 2436.0, 20.5),
]


def test_rows_ordered_by_method_with_ratios_to_hf_qlora() -> None:
    body = table(RESULTS)
    assert [row[2] for row in body] == ["HF LoRA", "HF QLoRA", "unsloth QLoRA"]
    unsloth = body[2]
    assert unsloth[10] == "2.00" and unsloth[12] == "0.50"  # tokens/s twice HF QLoRA's, half the peak
    assert body[1][10] == "-"  # the reference itself
    assert "ratios (x) are against HF QLoRA" in render(RESULTS)


def test_mixed_classes_and_nothing_to_compare_are_one_line() -> None:
    with pytest.raises(TrainperfError, match="one GPU class"):
        table([*RESULTS, result("sft_hf", "qlora", 4, 1.0, 1.0, gpu_class="h200")])
    with pytest.raises(TrainperfError, match="no HF LoRA"):
        render([])


def test_cli_reads_a_baselines_class_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for r in RESULTS:
        save_result(tmp_path / f"{r.case_id}.json", r)
    assert main(["side-by-side", str(tmp_path)]) == 0
    assert "unsloth QLoRA" in capsys.readouterr().out
    assert main(["side-by-side", str(tmp_path / "nope")]) == 2
