"""A case's report made the pytest test's outcome: its figures as JUnit properties, then a skip,
a failure naming why, or a pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from trainperf.case import Outcome
from trainperf.report.export import key_figures
from trainperf.report.table import failure_detail
from trainperf.run.runner_port import CaseReport
from trainperf.run.session import BASELINE_WRITTEN_PROPERTY


class CaseOutcome:
    """Called with each case's report: records its key figures (and any baseline it wrote) with
    ``record_property``, then skips or fails the test as the verdict says."""

    def __init__(self, record_property: Callable[[str, Any], None] | None) -> None:
        self.record_property = record_property

    def __call__(self, report: CaseReport) -> CaseReport:
        record = self.record_property
        if record is not None:
            for name, value in key_figures(report.result).items():
                record(f"trainperf_{name}", value)
            if report.baseline_written:
                record(BASELINE_WRITTEN_PROPERTY, f"{report.result.case_id}={report.baseline_written}")
        if report.result.outcome == Outcome.SKIPPED.value:
            pytest.skip(report.result.message or "skipped")
        if report.verdict.fails:
            pytest.fail("\n".join(failure_detail(report.result)), pytrace=False)
        return report
