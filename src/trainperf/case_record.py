"""The case a result measured, as the result keeps it (``CaseResult.case``): the ``Case`` written by
``Case.to_dict``, its id with it; a baseline pooled from a history has none (an empty object).

The reports read a few of its keys by name (the family, model, method, profile, batch size, GPUs, the
family's knobs, a local model or data set, a memory cap): those are fields. The whole case is read back
as a ``Case`` (``as_case``). A key an older trainperf did not write is None here and not written back;
a key not read by name (the other knobs, a newer trainperf's) or a value that does not read as its
field is kept as the file had it and written back in its place, so a rewritten result loses nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainperf.case import Case
from trainperf.jsonio import (
    read_fields,
    stored_int,
    stored_number_or_none,
    stored_text,
    unread_keys,
    written_back,
)

STORED_ORDER = (*(f.name for f in dataclasses.fields(Case)), "id")
"""The keys in the order ``Case.to_dict`` writes them."""


def _knobs(value: Any) -> dict[str, str] | None:
    """The family's knobs as stored (names to values, both strings), or None where they are not."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return {str(name): knob for name, knob in value.items()}


READERS: dict[str, Callable[[Any], Any]] = {
    "id": stored_text,
    "family": stored_text,
    "model": stored_text,
    "method": stored_text,
    "profile": stored_text,
    "batch_size": stored_int,
    "gpus": stored_int,
    "extra": _knobs,
    "model_path": stored_text,
    "dataset_path": stored_text,
    "memory_cap_gib": stored_number_or_none,
}
"""The keys read by name, each with what reads its stored value."""


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """The identity of a measured case and the knobs the reports tell cases apart by."""

    id: str | None = None
    family: str | None = None
    model: str | None = None
    method: str | None = None
    profile: str | None = None
    batch_size: int | None = None
    gpus: int | None = None
    extra: Mapping[str, str] | None = None
    """The family's own knobs (verl's ``eng``, ``alg``, ``tp``)."""
    model_path: str | None = None
    dataset_path: str | None = None
    memory_cap_gib: float | None = None
    unread: Mapping[str, Any] = field(default_factory=dict)
    """Keys not read by name here, as the file had them: read only as part of the whole case, written
    back."""

    @classmethod
    def of(cls, case: Case) -> CaseRecord:
        """The record a result keeps of ``case``."""
        return cls.from_dict(case.to_dict())

    def as_case(self) -> Case:
        """The whole case; TypeError or ValueError where the record holds none (a pooled baseline's)."""
        return Case.from_dict(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        recorded = {
            "id": self.id,
            "family": self.family,
            "model": self.model,
            "method": self.method,
            "profile": self.profile,
            "batch_size": self.batch_size,
            "gpus": self.gpus,
            "extra": dict(self.extra) if self.extra is not None else None,
            "model_path": self.model_path,
            "dataset_path": self.dataset_path,
            "memory_cap_gib": self.memory_cap_gib,
        }
        return written_back(recorded, self.unread, STORED_ORDER)

    @classmethod
    def from_dict(cls, data: Any) -> CaseRecord:
        """Read a stored case; anything but an object reads as an empty one."""
        stored = data if isinstance(data, dict) else {}
        read = read_fields(stored, READERS)
        return cls(**read, unread=unread_keys(stored, read))
