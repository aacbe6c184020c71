"""A nightly's tiers and its weekly rotation (pure: a class's cases, their projected GPU-seconds and
their last results in; a night's plan out). ``fleet.night`` reads the figures and applies a night's
plan to a session (``--perf-night``); ``trainperf cost --night`` projects a week of it.

The core tier, by rule. The cases of a class are grouped by family x method x engine: the family,
the method (the RL algorithm where the case names one, verl's ``alg``; else lora, qlora or full)
and the engine (the Python environment the case runs in: hf, unsloth, verl-vllm, verl-sglang).
Each group has one core case, the first by: not a cliff search; expected to run (``ok``, then
``unknown``, then an expected OOM or configuration error); the fewest GPUs; not slow; declared
first in the catalogue. A case declared ``tier="core"`` stands for its group instead (several
may); one declared ``tier="rotating"`` is never picked. The core tier runs every night.

The rotation. Every other case runs one night a week, on its weekday: the cases with a projected
cost costliest first onto the weekday with the least rotating load (ties by case id, then the
earlier weekday), then those without one (no wall time in their baseline), one at a time onto the
weekday with the fewest of them. A date's plan depends on the catalogue and the baseline files
alone, so every runner and every shard of a class at one commit plans the same night.

Promotion. A case whose last result before the night did not pass (any verdict but ``pass`` and
``expected-oom``: regressed, outcome- or config-changed, new, noisy, improved, contaminated,
not-compared, as for a case left out by ``--perf-budget``) runs every night until it passes; so does
a rotating case whose last result is more than a week old (a change of the catalogue or of the
baselines moved it to a later weekday).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from trainperf.case import Case

NIGHTS = 7
DAYS = ("Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays")
PASSING = frozenset({"pass", "expected-oom"})
EXPECTATION_RANK = {"ok": 0, "unknown": 1}
"""An expected OOM or configuration error ranks 2: it stands for its group only where nothing runs."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A pytest item of the catalogue: its key (the case id, or a cliff search's
    ``<case id>-cliff-<axis>``) and its case."""

    key: str
    case: Case

    @property
    def cliff(self) -> bool:
        return self.key != self.case.id


@dataclass(frozen=True, slots=True)
class LastResult:
    """A stored result of a case: when it was made (ISO time, UTC) and its case verdict."""

    key: str
    when: str
    verdict: str


def parse_night(text: str, today: date) -> date:
    """``YYYY-MM-DD`` or ``today`` (``today``: the UTC date); a ValueError whose text names the fix."""
    value = str(text).strip().lower()
    if value == "today":
        return today
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a date: give YYYY-MM-DD or today") from None


def group_of(case: Case) -> tuple[str, str, str]:
    """Family, method (the RL algorithm where the case names one) and engine (its environment)."""
    return case.family, dict(case.extra).get("alg") or case.method, case.environment


def core_keys(entries: Sequence[Entry], gpu_class: str) -> frozenset[str]:
    """The core tier of a class's entries, given in catalogue order."""
    groups: dict[tuple[str, str, str], list[tuple[int, Entry]]] = {}
    for position, entry in enumerate(entries):
        groups.setdefault(group_of(entry.case), []).append((position, entry))
    core: set[str] = set()
    for members in groups.values():
        declared = [entry.key for _, entry in members if entry.case.tier == "core"]
        free = [(position, entry) for position, entry in members if entry.case.tier is None]
        if declared:
            core.update(declared)
        elif free:
            core.add(min(free, key=lambda pair: (*_preference(pair[1], gpu_class), pair[0]))[1].key)
    return frozenset(core)


def _preference(entry: Entry, gpu_class: str) -> tuple[bool, int, int, bool]:
    rank = EXPECTATION_RANK.get(entry.case.expectation(gpu_class), 2)
    return entry.cliff, rank, entry.case.gpus, entry.case.slow


def rotation(keys: Iterable[str], gpu_s: Mapping[str, float | None]) -> dict[str, int]:
    """Each rotating key's weekday (0: Monday), balanced by projected GPU-seconds."""
    loads, unknown = [0.0] * NIGHTS, [0] * NIGHTS
    weekday: dict[str, int] = {}
    keys = sorted(set(keys))
    known = {key: seconds for key in keys if (seconds := gpu_s.get(key)) is not None}
    for key in sorted(known, key=lambda k: (-known[k], k)):
        night = min(range(NIGHTS), key=lambda n: (loads[n], n))
        loads[night] += known[key]
        weekday[key] = night
    for key in (key for key in keys if key not in known):
        night = min(range(NIGHTS), key=lambda n: (unknown[n], loads[n], n))
        unknown[night] += 1
        weekday[key] = night
    return weekday


