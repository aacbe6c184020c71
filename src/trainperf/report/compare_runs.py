"""Two run folders side by side: run B judged case by case against run A (no I/O).

Typical use: the same runner class before (A) and after (B) a driver or library upgrade. Run A
plays the baseline: each case present in both runs goes through ``compare.compare_case``
exactly as a run is judged against its stored baseline (paired per-step ratios, bootstrap test,
tolerances of the class). ``trainperf compare`` (``cli.compare``) loads the folders, calls
:func:`compare_runs` and prints :func:`render` or :meth:`RunComparison.to_dict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainperf.case import Outcome
from trainperf.errors import TrainperfError
from trainperf.judge.compare import CaseVerdict, MetricVerdict, Verdict, timing_comparable
from trainperf.judge.fingerprint import environment_changes
from trainperf.judge.metrics import KERNEL_TIME, STEP_TIME
from trainperf.judge.verdict import judge_case
from trainperf.measure.hardware import GpuClass
from trainperf.report.table import align, format_value
from trainperf.result import CaseResult

# Case verdicts that fail a comparison; with strict, noisy and contaminated ones too (a busy host
# measured nothing that can be judged: a strict gate does not let it pass).
FAILING = (Verdict.REGRESSED, Verdict.OUTCOME_CHANGED, Verdict.CONFIG_CHANGED)
STRICTLY_FAILING = (Verdict.NOISY, Verdict.CONTAMINATED)

ENVIRONMENT_LABELS = {
    "gpu_name": "GPU name",
    "driver": "driver",
    "cuda_driver": "CUDA (driver)",
    "torch_cuda": "CUDA (torch)",
    "power_limit_w": "power limit W",
    "cpu_model": "CPU model",
    "cpu_count": "CPU count",
}

RATIO_LEGEND = (
    "A/B step s: each side's median step; B/A step: the median of per-step ratios, each step of B over "
    "the same step of A (paired by step, so it can differ from the ratio of the two medians), with its "
    "95% bootstrap interval (the runs resampled too where each side has several)"
)

KERNEL_LEGEND = (
    "B/A kernel: GPU kernel time of each window step of B over A's same step, the median and [range] "
    "over B's runs; it transfers across the machines of a class, the rest of a step (host) compares on "
    "one host only"
)

COLUMNS = (
    "case",
    "A step s",
    "B step s",
    "B/A step",
    "95% interval",
    "tok/s ratio",
    "peak alloc A->B",
    "verdict",
)


@dataclass(frozen=True, slots=True)
class CaseComparison:
    case_id: str
    a: CaseResult
    b: CaseResult
    verdict: CaseVerdict
    """B judged against A (``compare_case`` with A as the baseline)."""
    fails: bool
    timing_note: str = ""
    """Why timing metrics were not gated (empty when they were)."""

    def metric(self, name: str) -> MetricVerdict | None:
        return next((m for m in self.verdict.metrics if m.metric == name), None)

    @property
    def kernels(self) -> str:
        """Which kernel groups and kernels moved, where B's kernel time moved against A's."""
        return self.verdict.kernels


@dataclass(frozen=True, slots=True)
class RunComparison:
    label_a: str
    label_b: str
    gpu_class: str
    strict: bool
    environment: list[tuple[str, Any, Any]]
    """``fingerprint.environment_changes`` A -> B, from the first common case's fingerprints."""
    environment_case: str
    cases: list[CaseComparison] = field(default_factory=list)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.fails]

    @property
    def exit_status(self) -> int:
        """0 when nothing failed, 1 when any case did (a CI gate for an upgrade)."""
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.label_a,
            "run_b": self.label_b,
            "gpu_class": self.gpu_class,
            "strict": self.strict,
            "environment_changes": [{"key": key, "a": old, "b": new} for key, old, new in self.environment],
            "environment_from": self.environment_case,
            "cases": [_case_dict(c) for c in self.cases],
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
            "failed": [c.case_id for c in self.failed],
            "exit_status": self.exit_status,
        }


def _run_class(results: Sequence[CaseResult], label: str) -> str:
    if not results:
        raise TrainperfError(f"{label} has no result files (results/ is empty)")
    names = sorted({r.gpu_class for r in results})
    if len(names) > 1:
        raise TrainperfError(f"{label} mixes GPU classes ({', '.join(names)}): compare runs of one class")
    return names[0]


