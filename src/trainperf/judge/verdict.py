"""The one room where a case's verdict is reached (no I/O): which reference each figure is judged
against, which timing figures gate, contamination, whether a regression needs confirming, and the line
that says which part of a step moved.

A step's time has two parts. The GPU's kernel time transfers across machines of a class: it is judged
against the class's baseline file, on any runner, and it is deterministic enough that a regression of
it fails at once. The host's share (step time less kernel time) compares only on the same runner: it is
judged against that runner's own reference (its history, or a baseline file taken there), and only
while the host's speed index sits within its own noise; elsewhere it is shown, with one line saying why
and how to gate it. Wall-clock figures (step time, tokens/s, energy) hold both parts and gate where both
do. A result without kernel time (the CPU class) is judged on wall time as before; against a reference
taken before kernel time was recorded, wall time gates on the same runner or where the step is nearly all
kernels, and is shown elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from trainperf.case import Outcome
from trainperf.judge import stats
from trainperf.judge.comparability import OPEN, Gate, PartGates
from trainperf.judge.compare import CaseVerdict, MetricVerdict, Verdict, compare_case
from trainperf.judge.contamination import Contamination, apply_contamination
from trainperf.judge.host_runs import with_host_run_floor
from trainperf.judge.host_spells import FullSpeedSteps, full_speed_steps
from trainperf.judge.kernel_changes import group_deltas, kernel_changes
from trainperf.judge.metrics import (
    HOST_INDEX,
    HOST_SPEED,
    HOST_TIME,
    KERNEL_TIME,
    SM_CLOCK,
    STEP_TIME,
    Metric,
    Part,
    metrics_of_part,
    resolve_metric,
)
from trainperf.result import CaseResult, KernelSummary, MetricValue

HOST_INDEX_FLOOR = 0.25
"""The host index moved this much between fresh children of one cloud H100 host whose steps took the
same time (0.72 to 1.49 on a host of four GPUs busy at once; docs/verdicts.md): a smaller move is the
index's own noise there, never a reason to stop judging host time."""
HOST_INDEX_NOISE_MULTIPLE = 3.0
"""Beyond this many robust sigmas of the reference's own runs, the host index has moved."""
HOST_INDEX_WIDEST_MULTIPLE = 1.5
"""Or beyond 1.5 times the widest move of one of the reference's runs from their median: a baseline of
two or three runs says too little for a sigma, but not nothing."""
SM_CLOCK_TOLERANCE = 0.02
"""A GPU whose steady SM clock sits this much below the reference's ran down-clocked."""
OWN_RUNNER = "compares on its own runner only"
"""How a verdict says its host time was shown because the reference is another runner's."""
OWN_POWER_CAP = 0x4
"""NVML's software power cap: a card at its cap while it trains is the case's own load."""
GPU_BOUND_SHARE = 0.95
"""Where kernels fill this much of a step, the host's share cannot carry the step past its tolerance
on another host (host time moved 26-35% between cloud H100s of one kind; 5% of a step times 35% is
1.75%, under step time's 3%): wall time against a reference without kernel time still tells the GPU's
work there. Below it the step is the host's as much as the GPU's, and a reference from another runner
would read the host."""


