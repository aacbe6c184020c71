"""A nightly's night (``--perf-night DATE``): the class's plan (``plan.tiers``) made from the
catalogue, the baseline files' wall times and the cases promoted by their last results, applied to
the selection before it is sharded; and a week of it projected for ``trainperf cost --night``.

Where promoted cases come from (``--perf-night-promote``): a run folder or a folder holding run
folders (the last nights' runs, merged or not: each case's latest result counts), a text file of
case ids (one a line, ``#`` comments), ``store`` (the results history, the default for a session) or
``off``. Every shard of a night must read the same: a session that is a shard reads the history
only where it is a PostgreSQL server the shards share, never one machine's SQLite file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.fleet.cost import case_cost
from trainperf.fleet.fresh_runner import first_writers, inputs_needed
from trainperf.fleet.fresh_runner import night_line as fresh_night_line
from trainperf.fleet.night_cost import PROJECTED_KEY
from trainperf.fleet.shard import baseline_loader
from trainperf.ground.catalogue import catalogue_items
from trainperf.ground.folder import RunFolder
from trainperf.ground.settings import Settings
from trainperf.plan.tiers import (
    Entry,
    LastResult,
    NightPlan,
    case_lines,
    core_warning,
    listed,
    night_line,
    over_budget,
    plan_night,
    promoted,
    week,
    week_lines,
    with_promoted,
)
from trainperf.result import CaseResult
from trainperf.store.baselines import BaselineStore

PROMOTE_HELP = "give a run folder, a folder of run folders, a file of case ids, store or off"


def class_entries(root: Path, gpu_class: str, selection: Sequence[tuple[str, Case]] = ()) -> list[Entry]:
    """The catalogue's items of the class in collection order, then the selection's items it does
    not declare (a catalogue outside ``root/perf_tests``)."""
    try:
        items = [(key, case) for key, case in catalogue_items(root) if gpu_class in case.gpu_classes]
    except TrainperfError:
        items = []
    known = {key for key, _ in items}
    items += [(key, case) for key, case in selection if key not in known]
    return [Entry(key, case) for key, case in dict(items).items()]


def projected_gpu_s(baseline: CaseResult | None) -> float | None:
    """A baseline's GPU-seconds for one nightly run, as ``trainperf cost`` projects it; None where
    it records no wall time for a launch it made (or there is no baseline)."""
    if baseline is None:
        return None
    cost = case_cost(baseline, one_run=True)
    if cost.unknown_launches or (not cost.launches and cost.launched):
        return None
    return cost.gpu_s


def load_baselines(baselines: Path, gpu_class: str, keys: Sequence[str]) -> dict[str, CaseResult | None]:
    """Each key's baseline file, read once for the night's projection and its fresh-runner writes:
    the class's, else the class it plans from (``fleet.shard.baseline_loader``); None for none, or a
    damaged one (reported when its case runs)."""
    load = baseline_loader(BaselineStore(baselines), gpu_class)
    return {key: load(key) for key in keys}


def stand_in_line(
    loaded: Mapping[str, CaseResult | None], tonight: Sequence[str], gpu_class: str
) -> str | None:
    """A line naming how many of tonight's figures came from another class's baselines."""
    borrowed = [b.gpu_class for key in tonight if (b := loaded.get(key)) and b.gpu_class != gpu_class]
    if not borrowed:
        return None
    return (
        f"trainperf: {len(borrowed)} of tonight's case(s) have no {gpu_class} baseline: projected from "
        f"their {', '.join(sorted(set(borrowed)))} baseline(s) (plans_from in fixtures/hardware/"
        f"{gpu_class}.yaml), never judged against"
    )


def baseline_figures(loaded: Mapping[str, CaseResult | None]) -> dict[str, float | None]:
    """Each case's GPU-seconds for one nightly run, from its baseline (``projected_gpu_s``)."""
    return {key: projected_gpu_s(baseline) for key, baseline in loaded.items()}