def compare_runs(
    results_a: Sequence[CaseResult],
    results_b: Sequence[CaseResult],
    *,
    classes: Mapping[str, GpuClass],
    tolerances: Mapping[str, Any],
    strict: bool = False,
    label_a: str = "A",
    label_b: str = "B",
) -> RunComparison:
    """Judge run B against run A, case by case; raise ``TrainperfError`` when they cannot be compared.

    ``classes`` is ``hardware.load_classes()``, ``tolerances`` is ``[tool.trainperf.tolerances]``.
    Verdicts are reached without ``compare_case``'s strict mode, which would fail every case
    on an environment change, the very thing compared here; ``strict`` makes noisy cases fail.
    A case with a contaminated run on either side (a busy host, a foreign process on the GPU) is
    ``contaminated``: its timing is shown, not judged, as in a nightly run.
    """
    class_a, class_b = _run_class(results_a, label_a), _run_class(results_b, label_b)
    if class_a != class_b:
        raise TrainperfError(f"{label_a} is {class_a}, {label_b} is {class_b}: compare runs of one class")
    gpu_class = classes.get(class_a)
    if gpu_class is None:
        raise TrainperfError(
            f"{label_a} and {label_b} are of class {class_a}, which fixtures/hardware does not define "
            f"(known: {', '.join(sorted(classes))})"
        )
    by_id_a = {r.case_id: r for r in results_a}
    by_id_b = {r.case_id: r for r in results_b}
    common = sorted(by_id_a.keys() & by_id_b.keys())
    if not common:
        raise TrainperfError(
            f"{label_a} ({len(by_id_a)} cases) and {label_b} ({len(by_id_b)} cases) have no case in common"
        )
    metrics = gpu_class.metrics(dict(tolerances))
    cases = []
    for case_id in common:
        a, b = by_id_a[case_id], by_id_b[case_id]
        timing = timing_comparable(a, b, gpu_class.timing_comparable_only_on_same)
        verdict = judge_case(b, a, metrics, expectation=Outcome.OK.value, timing=timing, strict=False)
        fails = verdict.verdict in FAILING or (strict and verdict.verdict in STRICTLY_FAILING)
        note = timing[1] or (verdict.reason if verdict.verdict is Verdict.CONTAMINATED else "")
        cases.append(CaseComparison(case_id, a, b, verdict, fails, note))
    first = common[0]
    return RunComparison(
        label_a=label_a,
        label_b=label_b,
        gpu_class=class_a,
        strict=strict,
        environment=environment_changes(
            by_id_a[first].fingerprint.to_dict(), by_id_b[first].fingerprint.to_dict()
        ),
        environment_case=first,
        cases=cases,
        only_in_a=sorted(by_id_a.keys() - by_id_b.keys()),
        only_in_b=sorted(by_id_b.keys() - by_id_a.keys()),
    )


# -- rendering -------------------------------------------------------------------------------


