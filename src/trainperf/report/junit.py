"""A case's figures as JUnit XML properties, clean under every ``junit_family``.

pytest's ``record_property`` fixture warns once per test under ``xunit2`` (pytest's default
family), yet pytest's JUnit writer puts a test's ``user_properties`` into its ``<properties>``
under every family. So the figures go onto the test's ``user_properties`` directly: the same
XML, no warning, and the xdist controller still reads them from each test's report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol
from xml.etree import ElementTree

from trainperf.result import CaseResult


class HasUserProperties(Protocol):
    """A pytest item: what its report carries beside the outcome."""

    user_properties: list[tuple[str, object]]


def property_recorder(item: HasUserProperties) -> Callable[[str, Any], None]:
    """``record(name, value)``, as ``record_property`` is called, onto ``item``'s properties."""

    def record(name: str, value: Any) -> None:
        item.user_properties.append((name, value))

    return record


def junit_xml(results: Sequence[CaseResult], suite: str) -> str:
    """A run's cases as one JUnit test suite (what pytest's ``--junitxml`` writes for a session):
    a failing verdict is a failure, a skipped case a skip, with the case's figures as properties."""
    from trainperf.report.export import key_figures
    from trainperf.report.table import failure_detail

    cases = ElementTree.Element("testsuite", name=suite, tests=str(len(results)))
    failures = skipped = 0
    for result in results:
        case = ElementTree.SubElement(cases, "testcase", classname=suite, name=result.case_id)
        properties = ElementTree.SubElement(case, "properties")
        for name, value in key_figures(result).items():
            ElementTree.SubElement(properties, "property", name=f"trainperf_{name}", value=str(value))
        if result.outcome == "skipped":
            skipped += 1
            ElementTree.SubElement(case, "skipped", message=result.message or "skipped")
        elif result.verdict.get("fails"):
            failures += 1
            failure = ElementTree.SubElement(case, "failure", message=str(result.verdict.get("verdict")))
            failure.text = "\n".join(failure_detail(result))
    cases.set("failures", str(failures))
    cases.set("skipped", str(skipped))
    cases.set("errors", "0")
    suites = ElementTree.Element("testsuites")
    suites.append(cases)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
