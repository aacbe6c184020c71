"""The workload families' parent side, by name: the one place a family's rules are looked up."""

from __future__ import annotations

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families.base import Family, LaunchMode
from trainperf.families.rl_trl import RlTrl
from trainperf.families.rl_verl.family import RlVerl
from trainperf.families.sft import SftHf, SftUnsloth

FAMILIES: dict[str, Family] = {family.name: family for family in (SftHf(), SftUnsloth(), RlTrl(), RlVerl())}


def family_of(name: str) -> Family:
    """The family called ``name``; an unknown name is one line listing the known ones."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise TrainperfError(
            f"unknown workload family {name!r}: use one of {', '.join(sorted(FAMILIES))}"
        ) from None


def preflight(case: Case, python: str | None = None) -> None:
    """Problems found before any process starts: one line each, naming the fix."""
    family_of(case.family).preflight(case, python)


__all__ = ["FAMILIES", "Family", "LaunchMode", "family_of", "preflight"]
