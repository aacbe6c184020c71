"""Bencher Metric Format, OpenMetrics and node_exporter textfile exports of stored runs, read back
with their own parsers and schema (Bencher's published BMF schema, vendored in tests/data/bencher/)
and, where it is installed, Prometheus' promtool."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import required
from store_data import CASE_IDS_FOR_EXPORT, make_result, nightly, write_run_folder
from test_store_cli import call

from trainperf.errors import TrainperfError
from trainperf.recording.ingest import ingest
from trainperf.report.interchange import bmf, openmetrics, openmetrics_name
from trainperf.store.db import open_store
from trainperf.store.reads import list_runs, run_cases

BMF_SCHEMA = Path(__file__).resolve().parent / "data" / "bencher" / "bmf.json"
SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON: Bencher's parser (serde_json) refuses it")


def bencher_accepts(text: str) -> dict:
    """A BMF report checked as Bencher reads it: strict JSON, valid against its published schema
    (https://bencher.dev/bmf.json), and the limits its reference page gives for what the schema
    leaves open (https://bencher.dev/docs/reference/bencher-metric-format: a benchmark name up to
    1024 characters; a measure by its slug, up to 64)."""
    import jsonschema

    report = json.loads(text, parse_constant=_reject_constant)
    jsonschema.Draft7Validator(json.loads(BMF_SCHEMA.read_text())).validate(report)
    for benchmark, measures in report.items():
        assert 0 < len(benchmark) <= 1024, benchmark
        assert measures, f"{benchmark} has no measure"
        assert all(SLUG.fullmatch(slug) and len(slug) <= 64 for slug in measures), sorted(measures)
    return report


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
    report = bencher_accepts(json.dumps(bmf(found)))
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


def test_two_runs_of_a_runner_in_one_second_leave_one_point_the_later_runs(tmp_path: Path) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    run, found = _stored_run(tmp_path)
    later = [replace(case, metrics={**case.metrics}) for case in found]
    for case in later:
        for metric, value in case.metrics.items():
            case.metrics[metric] = replace(value, value=value.value * 2)
    text = openmetrics([(run, found), ({**run, "run_key": "later"}, later)])
    step = {f.name: f for f in text_string_to_metric_families(text)}["trainperf_step_time_seconds"]
    first = {c.case_id: c.metrics["step_time_s"].value for c in found if "step_time_s" in c.metrics}
    assert len(step.samples) == len(first)
    assert {s.labels["case"]: s.value for s in step.samples} == {case: 2 * v for case, v in first.items()}


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


def _promtool() -> str:
    """Prometheus' own checker; the figures were read with prometheus_client before it is asked for."""
    return required.program("promtool", install="apt-get install -y prometheus (.ci/run does)")


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
    # One series per case (no run label), its nights together and oldest first.
    assert all("run" not in s.labels for s in step.samples)
    by_case = [s.labels["case"] for s in step.samples]
    assert by_case == sorted(by_case, key=by_case.index) and len(set(by_case)) == len(CASE_IDS_FOR_EXPORT)
    for case in set(by_case):
        points = [float(s.timestamp) for s in step.samples if s.labels["case"] == case]
        assert points == sorted(points) and len(points) == (2 if case == CASE_IDS_FOR_EXPORT[0] else 3)
    contaminated = [s for s in families["trainperf_case_contaminated"].samples if s.value == 1]
    assert [s.labels["case"] for s in contaminated] == [CASE_IDS_FOR_EXPORT[0]]
    promtool = _promtool()
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
    # A series is a case's metric on a runner, the same every night; the run is named once.
    info = families.pop("trainperf_last_run_info").samples
    started = families.pop("trainperf_last_run_start_timestamp_seconds").samples
    assert [s.value for s in info] == [1.0] and info[0].labels["run"] == _run_key(url, -1)[:12]
    assert [s.value for s in started] == [_seconds(nightly(2))]
    assert all(
        set(s.labels) == {"case", "variant", "gpu_class", "runner"}
        for f in families.values()
        for s in f.samples
    )
    assert families["trainperf_peak_allocated_bytes"].samples[0].value == 21.5 * 2**30
    with pytest.raises(TrainperfError, match="textfile.*holds one run"):
        call("export", "--format", "textfile", "--run", "all", "--store", url)
    promtool = _promtool()
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_textfile_keeps_its_series_from_one_run_to_the_next(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    url = _store_of_runs(tmp_path)
    texts = []
    for run in (_run_key(url, 1), "latest"):
        assert (
            call(
                "export",
                "--format",
                "textfile",
                "--run",
                run,
                "--store",
                url,
                "--output",
                str(tmp_path / run),
            )
            == 0
        )
        texts.append((tmp_path / run / "trainperf.prom").read_text())

    def series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        return {
            (s.name, tuple(sorted(s.labels.items())))
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if f.name != "trainperf_last_run_info"
        }

    earlier, latest = (series(text) for text in texts)
    # The latest run's contaminated case has no figures: every other series is the earlier run's.
    assert latest <= earlier and len(earlier - latest) > 0
    assert all(not name.endswith("_info") for name, _ in earlier)


def _run_key(url: str, index: int) -> str:
    """The key of the store's run at ``index``, oldest first."""
    store = open_store(url)
    try:
        return str(list_runs(store)[index]["run_key"])
    finally:
        store.close()


def test_bmf_of_every_run_is_one_report_per_run_without_contaminated_figures(tmp_path: Path) -> None:
    url = _store_of_runs(tmp_path)
    with pytest.raises(TrainperfError, match="a BMF report is one run; give --output FOLDER"):
        call("export", "--format", "bmf", "--run", "all", "--store", url)
    assert (
        call("export", "--format", "bmf", "--run", "all", "--store", url, "--output", str(tmp_path / "bmf"))
        == 0
    )
    reports = [bencher_accepts(p.read_text()) for p in sorted((tmp_path / "bmf").glob("*.json"))]
    assert len(reports) == 3
    assert [sorted(r) for r in reports[:2]] == [sorted(CASE_IDS_FOR_EXPORT)] * 2
    assert sorted(reports[2]) == [CASE_IDS_FOR_EXPORT[1]]  # the contaminated result is not a measurement


def test_bmf_of_the_latest_run_on_stdout_is_what_bencher_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _store_of_runs(tmp_path)
    capsys.readouterr()
    assert call("export", "--format", "bmf", "--store", url) == 0
    assert sorted(bencher_accepts(capsys.readouterr().out)) == [CASE_IDS_FOR_EXPORT[1]]


def test_the_bmf_check_refuses_what_bencher_refuses() -> None:
    import jsonschema

    good = {"case": {"step-time-s": {"value": 0.5, "lower_value": 0.49, "upper_value": 0.51}}}
    assert bencher_accepts(json.dumps(good)) == good
    with pytest.raises(jsonschema.ValidationError, match="'value' is a required property"):
        bencher_accepts(json.dumps({"case": {"step-time-s": {"lower_value": 0.49}}}))
    with pytest.raises(jsonschema.ValidationError, match="is not of type 'number'"):
        bencher_accepts(json.dumps({"case": {"step-time-s": {"value": "0.5"}}}))
    with pytest.raises(ValueError, match="NaN is not JSON"):
        bencher_accepts('{"case": {"step-time-s": {"value": NaN}}}')
    with pytest.raises(AssertionError):
        bencher_accepts(json.dumps({"case": {"step_time_s": {"value": 0.5}}}))
