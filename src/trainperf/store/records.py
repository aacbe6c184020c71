"""What the results history keeps and gives back, without a database: a run's identity and the
keys that make writes idempotent, and the records its reads return (``store/interface.py``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainperf.case import Outcome
from trainperf.result import CaseResult, MetricValue

RUNNER_ENV = "TRAINPERF_RUNNER"
# The machine under a runner label: a change of any of these is an environment change, never pooled.
HARDWARE_KEYS = ("gpu_name", "gpu_uuid", "driver", "cuda_driver", "cpu_model", "power_limit_w")
# Verdicts that keep a run out of the history baseline: a regression must not become the new normal.
REJECTED_VERDICTS = ("regressed", "outcome-changed", "config-changed", "contaminated")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as the store keeps it (a pytest session, ``trainperf ab``, fidelity, a cliff search)."""

    run_key: str
    kind: str
    started: str
    fingerprint: dict[str, Any]
    runner: str
    gpu_class: str | None = None
    ended: str | None = None
    commit: str | None = None
    run_dir: str | None = None
    argv: list[str] | None = None


@dataclass(slots=True)
class CaseItem:
    """A case result to store, with where its file is and its place in the run."""

    result: CaseResult
    result_path: str | None = None
    variant: str = ""
    seq: int = 0


def runner_label(
    fingerprint: dict[str, Any], explicit: str | None = None, env: dict[str, str] | None = None
) -> str:
    """The runner's identity: ``--perf-runner`` > ``TRAINPERF_RUNNER`` > host and GPU UUID."""
    environ = os.environ if env is None else env
    label = explicit or environ.get(RUNNER_ENV)
    if label:
        return label
    return f"{fingerprint.get('hostname') or 'unknown-host'}/{fingerprint.get('gpu_uuid') or 'cpu'}"


def runner_env(fingerprint: dict[str, Any]) -> str:
    """A short hash of the hardware and driver under a runner label."""
    return _digest(json.dumps({k: fingerprint.get(k) for k in HARDWARE_KEYS}, sort_keys=True))[:16]


def config_hash(effective_config: dict[str, Any]) -> str:
    return _digest(json.dumps(effective_config, sort_keys=True, default=str))[:16]


def result_key(result: CaseResult, variant: str = "") -> str:
    fp = result.fingerprint
    return _digest(f"{result.case_id}|{variant}|{result.created}|{fp.hostname}|{fp.gpu_uuid}")


def run_key(started: str, fingerprint: dict[str, Any], extra: str = "") -> str:
    return _digest(f"{started}|{fingerprint.get('hostname')}|{fingerprint.get('gpu_uuid')}|{extra}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def accepted(result: CaseResult) -> bool:
    """Whether a result may stand in a history baseline: it ran, untouched, and was not judged worse."""
    return (
        result.outcome == Outcome.OK
        and not result.planted_slowdown
        and not result.planted  # a --perf-plant regression is a drill, never the runner's normal
        and not result.emulated
        and result.verdict.verdict not in REJECTED_VERDICTS
    )


@dataclass(slots=True)
class StoredCase:
    """A case result read back from the store, with its run's identity."""

    row: int
    run_key: str
    started: str
    runner: str
    runner_env: str
    case_id: str
    variant: str
    outcome: str
    verdict: str | None
    accepted: bool
    run_dir: str | None
    result_path: str | None
    fingerprint: dict[str, Any]
    effective_config: dict[str, Any]
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """95% interval of each metric's median, where it has samples."""


@dataclass(frozen=True, slots=True)
class ResultFilter:
    """Which of a case's stored results to read (``HistoryStore.stored_cases``): by default every
    result of the nightly case (the empty variant), each with all its metrics."""

    runner: str | None = None
    accepted_only: bool = False
    last: int | None = None
    """Only the latest N (of those that pass the rest)."""
    with_metrics: Sequence[str] | None = None
    """Only these metrics of each result; None: all."""
    variants: Sequence[str] = ("",)


EVERY_RESULT = ResultFilter()


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One stored case result placed in its run: when its run started and ended, when it started,
    and its step time (for change points)."""

    run_row: int
    run_started: str
    run_ended: str | None
    case_id: str
    created: str
    step_time_s: float | None


@dataclass(slots=True)
class Point:
    """One run's result of a case, with the values of the metrics asked for."""

    run_key: str
    started: str
    runner: str
    runner_env: str
    case_id: str
    created: str
    """When the case ended (a fidelity run's children each have their own)."""
    outcome: str
    verdict: str | None
    run_dir: str | None
    fingerprint: dict[str, Any]
    steps: int | None
    """The steps its runs were told to run (None in results stored before it was kept)."""
    values: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class StoredRun(Point):
    """A stored result as the dashboard reads it: a point of its case's series with what the gate
    said of it (planted ones and contaminated ones too, which the series leave out)."""

    planted: float = 0.0
    commit: str | None = None
    judged_against: str | None = None
    message: str | None = None
    result_path: str | None = None
    kind: str = ""
    """How the dashboard draws it (``report.trend_model.kind_of``), worked out once."""

    @property
    def commit_short(self) -> str:
        return (self.commit or "")[:8]

    @property
    def in_series(self) -> bool:
        """Whether a case's series holds it: a planted slowdown checks the gate and a contaminated
        run shared its GPU, so neither is history."""
        return not self.planted and self.verdict != "contaminated"


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A stored result of a case that no series holds."""

    created: str
    runner: str
    run_dir: str | None
    why: str


@dataclass(frozen=True, slots=True)
class MetricVerdict:
    """A stored result's verdict on one of its metrics."""

    run_key: str
    created: str
    verdict: str | None
    stored: bool
    """Whether the verdict was stored with the metric: results stored before it was kept have
    none, and their result file (``result_path``) says it."""
    result_path: str | None
