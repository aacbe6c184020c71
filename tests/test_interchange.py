"""Bencher Metric Format and OpenMetrics exports of a stored run, read back with their own parsers."""

from __future__ import annotations

import json
from pathlib import Path

from store_data import CASE_IDS_FOR_EXPORT, make_result, nightly, write_run_folder

from trainperf.report.interchange import bmf, openmetrics, openmetrics_name
from trainperf.run.ingest import ingest
from trainperf.store.db import open_store
from trainperf.store.reads import list_runs, run_cases


def _stored_run(tmp_path: Path) -> tuple[dict, list]:
    results = [make_result(c, nightly(1), 0.5, seed=i) for i, c in enumerate(CASE_IDS_FOR_EXPORT)]
    results.append(make_result("sft_hf-qwen3_32b-full-long-b4", nightly(1), 0.0, outcome="oom"))
    write_run_folder(tmp_path / "run", nightly(1), results)
    store = open_store(str(tmp_path / "h.sqlite"))
    ingest(store, [tmp_path / "run"], say=lambda _: None)
    run = list_runs(store)[0]
    return run, run_cases(store, run["run_key"])


def test_bmf_has_a_benchmark_per_measured_case_with_the_median_interval(tmp_path: Path) -> None:
    _run, found = _stored_run(tmp_path)
    report = json.loads(json.dumps(bmf(found)))
    assert sorted(report) == sorted(CASE_IDS_FOR_EXPORT)  # the OOM case has no figure to export
    step = report[CASE_IDS_FOR_EXPORT[0]]["step-time-s"]
    assert (
        step["lower_value"] <= step["value"] <= step["upper_value"]
        and step["upper_value"] > step["lower_value"]
    )
    assert set(report[CASE_IDS_FOR_EXPORT[0]]["peak-allocated-gib"]) == {"value"}  # one value: no interval


def test_openmetrics_parses_with_the_prometheus_parser(tmp_path: Path) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    run, found = _stored_run(tmp_path)
    text = openmetrics(run, found)
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    step = families["trainperf_step_time_seconds"]
    assert step.unit == "seconds" and len(step.samples) == len(CASE_IDS_FOR_EXPORT)
    assert {s.labels["case"] for s in step.samples} == set(CASE_IDS_FOR_EXPORT)
    memory = families["trainperf_peak_allocated_bytes"].samples[0]
    assert memory.value == 21.5 * 2**30 and memory.timestamp is not None
    outcomes = {s.labels["case"]: s.value for s in families["trainperf_case_ok"].samples}
    assert outcomes["sft_hf-qwen3_32b-full-long-b4"] == 0


def test_metric_names_carry_openmetrics_base_units() -> None:
    assert openmetrics_name("energy_per_token_j") == ("trainperf_energy_per_token_joules", "joules", 1.0)
    assert openmetrics_name("tokens_per_s") == ("trainperf_tokens_per_second", None, 1.0)
    assert openmetrics_name("peak_allocated_gib") == ("trainperf_peak_allocated_bytes", "bytes", float(2**30))