@dataclass(frozen=True, slots=True)
class NightPlan:
    """One night of a class: which cases run and why, and what they are projected to cost."""

    night: date
    keys: tuple[str, ...]
    """Every planned key, in catalogue order."""
    core: frozenset[str]
    weekday: Mapping[str, int]
    """Each rotating key's weekday (0: Monday)."""
    gpu_s: Mapping[str, float | None]
    """Projected GPU-seconds per key; None where its baseline records no wall time (or it has none)."""
    budget_min: float | None = None
    promoted: Mapping[str, str] = field(default_factory=dict)
    """Keys run beyond the plan, each with why."""

    def on(self, night: date) -> NightPlan:
        return dataclasses.replace(self, night=night)

    def tier(self, key: str) -> str:
        return "core" if key in self.core else "rotating"

    def runs(self, key: str) -> bool:
        return key in self.core or self.weekday.get(key) == self.night.weekday() or key in self.promoted

    def tonight(self, selection: Iterable[str]) -> list[str]:
        return [key for key in selection if self.runs(key)]

    def latency(self, key: str) -> str:
        """How soon a change in the case is seen: every night, or within a week (its weekday)."""
        if key in self.core:
            return "every night"
        if key in self.promoted:
            return "every night until it passes"
        return f"within {NIGHTS} nights ({DAYS[self.weekday[key]]})"

    def projected(self, keys: Iterable[str]) -> tuple[float, int]:
        """GPU-minutes of ``keys`` and how many of them have no projected figure."""
        figures = [self.gpu_s.get(key) for key in keys]
        return sum(f for f in figures if f is not None) / 60, sum(f is None for f in figures)

    def counts(self, keys: Iterable[str]) -> tuple[int, int, int]:
        """Core, rotating (tonight's weekday) and promoted among tonight's ``keys``."""
        tonight = self.tonight(keys)
        core = sum(key in self.core for key in tonight)
        rotating = sum(
            key not in self.core and self.weekday.get(key) == self.night.weekday() for key in tonight
        )
        return core, rotating, len(tonight) - core - rotating


def plan_night(
    entries: Sequence[Entry],
    gpu_class: str,
    night: date,
    gpu_s: Mapping[str, float | None],
    budget_min: float | None = None,
) -> NightPlan:
    """The class's plan for ``night`` (promotion comes after: ``with_promoted``)."""
    keys = tuple(dict.fromkeys(entry.key for entry in entries))
    core = core_keys(entries, gpu_class)
    weekday = rotation((key for key in keys if key not in core), gpu_s)
    return NightPlan(night, keys, core, weekday, dict(gpu_s), budget_min)


def promoted(results: Iterable[LastResult], plan: NightPlan) -> dict[str, str]:
    """The planned keys whose latest result before the night did not pass, or, rotating, is more than
    a week old; each with why. A result without a date is left out."""
    latest: dict[str, tuple[date, LastResult]] = {}
    planned = set(plan.keys)
    for result in sorted(results, key=lambda r: r.when):
        day = _date_of(result.when)
        if result.key in planned and day is not None and day < plan.night:
            latest[result.key] = day, result  # the latest one stays
    found: dict[str, str] = {}
    for key, (day, result) in sorted(latest.items()):
        if result.verdict not in PASSING:
            found[key] = f"last result {result.verdict or 'not judged'} on {day}"
        elif key not in plan.core and (plan.night - day).days > NIGHTS:
            found[key] = f"last ran on {day}, more than {NIGHTS} nights before"
    return found


def _date_of(when: str) -> date | None:
    try:
        return date.fromisoformat(when[:10])
    except ValueError:
        return None


def with_promoted(plan: NightPlan, reasons: Mapping[str, str]) -> NightPlan:
    """The plan with ``reasons``' planned keys run every night until they pass."""
    return dataclasses.replace(plan, promoted={k: v for k, v in reasons.items() if k in plan.keys})


def listed(ids: Collection[str], source: str) -> dict[str, str]:
    return {case_id: f"listed in {source}" for case_id in ids}


