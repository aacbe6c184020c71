"""A session's part of a fleet's nightly, decided at collection: its shard (``--perf-shard``) and
its order and budget (``--perf-budget``). What it decided is recorded in ``run.json`` (the
settings' ``fleet``), so that ``trainperf merge`` can check the shards against each other."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainperf.case import Case
from trainperf.run.budget import Budget, by_value, values_from_timeline
from trainperf.run.settings import Settings
from trainperf.run.shard import (
    baseline_loader,
    durations_from_timeline,
    expected_durations,
    item_key,
    parse_shard,
    read_timeline,
    shard_line,
    split,
)
from trainperf.store.baselines import BaselineStore


@dataclass(slots=True)
class SessionPlan:
    settings: Settings
    """The session's settings, with ``fleet`` set to what is recorded in run.json."""
    lines: list[str] = field(default_factory=list)
    budget: Budget | None = None


def plan_session(
    items: list[Any],
    settings: Settings,
    gpu_class: str | None,
    case_of: Callable[[Any], Case | None],
    deselect: Callable[[list[Any]], None],
    markexpr: str = "",
) -> SessionPlan:
    """Keep this shard's items (in ``items``, in place) and order them for the budget."""
    if settings.shard is None and settings.budget is None:
        return SessionPlan(settings)
    cases = [case for item in items if (case := case_of(item))]
    gpu_class = durations_class(gpu_class, markexpr, cases)
    keyed = {id(item): item_key(case, item.callspec.params) for item in items if (case := case_of(item))}
    keys = sorted(set(keyed.values()))
    rows = read_timeline(settings.store, gpu_class or "")
    expected = expected_durations(
        keys,
        gpu_class or "",
        durations_from_timeline(rows),
        baseline_loader(BaselineStore(settings.baselines), gpu_class or ""),
        settings.repeats,
    )
    record: dict[str, Any] = {}
    lines: list[str] = []
    if settings.shard is not None:
        shard = parse_shard(settings.shard)
        assigned = split({key: value.seconds for key, value in expected.items()}, shard.count)
        dropped = [item for item in items if id(item) in keyed and assigned[keyed[id(item)]] != shard.index]
        if dropped:
            deselect(dropped)
            gone = {id(item) for item in dropped}
            items[:] = [item for item in items if id(item) not in gone]
        lines.append(shard_line(shard, assigned, expected))
        record = {
            "shard": str(shard),
            "split": {
                key: [assigned[key], round(expected[key].seconds, 1), expected[key].source] for key in keys
            },
        }
    budget = None
    if settings.budget is not None:
        order = {key: rank for rank, key in enumerate(by_value(keys, values_from_timeline(rows)))}
        # Items that are not trainperf cases keep their place at the front: they cost nothing.
        items.sort(key=lambda item: order.get(keyed.get(id(item), ""), -1))
        mine = [keyed[id(item)] for item in items if id(item) in keyed]
        budget = Budget(settings.budget, {key: expected[key].seconds for key in mine})
        total = sum(expected[key].seconds for key in mine) / 60
        lines.append(
            f"trainperf: --perf-budget {settings.budget:g} min for {len(mine)} cases expected to take "
            f"{total:.1f} min, the most valuable first (a recent change, then the longest unrun)"
        )
        record["budget_min"] = settings.budget
    return SessionPlan(dataclasses.replace(settings, fleet=record), lines, budget)


def durations_class(session_class: str | None, markexpr: str, cases: list[Case]) -> str:
    """The class whose history and baselines give the durations: the session's, or, where a
    marker names a class the cases run on but this machine is not (listing a GPU class's shards
    on a laptop, ``-m h100 --collect-only``), that class."""
    named = markexpr.strip()
    if cases and named and all(named in case.gpu_classes for case in cases):
        return named
    return session_class or ""