def judge_case(
    result: CaseResult,
    reference: CaseResult | None,
    metrics: Mapping[str, Metric],
    *,
    expectation: str,
    timing: tuple[bool, str],
    strict: bool,
    device_reference: CaseResult | None = None,
) -> CaseVerdict:
    """A case's verdict. ``reference`` is what it is judged against (the class's file or the runner's
    history); ``device_reference`` the class's file, whose kernel time is the class's, where the
    reference is the runner's history. ``timing``: whether the class lets timing compare at all (an
    emulated run, another CPU on the CPU class), and why not."""
    both = [*result.runs, *(reference.runs if reference is not None else [])]
    contamination = Contamination.of_runs(both)
    reference = with_device_figures(reference, device_reference)
    split = reference is not None and KERNEL_TIME in reference.metrics and KERNEL_TIME in result.metrics
    spells = full_speed_steps(result, reference, metrics) if split and reference is not None else None
    gates = part_gates(result, reference, timing, contamination, host_matched=spells is not None)
    judged_metrics = dict(metrics)
    if split and reference is not None and gates.host.open:
        # Host time gates here: at no less than what this runner's own processes moved (over the
        # full-speed steps where those were selected: the spells' mix is then no longer in the figure).
        judged_metrics = with_host_run_floor(metrics, spells.reference if spells else reference)
    verdict = compare_case(
        spells.result if spells else result,
        spells.reference if spells else reference,
        judged_metrics,
        expectation=expectation,
        strict=strict,
        gates=gates,
    )
    if spells is not None:
        for judged in verdict.metrics:
            if judged.metric in spells.metrics:
                judged.note = "; ".join(part for part in (judged.note, spells.note()) if part)
    kernel_judged = gates.device.open and KERNEL_TIME in result.metrics
    verdict = apply_contamination(
        verdict,
        contamination,
        strict=strict,
        out_of_memory=result.outcome == Outcome.OOM.value,
        kernel_judged=kernel_judged,
    )
    verdict.parts = parts_line(verdict, result, reference, judged_metrics.get(STEP_TIME), spells)
    verdict.kernels = moved_kernels(verdict, result, reference)
    verdict.confirm = needs_confirmation(verdict, metrics)
    return verdict


def with_device_figures(reference: CaseResult | None, device: CaseResult | None) -> CaseResult | None:
    """The reference with its device-part figures (kernel time) and kernel summary taken from the class's
    file: a runner's history judges its host, the class judges its GPU's work."""
    if reference is None or device is None or device is reference or KERNEL_TIME not in device.metrics:
        return reference
    figures = {name: value for name, value in device.metrics.items() if name in metrics_of_part(Part.DEVICE)}
    return dataclasses.replace(
        reference, metrics={**reference.metrics, **figures}, kernels=device.kernels or reference.kernels
    )


def part_gates(
    result: CaseResult,
    reference: CaseResult | None,
    timing: tuple[bool, str],
    contamination: Contamination | None,
    *,
    host_matched: bool = False,
) -> PartGates:
    """Which timing figures gate, by the part of the machine they depend on. ``host_matched``: host time
    is judged over the steps both sides' hosts ran at full speed (``host_spells``)."""
    comparable, why = timing
    if not comparable:
        return PartGates.uniform(False, why)
    if contamination is not None and contamination.on_gpu:
        return PartGates.uniform(False, contamination.note())
    if reference is None or KERNEL_TIME not in result.metrics:
        return PartGates.uniform(contamination is None, contamination.note() if contamination else "")
    if KERNEL_TIME not in reference.metrics:
        return legacy_reference_gates(result, reference, contamination)
    device = device_gate(result, reference)
    host = host_gate(result, reference, contamination, host_matched=host_matched)
    whole = OPEN if host.open and device.open else Gate(False, host.why or device.why)
    return PartGates(device, host, whole)


def legacy_reference_gates(
    result: CaseResult, reference: CaseResult, contamination: Contamination | None
) -> PartGates:
    """A reference taken before kernel time was recorded: its wall time cannot be split, so it gates
    where the host compares (the same runner, the host index still) or where this step is nearly all
    kernels; elsewhere it is shown, with how to gate it."""
    if contamination is not None:
        return PartGates.uniform(False, contamination.note())
    if host_gate(result, reference, contamination).open:
        return PartGates.uniform(True)
    share = kernel_share(result)
    if share is not None and share >= GPU_BOUND_SHARE:
        return PartGates.uniform(True)
    shown = f"kernels are {share:.0%} of this step" if share is not None else "this step has no step time"
    return PartGates.uniform(
        False,
        f"the reference has no kernel time and {shown}: the rest is host time, which {OWN_RUNNER} and "
        f"the reference is {_runner(reference.fingerprint.runner)}'s; re-take the baseline with "
        "kernel time to gate it on any runner (trainperf baselines --stale lists such baselines)",
    )


