"""Adding a metric is one definition: a toy metric registered in one place is pooled as its
definition says, judged with its tolerance, and written wherever a result's metrics go (the
summary, index.html, JUnit XML, benchmark.json and the results store), no other module touched."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html import escape
from pathlib import Path

import pytest
from store_data import GPU, nightly

from trainperf.case_record import CaseRecord
from trainperf.errors import TrainperfError
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import compare_case
from trainperf.judge.metrics import (
    METRICS,
    STEP_TIME,
    Direction,
    Kind,
    Metric,
    Pooling,
    metrics_of_kind,
    register_metric,
    with_tolerances,
)
from trainperf.measure.measurement import RunMeasurement, pool_runs
from trainperf.report import dashboard, table
from trainperf.report.build import write_reports
from trainperf.report.junit import junit_xml
from trainperf.report.summary import details
from trainperf.result import CaseResult
from trainperf.store.interface import open_history_store
from trainperf.store.records import RunInfo, run_key, runner_label

CASE = "sft_hf-qwen3_8b-lora-short-b4"
TOY = Metric(
    name="toy_widgets",
    kind=Kind.THROUGHPUT,
    unit="w",
    column="widgets",
    label="widgets made (w)",
    direction=Direction.HIGHER,
    tolerance=0.05,
    pooling=Pooling.MAX_OF_RUNS,
    description="widgets a run makes (a metric of the self-tests)",
)


@pytest.fixture
def toy() -> Iterator[Metric]:
    metric = register_metric(TOY)
    yield metric
    del METRICS[metric.name]


def _run(seed: int, widgets: float) -> RunMeasurement:
    rng = random.Random(seed)
    steps = [0.5 * (1 + rng.gauss(0, 0.002)) for _ in range(12)]
    keys = [f"{k + 2}:4096" for k in range(12)]
    return RunMeasurement({STEP_TIME: sorted(steps)[6], TOY.name: widgets}, steps, [], step_keys=keys)


def _result(runs: list[RunMeasurement], day: int) -> CaseResult:
    return CaseResult(
        CASE,
        CaseRecord(),
        "h100",
        "ok",
        metrics=pool_runs(runs),
        fingerprint=Fingerprint.from_dict(GPU),
        created=nightly(day),
    )


def _judged(toy: Metric) -> CaseResult:
    """Three runs making 70, 80 and 75 widgets against a baseline's 100, 95 and 98."""
    baseline = _result([_run(1, 100.0), _run(2, 95.0), _run(3, 98.0)], 0)
    result = _result([_run(4, 70.0), _run(5, 80.0), _run(6, 75.0)], 1)
    verdict = compare_case(
        result, baseline, with_tolerances({toy.name: 0.1}), expectation="ok", timing_comparable=True
    )
    result.verdict = verdict.stored()
    return result


def test_the_registry_knows_a_registered_metric_once(toy: Metric) -> None:
    assert toy.name in metrics_of_kind(Kind.THROUGHPUT) and toy.name not in metrics_of_kind(Kind.MEMORY)
    assert with_tolerances({toy.name: 0.2})[toy.name].tolerance == 0.2
    with pytest.raises(TrainperfError, match="toy_widgets"):
        register_metric(toy)


def test_a_toy_metric_is_pooled_and_judged_by_its_definition(toy: Metric) -> None:
    result = _judged(toy)
    pooled = result.metrics[toy.name]
    assert (pooled.value, pooled.unit, pooled.per_run) == (80.0, "w", [70.0, 80.0, 75.0])  # max of runs
    judged = {m.metric: m for m in result.verdict.metrics}
    assert judged[toy.name].verdict == "regressed" and judged[STEP_TIME].verdict == "pass"
    assert result.verdict.verdict == "regressed" and "toy_widgets -20.0%" in result.verdict.reason


def test_a_toy_metric_reaches_every_report_and_the_store(toy: Metric, tmp_path: Path) -> None:
    result = _judged(toy)
    lines = details([result], {}, {})
    write_reports(tmp_path, [result], "toy run", lines)
    detail = "toy_widgets: 100.0 -> 80.0 (-20.0%) [regressed]"
    # The summary table is a chosen set of columns (a terminal is narrow); a changed metric outside
    # it is named under the table, in summary.md and on index.html alike.
    assert toy.name not in dict(table.COLUMNS) and toy.name not in dashboard.LABELS
    assert detail in (tmp_path / "summary.md").read_text()
    assert escape(detail) in (tmp_path / "index.html").read_text()
    bench = json.loads((tmp_path / "benchmark.json").read_text())
    assert bench["benchmarks"][0]["extra_info"][toy.name] == 80.0
    suite = ET.fromstring(junit_xml([result], "trainperf"))
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties[f"{CASE}/trainperf_{toy.name}"] == "80.0"
    store = open_history_store(str(tmp_path / "history.sqlite"))
    started = nightly(1)
    run = RunInfo(run_key(started, GPU), "pytest", started, GPU, runner_label(GPU, "h100-a"), "h100")
    with store:
        assert store.record_case(run, result)
        stored = store.stored_cases(CASE)[0].metrics[toy.name]
        assert (stored.value, stored.unit, stored.per_run) == (80.0, "w", [70.0, 80.0, 75.0])
        assert [v.verdict for v in store.metric_verdicts(CASE, toy.name)] == ["regressed"]


def test_reports_title_their_metrics_by_the_definitions() -> None:
    """A report picks which metrics it shows; their titles are the definitions'."""
    for key, title in table.COLUMNS:
        assert key not in METRICS or title == METRICS[key].column
    assert dashboard.LABELS == {name: METRICS[name].label for name in dashboard.SHOWN}