def run_folders(path: Path) -> list[Path]:
    """The run folders at ``path`` and up to three levels below it (an artifact's reports/<run>)."""
    levels, found = [path], []
    for _ in range(4):
        runs = [folder for folder in levels if RunFolder(folder).is_run()]
        found += runs
        levels = [child for f in levels if f not in runs for child in sorted(f.iterdir()) if child.is_dir()]
    return found


def folder_results(path: Path, gpu_class: str) -> list[LastResult]:
    """The class's results in the run folders at or below ``path`` (planted and emulated left out)."""
    found = []
    for folder in run_folders(path):
        for result in RunFolder(folder).results():
            if result.gpu_class != gpu_class or result.planted or result.planted_slowdown or result.emulated:
                continue
            found.append(LastResult(result.case_id, result.created, result.verdict.verdict))
    return found


def listed_ids(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def store_results(
    store_url: str | None, gpu_class: str, night: date, shard: bool
) -> tuple[list[LastResult], str]:
    """The class's stored results before the night, and a note where none could be read."""
    from trainperf.store.interface import open_history_store, resolve_url

    url = resolve_url(store_url)
    if shard and not url.startswith("postgresql"):
        return [], (
            "the results history is one machine's file and this session is a shard: give "
            "--perf-night-promote a folder or file that every shard reads, or a PostgreSQL --perf-store"
        )
    try:
        store = open_history_store(url, create=False)
    except TrainperfError as exc:
        return [], f"the results history could not be read ({str(exc).split(':')[0]})"
    try:
        rows = store.class_verdicts(gpu_class, before=night.isoformat())
    finally:
        store.close()
    return [LastResult(*row) for row in rows], ""


def promotions(
    plan: NightPlan, source: str | None, gpu_class: str, store_url: str | None, shard: bool
) -> tuple[dict[str, str], str]:
    """The promoted keys with why, and a note when the source gave none to read."""
    value = (source or "store").strip()
    if value.lower() == "off" or (value.lower() == "store" and (store_url or "").lower() in ("off", "none")):
        return {}, ""
    if value.lower() == "store":
        results, note = store_results(store_url, gpu_class, plan.night, shard)
        return promoted(results, plan), note
    path = Path(value)
    if path.is_file():
        return listed(listed_ids(path), str(path)), ""
    if not path.is_dir():
        raise TrainperfError(f"--perf-night-promote {value}: no such file or folder; {PROMOTE_HELP}")
    return promoted(folder_results(path, gpu_class), plan), ""


@dataclass(frozen=True, slots=True)
class NightSession:
    settings: Settings
    gpu_class: str
    rootdir: Path
    listing: bool = False
    """--collect-only: each case's tier and detection latency are listed too."""


def night_of_session(
    session: NightSession, selection: Sequence[tuple[str, Case]]
) -> tuple[NightPlan, str, dict[str, CaseResult | None]]:
    """The session's night, its promoted cases included; a note when none could be read; the
    baselines it was planned from."""
    settings, gpu_class = session.settings, session.gpu_class
    assert settings.night is not None
    entries = class_entries(session.rootdir, gpu_class, selection)
    loaded = load_baselines(settings.baselines, gpu_class, [entry.key for entry in entries])
    plan = plan_night(
        entries,
        gpu_class,
        date.fromisoformat(settings.night),
        baseline_figures(loaded),
        settings.night_budget,
    )
    reasons, note = promotions(
        plan, settings.night_promote, gpu_class, settings.store, settings.shard is not None
    )
    return with_promoted(plan, reasons), note, loaded


def keep_night(
    items: list[Any],
    keyed: dict[int, str],
    case_of: Callable[[Any], Case | None],
    session: NightSession,
    deselect: Callable[[list[Any]], None],
    lines: list[str],
) -> dict[str, Any]:
    """Drop the items the night does not run (from ``items`` and ``keyed``); what run.json records."""
    chosen = {keyed[id(item)]: case for item in items if id(item) in keyed and (case := case_of(item))}
    plan, note, baselines = night_of_session(session, list(chosen.items()))
    selection = list(chosen)
    dropped = [item for item in items if id(item) in keyed and not plan.runs(keyed[id(item)])]
    if dropped:
        deselect(dropped)
        gone = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in gone]
        for key in gone:
            keyed.pop(key)
    lines.append(night_line(plan, selection))
    if (warning := core_warning(plan, selection)) is not None:
        lines.append(warning)
    if note:
        lines.append(f"trainperf: no promoted cases: {note}")
    if session.listing:
        lines += case_lines(plan, selection)
    tonight = plan.tonight(selection)
    if (borrowed := stand_in_line(baselines, tonight, session.gpu_class)) is not None:
        lines.append(borrowed)
    writes = first_writes(tonight, baselines, lines)
    return {
        "date": plan.night.isoformat(),
        "tonight": tonight,
        "promoted": dict(plan.promoted),
        PROJECTED_KEY: {
            key: None if (seconds := plan.gpu_s.get(key)) is None else seconds + writes.get(key, 0.0)
            for key in tonight
        },
    }


