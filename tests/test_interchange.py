"""Bencher Metric Format, OpenMetrics and node_exporter textfile exports of stored runs, read back
with their own parsers and, where it is installed, Prometheus' promtool."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from store_data import CASE_IDS_FOR_EXPORT, make_result, nightly, write_run_folder
from test_store_cli import call

from trainperf.errors import TrainperfError
from trainperf.recording.ingest import ingest
from trainperf.report.interchange import bmf, openmetrics, openmetrics_name
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
    text = openmetrics([(run, found)])
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
    assert openmetrics_name("samples_per_hour") == ("trainperf_samples_per_second", None, 1 / 3600)


def _store_of_runs(tmp_path: Path, days: int = 3) -> str:
    """``days`` nightly runs of the export cases and an OOM; the last run's short case contaminated."""
    for day in range(days):
        results = [make_result(c, nightly(day), 0.5, seed=i + day) for i, c in enumerate(CASE_IDS_FOR_EXPORT)]
        results.append(make_result("sft_hf-qwen3_32b-full-long-b4", nightly(day), 0.0, outcome="oom"))
        if day == days - 1:
            results[0] = make_result(CASE_IDS_FOR_EXPORT[0], nightly(day), 0.9, verdict="contaminated")
        write_run_folder(tmp_path / "runs" / f"n{day}", nightly(day), results)
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert call("ingest", str(tmp_path / "runs"), "--store", url, "--quiet") == 0
    return url


def _promtool() -> str | None:
    found = shutil.which("promtool")
    if found is None and os.environ.get("CI") == "true":
        pytest.fail("promtool is not installed under CI: apt-get install prometheus (.ci/run does)")
    return found


def test_openmetrics_of_every_run_to_stdout_is_one_exposition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    url = _store_of_runs(tmp_path)
    capsys.readouterr()
    assert call("export", "--format", "openmetrics", "--run", "all", "--store", url) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert text.count("# EOF") == 1 and text.endswith("# EOF\n")
    assert "1 contaminated result(s): their figures are not exported" in captured.err
    families = {f.name: f for f in text_string_to_metric_families(text)}
    step = families["trainperf_step_time_seconds"]
    assert len(step.samples) == 3 * 2 - 1  # the contaminated result's figures are left out
    stamps = [s.timestamp for s in step.samples]
    assert {float(t) for t in stamps} == {float(_seconds(nightly(d))) for d in range(3)}
    assert stamps == sorted(stamps, key=float)  # each family's samples oldest first
    contaminated = [s for s in families["trainperf_case_contaminated"].samples if s.value == 1]
    assert [s.labels["case"] for s in contaminated] == [CASE_IDS_FOR_EXPORT[0]]
    promtool = _promtool()
    if promtool is None:
        pytest.skip(
            "promtool is not installed (apt-get install prometheus): parsed with prometheus_client only"
        )
    (tmp_path / "all.om").write_text(text)
    done = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(tmp_path / "all.om"),
            str(tmp_path / "tsdb"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NUM SAMPLES" in done.stdout and len(list((tmp_path / "tsdb").iterdir())) >= 3  # a block a night


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def test_openmetrics_into_a_folder_is_one_valid_file_per_run(tmp_path: Path) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    url = _store_of_runs(tmp_path)
    assert (
        call(
            "export",
            "--format",
            "openmetrics",
            "--run",
            "all",
            "--store",
            url,
            "--output",
            str(tmp_path / "om"),
        )
        == 0
    )
    files = sorted((tmp_path / "om").glob("*.om"))
    assert len(files) == 3
    for path in files:
        assert len(list(text_string_to_metric_families(path.read_text()))) > 2


def test_the_textfile_is_a_prom_file_without_timestamps_that_promtool_accepts(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    url = _store_of_runs(tmp_path)
    collector = tmp_path / "textfile-collector"
    assert call("export", "--format", "textfile", "--store", url, "--output", str(collector)) == 0
    assert [p.name for p in collector.iterdir()] == ["trainperf.prom"]  # nothing half-written left beside it
    text = (collector / "trainperf.prom").read_text()
    assert "# EOF" not in text and "# UNIT" not in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = [s for f in families.values() for s in f.samples]
    assert samples and all(s.timestamp is None for s in samples)
    assert {s.labels["run"] for s in samples} == {samples[0].labels["run"]}  # the latest run only
    assert families["trainperf_peak_allocated_bytes"].samples[0].value == 21.5 * 2**30
    with pytest.raises(TrainperfError, match="textfile.*holds one run"):
        call("export", "--format", "textfile", "--run", "all", "--store", url)
    promtool = _promtool()
    if promtool is None:
        pytest.skip(
            "promtool is not installed (apt-get install prometheus): parsed with prometheus_client only"
        )
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_bmf_of_every_run_is_one_report_per_run_without_contaminated_figures(tmp_path: Path) -> None:
    url = _store_of_runs(tmp_path)
    with pytest.raises(TrainperfError, match="a BMF report is one run; give --output FOLDER"):
        call("export", "--format", "bmf", "--run", "all", "--store", url)
    assert (
        call("export", "--format", "bmf", "--run", "all", "--store", url, "--output", str(tmp_path / "bmf"))
        == 0
    )
    reports = [json.loads(p.read_text()) for p in sorted((tmp_path / "bmf").glob("*.json"))]
    assert len(reports) == 3
    assert [sorted(r) for r in reports[:2]] == [sorted(CASE_IDS_FOR_EXPORT)] * 2
    assert sorted(reports[2]) == [CASE_IDS_FOR_EXPORT[1]]  # the contaminated result is not a measurement
