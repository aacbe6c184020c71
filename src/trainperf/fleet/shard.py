"""``--perf-shard K/N``: one of N deterministic, duration-balanced parts of a selection.

Every shard computes the whole split on its own, from the same inputs, and keeps its part: the
cases are sorted longest first (ties by case id) and each goes onto the least-loaded shard
(ties by shard number), the greedy "longest processing time" rule, within 4/3 of the best split.
A case's expected duration is, in order: its median wall time in the results history of its
class, its baseline file's wall time, a default. Every shard must read the same figures: the
history weighs the split only when the shards share it (a PostgreSQL server; a SQLite file is
one machine's), and only its runs of the class (every runner) started before today (UTC), as
shards start minutes apart and one may already have written to it. ``trainperf merge`` checks
that every shard recorded the same split.

A cliff search and a multi-GPU case are one pytest item each, so they always stay whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from statistics import median
from typing import Any

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.ground.settings import Shard
from trainperf.measure.hardware import CPU_CLASS, planning_classes
from trainperf.result import CaseResult
from trainperf.store.baselines import BaselineStore
from trainperf.store.url import store_off

# With nothing measured, a tiny CPU case takes about half a minute and a GPU case about ten
# (the h100 baselines' single runs: 2 to 19 minutes); a cliff search launches about ten children.
DEFAULT_SECONDS = {CPU_CLASS: 60.0}
DEFAULT_GPU_SECONDS = 600.0
CLIFF_FACTOR = 10
VERIFY_LAUNCHES = 2


@dataclass(frozen=True, slots=True)
class Expected:
    """A case's expected wall time and where the figure came from."""

    seconds: float
    source: str
    """history, baseline or default"""


def item_key(case: Case, params: Mapping[str, Any]) -> str:
    """The id a pytest item's result is stored under: the case's, or its cliff search's."""
    return f"{case.id}-cliff-{params['axis']}" if "axis" in params else case.id


def split(expected: Mapping[str, float], count: int) -> dict[str, int]:
    """Each key's shard (1-based): longest first onto the least-loaded shard; every tie broken by
    key or shard number, so the split is a function of its inputs alone."""
    loads = [0.0] * count
    assigned: dict[str, int] = {}
    for key in sorted(expected, key=lambda k: (-expected[k], k)):
        target = min(range(count), key=lambda s: (loads[s], s))
        loads[target] += expected[key]
        assigned[key] = target + 1
    return assigned


def durations_from_timeline(rows: Sequence[Any]) -> dict[str, list[float]]:
    """Each case's wall times in stored runs: from its start to the next case's start in its run
    (the last case: to the run's end). Rows are ``store.records.TimelineRow``, in run order."""
    found: dict[str, list[float]] = {}
    for row, following in zip(rows, [*rows[1:], None]):
        same_run = following is not None and following.run_row == row.run_row
        end = following.created if same_run else row.run_ended
        seconds = _seconds_between(row.created, end) if end else None
        if seconds is not None and seconds > 0:
            found.setdefault(row.case_id, []).append(seconds)
    return found


def _seconds_between(start: str, end: str) -> float | None:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


def baseline_seconds(baseline: CaseResult, repeats: int) -> float | None:
    """A baseline file's wall time for one nightly: a case's median fresh run times the runs a
    nightly makes (baselines are written from several); a cliff's two edge probes, as a stored
    cliff is verified with them (``run.cliff``)."""
    if baseline.cliff:
        return baseline.cliff.edges_wall_s()
    walls = [run.wall_s for run in baseline.runs if run.wall_s]
    return median(walls) * repeats if walls else None


def expected_durations(
    keys: Sequence[str],
    gpu_class: str,
    history: Mapping[str, list[float]],
    baseline_of: Callable[[str], CaseResult | None],
    repeats: int = 1,
) -> dict[str, Expected]:
    """Each key's expected wall time: the history's median, else the baseline's, else a default."""
    default = DEFAULT_SECONDS.get(gpu_class, DEFAULT_GPU_SECONDS)
    expected: dict[str, Expected] = {}
    for key in keys:
        if history.get(key):
            expected[key] = Expected(median(history[key]), "history")
            continue
        baseline = baseline_of(key)
        seconds = baseline_seconds(baseline, repeats) if baseline else None
        if seconds is not None and baseline and baseline.gpu_class not in ("", gpu_class):
            expected[key] = Expected(seconds, f"{baseline.gpu_class} baseline")  # plans_from
        elif seconds is not None:
            expected[key] = Expected(seconds, "baseline")
        elif baseline is not None and baseline.cliff:
            expected[key] = Expected(default * VERIFY_LAUNCHES, "default")  # a stored cliff: 2 launches
        else:
            expected[key] = Expected(default * (CLIFF_FACTOR if "-cliff-" in key else 1), "default")
    return expected


def shard_line(shard: Shard, assigned: Mapping[str, int], expected: Mapping[str, Expected]) -> str:
    mine = [key for key, index in assigned.items() if index == shard.index]
    minutes = sum(expected[key].seconds for key in mine) / 60
    sources = sorted({expected[key].source for key in mine})
    return (
        f"trainperf: shard {shard}: {len(mine)} of {len(assigned)} cases, expected {minutes:.1f} min "
        f"(durations from {', '.join(sources) or 'nothing'})"
    )


def read_timeline(store_url: str | None, gpu_class: str) -> tuple[list[Any], bool]:
    """The class's stored case results before today (UTC), and whether every shard reads the same
    ones: a PostgreSQL server is the fleet's, a SQLite file is one machine's. None when the store
    is off, absent or unreachable (the split then falls back to the baseline files)."""
    if store_off(store_url):
        return [], False
    from trainperf.store.interface import open_history_store, resolve_url

    today = datetime.now(timezone.utc).date().isoformat()
    try:
        url = resolve_url(store_url)
        store = open_history_store(url, create=False)
    except (ImportError, TrainperfError):
        return [], False
    try:
        return store.class_timeline(gpu_class, before=today), url.startswith("postgresql")
    except TrainperfError:
        return [], False
    finally:
        store.close()


def baseline_loader(baselines: BaselineStore, gpu_class: str) -> Callable[[str], CaseResult | None]:
    """A key's baseline for weighing: the class's, else the class it plans from (``plans_from``)."""
    classes = planning_classes(gpu_class)

    def load(key: str) -> CaseResult | None:
        for name in classes:
            try:
                found = baselines.load(name, key)
            except TrainperfError:
                continue  # a damaged baseline is reported when its case runs; here it only weighs
            if found is not None:
                return found
        return None

    return load