def first_writes(
    tonight: list[str], baselines: Mapping[str, CaseResult | None], lines: list[str]
) -> dict[str, float]:
    """GPU-seconds tonight's cases spend first writing the cached inputs (``fleet.fresh_runner``) their
    baselines used and this runner's cache lacks, on the case that writes each; its line in ``lines``."""
    from trainperf.synth.cache import cache_dir, holds

    needs = inputs_needed(result for key in tonight if (result := baselines.get(key)) is not None)
    missing = [need for need in needs if not holds(need.kind, need.key)]
    if (line := fresh_night_line(missing, str(cache_dir()))) is not None:
        lines.append(line)
    return first_writers(missing, tonight)


@dataclass(frozen=True, slots=True)
class WeekProjection:
    lines: list[str]
    figures: dict[str, Any]
    over: list[date]
    """Nights projected over the night budget."""


def project_week(
    results: Sequence[CaseResult],
    gpu_class: str,
    start: date,
    budget: float | None,
    promote: str | None,
    root: Path,
) -> WeekProjection:
    """A baselines class folder's week of nights from ``start``: the class's catalogue planned as
    ``--perf-night`` plans it, each case at its baseline's wall time."""
    entries = class_entries(root, gpu_class)
    if not entries:
        raise TrainperfError(
            f"no case of class {gpu_class} in {root / 'perf_tests'}: --night plans a baselines class folder "
            "(baselines/<class>) from the checkout's root"
        )
    keys = [entry.key for entry in entries]
    by_key = {result.case_id: projected_gpu_s(result) for result in results}
    plan = plan_night(entries, gpu_class, start, {key: by_key.get(key) for key in keys}, budget)
    reasons, _ = promotions(plan, promote or "off", gpu_class, None, shard=False)
    nights = week(with_promoted(plan, reasons), start)
    lines = week_lines(nights, keys)
    stale = sorted(set(by_key) - set(keys))
    lines += [f"  not in the catalogue of class {gpu_class} (not planned): {key}" for key in stale]
    return WeekProjection(lines, _week_figures(nights, keys), over_budget(nights, keys))


def _week_figures(nights: Sequence[NightPlan], keys: Sequence[str]) -> dict[str, Any]:
    first = nights[0]
    cases = [
        {"case_id": key, "tier": first.tier(key), "latency": first.latency(key),
         "gpu_minutes": None if (s := first.gpu_s.get(key)) is None else round(s / 60, 2)}
        for key in keys
    ]  # fmt: skip
    per_night = []
    for night in nights:
        core, rotating, extra = night.counts(keys)
        minutes, unknown = night.projected(night.tonight(keys))
        per_night.append(
            {"date": night.night.isoformat(), "core": core, "rotating": rotating, "promoted": extra,
             "gpu_minutes": round(minutes, 2), "without_wall_time": unknown}
        )  # fmt: skip
    return {
        "start": first.night.isoformat(),
        "budget_minutes": first.budget_min,
        "cases": cases,
        "nights": per_night,
    }