def kernel_share(result: CaseResult) -> float | None:
    """The median kernel time's share of the median step, or None without both."""
    kernel, step = result.metrics.get(KERNEL_TIME), result.metrics.get(STEP_TIME)
    if kernel is None or step is None or step.value <= 0:
        return None
    return kernel.value / (step.value * 1000.0)


def device_gate(result: CaseResult, reference: CaseResult) -> Gate:
    """The GPU's kernel time gates where both windows ran the same batches, unless the GPU ran
    down-clocked against the reference (its own power cap, which is the case's load, excepted)."""
    mine, theirs = result.metrics[KERNEL_TIME].keys, reference.metrics[KERNEL_TIME].keys
    if mine and theirs and not set(mine) & set(theirs):
        return Gate(
            False,
            f"the kernel window ran other batches ({', '.join(sorted(set(mine)))}) than the reference's "
            f"({', '.join(sorted(set(theirs)))}): give the runs the reference's step count (--perf-steps)",
        )
    current, base = result.metrics.get(SM_CLOCK), reference.metrics.get(SM_CLOCK)
    if current is None or base is None or not base.value:
        return OPEN
    if current.value >= base.value * (1 - SM_CLOCK_TOLERANCE):
        return OPEN
    if any((run.clock_event_reasons or 0) & OWN_POWER_CAP for run in result.runs):
        return OPEN
    return Gate(
        False,
        f"the GPU ran at {current.value:.0f} MHz against {base.value:.0f} MHz in the reference "
        "(a down-clocked GPU, not the case's own power cap)",
    )


def host_gate(
    result: CaseResult,
    reference: CaseResult,
    contamination: Contamination | None,
    *,
    host_matched: bool = False,
) -> Gate:
    """Host time gates against the same runner's reference only: over the steps both hosts ran at full
    speed where the steps timed the host (``host_matched``), else while the host index before the case
    held still. The host's speed through the steps picks those steps but never stops host time from
    gating: it is partly the case's own doing. Runs with +50 ms of Python a step read it 7-22% slower
    than their runner's unchanged runs, 6 of 6 on two H200s (docs/measurements/2026-11-29-h200-history-
    gate); as a trigger it had shown 3 of 4 such runs "not gated". The index is taken in the child
    before the case's work starts."""
    if contamination is not None:
        return Gate(False, contamination.note())
    mine, theirs = result.fingerprint.runner, reference.fingerprint.runner
    if not mine or mine != theirs:
        return Gate(
            False,
            f"host time {OWN_RUNNER} and the reference is {_runner(theirs)}'s: it gates once this runner "
            "has a reference of its own (its history: --perf-baseline auto; or a baseline taken here)",
        )
    if host_matched:
        return OPEN
    moved = host_index_moved(result.metrics.get(HOST_INDEX), reference.metrics.get(HOST_INDEX))
    return Gate(False, moved) if moved else OPEN


def _runner(name: object) -> str:
    return f"runner {name}" if name else "an unnamed runner"


def host_index_moved(current: MetricValue | None, reference: MetricValue | None) -> str:
    """Why the host no longer compares (its speed index moved beyond its own noise), or ''."""
    if current is None or reference is None:
        return ""
    runs = list(reference.per_run or [reference.value])
    centre = stats.median(runs)
    if not centre:
        return ""
    spread = stats.MAD_TO_SIGMA * stats.mad(runs) / centre if len(runs) >= 3 else 0.0
    widest = max(abs(run / centre - 1) for run in runs)
    limit = max(HOST_INDEX_FLOOR, HOST_INDEX_NOISE_MULTIPLE * spread, HOST_INDEX_WIDEST_MULTIPLE * widest)
    change = current.value / centre - 1
    if abs(change) <= limit:
        return ""
    which = "slower" if change < 0 else "faster"
    return f"host index {change:+.1%} against the reference (a {which} host; its noise is ±{limit:.1%})"


