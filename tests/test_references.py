"""Published reference points: matched to cases, shown as ratios, never gating."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.errors import TrainperfError
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult, MetricValue
from trainperf.store.references import compare_to_references, load_references
from trainperf.store.results import load_result

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
        case=CaseRecord.of(case),
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
    assert [(line.published, round(line.ratio or 0, 3)) for line in lines] == [(27000.0, 0.5)]


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
    # Each cliff baseline says its largest fit and the smallest value that ran out of memory, as
    # its file's probes measured them (whichever GPU runner took it last).
    cliffs = [load_result(path) for path in sorted((REPO_ROOT / "baselines").glob("h*/*.json"))]
    cliffs = [result for result in cliffs if result.cliff]
    assert cliffs, "the committed GPU baselines hold an OOM-cliff search"
    for result in cliffs:
        cliff = result.cliff
        assert cliff is not None
        probes = [*cliff.probes, *cliff.confirmation]
        oom_from = min(probe.value for probe in probes if probe.outcome == "oom")
        confirmed = ", confirmed" if cliff.confirmed else ""
        fit = cliff.largest_fit
        found = (
            f"largest fit {fit}, OOM from {oom_from}"
            if fit
            else f"nothing fits, {oom_from} already runs out of memory"
        )
        assert f"{result.case_id}: {cliff.axis}: {found}{confirmed}\n" in out, out
