"""How precisely an A/B has measured B's step time against A's, and how many rounds a precision needs.

A study's answer is the step-time ratio B/A with its 95% interval (``judge.compare``: paired per
step where both sides ran the same batches, runs resampled as well as steps). Its width falls as
rounds are added, roughly as one over the square root of the rounds, since each round adds one
run a side and the runs' spread dominates on a steady GPU (on two H200s, 2026-11-27, the
accelerate study's three rounds a side bounded a GPU-bound case to [-1.5%, +1.2%] while its six
runs' medians lay within 1.0% of each other). ``trainperf ab --until-within PCT`` adds rounds until
every judged case's interval is that narrow or ``--max-rounds`` is reached. The rule looks at the
interval's width, never at where it lies: a study cannot keep adding rounds until the ratio reads
as hoped. The projection assumes the runs' spread stays what it was; on a host whose runs scatter
(a shared 2-core CPU host, 2026-11-27: run medians 0.065-0.098 s) the width barely falls, and the
round limit ends the study.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainperf.jsonio import stored_number
from trainperf.judge.compare import CaseVerdict, Verdict
from trainperf.judge.metrics import STEP_TIME


@dataclass(frozen=True, slots=True)
class Precision:
    """The least precise judged case: its step-time interval's half-width in percent of A's step."""

    case_id: str
    half_width_pct: float

    def to_dict(self) -> dict[str, object]:
        return {"case": self.case_id, "half_width_pct": round(self.half_width_pct, 3)}

    @classmethod
    def from_dict(cls, data: Any) -> Precision | None:
        """The precision a study recorded, or None where it recorded none (no case was timed)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(str(data["case"]), stored_number(data["half_width_pct"]))
        except (KeyError, TypeError):
            return None


def half_width_pct(interval: tuple[float, float]) -> float:
    """Half the width of a B/A ratio interval, in percentage points (``[0.985, 1.012]``: 1.35)."""
    low, high = interval
    return 100 * (high - low) / 2


def least_precise(verdicts: Mapping[str, CaseVerdict] | None) -> Precision | None:
    """The judged case (B's verdict against A, by case) whose step-time interval is widest; None
    when no case has one (nothing timed was judged: a contaminated or broken case is not made
    precise by more rounds)."""
    widths = []
    for case_id, verdict in (verdicts or {}).items():
        step = next((m for m in verdict.metrics if m.metric == STEP_TIME), None)
        interval = step.interval if step is not None else None
        if (
            interval is not None
            and all(map(math.isfinite, interval))
            and verdict.verdict is not Verdict.CONTAMINATED
        ):
            widths.append(Precision(case_id, half_width_pct(interval)))
    return max(widths, key=lambda p: p.half_width_pct, default=None)


def rounds_for(precision: Precision, rounds: int, target_pct: float) -> int:
    """About how many rounds in all bring ``precision`` (after ``rounds``) to ``target_pct``, from
    the width's fall as one over the square root of the rounds; at least ``rounds``."""
    if target_pct <= 0:
        raise ValueError("a precision target must be above zero")
    needed = rounds * (precision.half_width_pct / target_pct) ** 2
    return max(rounds, math.ceil(needed - 1e-9))


def more_rounds(precision: Precision | None, rounds: int, target_pct: float, max_rounds: int) -> int:
    """How many rounds to add after ``rounds``: none once the target is met, nothing is judged or the
    limit is reached; else a pair (one A B and one B A keep the order balanced), or one where the
    projection asks for only one, never past ``max_rounds``. Adding a pair at a time and judging
    again, rather than the projection's whole count at once, stops as soon as the width allows."""
    if precision is None or precision.half_width_pct <= target_pct or rounds >= max_rounds:
        return 0
    wanted = min(2, max(1, rounds_for(precision, rounds, target_pct) - rounds))
    return min(wanted, max_rounds - rounds)


def precision_line(precision: Precision | None, rounds: int, target_pct: float | None) -> str:
    """The study's closing line on its precision, with the rounds a target would take."""
    if precision is None:
        return f"precision: no case's step time was judged after {rounds} round(s)"
    head = (
        f"precision: step time within ±{precision.half_width_pct:.1f}% after {rounds} round(s) "
        f"({precision.case_id})"
    )
    if target_pct is None or precision.half_width_pct <= target_pct:
        return head
    return f"{head}; ±{target_pct:g}% would take about {rounds_for(precision, rounds, target_pct)} rounds"
