"""Load run folders into the results store, idempotently: ingesting a run twice adds nothing.

Three shapes of folder are runs: a pytest run folder (``run.json`` or ``run.gw*.json`` beside
``results/*.json``; a cliff search is one too), a fidelity run (``fidelity.json``: each fresh
child is stored as a result of the case, labelled with its role, planted ones never accepted),
and a folder of result files copied out of a run (``*.json`` with a trainperf result schema).
A folder that is none of these is searched below for runs; with none found, one line says so.
Each folder is ingested on its own: one that is not a run, or whose record cannot be read, is
reported with the reason and the others go on; a run that adds nothing says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.errors import TrainperfError
from trainperf.families import family_of
from trainperf.fingerprint_record import Fingerprint
from trainperf.ground.folder import RunFolder
from trainperf.measure.measurement import measure_run, run_metrics
from trainperf.measure.nvml import read_samples
from trainperf.paths import BENCHMARK_FILE, CASES_DIR, TRACES_DIR
from trainperf.result import SCHEMA_VERSION, CaseResult
from trainperf.store.interface import HistoryStore, StoreBusy
from trainperf.store.records import CaseItem, RunInfo, run_key, runner_label
from trainperf.stored_verdict import StoredVerdict
from trainperf.workloads.protocol import SAMPLES_FILE, SPEC_FILE, read_child_result

FIDELITY_STATE = "fidelity.json"
# Folders inside a run that hold per-child files, never runs of their own.
NOT_RUNS = {CASES_DIR, TRACES_DIR, "logs", "__pycache__"}
BARE_LABEL = "bare"
"""A fidelity child that ran the bare loop without the harness: a different workload, stored apart."""


@dataclass(slots=True)
class IngestReport:
    runs_seen: int = 0
    cases_added: int = 0
    cases_known: int = 0
    skipped: list[str] = field(default_factory=list)
    deferred: list[Path] = field(default_factory=list)
    """Runs whose write found the store locked too long: their folders stay for a later ingest."""
    failed: list[str] = field(default_factory=list)
    """Folders not ingested, each with why (not a run, an unreadable run record)."""
    empty: list[str] = field(default_factory=list)
    """Runs read whole that hold no case result, each with why."""

    def line(self) -> str:
        text = (
            f"{self.runs_seen} run(s): {self.cases_added} case result(s) added, "
            f"{self.cases_known} already stored"
        )
        text += f"; {len(self.empty)} run(s) with no case result" if self.empty else ""
        text += f"; {len(self.skipped)} file(s) skipped" if self.skipped else ""
        text += f"; {len(self.failed)} folder(s) not ingested" if self.failed else ""
        return text + (
            f"; {len(self.deferred)} run(s) left for a later ingest (store locked)" if self.deferred else ""
        )

    @property
    def complete(self) -> bool:
        """Every folder named was read and stored (a run with no case result is not a failure)."""
        return not (self.failed or self.deferred or self.skipped)


def find_runs(path: Path) -> list[Path]:
    """The run folders at or below ``path``; one line when there is none."""
    if not path.is_dir():
        raise TrainperfError(
            f"{path} is not a folder: name a run folder (reports/<run>/) or a folder of them"
        )
    found = sorted(_walk(path))
    if not found:
        raise TrainperfError(
            f"{path} is not a run folder (no run.json, fidelity.json or result files) and holds none: "
            "name a folder under reports/"
        )
    return found


def _walk(path: Path) -> Iterator[Path]:
    if _is_run(path):
        yield path
        return
    for child in sorted(p for p in path.iterdir() if p.is_dir() and p.name not in NOT_RUNS):
        yield from _walk(child)


def _is_run(path: Path) -> bool:
    folder = RunFolder(path)
    if (path / FIDELITY_STATE).is_file() or folder.session_files():
        return True
    return any(_looks_like_result(p) for p in _candidates(folder.results_dir)[:1] + _candidates(path)[:1])


def _candidates(folder: Path) -> list[Path]:
    """The JSON files of a folder that may be case results (not run records, fidelity state or exports)."""
    if not folder.is_dir():
        return []
    skip = (FIDELITY_STATE, BENCHMARK_FILE, "fidelity-report.json")
    return [p for p in sorted(folder.glob("*.json")) if not p.name.startswith("run") and p.name not in skip]


def _looks_like_result(path: Path) -> bool:
    head = path.read_text(errors="replace")[:65536]
    return '"case_id"' in head and '"gpu_class"' in head


def _load_results(
    files: Sequence[Path], skipped: list[str], *, only_results: bool = False
) -> list[tuple[Path, CaseResult]]:
    """Each file parsed once; a JSON file that is not a case result is passed over (reported where the
    folder holds case results only: a run folder's ``results/``), a damaged one reported."""
    loaded = []
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            skipped.append(f"{path}: not readable JSON ({exc})")
            continue
        if not (isinstance(data, dict) and "case_id" in data and "schema_version" in data):
            if only_results:
                skipped.append(f"{path}: not a case result (a JSON {type(data).__name__}, no case_id)")
            continue
        try:
            loaded.append((path, CaseResult.from_dict(data, origin=str(path))))
        except (TrainperfError, TypeError, ValueError) as exc:
            skipped.append(f"{path}: {exc}")
    return loaded


def ingest(
    store: HistoryStore,
    paths: Sequence[Path],
    *,
    runner: str | None = None,
    say: Callable[[str], None] = print,
    warn: Callable[[str], None] | None = None,
) -> IngestReport:
    """Ingest every run at or below ``paths``, each run in its own transaction; a folder that
    cannot be ingested is reported with why (through ``warn``, default ``say``), and the rest go on."""
    report = IngestReport()
    for path in paths:
        try:
            found = find_runs(path)
        except TrainperfError as exc:
            report.failed.append(str(exc))
            (warn or say)(f"not ingested: {exc}")
            continue
        for run_dir in found:
            _ingest_one(store, run_dir, runner, report, say, warn or say)
    return report


def _ingest_one(
    store: HistoryStore,
    run_dir: Path,
    runner: str | None,
    report: IngestReport,
    say: Callable[[str], None],
    warn: Callable[[str], None],
) -> None:
    skipped_before = len(report.skipped)
    try:
        if (run_dir / FIDELITY_STATE).is_file():
            added, known = _ingest_fidelity(store, run_dir, runner)
        else:
            added, known = _ingest_results(store, run_dir, runner, report.skipped)
    except StoreBusy as busy:
        report.runs_seen += 1
        report.deferred.append(run_dir)
        warn(f"{run_dir}: not stored, {busy}; it stays on disk: `trainperf ingest {run_dir}` later")
        return
    except TrainperfError as exc:
        report.failed.append(str(exc))
        warn(f"not ingested: {exc}")
        return
    report.runs_seen += 1
    report.cases_added += added
    report.cases_known += known
    why = "" if added or known else _why_nothing(run_dir, len(report.skipped) - skipped_before)
    if why:
        report.empty.append(f"{run_dir}: {why}")
    say(f"{run_dir}: {added} added, {known} already stored" + (f" ({why})" if why else ""))


def _why_nothing(run_dir: Path, unreadable: int) -> str:
    """Why a run folder gave no case result to store."""
    if unreadable:
        return f"{unreadable} result file(s) could not be read (listed below)"
    folder = RunFolder(run_dir)
    if (run_dir / FIDELITY_STATE).is_file():
        return "no fidelity child ended ok"
    if folder.session_files() and not _candidates(folder.results_dir):
        return (
            f"no {folder.results_dir.name}/*.json: the run recorded no case; "
            "it was interrupted before its first case ended, or selected none"
        )
    return "its JSON files are not case results"


def sessions_of(run_dir: Path) -> list[dict[str, Any]]:
    """The session records of ``run.json`` (and of each xdist worker's ``run.gwN.json``), oldest first."""
    sessions: list[dict[str, Any]] = []
    for path in RunFolder(run_dir).session_files():
        try:
            sessions.extend(json.loads(path.read_text()).get("sessions", []))
        except (OSError, ValueError, AttributeError) as exc:
            raise TrainperfError(
                f"{path} is not a readable run record ({exc}); fix or delete it and ingest again"
            ) from exc
    return sorted(sessions, key=lambda s: str(s.get("started", "")))


def run_info(
    run_dir: Path, results: Sequence[CaseResult], runner: str | None, kind: str | None = None
) -> RunInfo:
    """What the store keeps of a run folder: its earliest recorded session, or (a folder of copied results)
    the results."""
    sessions = sessions_of(run_dir)
    if sessions:
        first = sessions[0]
        fingerprint = dict(first.get("fingerprint") or {})
        started, argv, gpu_class = str(first.get("started")), first.get("argv"), first.get("gpu_class")
        key = run_key(started, fingerprint)
    else:
        fingerprint = results[0].fingerprint.to_dict() if results else {}
        started = min(r.created for r in results) if results else ""
        argv, gpu_class = None, results[0].gpu_class if results else None
        origin = results[0].source.split(":", 1)[0].strip() if results else ""
        key = run_key(
            started if not origin else origin,
            fingerprint,
            "" if origin else ",".join(sorted(r.case_id for r in results)),
        )
    if results:
        last = results[-1].fingerprint.to_dict()
        fingerprint.update({k: v for k, v in last.items() if k not in fingerprint})
    ended = max([r.created for r in results] + [started]) if results else started
    guessed = "cliff" if any(r.cliff for r in results) else "pytest"
    return RunInfo(
        run_key=key,
        kind=kind or guessed,
        started=started,
        ended=ended,
        fingerprint=fingerprint,
        runner=runner_label(fingerprint, runner),
        gpu_class=gpu_class,
        run_dir=str(run_dir.resolve()),
        argv=argv if isinstance(argv, list) else None,
    )


def _ingest_results(
    store: HistoryStore, run_dir: Path, runner: str | None, skipped: list[str]
) -> tuple[int, int]:
    run = RunFolder(run_dir)
    files = _candidates(run.results_dir if run.is_run() else run_dir)
    if sessions_of(run_dir):
        info = run_info(run_dir, [], runner)
        if store.stored_case_count(info.run_key) >= len(files) > 0:
            return 0, len(files)  # every result of this run is stored: nothing to parse
    results = sorted(
        _load_results(files, skipped, only_results=run.is_run()), key=lambda item: item[1].created
    )
    added = 0
    for group in _run_groups(run_dir, results):
        info = run_info(run_dir, [r for _, r in group], runner)
        added += store.write_cases(
            info, [CaseItem(r, str(p.resolve()), seq=i) for i, (p, r) in enumerate(group)]
        )
    return added, len(results) - added


def _run_groups(run_dir: Path, results: list[tuple[Path, CaseResult]]) -> list[list[tuple[Path, CaseResult]]]:
    """A run folder is one run. Copied results (a baselines folder) came from several runs: a
    baseline names its run folder in ``source`` (``<run>: <command>``), so they are grouped by it."""
    if not results or RunFolder(run_dir).session_files():
        return [results] if results else []
    groups: dict[str, list[tuple[Path, CaseResult]]] = {}
    for path, result in results:
        groups.setdefault(result.source.split(":", 1)[0].strip(), []).append((path, result))
    return list(groups.values())


def _ingest_fidelity(store: HistoryStore, run_dir: Path, runner: str | None) -> tuple[int, int]:
    """Each fresh child of a fidelity run as one result of its case, in launch order."""
    try:
        state = json.loads((run_dir / FIDELITY_STATE).read_text())
        children = [c for c in state["children"] if c.get("dir")]
        spec = json.loads((run_dir / children[0]["dir"] / SPEC_FILE).read_text()) if children else {}
        case = Case.from_dict(spec["case"]) if spec else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TrainperfError(
            f"{run_dir / FIDELITY_STATE} is not a readable fidelity record ({exc}); "
            "re-run `trainperf fidelity`"
        ) from exc
    sessions = sessions_of(run_dir)
    info = run_info(run_dir, [], runner, kind="fidelity")
    idle_mem_b = sessions[0].get("idle_mem_b") if sessions else None
    items = []
    for seq, entry in enumerate(children):
        result = _fidelity_child(run_dir, entry, case, info, idle_mem_b)
        if result is None:
            continue
        if entry["label"] == BARE_LABEL:
            result.case_id = f"{result.case_id}@{BARE_LABEL}"
        variant = _series_variant(entry["label"] if entry["label"] != BARE_LABEL else "")
        items.append(CaseItem(result, str((run_dir / entry["dir"]).resolve()), variant=variant, seq=seq))
    added = store.write_cases(info, items)
    return added, len(items) - added


def _series_variant(label: str) -> str:
    """The A/A children are the case as it runs every night (the series); planted ones stand apart."""
    return "" if label in ("", "A", "A2") else label


def _fidelity_child(
    run_dir: Path, entry: dict[str, Any], case: Case | None, info: RunInfo, idle_mem_b: int | None
) -> CaseResult | None:
    if case is None or entry.get("outcome") != Outcome.OK:
        return None
    folder = run_dir / entry["dir"]
    child = read_child_result(folder)
    samples = read_samples(folder / SAMPLES_FILE) if (folder / SAMPLES_FILE).is_file() else []
    measured = measure_run(
        child, samples, samples_per_step=family_of(case.family).samples_per_step(case), idle_mem_b=idle_mem_b
    )
    fingerprint = Fingerprint.from_dict({**info.fingerprint, **(child.get("versions") or {})})
    planted = float(entry["label"].removeprefix("plant")) if entry["label"].startswith("plant") else 0.0
    return CaseResult(
        case_id=case.id,
        case=CaseRecord.of(case),
        gpu_class=info.gpu_class or "",
        outcome=Outcome.OK.value,
        metrics=run_metrics(measured),
        effective_config=EffectiveConfig.from_dict(child.get("effective_config")),
        fingerprint=fingerprint,
        planted_slowdown=planted,
        created=_child_time(child, info.started),
        verdict=StoredVerdict(reason=f"fidelity child {entry['label']} ({entry['dir']})"),
        schema_version=SCHEMA_VERSION,
    )


def _child_time(child: dict[str, Any], fallback: str) -> str:
    from datetime import datetime, timezone

    start = child.get("child_start")
    if start is None:
        return fallback
    return datetime.fromtimestamp(float(start), tz=timezone.utc).isoformat(timespec="seconds")
