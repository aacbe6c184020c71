"""A session's part of a fleet's nightly, decided at collection: its shard (``--perf-shard``) and
its order and budget (``--perf-budget``). What it decided is recorded in ``run.json`` (the
settings' ``fleet``), so that ``trainperf merge`` can check the shards against each other."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.case import Case
from trainperf.fleet.budget import Budget, by_value, values_from_timeline
from trainperf.fleet.night import NightSession, keep_night
from trainperf.fleet.shard import (
    Expected,
    baseline_loader,
    durations_from_timeline,
    expected_durations,
    item_key,
    read_timeline,
    shard_line,
    split,
)
from trainperf.fleet.worker_order import projected_wall_s, worker_order
from trainperf.ground.settings import Settings, Shard, parse_shard
from trainperf.store.baselines import BaselineStore


@dataclass(slots=True)
class SessionShare:
    """A session's share of a night, decided at collection: its cases, order and budget."""

    settings: Settings
    """The session's settings, with ``fleet`` set to what is recorded in run.json."""
    lines: list[str] = field(default_factory=list)
    budget: Budget | None = None
    emptied: bool = False
    """The night's plan or the shard left this session no case: nothing to run is then this
    session's right answer (a shard of a small night), not pytest's "no tests" error."""


NO_TESTS_COLLECTED = 5
"""pytest's exit status when no test was left to run."""


def session_exit_status(plan: SessionShare | None, status: int) -> int:
    """The session's exit status: pytest's "no tests" becomes 0 where the night's plan or the shard
    left the session no case (the nightly's job stays green), and stays 5 for a selection that
    matched nothing (a typo in ``-k`` must still fail)."""
    emptied = plan is not None and plan.emptied
    return 0 if emptied and status == NO_TESTS_COLLECTED else status


def share_of_session(
    items: list[Any],
    settings: Settings,
    gpu_class: str | None,
    case_of: Callable[[Any], Case | None],
    deselect: Callable[[list[Any]], None],
    markexpr: str = "",
    night: tuple[Path, bool] | None = None,
    workers: int = 1,
) -> SessionShare:
    """Keep the night's items (``--perf-night``; ``night``: the catalogue's root and whether the session
    only lists), then this shard's (in ``items``, in place), and order them for the budget, or, where
    ``workers`` xdist workers share them, for the workers (longest first)."""
    if settings.shard is None and settings.budget is None and settings.night is None:
        return SessionShare(settings)
    keyed = {id(item): item_key(case, item.callspec.params) for item in items if (case := case_of(item))}
    weighed_class = durations_class(gpu_class, markexpr, [c for item in items if (c := case_of(item))])
    rows, shared = read_timeline(settings.store, weighed_class)
    history = durations_from_timeline(rows)
    loader = baseline_loader(BaselineStore(settings.baselines), weighed_class)

    def weigh(from_history: bool) -> dict[str, Expected]:
        figures = history if from_history else {}
        return expected_durations(
            sorted(set(keyed.values())), weighed_class, figures, loader, settings.repeats
        )

    plan = SessionShare(settings)
    record: dict[str, Any] = {}
    had_cases = bool(keyed)  # the night drops its left-out items from ``keyed`` too
    if settings.night is not None:
        session = NightSession(settings, weighed_class, *(night or (Path.cwd(), False)))
        record["night"] = keep_night(items, keyed, case_of, session, deselect, plan.lines)
    if settings.shard is not None:
        record |= _keep_shard(items, keyed, parse_shard(settings.shard), weigh(shared), deselect, plan.lines)
    if had_cases and not any(id(item) in keyed for item in items):
        plan.emptied = True
        plan.lines.append("trainperf: no case of this selection is this session's to run; nothing failed")
    if settings.budget is not None:
        plan.budget = _order_for_budget(items, keyed, settings.budget, weigh(True), rows, plan.lines)
        record["budget_min"] = settings.budget
    elif workers > 1 and any(id(item) in keyed for item in items):
        record["workers"] = _order_for_workers(items, keyed, weigh(shared), workers, plan.lines, case_of)
    plan.settings = dataclasses.replace(settings, fleet=record)
    return plan


