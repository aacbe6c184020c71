"""A case's baseline from the runner's own history: its last accepted runs pooled into one result,
or the class's baseline file where the history is too short (``--perf-baseline``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from trainperf.case import Outcome
from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge import stats
from trainperf.judge.fingerprint import environment_changes
from trainperf.result import CaseResult, MetricValue
from trainperf.store.baselines import describe_file_baseline
from trainperf.store.interface import HistoryStore
from trainperf.store.records import HARDWARE_KEYS, ResultFilter, StoredCase, runner_env

DEFAULT_HISTORY_RUNS = 10


def pooled_baseline(case_id: str, gpu_class: str, history: Sequence[StoredCase]) -> CaseResult:
    """One baseline from several accepted runs: each metric's samples and keys pooled (so the gate's
    paired per-step test sees each step once per run), its value the median of the runs' values."""
    latest = history[-1]
    pooled: dict[str, MetricValue] = {}
    for name in sorted({n for case in history for n in case.metrics}):
        values = [case.metrics[name] for case in history if name in case.metrics]
        samples = [s for v in values for s in (v.samples or [])]
        keys = [k for v in values for k in (v.keys or [])]
        pooled[name] = MetricValue(
            value=stats.median([v.value for v in values]),
            unit=values[-1].unit,
            samples=samples or None,
            per_run=[v.value for v in values],
            keys=keys if keys and len(keys) == len(samples) else None,
        )
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(),
        gpu_class=gpu_class,
        outcome=Outcome.OK.value,
        metrics=pooled,
        effective_config=EffectiveConfig.from_dict(latest.effective_config),
        # Pooled from one runner's runs: its host time is that runner's, whatever the stored records say.
        fingerprint=Fingerprint.from_dict({**latest.fingerprint, "runner": latest.runner}),
        source=(
            f"history: {len(history)} accepted runs on runner {latest.runner}, "
            f"{history[0].started} .. {latest.started}"
        ),
    )


def history_baseline(
    store: HistoryStore,
    case_id: str,
    runner: str,
    n: int = DEFAULT_HISTORY_RUNS,
    *,
    gpu_class: str = "",
    fingerprint: dict[str, Any] | None = None,
    min_runs: int = 1,
    since: str = "",
) -> tuple[CaseResult | None, str]:
    """The case's baseline pooled from its last ``n`` accepted runs on ``runner``, and what it is.

    With ``fingerprint`` (this run's), only runs on the same hardware and driver are pooled; when
    the runner's machine changed, the description says what changed. With ``since`` (when the
    class's baseline file was written), only runs from then on are pooled: re-taking the baseline
    is how a team accepts an intended change, and the history must follow it. None (with the
    reason) when fewer than ``min_runs`` accepted runs remain: the caller falls back to the class's
    baseline."""
    history = store.stored_cases(case_id, ResultFilter(runner=runner, accepted_only=True, last=n))
    note = ""
    if since and history:
        kept = [case for case in history if _at_or_after(case.started, since)]
        if len(kept) < len(history):
            note = f"; runs before the class's baseline file ({since}) not pooled: it was written after them"
            history = kept
    if fingerprint is not None and history:
        current = runner_env(fingerprint)
        same = [case for case in history if case.runner_env == current]
        if len(same) < len(history):
            other = [case for case in history if case.runner_env != current][-1]
            changed = environment_changes(other.fingerprint, fingerprint)
            listed = ", ".join(
                f"{k} {a} -> {b}" for k, a, b in changed if k in HARDWARE_KEYS or k == "cuda_driver"
            )
            note += (
                f"; environment changed under runner {runner} ({listed or 'hardware'}): "
                "earlier runs not pooled"
            )
            history = same
    if len(history) < max(1, min_runs):
        have = f"{len(history)} accepted run{'s' if len(history) != 1 else ''}"
        reason = (
            f"{case_id} has {have} on runner {runner} (needs {max(1, min_runs)}){note}: "
            "judged against the class's baseline"
        )
        return None, reason
    described = (
        f"the last {len(history)} accepted runs on runner {runner} "
        f"({history[0].started} .. {history[-1].started}){note}"
    )
    return pooled_baseline(case_id, gpu_class, history), described


def _at_or_after(started: str, since: str) -> bool:
    """Whether an ISO time is at or after another (offsets honoured; unparseable: kept)."""
    try:
        return datetime.fromisoformat(started) >= datetime.fromisoformat(since)
    except (TypeError, ValueError):
        return True


def choose_baseline(
    mode: str,
    store: HistoryStore | None,
    case_id: str,
    runner: str,
    class_baseline: CaseResult | None,
    *,
    n: int = DEFAULT_HISTORY_RUNS,
    gpu_class: str = "",
    fingerprint: dict[str, Any] | None = None,
) -> tuple[CaseResult | None, str]:
    """``--perf-baseline file|history|auto``: the baseline to judge against, and a line naming it.

    ``auto`` takes the runner's history once it holds ``n`` accepted runs, the class's file before that;
    ``history`` takes whatever accepted runs there are, and falls back to the file when there are none.
    Either counts only runs from the time the class's baseline file was written."""
    file_line = describe_file_baseline(class_baseline)
    if mode == "file" or store is None:
        return class_baseline, file_line
    need = n if mode == "auto" else 1
    since = class_baseline.created if class_baseline is not None else ""
    pooled, described = history_baseline(
        store, case_id, runner, n, gpu_class=gpu_class, fingerprint=fingerprint, min_runs=need, since=since
    )
    if pooled is None:
        return class_baseline, f"{described} ({file_line})"
    return pooled, described
