"""The fidelity benchmark's records as its run folder keeps them: ``fidelity.json`` (the plan and each
child as it finished, what ``--resume`` goes on from) and ``fidelity-report.json`` (the analysis:
overhead, noise, detection of planted slowdowns, the power check).

A report written before the paired overhead or the window's noise existed has neither: those read as
None and are not written back, and render as they did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainperf.case import Outcome
from trainperf.errors import TrainperfError
from trainperf.fingerprint_record import Fingerprint
from trainperf.jsonio import stored_number, stored_number_or_none
from trainperf.measure import fidelity_stats as fidelity
from trainperf.workloads.protocol import BARE_WINDOW_START


@dataclass(frozen=True, slots=True)
class Plan:
    case_id: str
    steps: int
    aa_repeats: int
    bare_runs: int
    plant_fractions: tuple[float, ...]
    plant_runs: int
    window_after: int = BARE_WINDOW_START
    """Overhead and power are measured over the steps after this one. Later than the default
    leaves out warm-up steps that vary from run to run (the allocator growing for a new longest
    batch: two such steps gave each 16-step run 2% of tokens/s noise on an H100)."""

    def __post_init__(self) -> None:
        if self.aa_repeats < 2:
            raise TrainperfError("--aa must be at least 2: noise needs several fresh runs per series")
        if self.window_after < 1:
            raise TrainperfError("--window-after must be at least 1: the first step is never steady")
        if self.steps <= self.window_after + 4:
            raise TrainperfError(
                f"--steps must be more than {self.window_after + 4}: the window starts after step "
                f"{self.window_after}"
            )
        if any(not 0 < f < 1 for f in self.plant_fractions):
            raise TrainperfError("--plant takes fractions between 0 and 1, e.g. 0.03,0.05")

    def schedule(self) -> list[str]:
        """Labels of the children in launch order, round by round."""
        return [label for _round, label in self.rounds()]

    def rounds(self) -> list[tuple[int, str]]:
        """(round, label) of the children in launch order."""
        entries: list[tuple[int, str]] = []
        for round_index in range(max(self.aa_repeats, self.bare_runs, self.plant_runs)):
            if round_index < self.aa_repeats:
                entries.append((round_index, fidelity.AA_BASE))
            if round_index < self.bare_runs:
                entries.append((round_index, fidelity.BARE))
            if round_index < self.aa_repeats:
                entries.append((round_index, fidelity.AA_OTHER))
            if round_index < self.plant_runs:
                entries.extend((round_index, fidelity.planted_label(f)) for f in self.plant_fractions)
        return entries

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """The plan as saved; one saved before a field existed gets its default."""
        return cls(**{**data, "plant_fractions": tuple(data["plant_fractions"])})


@dataclass(frozen=True, slots=True)
class FidelityChild:
    """One finished child: its label in the plan, its folder under the run folder, how it ended."""

    label: str
    dir: str
    outcome: Outcome
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "dir": self.dir, "outcome": self.outcome.value, "message": self.message}

    @classmethod
    def from_dict(cls, data: Any) -> FidelityChild:
        return cls(
            str(data["label"]), str(data["dir"]), Outcome(data["outcome"]), str(data.get("message", ""))
        )


@dataclass(frozen=True, slots=True)
class FidelityState:
    """A fidelity run's progress (``fidelity.json``): the plan it was started with and the children
    finished so far, in launch order."""

    plan: Plan
    children: tuple[FidelityChild, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "children": [child.to_dict() for child in self.children]}

    @classmethod
    def from_dict(cls, data: Any) -> FidelityState:
        """The state; a file that holds none raises (KeyError, TypeError or ValueError)."""
        return cls(Plan.from_dict(data["plan"]), tuple(FidelityChild.from_dict(c) for c in data["children"]))


@dataclass(frozen=True, slots=True)
class DetectionRow:
    """Per tolerance and series: how many single runs the gate flagged, and the pooled verdict."""

    tolerance: float
    series: str
    single_flagged: int
    single: int
    pooled: str | None = None
    """None where the series had no pooled judgement (and then no ``pooled_ratio`` is written)."""
    pooled_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "tolerance": self.tolerance,
            "series": self.series,
            "single_flagged": self.single_flagged,
            "single": self.single,
        }
        if self.pooled is not None:
            row.update(pooled=self.pooled, pooled_ratio=self.pooled_ratio)
        return row

    @classmethod
    def from_dict(cls, data: Any) -> DetectionRow:
        pooled = data.get("pooled")
        return cls(
            stored_number(data["tolerance"]),
            str(data["series"]),
            int(data["single_flagged"]),
            int(data["single"]),
            str(pooled) if pooled is not None else None,
            stored_number_or_none(data.get("pooled_ratio")),
        )


@dataclass(frozen=True, slots=True)
class FidelityReport:
    """The analysis of a fidelity run (``fidelity-report.json``), made from its files alone."""

    case_id: str
    run: str
    """The run folder's name."""
    plan: Plan
    children_done: int
    children_planned: int
    gpu: Fingerprint
    """The machine's fingerprint as the session recorded it (``measure.host``)."""
    overhead: fidelity.Overhead
    noise: fidelity.Noise
    default_tolerance: float
    detection: tuple[DetectionRow, ...]
    judgements: tuple[fidelity.Judgement, ...]
    smallest_detected_at_default: float | None
    power: fidelity.PowerCheck
    overhead_paired: fidelity.PairedOverhead | None = None
    window_noise: fidelity.WindowNoise | None = None

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "case_id": self.case_id,
            "run": self.run,
            "plan": self.plan.to_dict(),
            "children_done": self.children_done,
            "children_planned": self.children_planned,
            "gpu": self.gpu.to_dict(),
            "overhead": self.overhead.to_dict(),
            "overhead_paired": self.overhead_paired.to_dict() if self.overhead_paired else None,
            "noise": self.noise.to_dict(),
            "default_tolerance": self.default_tolerance,
            "detection": [row.to_dict() for row in self.detection],
            "judgements": [judgement.to_dict() for judgement in self.judgements],
            "smallest_detected_at_default": self.smallest_detected_at_default,
            "power": self.power.to_dict(),
            "window_noise": self.window_noise.to_dict() if self.window_noise else None,
        }
        optional = ("overhead_paired", "window_noise")
        return {key: value for key, value in stored.items() if value is not None or key not in optional}

    @classmethod
    def from_dict(cls, data: Any) -> FidelityReport:
        """The report; a file that holds none raises (KeyError, TypeError or ValueError)."""
        return cls(
            case_id=str(data["case_id"]),
            run=str(data["run"]),
            plan=Plan.from_dict(data["plan"]),
            children_done=int(data["children_done"]),
            children_planned=int(data["children_planned"]),
            gpu=Fingerprint.from_dict(data.get("gpu")),
            overhead=overhead_of(data["overhead"]),
            overhead_paired=paired_overhead_of(data.get("overhead_paired")),
            noise=fidelity.Noise(
                int(data["noise"]["runs"]), dict(data["noise"]["cv"]), dict(data["noise"]["per_run"])
            ),
            default_tolerance=stored_number(data["default_tolerance"]),
            detection=tuple(DetectionRow.from_dict(row) for row in data["detection"]),
            judgements=tuple(judgement_of(j) for j in data["judgements"]),
            smallest_detected_at_default=stored_number_or_none(data.get("smallest_detected_at_default")),
            power=fidelity.PowerCheck(**data["power"]),
            window_noise=window_noise_of(data.get("window_noise")),
        )


