"""A run folder (``reports/<stamp>-<class>``): the one owner of its layout and its loaders.

run.json, run.<worker>.json   the session record (argv, settings, fingerprint), one per xdist worker
results/<case>.json           each finished case's result, written atomically as it ends
results/<cliff>.probes.jsonl  a cliff search's probes, one line each, for --perf-resume
results.jsonl                 one line per finished case, flushed: nothing is lost on a crash
cases/<case>/r<n>/            each fresh child's spec, steps, samples, logs and result
cases/<case>/finished-runs.json   the runs of a case that has no result yet, for --perf-resume
traces/<case>/                each case's profiler traces under --perf-trace
interrupted.json              the case a Ctrl-C or time limit cut (``launch.interruption``)
summary.md, index.html, benchmark.json   the reports (``report.build``)

The names themselves live in ``trainperf.paths`` (and a child's files in ``workloads.protocol``),
where the layers below this one can name them too; nothing else spells them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.jsonio import append_jsonl
from trainperf.measure.nvml import Sample, read_samples
from trainperf.paths import (
    BENCHMARK_FILE,
    CASES_DIR,
    FINISHED_RUNS_FILE,
    INTERRUPTED_FILE,
    PAGE_FILE,
    RESULTS_DIR,
    RESULTS_INDEX_FILE,
    SESSION_FILE,
    SESSION_FILES_GLOB,
    SUMMARY_FILE,
    TRACES_DIR,
)
from trainperf.redact import redacted
from trainperf.result import CaseResult, Unjudged
from trainperf.store.results import load_result, save_result
from trainperf.workloads.protocol import SAMPLES_FILE, SPEC_FILE, STEPS_FILE, read_steps

MERGED_KEY = "merged"
MERGED_UNJUDGED_KEY = "unjudged"
"""A merged night's record in its ``run.json``, and in it the cases no shard judged (``Unjudged``)."""
SESSION_ENDED = "ended"
SESSION_ELAPSED = "elapsed_s"
SESSION_INTERRUPTED = "interrupted"
"""How a session ended, in its record (``RunFolder.update_session``): when, after how long, and whether a
Ctrl-C or a time limit's SIGINT stopped it."""
SESSION_SELECTED = "selected"
"""The cases a session selected to run, in its record from the start: a page counts those it never reached."""
SESSION_UNPLACED = "unplaced"
"""The cases a session skipped before any ran, each with why (more GPUs than it sees), in its record
from the start: its page and a merge list them as skipped, with the reason."""


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
        return self.results_dir.is_dir()

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def results_dir(self) -> Path:
        return self.root / RESULTS_DIR

    def result_path(self, result_id: str) -> Path:
        return self.results_dir / f"{result_id}.json"

    def probes_path(self, cliff_id: str) -> Path:
        return self.results_dir / f"{cliff_id}.probes.jsonl"

    def session_path(self, worker: str | None = None) -> Path:
        return self.root / (f"run.{worker}.json" if worker else SESSION_FILE)

    def session_files(self) -> list[Path]:
        """``run.json`` and each xdist worker's ``run.<worker>.json``, by name."""
        return sorted(self.root.glob(SESSION_FILES_GLOB))

    def session_records(self, worker: str | None = None) -> list[dict[str, Any]]:
        """The sessions recorded in ``run.json`` (or a worker's own file), oldest first; none when
        it is absent."""
        path = self.session_path(worker)
        if not path.is_file():
            return []
        sessions: list[dict[str, Any]] = json.loads(path.read_text()).get("sessions") or []
        return sessions

    def record_session(self, record: dict[str, Any], worker: str | None = None) -> list[dict[str, Any]]:
        """Append a session to its record file; every session it now holds, this one last. The record
        is written as ``trainperf.redact`` shows it: argv and settings (a store URL from the command line
        or TRAINPERF_STORE) never keep a password, and nothing built from this file can."""
        sessions = [*self.session_records(worker), redacted(record)]
        self._write_sessions(sessions, worker)
        return sessions

    def _write_sessions(self, sessions: list[dict[str, Any]], worker: str | None) -> None:
        self.session_path(worker).write_text(json.dumps({"sessions": sessions}, indent=1, default=str))

    def merged_unjudged(self) -> list[Unjudged]:
        """The cases a merged night's shards did not judge, as ``trainperf merge`` recorded them in its
        ``run.json`` (none for a run that is not a merge, or one merged by an older trainperf)."""
        try:
            merged = json.loads(self.session_path().read_text()).get(MERGED_KEY) or {}
        except (OSError, ValueError, AttributeError):
            return []
        found = [Unjudged.from_dict(raw) for raw in merged.get(MERGED_UNJUDGED_KEY) or []]
        return [case for case in found if case is not None]

    def update_session(self, fields: dict[str, Any], worker: str | None = None) -> None:
        """Add to the latest session's record: the cases it selected (``SESSION_SELECTED``), how it ended
        (``SESSION_ENDED``...), from which a page tells the cases a stopped session never reached."""
        sessions = self.session_records(worker)
        if sessions:
            sessions[-1].update(fields)
            self._write_sessions(sessions, worker)

    @property
    def interruption_path(self) -> Path:
        return self.root / INTERRUPTED_FILE

    @property
    def summary_path(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def page_path(self) -> Path:
        return self.root / PAGE_FILE

    @property
    def benchmark_path(self) -> Path:
        return self.root / BENCHMARK_FILE

    def trace_dir(self, case_id: str) -> Path:
        """Where a case's children write their traces (one TensorBoard run folder per case)."""
        return self.root / TRACES_DIR / case_id

    def case_dir(self, case_id: str) -> Path:
        return self.root / CASES_DIR / case_id

    def finished_runs_path(self, case_id: str) -> Path:
        return self.case_dir(case_id) / FINISHED_RUNS_FILE

    def finished_run_count(self, case_id: str) -> int:
        """How many runs of a case without a result are kept (``run.finished_runs``); 0 when none
        or the record is unreadable."""
        try:
            return int(json.loads(self.finished_runs_path(case_id).read_text()).get("runs") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            return 0

    def new_child_dir(self, case_id: str, repeat: int) -> Path:
        """``cases/<case>/r<repeat+1>``, or the next free one when the case is probed again (a
        cliff's confirmation): a child's files are never overwritten."""
        out_dir = self.case_dir(case_id) / f"r{repeat + 1}"
        while (out_dir / SPEC_FILE).exists():
            out_dir = out_dir.with_name(f"r{int(out_dir.name[1:]) + 1}")
        out_dir.mkdir(parents=True, exist_ok=True)
        return out_dir

    def child_dir(self, relative: str) -> Path:
        """A child's folder from its path in the run (a result's ``runs[].dir``)."""
        return self.root / relative

    def probe_dirs(self, case_id: str) -> list[Path]:
        """The children of one (probe) case id, as a cliff search left them, by folder name."""
        return [sub for sub in sorted(self.case_dir(case_id).glob("r*")) if sub.is_dir()]

    @staticmethod
    def child_steps(child: Path) -> list[dict[str, Any]]:
        """A child's step records (``steps.jsonl``)."""
        return read_steps(child / STEPS_FILE)

    @staticmethod
    def child_samples(child: Path) -> list[Sample]:
        """A child's NVML samples; none when it took none (a CPU case)."""
        return read_samples(child / SAMPLES_FILE) if (child / SAMPLES_FILE).is_file() else []

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def store(self, result: CaseResult, verdict: str) -> None:
        """Write a finished case's result and its line in the index, before the next case starts."""
        save_result(self.result_path(result.case_id), result)
        record: dict[str, Any] = {"case_id": result.case_id, "outcome": result.outcome, "verdict": verdict}
        append_jsonl(self.root / RESULTS_INDEX_FILE, record)

    def has_result(self, result_id: str) -> bool:
        return self.result_path(result_id).is_file()

    def load(self, result_id: str) -> CaseResult:
        return load_result(self.result_path(result_id))

    def results(self) -> list[CaseResult]:
        """Every case result, by file name (case id)."""
        return [load_result(path) for path in sorted(self.results_dir.glob("*.json"))]

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
                f"{folder} is neither a run folder (reports/<run>) nor a baselines class folder "
                "(baselines/<class>)"
            )
    return results
