"""An OOM-cliff search as a result and a baseline file store it: its probes, its edges, its
confirmation runs (``plan.cliff`` searches, ``run.cliff`` runs the probes and writes this).

One record read and written here, so that the report, the night's cost, the shard planner and the
headroom line read the same fields by name instead of each spelling out the JSON keys.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trainperf.case import Outcome

NOT_LAUNCHED = ("skipped-by-estimate", Outcome.CONFIG_ERROR.value)
"""Probe outcomes decided before any launch: the memory estimate, or the framework's own rules."""


@dataclass(frozen=True, slots=True)
class Probe:
    value: int
    fits: bool
    outcome: str
    """ok, oom, skipped-by-estimate, config_error, or what else the child reported."""
    note: str = ""
    wall_s: float = 0.0
    """The child's wall time (0: not launched, or recorded before it was kept)."""

    @classmethod
    def from_dict(cls, data: Any) -> Probe:
        return cls(
            int(data["value"]),
            bool(data["fits"]),
            str(data["outcome"]),
            str(data.get("note") or ""),
            float(data.get("wall_s") or 0.0),
        )


@dataclass(slots=True)
class CliffEdges:
    """What a search in progress (``plan.cliff.Cliff``) and a stored one (``CliffRecord``) both hold:
    the axis and range searched, the edges found so far, the probes that found them."""

    axis: str
    low: int
    high: int
    largest_fit: int | None = None
    """None: even ``low`` does not fit."""
    smallest_oom: int | None = None
    """None: even ``high`` fits (the cliff is above the range)."""
    probes: list[Probe] = field(default_factory=list)


@dataclass(slots=True)
class CliffRecord(CliffEdges):
    """The largest value of ``axis`` in ``low..high`` that fits, how it was found and confirmed."""

    launched: int = 0
    summary: str = ""
    """One line: ``micro_batch_size: largest fit 16, OOM from 32``."""
    confirmation: list[Probe] = field(default_factory=list)
    """Fresh runs at the edges after the search: the largest fit again, the smallest OOM again."""
    confirmed: bool = False
    verified: bool | None = None
    """True: a stored cliff checked at its edges, no search; None in files written before it was kept."""

    def edges_wall_s(self) -> float | None:
        """What verifying this cliff costs: its two edge probes' wall time, None when one is unknown."""
        walls = {p.value: p.wall_s for p in [*self.probes, *self.confirmation]}
        edges = [walls.get(v, 0.0) for v in (self.largest_fit, self.smallest_oom) if v is not None]
        return sum(edges) if edges and all(edges) else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.verified is None:
            del data["verified"]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> CliffRecord | None:
        """The record, or None where there is none (a result of an ordinary case)."""
        if not isinstance(data, dict) or not data:
            return None

        def optional(key: str) -> int | None:
            return None if data.get(key) is None else int(data[key])

        verified = data.get("verified")
        return cls(
            axis=str(data["axis"]),
            low=int(data["low"]),
            high=int(data["high"]),
            largest_fit=optional("largest_fit"),
            smallest_oom=optional("smallest_oom"),
            probes=[Probe.from_dict(p) for p in data.get("probes") or []],
            launched=int(data.get("launched") or 0),
            summary=str(data.get("summary") or ""),
            confirmation=[Probe.from_dict(p) for p in data.get("confirmation") or []],
            confirmed=bool(data.get("confirmed")),
            verified=None if verified is None else bool(verified),
        )
