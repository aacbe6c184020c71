"""The record of one measured case: its metrics, runs, verdict and provenance (schema-versioned).

A baseline has the same schema as a result (plus where it came from), so a run folder's results
can be promoted to baselines verbatim and compared with the same code. Files: ``store.results``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from trainperf.case_record import CaseRecord
from trainperf.cliff_record import CliffRecord
from trainperf.config_record import EffectiveConfig
from trainperf.errors import TrainperfError
from trainperf.fingerprint_record import Fingerprint
from trainperf.limits_record import Limits
from trainperf.memory_estimate import MemoryEstimate
from trainperf.profile_record import ProfileSummary
from trainperf.reference_record import ReferenceLine
from trainperf.run_record import KernelShare, RunRecord
from trainperf.stored_verdict import StoredVerdict
from trainperf.trace_record import TraceRecord

SCHEMA_VERSION = 1


@dataclass(slots=True)
class MetricValue:
    value: float
    unit: str
    samples: list[float] | None = None
    """Per-step samples behind the value (step times, per-step throughput), pooled over repeats."""
    per_run: list[float] | None = None
    """The value of each repeat (fresh child), for run-to-run spread."""
    keys: list[str] | None = None
    """One key per sample naming the work it measured (``step:tokens``). Synthetic data is
    deterministic, so step k is the same batch in every run and samples can be paired."""


@dataclass(slots=True)
class KernelSummary:
    """Where a result's GPU kernel time goes per step: by group (the median over its runs) and its top
    kernels (its last run's); what a kernel-time change is explained by."""

    groups_ms: dict[str, float] = field(default_factory=dict)
    top: list[KernelShare] = field(default_factory=list)
    runs: int = 0
    roles_ms: dict[str, float] = field(default_factory=dict)
    """Per process role where a family's kernels run in processes of its own (verl's ``rollout`` and
    ``training``): the median over its runs; empty otherwise."""

    @classmethod
    def from_dict(cls, data: Any) -> KernelSummary | None:
        if not isinstance(data, dict):
            return None
        return cls(
            groups_ms={str(k): float(v) for k, v in (data.get("groups_ms") or {}).items()},
            top=[KernelShare(**entry) for entry in data.get("top") or []],
            runs=int(data.get("runs") or 0),
            roles_ms={str(k): float(v) for k, v in (data.get("roles_ms") or {}).items()},
        )


@dataclass(slots=True)
class CaseResult:
    case_id: str
    case: CaseRecord
    """The case measured, as ``Case.to_dict`` wrote it (``case_record``); empty for a pooled baseline."""
    gpu_class: str
    outcome: str
    message: str = ""
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    effective_config: EffectiveConfig = field(default_factory=EffectiveConfig)
    """What the first child that ran reported it ran with (``config_record``)."""
    fingerprint: Fingerprint = field(default_factory=Fingerprint)
    """The machine and the stack's versions (``fingerprint_record``)."""
    runs: list[RunRecord] = field(default_factory=list)
    """One record per fresh child: exit, steps, warm-up, stalls, timings, idle check, log folder."""
    verdict: StoredVerdict = field(default_factory=StoredVerdict)
    references: list[ReferenceLine] | None = None
    """Measured / published for matching published reference points (never gating)."""
    cliff: CliffRecord | None = None
    """For an OOM-cliff search: the axis, range, probes, result and its confirmation."""
    estimate: MemoryEstimate | None = None
    """Peak allocator memory estimated before launch (``trainperf.plan.estimate``), shown beside the measured
    peak."""
    trace: TraceRecord | None = None
    """With --perf-trace: the first traced run's trace record (file, size, analysis summary)."""
    profile: ProfileSummary | None = None
    """The profile summary of a profiled run (``traces.profile``): GPU time per step by group,
    host-side time, top kernels, the allocator's largest blocks; a baseline's is what a regression's
    diagnosis compares with."""
    planted: str | None = None
    """``--perf-plant KIND[:AMOUNT]``: a planted regression of one nature (never baselined)."""
    kernels: KernelSummary | None = None
    """Where the GPU's kernel time goes per step (``measure.step_parts``); None without kernel time."""
    limits: Limits | None = None
    """How far from the GPU's limits (``trainperf.plan.headroom``): model FLOPs per token and step with
    their formula, achieved TFLOP/s, MFU against the class's peak (or why n/a), energy per million
    tokens, headroom to a stored OOM cliff."""
    emulated: str | None = None
    planted_slowdown: float = 0.0
    created: str = ""
    source: str = ""
    """For a baseline: the run folder and command it came from."""
    schema_version: int = SCHEMA_VERSION

    def take_child_config(self, child: Mapping[str, Any]) -> None:
        """Keep the configuration the first child that reported one ran with, and its stack and device in
        the fingerprint (``protocol.read_child_result``): every child of a case runs the same one."""
        if child.get("effective_config") and self.effective_config == EffectiveConfig():
            self.effective_config = EffectiveConfig.from_dict(child["effective_config"])
            self.fingerprint = self.fingerprint.with_child(child)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["case"] = self.case.to_dict()
        data["effective_config"] = self.effective_config.to_dict()
        data["fingerprint"] = self.fingerprint.to_dict()
        data["runs"] = [run.to_dict() for run in self.runs]
        data["references"] = (
            [line.to_dict() for line in self.references] if self.references is not None else None
        )
        data["verdict"] = self.verdict.to_dict()
        data["cliff"] = self.cliff.to_dict() if self.cliff else None
        data["estimate"] = self.estimate.to_dict() if self.estimate else None
        data["limits"] = self.limits.to_dict() if self.limits else None
        data["trace"] = self.trace.to_dict() if self.trace else None
        data["profile"] = self.profile.to_dict() if self.profile else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "result") -> CaseResult:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise TrainperfError(
                f"{origin} has schema version {version}, this trainperf reads {SCHEMA_VERSION}; "
                "re-create it with --perf-update-baselines (or use the trainperf that wrote it)"
            )
        payload = dict(data)
        metrics = data.get("metrics", {})
        if not isinstance(metrics, dict) or not all(isinstance(v, dict) for v in metrics.values()):
            raise TypeError("'metrics' must be an object of metric objects")
        payload["metrics"] = {name: MetricValue(**value) for name, value in metrics.items()}
        runs = data.get("runs") or []
        if not isinstance(runs, list):
            raise TypeError("'runs' must be a list of run objects")
        payload["runs"] = [RunRecord.from_dict(run) for run in runs]
        if "case" in data:  # a result without one is not read (a TypeError names it)
            payload["case"] = CaseRecord.from_dict(data["case"])
        if "effective_config" in data:
            payload["effective_config"] = EffectiveConfig.from_dict(data["effective_config"])
        payload["fingerprint"] = Fingerprint.from_dict(data.get("fingerprint"))
        payload["references"] = _reference_lines(data.get("references"))
        payload["kernels"] = KernelSummary.from_dict(data.get("kernels"))
        payload["verdict"] = StoredVerdict.from_dict(data.get("verdict"))
        payload["cliff"] = CliffRecord.from_dict(data.get("cliff"))
        payload["estimate"] = MemoryEstimate.from_dict(data.get("estimate"))
        payload["limits"] = Limits.from_dict(data.get("limits"))
        payload["trace"] = TraceRecord.from_dict(data.get("trace"))
        payload["profile"] = ProfileSummary.from_dict(data.get("profile"))
        return cls(**payload)