def _pct(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{(ratio - 1) * 100:+.1f}%"


def _value(result: CaseResult, name: str) -> float | None:
    metric = result.metrics.get(name)
    return metric.value if metric else None


def _row(case: CaseComparison) -> list[str]:
    step = case.metric(STEP_TIME)
    tps = case.metric("tokens_per_s")
    interval = step.interval if step else None
    alloc_a, alloc_b = _value(case.a, "peak_allocated_gib"), _value(case.b, "peak_allocated_gib")
    return [
        case.case_id,
        format_value(_value(case.a, STEP_TIME)),
        format_value(_value(case.b, STEP_TIME)),
        _pct(step.ratio if step else None),
        f"[{_pct(interval[0])}, {_pct(interval[1])}]" if interval else "-",
        _kernel_cell(case),
        _pct(tps.ratio if tps else None),
        "-" if alloc_a is None and alloc_b is None else f"{format_value(alloc_a)} -> {format_value(alloc_b)}",
        case.verdict.verdict.value
        + (" (fails)" if case.fails and case.verdict.verdict in STRICTLY_FAILING else ""),
    ]


def _table(rows: list[list[str]], kernel: bool) -> list[str]:
    """The table; with a kernel-time column after the step interval where any case has kernel time."""
    if not kernel:
        return align(list(COLUMNS), [row[:5] + row[6:] for row in rows])
    titles = list(COLUMNS)
    titles.insert(5, "B/A kernel")
    return align(titles, rows)


def _kernel_cell(case: CaseComparison) -> str:
    kernel = case.metric(KERNEL_TIME)
    if kernel is None or kernel.ratio is None:
        return "-"
    shown = "" if kernel.gated else " shown"
    if kernel.interval:
        return f"{_pct(kernel.ratio)} [{_pct(kernel.interval[0])}, {_pct(kernel.interval[1])}]{shown}"
    return f"{_pct(kernel.ratio)}{shown}"


def _environment_line(changes: list[tuple[str, Any, Any]]) -> str:
    if not changes:
        return "environment: no environment change"
    listed = "; ".join(f"{ENVIRONMENT_LABELS.get(key, key)} {old} -> {new}" for key, old, new in changes)
    return f"environment: {listed}"


def _planted_lines(comparison: RunComparison) -> list[str]:
    """A run measured with --perf-plant-slowdown is slower on purpose: say so above the table."""
    lines = []
    for side in ("a", "b"):
        planted = sorted({getattr(c, side).planted_slowdown for c in comparison.cases} - {0.0})
        if planted:
            listed = ", ".join(f"{p:+.0%}" for p in planted)
            lines.append(f"note: {side.upper()} was measured with a planted slowdown ({listed} per step)")
    return lines


def render(comparison: RunComparison) -> str:
    """The comparison as plain text: runs, environment diff, table, details, unmatched cases, summary."""
    kernel = any(case.metric(KERNEL_TIME) is not None for case in comparison.cases)
    lines = [
        f"A: {comparison.label_a}",
        f"B: {comparison.label_b}",
        f"class: {comparison.gpu_class}",
        _environment_line(comparison.environment),
        *_planted_lines(comparison),
        "",
        *_table([_row(c) for c in comparison.cases], kernel),
        RATIO_LEGEND,
        *([KERNEL_LEGEND] if kernel else []),
    ]
    details = [f"{case.case_id}: {case.verdict.parts}" for case in comparison.cases if case.verdict.parts]
    details += [f"{case.case_id}: what moved: {case.kernels}" for case in comparison.cases if case.kernels]
    for case in comparison.cases:
        if case.verdict.verdict not in (Verdict.PASS, Verdict.EXPECTED_OOM):
            details.append(f"{case.case_id}: {case.verdict.verdict.value} - {case.verdict.reason}")
        if case.timing_note and case.verdict.verdict is not Verdict.CONTAMINATED:
            details.append(f"{case.case_id}: timing shown, not gated ({case.timing_note})")
    if details:
        lines += ["", *details]
    unmatched = [
        f"only in {side}: {', '.join(ids)}"
        for side, ids in (("A", comparison.only_in_a), ("B", comparison.only_in_b))
        if ids
    ]
    if unmatched:
        lines += ["", *unmatched]
    counts: dict[str, int] = {}
    for case in comparison.cases:
        counts[case.verdict.verdict.value] = counts.get(case.verdict.verdict.value, 0) + 1
    summary = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    failed = len(comparison.failed)
    outcome = f"{failed} failing" if failed else "nothing failing"
    lines += ["", f"{len(comparison.cases)} cases compared: {summary}; {outcome}"]
    return "\n".join(lines)


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def _case_dict(case: CaseComparison) -> dict[str, Any]:
    return {
        "case_id": case.case_id,
        "verdict": case.verdict.verdict.value,
        "fails": case.fails,
        "reason": case.verdict.reason,
        "parts": case.verdict.parts,
        "kernels": case.kernels,
        "outcome_a": case.a.outcome,
        "outcome_b": case.b.outcome,
        "planted_slowdown_a": case.a.planted_slowdown,
        "planted_slowdown_b": case.b.planted_slowdown,
        "timing_comparable": not case.timing_note,
        "timing_note": case.timing_note,
        "metrics": [
            {
                "metric": m.metric,
                "verdict": m.verdict.value,
                "a": _finite(m.baseline),
                "b": _finite(m.current),
                "ratio": _finite(m.ratio),
                "interval": [_finite(m.interval[0]), _finite(m.interval[1])] if m.interval else None,
                "p_value": _finite(m.p_value),
                "gated": m.gated,
                "note": m.note,
            }
            for m in case.verdict.metrics
        ],
        "config_changes": [{"key": k, "a": old, "b": new} for k, old, new in case.verdict.config_changes],
    }