def _interval(stored: Any) -> tuple[float, float] | None:
    """A stored 95% interval, ``[low, high]``, or None where there was none."""
    return (stored_number(stored[0]), stored_number(stored[1])) if stored else None


def overhead_of(data: Any) -> fidelity.Overhead:
    return fidelity.Overhead(
        list(data["harness_tokens_per_s"]),
        list(data["bare_tokens_per_s"]),
        stored_number_or_none(data.get("slowdown")),
        _interval(data.get("interval")),
    )


def paired_overhead_of(data: Any) -> fidelity.PairedOverhead | None:
    """The paired overhead, or None in a report written before it existed."""
    if not isinstance(data, dict):
        return None
    return fidelity.PairedOverhead(
        int(data["rounds"]),
        stored_number_or_none(data.get("slowdown")),
        _interval(data.get("interval")),
        list(data.get("per_round") or []),
    )


def judgement_of(data: Any) -> fidelity.Judgement:
    return fidelity.Judgement(
        str(data["series"]),
        bool(data["pooled"]),
        str(data["comparison"]),
        stored_number(data["tolerance"]),
        str(data["verdict"]),
        stored_number_or_none(data.get("ratio")),
        _interval(data.get("interval")),
        stored_number_or_none(data.get("p_value")),
    )


def window_noise_of(data: Any) -> fidelity.WindowNoise | None:
    """The window's noise, or None in a report written before it existed. Its steps are numbers (a
    JSON file keeps them as strings)."""
    if not isinstance(data, dict):
        return None
    return fidelity.WindowNoise(
        int(data["after_step"]),
        int(data["runs"]),
        stored_number_or_none(data.get("tokens_per_s_cv")),
        {int(step): stored_number(cv) for step, cv in data["step_cv"].items()},
        [int(step) for step in data["unsteady_steps"]],
        stored_number_or_none(data.get("unsteady_time_share")),
    )
