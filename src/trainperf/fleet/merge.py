"""``trainperf merge``: the run folders of one nightly's shards checked against each other and
copied into one run folder.

Each shard recorded in its ``run.json`` its shard (K/N), the whole split (every case of the
selection and its shard), its class and its checkout's commit. Shards of different classes,
checkouts or splits are refused in one line; a missing shard that had cases is named, and so is
a shard that wrote no result (it crashed before its first case ended).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.ground.folder import MERGED_KEY, MERGED_UNJUDGED_KEY, RunFolder
from trainperf.ground.settings import Shard, parse_shard
from trainperf.jsonio import append_jsonl, read_jsonl
from trainperf.launch.interruption import pending
from trainperf.paths import CASES_DIR, RESULTS_DIR, SESSION_FILE, portable
from trainperf.paths import RESULTS_INDEX_FILE as INDEX_FILE
from trainperf.recording.ingest import sessions_of
from trainperf.recording.session_end import INTERRUPTED_END, NO_END, NORMAL_END, session_end, unplaced_cases
from trainperf.result import INTERRUPTED, NOT_RUN, SKIPPED_AT_START, CaseResult, Unjudged, skip_cause
from trainperf.store.records import RunInfo, run_key, runner_label


@dataclass(frozen=True, slots=True)
class ShardRun:
    folder: Path
    shard: Shard
    gpu_class: str
    commit: str
    split: dict[str, int]
    """Every case of the whole selection and its shard."""
    sessions: list[dict[str, Any]]
    results: list[CaseResult]
    night: str = ""
    """``--perf-night``'s date, "" without one."""

    def cases(self) -> list[str]:
        return sorted(key for key, index in self.split.items() if index == self.shard.index)


def find_run(path: Path) -> Path | None:
    """The run folder at ``path`` or directly below it (a downloaded artifact holds reports/<run>)."""
    if not path.is_dir():
        return None
    for candidate in [path, *sorted(p for p in path.iterdir() if p.is_dir())]:
        if RunFolder(candidate).session_files():
            return candidate
    for candidate in sorted(path.glob("*/*")):
        if candidate.is_dir() and RunFolder(candidate).session_files():
            return candidate
    return None


def read_shard(run_dir: Path) -> ShardRun:
    sessions = sessions_of(run_dir)
    fleet = next((s["settings"]["fleet"] for s in sessions if (s.get("settings") or {}).get("fleet")), None)
    if not fleet or "shard" not in fleet:
        raise TrainperfError(
            f"{run_dir} was not run with --perf-shard: merge takes the run folders of one nightly's shards"
        )
    folder = RunFolder(run_dir)
    results = folder.results() if folder.is_run() else []
    first = sessions[0]
    return ShardRun(
        folder=run_dir,
        shard=parse_shard(fleet["shard"]),
        gpu_class=str(first.get("gpu_class")),
        commit=str((first.get("commit") or {}).get("id") or "unknown"),
        split={key: int(entry[0]) for key, entry in fleet["split"].items()},
        sessions=sessions,
        results=results,
        night=str((fleet.get("night") or {}).get("date") or ""),
    )


def read_shards(paths: list[Path]) -> list[ShardRun]:
    """Every given shard, checked against the others; one line for the first thing that is wrong."""
    shards: list[ShardRun] = []
    empty: list[Path] = []
    for path in paths:
        found = find_run(path)
        if found is None:
            empty.append(path)
        else:
            shards.append(read_shard(found))
    if not shards:
        raise TrainperfError(f"{_not_a_run(paths[0])}: give the shards' run folders (reports/<run>)")
    _check_same(shards)
    missing = _missing(shards)
    if empty:
        which = f"shard {', '.join(missing)} wrote nothing" if missing else "it holds no run"
        raise TrainperfError(
            f"{_not_a_run(empty[0])}: {which}, it crashed before its first case; "
            "run it again (see its job's log), then merge"
        )
    if missing:
        raise TrainperfError(
            f"shard {', '.join(missing)} is missing: no folder given holds it; add its run folder"
        )
    for shard in shards:
        if shard.cases() and not shard.results:
            raise TrainperfError(
                f"shard {shard.shard} ({shard.folder}) wrote no result: it crashed before its first case "
                f"({shard.cases()[0]}) ended; see {shard.folder / CASES_DIR} and run it again"
            )
    return sorted(shards, key=lambda s: s.shard.index)


def _not_a_run(path: Path) -> str:
    return f"{path} does not exist" if not path.exists() else f"{path} is not a run folder (no run.json)"


def _check_same(shards: list[ShardRun]) -> None:
    first = shards[0]
    for other in shards[1:]:
        for what, mine, theirs in (
            ("classes", first.gpu_class, other.gpu_class),
            ("checkouts", first.commit[:12], other.commit[:12]),
            ("shard counts", first.shard.count, other.shard.count),
            ("nights", first.night or "none", other.night or "none"),
        ):
            if mine != theirs:
                raise TrainperfError(
                    f"shards of different {what}: {mine} ({first.folder}) and {theirs} ({other.folder}); "
                    "merge the shards of one nightly"
                )
        if other.shard.index == first.shard.index:
            raise TrainperfError(f"shard {first.shard} given twice: {first.folder} and {other.folder}")
        if other.split != first.split:
            differ = sorted(
                k for k in {*first.split, *other.split} if first.split.get(k) != other.split.get(k)
            )
            raise TrainperfError(
                f"shards {first.shard} and {other.shard} split the selection differently ({len(differ)} "
                f"cases, e.g. {differ[0]}): run every shard with the same selection and baselines"
            )


