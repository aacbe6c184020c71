"""JUnit XML from ``--junitxml`` and ``trainperf merge``: valid under Jenkins xUnit's junit-10.xsd
(vendored in tests/data/junit/), no warning per case, the figures readable beside each test."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import required
from store_data import make_result, nightly

from trainperf.report.junit import junit_xml, property_recorder
from trainperf.result import INTERRUPTED, NOT_RUN, Unjudged
from trainperf.run_record import RunRecord

SCHEMA = Path(__file__).parent / "data" / "junit" / "junit-10.xsd"


def assert_valid_junit(path: Path) -> None:
    """Valid under junit-10.xsd, with the time, timestamp and hostname CI systems read."""
    xmlschema = required.module("xmlschema", install="pip install -e '.[dev]'")
    xmlschema.XMLSchema(str(SCHEMA)).validate(str(path))
    for suite in ET.parse(path).getroot().iter("testsuite"):
        assert {"time", "timestamp", "hostname"} <= set(suite.attrib), suite.attrib
        assert all(case.get("time") is not None for case in suite.iter("testcase"))


CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

CASES = [
    Case(
        family="sft_unsloth", environment="unsloth", model="qwen3_tiny", method="qlora", profile="short",
        batch_size=4, gpu_classes=("cpu",),
    )
]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""


def test_recorder_appends_to_the_items_user_properties() -> None:
    class Item:
        def __init__(self) -> None:
            self.user_properties: list[tuple[str, object]] = []

    item = Item()
    property_recorder(item)("trainperf_verdict", "pass")
    assert item.user_properties == [("trainperf_verdict", "pass")]


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["one-process", "xdist"])
def test_junitxml_under_xunit2_is_clean_and_carries_the_verdict(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """The case's child starts and skips at once (unsloth needs a CUDA GPU): a verdict, no training.
    Under xdist the figures reach the controller, which writes the XML, on the workers' reports."""
    pytester.makepyfile(test_catalogue=CATALOGUE)
    (pytester.path / "baselines").mkdir(exist_ok=True)
    result = pytester.runpytest_subprocess(
        *workers,
        "-m",
        "cpu",
        "-W",
        "error::pytest.PytestWarning",
        "--junitxml",
        "junit.xml",
        "-o",
        "junit_family=xunit2",
        f"--perf-env=unsloth={sys.executable}",
        "--perf-steps",
        "2",
        "--perf-baselines",
        "baselines",
        "--perf-output",
        "reports",
        timeout=120,
    )
    assert "record_property is incompatible" not in result.stdout.str()
    result.assert_outcomes(skipped=1)
    assert_valid_junit(pytester.path / "junit.xml")
    xml = ET.parse(pytester.path / "junit.xml").getroot()
    (case,) = xml.iter("testcase")
    assert case.find("properties") is None  # junit-10.xsd has none inside a test case
    (test_name,) = {p.get("name", "").split("/")[0] for p in xml.iter("property")}
    assert test_name.startswith("test_case[sft_unsloth-qwen3_tiny-qlora-short-b4")
    properties = {p.get("name", "").split("/")[1]: p.get("value") for p in xml.iter("property")}
    assert properties.get("trainperf_outcome") == "skipped"
    assert properties.get("trainperf_verdict") == "not-compared"
    output = "".join(node.text or "" for node in case.iter("system-out"))
    assert "trainperf_outcome=skipped\n" in output and "trainperf_verdict=not-compared\n" in output


def test_the_merged_runs_junit_is_valid_and_carries_the_figures(tmp_path: Path) -> None:
    passed = make_result("sft_hf-qwen3_8b-lora-maxlen-b4", nightly(1), 0.5)
    passed.runs = [RunRecord(wall_s=61.5), RunRecord(wall_s=60.25)]
    failed = make_result("sft_hf-qwen3_8b-lora-short-b4", nightly(1), 0.6, verdict="regressed")
    failed.verdict.fails = True
    failed.runs = [RunRecord(wall_s=30.0)]
    skipped = make_result("sft_hf-qwen3_32b-full-long-b4", nightly(1), 0.0, outcome="skipped")
    skipped.message = "needs 2 GPUs"
    path = tmp_path / "junit.xml"
    cut = Unjudged(
        "sft_hf-qwen3_8b-qlora-short-b4", INTERRUPTED, "interrupted in shard 2/4 with 2 finished run(s)"
    )
    never = Unjudged("rl_trl-qwen2_5_3b-full-fixed-b16-p128-c64-g8", NOT_RUN, "not run in any shard")
    path.write_text(junit_xml([passed, failed, skipped], "trainperf.h100", [cut, never]))
    assert_valid_junit(path)
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    # Every case of the selection counts: the cut and the never-run ones as skips saying why.
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "1", "3")
    by_name = {c.get("name"): c.find("skipped") for c in suite.iter("testcase")}
    assert (
        by_name[cut.case_id] is not None and by_name[cut.case_id].get("message") == f"interrupted: {cut.why}"
    )
    assert suite.get("time") == "151.750" and suite.get("hostname") == "runner-a"
    assert suite.get("timestamp") == "2026-01-02T01:57:58+00:00"  # the first case: 121.75 s before 02:00
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["sft_hf-qwen3_8b-lora-maxlen-b4"].get("time") == "121.750"
    assert cases["sft_hf-qwen3_8b-lora-short-b4"].find("failure") is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["sft_hf-qwen3_8b-lora-short-b4/trainperf_verdict"] == "regressed"
    system_out = cases["sft_hf-qwen3_8b-lora-maxlen-b4"].find("system-out")
    assert system_out is not None and "trainperf_peak_allocated_gib=21.5\n" in (system_out.text or "")


def test_the_schema_refuses_properties_inside_a_test_case(tmp_path: Path) -> None:
    """What pytest wrote for a test's user properties before, and why they moved."""
    import xmlschema

    path = tmp_path / "old.xml"
    path.write_text(
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0"><testcase name="c">'
        '<properties><property name="trainperf_verdict" value="pass"/></properties>'
        "</testcase></testsuite></testsuites>"
    )
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        xmlschema.XMLSchema(str(SCHEMA)).validate(str(path))
