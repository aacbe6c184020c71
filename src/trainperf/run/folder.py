"""A run folder (``reports/<stamp>-<class>``): the one owner of its layout and its loaders.

run.json, run.<worker>.json   the session record (argv, settings, fingerprint), one per xdist worker
results/<case>.json           each finished case's result, written atomically as it ends
results/<cliff>.probes.jsonl  a cliff search's probes, one line each, for --perf-resume
results.jsonl                 one line per finished case, flushed: nothing is lost on a crash
cases/<case>/r<n>/            each fresh child's spec, steps, samples, logs and result
interrupted.json              the case a Ctrl-C or time limit cut (``run.interruption``)
summary.md, index.html, benchmark.json   the reports (``report.build``)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.jsonio import append_jsonl
from trainperf.result import CaseResult
from trainperf.store.results import load_result, save_result
from trainperf.workloads.protocol import SPEC_FILE

RESULTS_DIR = "results"
CASES_DIR = "cases"
INDEX_FILE = "results.jsonl"
SESSION_FILE = "run.json"


@dataclass(frozen=True, slots=True)
class RunFolder:
    root: Path

    @classmethod
    def open(cls, path: Path) -> RunFolder:
        """An existing run folder; anything else is one line naming what to give."""
        folder = cls(path)
        if not folder.is_run():
            raise TrainperfError(f"{path} is not a run folder (no {RESULTS_DIR}/): give reports/<run>")
        return folder

    def is_run(self) -> bool:
        return (self.root / RESULTS_DIR).is_dir()

    @property
    def name(self) -> str:
        return self.root.name

    def result_path(self, result_id: str) -> Path:
        return self.root / RESULTS_DIR / f"{result_id}.json"

    def probes_path(self, cliff_id: str) -> Path:
        return self.root / RESULTS_DIR / f"{cliff_id}.probes.jsonl"

    def session_path(self, worker: str | None = None) -> Path:
        return self.root / (f"run.{worker}.json" if worker else SESSION_FILE)

    def case_dir(self, case_id: str) -> Path:
        return self.root / CASES_DIR / case_id

    def new_child_dir(self, case_id: str, repeat: int) -> Path:
        """``cases/<case>/r<repeat+1>``, or the next free one when the case is probed again (a
        cliff's confirmation): a child's files are never overwritten."""
        out_dir = self.case_dir(case_id) / f"r{repeat + 1}"
        while (out_dir / SPEC_FILE).exists():
            out_dir = out_dir.with_name(f"r{int(out_dir.name[1:]) + 1}")
        out_dir.mkdir(parents=True, exist_ok=True)
        return out_dir

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def store(self, result: CaseResult, verdict: str) -> None:
        """Write a finished case's result and its line in the index, before the next case starts."""
        save_result(self.result_path(result.case_id), result)
        record: dict[str, Any] = {"case_id": result.case_id, "outcome": result.outcome, "verdict": verdict}
        append_jsonl(self.root / INDEX_FILE, record)

    def has_result(self, result_id: str) -> bool:
        return self.result_path(result_id).is_file()

    def load(self, result_id: str) -> CaseResult:
        return load_result(self.result_path(result_id))

    def results(self) -> list[CaseResult]:
        """Every case result, by file name (case id)."""
        return [load_result(path) for path in sorted((self.root / RESULTS_DIR).glob("*.json"))]

    def results_by_finish(self) -> list[CaseResult]:
        """Every case result in the order the cases finished (xdist workers write concurrently)."""
        return sorted(self.results(), key=lambda result: (result.created, result.case_id))


def load_results(folders: list[Path]) -> list[CaseResult]:
    """The results of run folders (reports/<run>) and baselines class folders (baselines/<class>)."""
    results: list[CaseResult] = []
    for folder in folders:
        if RunFolder(folder).is_run():
            results += RunFolder(folder).results()
        elif folder.is_dir() and any(folder.glob("*.json")):
            results += [load_result(path) for path in sorted(folder.glob("*.json"))]
        else:
            raise TrainperfError(
                f"{folder} is neither a run folder (reports/<run>) nor a baselines class folder (baselines/<class>)"
            )
    return results
