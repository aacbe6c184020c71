"""--junitxml under pytest's default xunit2 family: no warning per case, the verdict in the XML."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from trainperf.report.junit import property_recorder

CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.run.catalogue import params

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


def test_junitxml_under_xunit2_is_clean_and_carries_the_verdict(pytester: pytest.Pytester) -> None:
    """The case's child starts and skips at once (unsloth needs a CUDA GPU): a verdict, no training."""
    pytester.makepyfile(test_catalogue=CATALOGUE)
    result = pytester.runpytest_subprocess(
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
    xml = ET.parse(pytester.path / "junit.xml").getroot()
    properties = {p.get("name"): p.get("value") for p in xml.iter("property")}
    assert properties.get("trainperf_outcome") == "skipped"
    assert properties.get("trainperf_verdict") == "not-compared"