def _missing(shards: list[ShardRun]) -> list[str]:
    """Shards not given that the split gives cases to (one with no case wrote no folder)."""
    given = {s.shard.index for s in shards}
    count, split = shards[0].shard.count, shards[0].split
    needed = set(split.values())
    return [f"{index}/{count}" for index in range(1, count + 1) if index not in given and index in needed]


def copy_into(shards: list[ShardRun], output: Path, record: dict[str, Any]) -> RunFolder:
    """One run folder of every shard's results, child folders, index and session records."""
    if output.exists() and any(output.iterdir()):
        raise TrainperfError(f"{output} exists and is not empty: give a new folder for the merged run")
    (output / RESULTS_DIR).mkdir(parents=True, exist_ok=True)
    sessions: list[dict[str, Any]] = []
    for shard in shards:
        for path in sorted((shard.folder / RESULTS_DIR).glob("*")):
            if path.is_file():
                shutil.copy2(path, output / RESULTS_DIR / path.name)
        if (shard.folder / CASES_DIR).is_dir():
            shutil.copytree(shard.folder / CASES_DIR, output / CASES_DIR, dirs_exist_ok=True)
        for line in read_jsonl(shard.folder / INDEX_FILE) if (shard.folder / INDEX_FILE).is_file() else []:
            append_jsonl(output / INDEX_FILE, {**line, "shard": str(shard.shard)})
        sessions += shard.sessions
    sessions.sort(key=lambda s: str(s.get("started", "")))
    (output / SESSION_FILE).write_text(
        json.dumps({"sessions": sessions, MERGED_KEY: record}, indent=1, default=str)
    )
    return RunFolder(output)


def nightly_record(
    shards: list[ShardRun], runner: str | None, unjudged: list[Unjudged]
) -> tuple[dict[str, Any], RunInfo]:
    """What the merged run.json records of the nightly, and the nightly's row in the results history:
    one id for the shards' runs (each stays in the history under its own runner)."""
    from trainperf.recording.ingest import run_info

    keys = [run_info(shard.folder, [], runner).run_key for shard in shards]
    first = shards[0]
    nightly = run_key(first.commit, {}, "|".join([first.gpu_class, *keys]))
    started = min(str(s.sessions[0].get("started", "")) for s in shards)
    ended = max([r.created for s in shards for r in s.results] + [started])
    fingerprint = {**(first.sessions[0].get("fingerprint") or {}), "shard_runs": keys}
    record = {
        "nightly": nightly,
        "gpu_class": first.gpu_class,
        "commit": first.commit,
        "shards": [
            {"shard": str(s.shard), "folder": portable(s.folder), "run_key": key, "cases": s.cases()}
            for s, key in zip(shards, keys)
        ],
        # What no shard judged, and why: `trainperf report` rebuilds the merged pages from it.
        MERGED_UNJUDGED_KEY: [case.to_dict() for case in unjudged],
    }
    info = RunInfo(
        run_key=nightly, kind="nightly", started=started, ended=ended, fingerprint=fingerprint,
        runner=runner_label(fingerprint, runner), gpu_class=first.gpu_class, commit=first.commit,
    )  # fmt: skip
    return record, info


def not_run(shards: list[ShardRun]) -> list[str]:
    """Cases of the selection with no result in any shard (a test skipped before its case ran)."""
    done = {r.case_id for s in shards for r in s.results}
    return sorted(key for key in shards[0].split if key not in done)


def unjudged_cases(shards: list[ShardRun]) -> list[Unjudged]:
    """Each case of the selection without a result: cut in its shard (during a run, or with runs
    kept), with how to go on, or not run, with how its shard ended."""
    found = []
    for key in not_run(shards):
        shard = next((s for s in shards if s.split.get(key) == s.shard.index), None)
        if shard is None:
            found.append(Unjudged(key, NOT_RUN, "not run: its shard is not among the merged", "in no shard"))
            continue
        kept = RunFolder(shard.folder).finished_run_count(key)
        cut = pending(shard.folder)
        name = f"shard {shard.shard.index}/{shard.shard.count}"
        if (why := unplaced_cases(shard.sessions).get(key)) is not None:
            found.append(Unjudged(key, SKIPPED_AT_START, f"skipped in {name}: {why}", skip_cause(why)))
        elif kept or (cut is not None and cut.case_id == key):
            during = f" during {cut.label} after {cut.steps_done}/{cut.steps_requested} steps" if cut else ""
            kept_said = f"{kept} finished run(s) kept" if kept else "no finished run kept"
            why = f"interrupted in {name}{during} with {kept_said}; --perf-resume={shard.folder} goes on"
            found.append(Unjudged(key, INTERRUPTED, why, "in an interrupted shard"))
        else:
            end = session_end(shard.sessions, cut)
            found.append(Unjudged(key, NOT_RUN, f"not run: {name} {end.how()}", SHARD_CAUSES[end.kind]))
    return found


SHARD_CAUSES = {
    INTERRUPTED_END: "in an interrupted shard",
    NORMAL_END: "in shards that ended without them",
    NO_END: "in shards that recorded no end",
}
"""The headline's words for how the shard of a case it did not reach ended."""