def week(plan: NightPlan, start: date) -> list[NightPlan]:
    """The plan on each of the ``NIGHTS`` nights from ``start`` (promoted cases on every one)."""
    return [plan.on(start + timedelta(days=n)) for n in range(NIGHTS)]


def _budget_note(minutes: float, budget: float | None) -> str:
    if budget is None:
        return ""
    if minutes <= budget:
        return f" of a {budget:g} GPU-min night budget"
    return f", over the {budget:g} GPU-min night budget"


def _unknown_note(count: int) -> str:
    return f" (+{count} without a recorded wall time)" if count else ""


def _day(night: date) -> str:
    return f"{night} {DAYS[night.weekday()][:3]}"


def night_line(plan: NightPlan, selection: Sequence[str]) -> str:
    """The session's one line: what runs tonight, its projected cost, what waits for its night."""
    tonight = plan.tonight(selection)
    core, rotating, extra = plan.counts(selection)
    minutes, unknown = plan.projected(tonight)
    return (
        f"trainperf: night {_day(plan.night)}: {core} core + {rotating} rotating + {extra} promoted of "
        f"{len(selection)} cases, projected {minutes:.1f} GPU-min{_unknown_note(unknown)}"
        f"{_budget_note(minutes, plan.budget_min)}; {len(selection) - len(tonight)} deselected, each runs "
        f"within {NIGHTS} nights"
    )


def core_warning(plan: NightPlan, selection: Sequence[str]) -> str | None:
    """A line when the core tier alone projects more than the night budget."""
    minutes, _ = plan.projected(key for key in selection if key in plan.core)
    if plan.budget_min is None or minutes <= plan.budget_min:
        return None
    return (
        f"trainperf: the core tier alone projects {minutes:.1f} GPU-min, over the {plan.budget_min:g} "
        'GPU-min night budget: declare some of its cases tier="rotating" in the catalogue, or raise '
        "--perf-night-budget"
    )


def case_lines(plan: NightPlan, selection: Sequence[str]) -> list[str]:
    """Each case's tier, whether it runs tonight and its detection latency."""
    lines = []
    for key in selection:
        why = f" ({plan.promoted[key]})" if key in plan.promoted else ""
        tonight = "tonight" if plan.runs(key) else "-"
        lines.append(f"trainperf:   {plan.tier(key):<8} {tonight:<7} {plan.latency(key):<28} {key}{why}")
    return lines


def over_budget(nights: Sequence[NightPlan], selection: Sequence[str]) -> list[date]:
    """The nights whose projection exceeds the night budget."""
    return [
        night.night
        for night in nights
        if night.budget_min is not None and night.projected(night.tonight(selection))[0] > night.budget_min
    ]


def week_lines(nights: Sequence[NightPlan], selection: Sequence[str]) -> list[str]:
    """A week of nights: each case's tier, latency and GPU-minutes, then each night's totals."""
    first = nights[0]
    lines = [f"night plan of {len(selection)} cases, {NIGHTS} nights from {_day(first.night)}:"]
    for key in sorted(selection, key=lambda k: (k not in first.core, first.weekday.get(k, -1))):
        seconds = first.gpu_s.get(key)
        figure = f"{seconds / 60:7.1f}" if seconds is not None else "      -"
        lines.append(f"  {first.tier(key):<8} {first.latency(key):<28} {figure}  {key}")
    core_min, core_unknown = first.projected(key for key in selection if key in first.core)
    lines.append(
        f"  core tier: {sum(key in first.core for key in selection)} cases, {core_min:.1f} GPU-min every "
        f"night{_unknown_note(core_unknown)}"
    )
    heaviest = 0.0
    for night in nights:
        core, rotating, extra = night.counts(selection)
        minutes, unknown = night.projected(night.tonight(selection))
        heaviest = max(heaviest, minutes)
        lines.append(
            f"  {_day(night.night)}: {core} core + {rotating} rotating + {extra} promoted, {minutes:.1f} "
            f"GPU-min{_unknown_note(unknown)}{_budget_note(minutes, night.budget_min)}"
        )
    covered = set().union(*(night.tonight(selection) for night in nights))
    lines.append(
        f"  {len(covered)} of {len(selection)} cases run at least once in these {NIGHTS} nights; the "
        f"heaviest night {heaviest:.1f} GPU-min{_budget_note(heaviest, first.budget_min)}"
    )
    return lines
