"""What the case runner offers the work built on one case's runs: the OOM-cliff search
(``run.cliff``), the diagnosis of a confirmed regression (``run.diagnosis``) and the record of a
case the budget leaves out (``run.session``). They take this interface, not ``CaseRunner``, so
the runner can call them without their importing it back, and a test can hand them a stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from trainperf.case import Case
from trainperf.families.envs import Interpreter
from trainperf.judge.compare import CaseVerdict
from trainperf.launch.launcher import ChildRun
from trainperf.result import CaseResult
from trainperf.run.context import RunContext
from trainperf.run.step_count import StepCount


@dataclass(slots=True)
class CaseReport:
    """A case's end as the session keeps it: the result, its verdict, the notes beside it."""

    case: Case
    result: CaseResult
    verdict: CaseVerdict
    baseline_written: Path | None = None
    notes: list[str] = field(default_factory=list)


class RunnerPort(Protocol):
    """Running, judging and keeping a case's result, one member per thing its users ask for."""

    @property
    def ctx(self) -> RunContext:
        """The session's facts: its settings, run folder, GPU class and where progress is said."""

    def baseline_of(
        self, result_id: str, *, from_history: bool = True, family: str | None = None
    ) -> tuple[CaseResult | None, str]:
        """What ``result_id`` is judged against, and a line naming it."""

    def new_result(self, case: Case) -> CaseResult:
        """An empty result of ``case`` stamped with the session's class and fingerprint."""

    def interpreter(self, case: Case) -> Interpreter | None:
        """The interpreter of the case's environment; None when it is missing."""

    def rejection(self, case: Case, interpreter: Interpreter | None) -> str | None:
        """Why pre-flight refuses ``case``, or None."""

    def run_probe(self, case: Case, steps: int, settled_by: str) -> CaseResult:
        """One fresh child of ``case`` as a probe: a result of its own, never pooled with others;
        an interruption of it is settled when ``settled_by`` (the search's result) arrives."""

    def run_profiled(
        self, case: Case, steps: StepCount, result: CaseResult, interpreter: Interpreter
    ) -> ChildRun:
        """One more fresh child, profiled over its last steps, numbered after ``result``'s runs but
        never pooled into it."""

    def judge(self, case: Case, result: CaseResult, baseline: CaseResult | None) -> CaseVerdict:
        """The verdict of ``result`` against ``baseline``."""

    def keep(self, result: CaseResult, verdict: CaseVerdict) -> None:
        """The finished result into the run folder, then into the results history."""

    def conclude(self, report: CaseReport) -> CaseReport:
        """The report, with the baseline written where the session asked for it."""
