"""Published reference points (``baselines/published/*.json``): provisional, never gating.

Each entry names a GPU class, the case fields it matches (family, model, profile, batch size,
and family knobs from ``Case.extra``), a metric and the published value, with the source and
stack in its file. Reports show measured / published where a case matches. They are kept apart
from measured baselines on purpose: the first measured run of a class is what gates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.reference_record import ReferenceLine
from trainperf.result import CaseResult


@dataclass(frozen=True, slots=True)
class Reference:
    source: str
    gpu_class: str
    match: tuple[tuple[str, str], ...]
    metric: str
    value: float
    note: str = ""

    def matches(self, case: Case, gpu_class: str) -> bool:
        return gpu_class == self.gpu_class and self.fits(case)

    def fits(self, case: Case) -> bool:
        """The case has the shape the published point describes, on whatever GPU class."""
        fields = {**{k: str(v) for k, v in case.to_dict().items()}, **dict(case.extra)}
        return all(fields.get(key) == value for key, value in self.match)


def load_references(directory: Path) -> list[Reference]:
    references = []
    for path in sorted(directory.glob("*.json")):
        try:
            data: dict[str, Any] = json.loads(path.read_text())
            for entry in data["entries"]:
                references.append(
                    Reference(
                        source=str(data["source"]).split(":")[0],
                        gpu_class=str(entry["gpu_class"]),
                        match=tuple(sorted((str(k), str(v)) for k, v in entry["match"].items())),
                        metric=str(entry["metric"]),
                        value=float(entry["value"]),
                        note=str(entry.get("note", "")),
                    )
                )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise TrainperfError(
                f"{path} is not a valid reference file ({type(exc).__name__}: {exc}); "
                "compare with baselines/published/e2-unsloth-samples-per-hour.json"
            ) from exc
    return references


def compare_to_references(result: CaseResult, case: Case, references: list[Reference]) -> list[ReferenceLine]:
    """Measured / published for each matching reference whose metric the result has."""
    lines = []
    for reference in references:
        measured = result.metrics.get(reference.metric)
        if measured is None or not reference.matches(case, result.gpu_class) or not reference.value:
            continue
        lines.append(
            ReferenceLine(
                source=reference.source,
                metric=reference.metric,
                published=reference.value,
                measured=measured.value,
                ratio=measured.value / reference.value,
                note=reference.note,
            )
        )
    return lines
