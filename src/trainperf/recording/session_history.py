"""A session's results history: the store opened once, each case judged against the runner's own
history where asked, and each finished case recorded as it ends.

The store never decides a run's fate: when it cannot be reached, cannot be written or is not
installed, the run goes on judged against the class's baseline files, its run folder is complete,
and one line says how to load that folder later (``trainperf ingest``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainperf.errors import TrainperfError
from trainperf.ground.settings import Settings
from trainperf.result import CaseResult
from trainperf.store.baselines import describe_file_baseline
from trainperf.store.url import store_off

if TYPE_CHECKING:
    from trainperf.store.interface import HistoryStore
    from trainperf.store.records import RunInfo


@dataclass(slots=True)
class SessionHistory:
    """The store of one pytest session (or ``trainperf`` command) and the run it writes."""

    settings: Settings
    """The session's settings: --perf-store, --perf-baseline, --perf-runner, --perf-history-runs."""
    run_dir: Path
    store: HistoryStore | None = None
    run: RunInfo | None = None
    problem: str | None = None
    """Why nothing is read from or written to the store (one line), None while it works."""
    told: bool = False
    recorded: int = 0
    lines: list[str] = field(default_factory=list)

    @property
    def runner(self) -> str:
        return self.run.runner if self.run else (self.settings.runner or "")

    def baseline(
        self, case_id: str, gpu_class: str, class_baseline: CaseResult | None
    ) -> tuple[CaseResult | None, str]:
        """What this case is judged against, and a line naming it."""
        from trainperf.store.history_baseline import choose_baseline

        mode = self.settings.baseline
        if self.store is None or self.run is None:
            source = describe_file_baseline(class_baseline)
            why = f"; history not read: {self.problem}" if self.problem and mode != "file" else ""
            return class_baseline, source + why
        try:
            return choose_baseline(
                mode, self.store, case_id, self.run.runner, class_baseline,
                n=self.settings.history_runs, gpu_class=gpu_class, fingerprint=self.run.fingerprint,
            )  # fmt: skip
        except TrainperfError as exc:
            self._lost(str(exc))
            return class_baseline, f"the class's baseline file; history not read: {exc}"

    def record(self, result: CaseResult, result_path: Path | None) -> None:
        """Write a finished case; on failure, say once how to load the run folder later."""
        if self.store is None or self.run is None:
            return
        try:
            stored = self.store.record_case(self.run, result, str(result_path) if result_path else None)
        except TrainperfError as exc:
            self._lost(str(exc))
            return
        if stored:
            self.recorded += 1
        else:  # counted only where it was written: a result already there is said as such
            self.lines.append(
                f"{result.case_id}: a result of the same key (case, creation time, host, GPU) is already in "
                "the results history; this one was not recorded again"
            )

    def _lost(self, why: str) -> None:
        self.problem = why
        if not self.told:
            self.told = True
            self.lines.append(
                f"results history not written ({why}); the run folder is complete: "
                f"trainperf ingest {self.run_dir} --store URL loads it later"
            )
        self.store = None

    def finish(self, ended: str) -> None:
        """Stamp the run's end time (a run with no case stored is not written at all)."""
        if self.store is None or self.run is None or not self.recorded:
            return
        from dataclasses import replace

        try:
            self.store.write_run(replace(self.run, ended=ended))
        except TrainperfError as exc:
            self._lost(str(exc))

    def conclude(self, ended: str) -> list[str]:
        """End the session: stamp the run's end, close the store, and the lines for the summary."""
        self.finish(ended)
        lines = list(self.lines)
        if self.store is not None and self.run is not None and self.recorded:
            from trainperf.store.interface import shown

            lines.append(
                f"trainperf: {self.recorded} case(s) recorded in the results history {shown(self.store.url)} "
                f"(runner {self.run.runner}); `trainperf history CASE` shows a case's series"
            )
        self.close()
        return lines

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


def open_history(
    settings: Settings, *, run_dir: Path, started: str, fingerprint: dict[str, Any], gpu_class: str,
    kind: str = "pytest", commit: str | None = None,
) -> SessionHistory:  # fmt: skip
    """Open the store for a session; a store that cannot be used leaves the session on its files."""
    history = SessionHistory(settings, run_dir)
    if store_off(settings.store):
        history.problem = "--perf-store off"
        return history
    from trainperf.store.interface import open_history_store, resolve_url
    from trainperf.store.records import RunInfo, run_key, runner_label

    try:
        history.store = open_history_store(resolve_url(settings.store))
    except ImportError as exc:  # the store's libraries are an install away
        history._lost(f"{exc.name} is not installed: pip install 'trainperf[store]'")
        return history
    except TrainperfError as exc:
        history._lost(str(exc))
        return history
    history.run = RunInfo(
        run_key(started, fingerprint), kind, started, fingerprint, runner_label(fingerprint, settings.runner),
        gpu_class, commit=commit, run_dir=str(run_dir), argv=list(sys.argv),
    )  # fmt: skip
    return history
