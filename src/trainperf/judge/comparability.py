"""Whether two results measured the same work on comparable hosts (no I/O): the effective
configuration keys whose change means other work, and the fingerprint keys a class's timing
is comparable only on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainperf.config_record import WORK_KEYS, EffectiveConfig
from trainperf.judge.metrics import Part
from trainperf.result import CaseResult

GATED_CONFIG_KEYS = WORK_KEYS
"""Effective-configuration keys whose change means "not the same work any more"."""


ANOTHER_HOST = "the baseline was measured on another host"


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether the timing figures of one part of the machine are judged, and if not why."""

    open: bool
    why: str = ""


OPEN = Gate(True)


@dataclass(frozen=True, slots=True)
class PartGates:
    """The gates of a case's timing figures by the part of the machine they depend on (``Part``)."""

    device: Gate
    host: Gate
    whole: Gate

    @classmethod
    def uniform(cls, comparable: bool, why: str = "") -> PartGates:
        """Every part alike: the timing of a class that has no kernel time (the CPU), or of a
        reference that lacks it."""
        gate = Gate(comparable, "" if comparable else why or "timing not comparable with the baseline")
        return cls(gate, gate, gate)

    def of(self, part: Part) -> Gate:
        return {Part.DEVICE: self.device, Part.HOST: self.host, Part.WHOLE: self.whole}[part]


def timing_comparable(baseline: CaseResult, result: CaseResult, same_keys: Sequence[str]) -> tuple[bool, str]:
    """Whether a result's timing can be judged against a baseline's, and if not why: an emulated
    result never can; otherwise the fingerprint keys its class names (``timing_comparable_only_on_same``,
    e.g. the CPU's identity) must match. The reason names each differing key with both values."""
    for label, side in (("baseline", baseline), ("result", result)):
        if side.emulated:
            return False, f"the {label} is emulated ({side.emulated})"
    # The keys are named by the class's configuration, so they are looked up as the file stores them.
    before, after = baseline.fingerprint.to_dict(), result.fingerprint.to_dict()
    differing = [
        f"{key} {_shown(before.get(key))} -> {_shown(after.get(key))}"
        for key in same_keys
        if before.get(key) != after.get(key)
    ]
    if differing:
        return False, f"{ANOTHER_HOST} (" + "; ".join(differing) + ")"
    return True, ""


def _shown(value: Any) -> str:
    return "unrecorded" if value is None else repr(value)


def config_changes(baseline: EffectiveConfig, current: EffectiveConfig) -> list[tuple[str, Any, Any]]:
    """Each gated key whose value differs, with both values as the files store them (a list a list)."""
    before, after = baseline.to_dict(), current.to_dict()
    return [
        (key, before.get(key), after.get(key))
        for key in GATED_CONFIG_KEYS
        if (key in before or key in after) and before.get(key) != after.get(key)
    ]