def _reference_lines(stored: Any) -> list[ReferenceLine] | None:
    """A result's stored reference lines; None where it has none (the file's null)."""
    if not isinstance(stored, list):
        return None
    return [line for entry in stored if (line := ReferenceLine.from_dict(entry)) is not None]


def requested_steps(result: CaseResult | None) -> int | None:
    """The steps a result's runs were told to run (a baseline's: like for like), None without a record."""
    recorded = [run.steps_requested for run in result.runs] if result else []
    return recorded[0] if recorded and recorded[0] else None


INTERRUPTED = "interrupted"
NOT_RUN = "not run"
SKIPPED_AT_START = "skipped"
"""A case its session skipped before any ran, for a reason the host gives (more GPUs than it has)."""
SKIP_CAUSE_CHARS = 60
"""The longest skip reason a headline repeats; the whole one is under the table."""


def skip_cause(message: str) -> str:
    """A skip's reason in a few words: its first clause (``environment 'verl-vllm' does not exist``
    of ``... does not exist (no .venvs/...): create it with ...``), "" where it gives none."""
    first = re.split(r" \(|: |; ", message.strip(), maxsplit=1)[0].strip()
    return first if len(first) <= SKIP_CAUSE_CHARS else first[: SKIP_CAUSE_CHARS - 3] + "..."


@dataclass(frozen=True, slots=True)
class Unjudged:
    """A case of the selection without a result: cut short (its kept runs said), never started, or
    skipped at the start (the host lacks what it needs)."""

    case_id: str
    state: str
    """``INTERRUPTED``, ``NOT_RUN`` or ``SKIPPED_AT_START``."""
    why: str
    cause: str = ""
    """Why it was not run, in a few words the headline counts by (``in an interrupted shard``)."""

    def to_dict(self) -> dict[str, str]:
        return {"case_id": self.case_id, "state": self.state, "why": self.why, "cause": self.cause}

    @classmethod
    def from_dict(cls, data: Any) -> Unjudged | None:
        """The record, or None for anything that is not one."""
        if (
            not isinstance(data, dict)
            or not data.get("case_id")
            or data.get("state") not in (INTERRUPTED, NOT_RUN, SKIPPED_AT_START)
        ):
            return None
        return cls(
            str(data["case_id"]), str(data["state"]), str(data.get("why") or ""), str(data.get("cause") or "")
        )