def needs_confirmation(verdict: CaseVerdict, metrics: Mapping[str, Metric]) -> bool:
    """A regression of host-dependent timing alone is confirmed by fresh runs before it fails: one
    process can be slow as a whole (host load, a neighbour). Kernel time and memory are deterministic:
    a regression of either fails at once."""
    if verdict.verdict is not Verdict.REGRESSED:
        return False
    regressed = [m for m in verdict.metrics if m.gated and m.verdict is Verdict.REGRESSED]
    resolved = [resolve_metric(dict(metrics), m.metric) for m in regressed]
    return bool(regressed) and all(
        metric is not None and metric.timing and metric.part is not Part.DEVICE for metric in resolved
    )


def parts_line(
    verdict: CaseVerdict,
    result: CaseResult,
    reference: CaseResult | None,
    step_metric: Metric | None = None,
    spells: FullSpeedSteps | None = None,
) -> str:
    """``step +21.1% = kernels +0.2% (GEMM -0.1 ms) + host +31.0% (host index -28.0%)``: which part of
    the step moved; '' where the result has no kernel time or nothing to compare. Where step time was
    judged at the runner's own run-to-run move (``step_metric``'s note), the line says how far that is."""
    by_name = {m.metric: m for m in verdict.metrics}
    step, kernel, host = by_name.get(STEP_TIME), by_name.get(KERNEL_TIME), by_name.get(HOST_TIME)
    if reference is None or step is None or kernel is None or kernel.ratio is None or step.ratio is None:
        return ""
    line = f"step {_pct(step.ratio)} = kernels {_pct(kernel.ratio)}{_gated(kernel)}"
    moved = largest_group_change(result.kernels, reference.kernels)
    line += f" ({moved})" if moved else ""
    if host is not None and host.ratio is not None:
        # Host time is shown beside step time, which gates it where the host compares.
        line += f" + host {_pct(host.ratio)}{_gated(step)}"
        said = [moved] if (moved := host_speed_change(result, reference)) else []
        if step.gated and step_metric is not None and step_metric.tolerance_note:
            said.append(f"this runner's runs {step_metric.tolerance:.1%} apart")
        if spells is not None:
            said.append(f"step over {spells.kept[0]} of {spells.total[0]} steps at full host speed")
        line += f" ({'; '.join(said)})" if said else ""
    return line


def moved_kernels(verdict: CaseVerdict, result: CaseResult, reference: CaseResult | None) -> str:
    """Which kernel groups and kernels moved, where kernel time regressed or improved; ''."""
    kernel = next((m for m in verdict.metrics if m.metric == KERNEL_TIME), None)
    if reference is None or kernel is None or kernel.verdict not in (Verdict.REGRESSED, Verdict.IMPROVED):
        return ""
    return kernel_changes(result.kernels, reference.kernels)


def _gated(verdict: MetricVerdict) -> str:
    return "" if verdict.gated else " shown"


def largest_group_change(current: KernelSummary | None, reference: KernelSummary | None) -> str:
    """The kernel group whose time per step moved most, e.g. ``GEMM -0.1 ms``."""
    if current is None or reference is None:
        return ""
    moved = group_deltas(current, reference)
    group = next(iter(moved), None)
    return f"{group} {moved[group]:+.1f} ms" if group is not None else ""


def host_speed_change(result: CaseResult, reference: CaseResult) -> str:
    """``host speed -4.1% through the steps``, where both sides timed the host at each step's edge;
    else ``host index -28.0%`` (one instant before each case); '' where neither has it."""
    speeds = ((HOST_SPEED, "host speed", " through the steps"), (HOST_INDEX, "host index", ""))
    for name, label, where in speeds:
        current, base = result.metrics.get(name), reference.metrics.get(name)
        if current is not None and base is not None and base.value:
            return f"{label} {_pct(current.value / base.value)}{where}"
    return ""


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


__all__ = [
    "HOST_INDEX_FLOOR",
    "OWN_RUNNER",
    "judge_case",
    "moved_kernels",
    "needs_confirmation",
    "part_gates",
    "parts_line",
    "with_device_figures",
]
