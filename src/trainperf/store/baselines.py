"""The baseline store: ``<root>/<gpu-class>/<case-id>.json``, one result file per case."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.redact import redact_text
from trainperf.result import CaseResult
from trainperf.store.results import load_result, save_result
from trainperf.stored_verdict import StoredVerdict


@dataclass(frozen=True, slots=True)
class BaselineStore:
    root: Path

    def path(self, gpu_class: str, case_id: str) -> Path:
        return self.root / gpu_class / f"{case_id}.json"

    def load(self, gpu_class: str, case_id: str) -> CaseResult | None:
        """The stored baseline, None when there is none; a corrupt file raises one line."""
        path = self.path(gpu_class, case_id)
        if not path.is_file():
            return None
        baseline = load_result(path)
        if baseline.case_id != case_id or baseline.gpu_class != gpu_class:
            raise TrainperfError(
                f"{path} holds case {baseline.case_id!r} of class {baseline.gpu_class!r}; "
                "move it to the right file or re-create it with --perf-update-baselines"
            )
        return baseline

    def save(self, result: CaseResult, source: str) -> Path:
        if result.emulated:
            raise TrainperfError(
                f"{result.case_id} was measured under --perf-emulate {result.emulated}: emulated results are "
                "never stored as a class's measured baseline"
            )
        if result.planted_slowdown or result.planted:
            raise TrainperfError(
                f"{result.case_id} ran with a planted regression: it cannot become a baseline"
            )
        # The source names the command line that measured it; a baseline file is committed and shared.
        stored = dataclasses.replace(result, source=redact_text(source), verdict=StoredVerdict())
        path = self.path(result.gpu_class, result.case_id)
        save_result(path, stored)
        return path

    def case_ids(self, gpu_class: str) -> list[str]:
        return sorted(p.stem for p in (self.root / gpu_class).glob("*.json"))


def describe_file_baseline(baseline: CaseResult | None) -> str:
    """How a verdict names a class's baseline file it was judged against."""
    return f"the class's baseline file ({baseline.source or 'stored'})" if baseline else "no baseline"