def _keep_shard(
    items: list[Any],
    keyed: dict[int, str],
    shard: Shard,
    expected: dict[str, Expected],
    deselect: Callable[[list[Any]], None],
    lines: list[str],
) -> dict[str, Any]:
    """Drop the other shards' items; what run.json records of the split."""
    assigned = split({key: value.seconds for key, value in expected.items()}, shard.count)
    dropped = [item for item in items if id(item) in keyed and assigned[keyed[id(item)]] != shard.index]
    if dropped:
        deselect(dropped)
        gone = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in gone]
    lines.append(shard_line(shard, assigned, expected))
    return {
        "shard": str(shard),
        "split": {
            key: [assigned[key], round(value.seconds, 1), value.source] for key, value in expected.items()
        },
    }


def _order_for_workers(
    items: list[Any],
    keyed: dict[int, str],
    expected: dict[str, Expected],
    workers: int,
    lines: list[str],
    case_of: Callable[[Any], Case | None],
) -> dict[str, Any]:
    """Sort the items (in place) so that xdist deals the longest cases first and the workers end
    together (``fleet.worker_order``); what run.json records of it. A 2-GPU case counts on both its
    GPUs; a case this host skips (more GPUs than it has) costs nothing and weighs nothing."""
    runs = [item for item in items if id(item) in keyed and not item.get_closest_marker("skip")]
    mine = sorted({keyed[id(item)] for item in runs})
    seconds = {key: expected[key].seconds for key in mine}
    gpus = {keyed[id(item)]: case.gpus for item in runs if (case := case_of(item)) is not None}
    if not seconds:
        return {"count": workers, "projected_wall_s": 0.0}
    order = worker_order(seconds, workers)
    rank = {key: position for position, key in enumerate(order)}
    # Items that are not trainperf cases keep their place at the front: they cost nothing.
    items.sort(key=lambda item: rank.get(keyed.get(id(item), ""), -1))
    wall = projected_wall_s(order, seconds, workers, gpus)
    guessed = [key for key in order if expected[key].source == "default"]
    gpu_min = sum(value * gpus.get(key, 1) for key, value in seconds.items()) / 60
    longest = max(seconds.values()) / 60
    lines.append(
        f"trainperf: {len(order)} case(s) dealt to {workers} workers, the longest first: projected "
        f"{wall / 60:.1f} min wall for {gpu_min:.1f} GPU-min (longest case {longest:.1f} min)"
        + (f"; {len(guessed)} case(s) without a recorded wall time counted at a default" if guessed else "")
    )
    return {"count": workers, "projected_wall_s": round(wall, 1)}


def _order_for_budget(
    items: list[Any],
    keyed: dict[int, str],
    minutes: float,
    expected: dict[str, Expected],
    rows: list[Any],
    lines: list[str],
) -> Budget:
    """Sort the items by value (in place); the budget that admits them one by one."""
    order = {key: rank for rank, key in enumerate(by_value(sorted(expected), values_from_timeline(rows)))}
    # Items that are not trainperf cases keep their place at the front: they cost nothing.
    items.sort(key=lambda item: order.get(keyed.get(id(item), ""), -1))
    mine = [keyed[id(item)] for item in items if id(item) in keyed]
    total = sum(expected[key].seconds for key in mine) / 60
    lines.append(
        f"trainperf: --perf-budget {minutes:g} min for {len(mine)} cases expected to take "
        f"{total:.1f} min, the most valuable first (a recent change, then the longest unrun)"
    )
    return Budget(minutes, {key: expected[key].seconds for key in mine})


def durations_class(session_class: str | None, markexpr: str, cases: list[Case]) -> str:
    """The class whose history and baselines give the durations: the session's, or, where a
    marker names a class the cases run on but this machine is not (listing a GPU class's shards
    on a laptop, ``-m h100 --collect-only``), that class."""
    named = markexpr.strip()
    if cases and named and all(named in case.gpu_classes for case in cases):
        return named
    return session_class or ""
