"""Published reference points: matched to cases, shown as ratios, never gating."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult, MetricValue
from trainperf.store.references import compare_to_references, load_references

UNSLOTH_32B_SHORT = Case(
    family="sft_unsloth",
    model="qwen3_32b",
    method="qlora",
    profile="short",
    batch_size=32,
    gpu_classes=("maxq", "h100"),
)


def result_for(case: Case, gpu_class: str, samples_per_hour: float) -> CaseResult:
    return CaseResult(
        case_id=case.id,
        case=case.to_dict(),
        gpu_class=gpu_class,
        outcome="ok",
        metrics={"samples_per_hour": MetricValue(samples_per_hour, "samples/h")},
    )


def test_the_shipped_reference_files_load_with_their_sources() -> None:
    references = load_references(REPO_ROOT / "baselines" / "published")
    sources = {r.source for r in references}
    assert sources == {"docs/experiments.md E1", "docs/experiments.md E2", "docs/experiments.md E3"}
    assert any(r.metric == "phase_gen_s" and r.value == pytest.approx(382.91) for r in references)


def test_a_matching_case_gets_measured_over_published() -> None:
    references = load_references(REPO_ROOT / "baselines" / "published")
    lines = compare_to_references(
        result_for(UNSLOTH_32B_SHORT, "h100", 13500.0), UNSLOTH_32B_SHORT, references
    )
    assert [(line["published"], round(line["ratio"], 3)) for line in lines] == [(27000.0, 0.5)]


def test_no_reference_for_another_class_or_profile() -> None:
    references = load_references(REPO_ROOT / "baselines" / "published")
    assert (
        compare_to_references(result_for(UNSLOTH_32B_SHORT, "h200", 1.0), UNSLOTH_32B_SHORT, references) == []
    )
    long_b8 = UNSLOTH_32B_SHORT.replace(profile="long", batch_size=8)
    assert compare_to_references(result_for(long_b8, "h100", 1.0), long_b8, references) == []


def test_a_broken_reference_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"source": "x", "entries": [{"gpu_class": "h100"}]}))
    with pytest.raises(TrainperfError, match="bad.json is not a valid reference file"):
        load_references(tmp_path)


def test_listing_the_shipped_baselines_skips_the_published_reference_points(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainperf.cli import main

    assert main(["baselines", "--baselines", str(REPO_ROOT / "baselines")]) == 0
    out = capsys.readouterr().out
    assert "== h100" in out and "published" not in out
    # a cliff baseline says its largest fit (measured on an H100, 2026-11-22)
    assert (
        "sft_hf-qwen3_32b-lora-long-b1-cliff-batch_size: batch_size: largest fit 6, OOM from 7, confirmed"
        in out
    )
