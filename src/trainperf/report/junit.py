"""A case's figures in JUnit XML that the common schema accepts (Jenkins xUnit's junit-10.xsd).

That schema has no ``<properties>`` inside a ``<testcase>``, which is where pytest's JUnit writer
puts a test's ``user_properties``. So each case's figures travel as user properties (the xdist
controller reads them from each worker's test report), and where the JUnit XML is written they
are taken off the report before pytest writes the test case, and written instead
- as the test case's ``<system-out>`` (``name=value`` lines: Jenkins, GitLab and GitHub test
  reporters show it beside the test), and
- as properties of the test suite, named ``<test name>/<figure>`` (read by tools that collect
  suite properties).
``trainperf merge`` writes the same shape for a merged run, with time, timestamp and hostname.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol
from xml.etree import ElementTree

import pytest

from trainperf.case import Outcome
from trainperf.result import CaseResult, Unjudged

FIGURE_PREFIX = "trainperf_"


class HasUserProperties(Protocol):
    """A pytest item: what its report carries beside the outcome."""

    user_properties: list[tuple[str, object]]


def property_recorder(item: HasUserProperties) -> Callable[[str, Any], None]:
    """``record(name, value)``, as ``record_property`` is called, onto ``item``'s properties."""

    def record(name: str, value: Any) -> None:
        item.user_properties.append((name, value))

    return record


def figures_text(figures: Sequence[tuple[str, object]]) -> str:
    """One ``name=value`` line per figure: what ``<system-out>`` carries."""
    return "".join(f"{name}={value}\n" for name, value in figures)


class JunitFigures:
    """Registered where pytest writes ``--junitxml``: moves each test's trainperf figures out of
    its ``<testcase>`` properties into its ``<system-out>`` and the suite's properties."""

    def __init__(self, xml: Any) -> None:
        self.xml = xml
        """pytest's ``LogXML``: ``node_reporter(report)`` and ``add_global_property``."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        # pytest writes a test case, with its user properties, on its teardown report; the
        # earlier reports keep theirs (the controller reads baselines the workers wrote there).
        if report.when != "teardown":
            return (yield)
        ours = [(n, v) for n, v in report.user_properties if n.startswith(FIGURE_PREFIX)]
        if not ours:
            return (yield)
        kept = report.user_properties
        report.user_properties = [(n, v) for n, v in kept if not n.startswith(FIGURE_PREFIX)]
        output = ElementTree.Element("system-out")
        output.text = figures_text(ours)
        self.xml.node_reporter(report).append(output)
        test_name = report.nodeid.rsplit("::", 1)[-1]
        for name, value in ours:
            self.xml.add_global_property(f"{test_name}/{name}", value)
        try:
            return (yield)
        finally:
            report.user_properties = kept


def junit_xml(results: Sequence[CaseResult], suite: str, unjudged: Sequence[Unjudged] = ()) -> str:
    """A run's cases as one JUnit test suite, valid under junit-10.xsd: a failing verdict is a
    failure, a skipped case a skip; each case's figures in its ``<system-out>`` and, named
    ``<case>/<figure>``, in the suite's properties. A case of the selection without a result (cut,
    not run: ``unjudged``) is a skip whose message says why, so that CI counts every case."""
    from trainperf.report.export import key_figures
    from trainperf.report.table import failure_detail

    times = {r.case_id: case_seconds(r) for r in results}
    cases = ElementTree.Element(
        "testsuite",
        name=suite,
        tests=str(len(results) + len(unjudged)),
        time=f"{sum(times.values()):.3f}",
        timestamp=suite_start(results, times),
        hostname=",".join(sorted({r.fingerprint.hostname for r in results if r.fingerprint.hostname}))
        or "unknown",
    )
    properties = ElementTree.SubElement(cases, "properties")
    failures = skipped = 0
    for result in results:
        case = ElementTree.SubElement(
            cases, "testcase", classname=suite, name=result.case_id, time=f"{times[result.case_id]:.3f}"
        )
        figures = [(f"{FIGURE_PREFIX}{name}", value) for name, value in key_figures(result).items()]
        for name, value in figures:
            ElementTree.SubElement(properties, "property", name=f"{result.case_id}/{name}", value=str(value))
        if result.outcome == Outcome.SKIPPED:
            skipped += 1
            ElementTree.SubElement(case, "skipped", message=result.message or "skipped")
        elif result.verdict.fails:
            failures += 1
            failure = ElementTree.SubElement(case, "failure", message=result.verdict.verdict)
            failure.text = "\n".join(failure_detail(result))
        ElementTree.SubElement(case, "system-out").text = figures_text(figures)
    for missing in unjudged:
        case = ElementTree.SubElement(cases, "testcase", classname=suite, name=missing.case_id, time="0.000")
        ElementTree.SubElement(case, "skipped", message=f"{missing.state}: {missing.why}")
        skipped += 1
    cases.set("failures", str(failures))
    cases.set("skipped", str(skipped))
    cases.set("errors", "0")
    suites = ElementTree.Element("testsuites")
    suites.append(cases)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def case_seconds(result: CaseResult) -> float:
    """The wall time of a case's fresh runs (0 where none ran, as for a skip)."""
    return float(sum(run.wall_s or 0.0 for run in result.runs))


def suite_start(results: Sequence[CaseResult], times: dict[str, float]) -> str:
    """When the first case started (its end less its wall time), ISO 8601 as pytest writes it."""
    starts = []
    for result in results:
        try:
            ended = datetime.fromisoformat(result.created)
        except ValueError:
            continue
        starts.append(ended - timedelta(seconds=times[result.case_id]))
    return min(starts).isoformat(timespec="seconds") if starts else datetime.now().astimezone().isoformat()


def wire_junit_figures(config: pytest.Config) -> None:
    """Where this process writes ``--junitxml``, register ``JunitFigures`` on its writer (called once
    the JUnit plugin has configured: pytest configures plugins registered later first)."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is not None and not config.pluginmanager.has_plugin("trainperf-junit"):
        config.pluginmanager.register(JunitFigures(xml), "trainperf-junit")
