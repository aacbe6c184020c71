"""A published figure a result was set beside, as the result keeps it (``CaseResult.references``):
``store.references`` makes one per matching published point, the case's notes show it. Never a gate.

A key a stored file lacks reads as None and is not written back, and one this trainperf does not know
(a newer one's) is kept aside and written back, so a rewritten result loses nothing of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.jsonio import stored_number_or_none, stored_text

STORED_KEYS = ("source", "metric", "published", "measured", "ratio", "note")


@dataclass(frozen=True, slots=True)
class ReferenceLine:
    """Measured over published for one metric of one published point."""

    source: str | None = None
    """Where the figure was published (``docs/experiments.md E2``)."""
    metric: str | None = None
    published: float | None = None
    measured: float | None = None
    ratio: float | None = None
    """``measured / published``."""
    note: str | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)
    """Keys this trainperf does not know, as the file had them: written back, never read."""

    def to_dict(self) -> dict[str, Any]:
        recorded = {key: value for key in STORED_KEYS if (value := getattr(self, key)) is not None}
        return {**recorded, **self.unread}

    @classmethod
    def from_dict(cls, data: Any) -> ReferenceLine | None:
        """The line, or None for anything that is not an object."""
        if not isinstance(data, dict):
            return None
        return cls(
            source=stored_text(data.get("source")),
            metric=stored_text(data.get("metric")),
            published=stored_number_or_none(data.get("published")),
            measured=stored_number_or_none(data.get("measured")),
            ratio=stored_number_or_none(data.get("ratio")),
            note=stored_text(data.get("note")),
            unread={key: value for key, value in data.items() if key not in STORED_KEYS},
        )
