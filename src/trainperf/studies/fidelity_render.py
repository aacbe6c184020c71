"""The text form of a fidelity report: overhead, noise, detection of planted slowdowns, power."""

from __future__ import annotations

from collections.abc import Sequence

from trainperf.judge import stats
from trainperf.measure import fidelity_stats as fidelity
from trainperf.studies.fidelity_record import FidelityReport, Plan
from trainperf.workloads.protocol import BARE_WINDOW_START


def _pct(value: float | None, signed: bool = True) -> str:
    return "n/a" if value is None else (f"{value:+.2%}" if signed else f"{value:.2%}")


def _window(plan: Plan) -> str:
    after = plan.window_after
    return "" if after == BARE_WINDOW_START else f", overhead and power after step {after}"


def render(report: FidelityReport) -> str:
    lines = [_headline(report)]
    lines += _overhead_lines(report)
    noise = report.noise
    parts = ", ".join(f"{name} {_pct(value, signed=False)}" for name, value in noise.cv.items())
    lines.append(f"noise      CV over {noise.runs} fresh children: {parts}   target step time <= 1%")
    lines += _detection_lines(report)
    lines.append(_power_line(report.power))
    return "\n".join(lines)


def _headline(report: FidelityReport) -> str:
    gpu = report.gpu
    return (
        f"fidelity of {report.case_id} ({report.run}): "
        f"{report.children_done}/{report.children_planned} children, "
        f"{report.plan.steps} steps each{_window(report.plan)}; GPU {gpu.gpu_name or '?'}, "
        f"driver {gpu.driver or '?'}"
    )


def _overhead_lines(report: FidelityReport) -> list[str]:
    """The harness's overhead against bare runs: pooled, paired by round, and the window's noise."""
    over = report.overhead
    interval = over.interval
    lines = [
        f"overhead   harness {_median(over.harness_tokens_per_s)} tok/s "
        f"({len(over.harness_tokens_per_s)} runs) vs bare "
        f"{_median(over.bare_tokens_per_s)} tok/s ({len(over.bare_tokens_per_s)} runs): "
        f"{_pct(over.slowdown)} slower"
        + (f" [95% {_pct(interval[0])} .. {_pct(interval[1])}]" if interval else "")
        + "   target <= 1%"
    ]
    paired = report.overhead_paired
    if paired is not None and paired.slowdown is not None and paired.interval is not None:
        low, high = paired.interval
        lines.append(
            f"           paired by round ({paired.rounds} rounds, drift cancels): "
            f"{_pct(paired.slowdown)} slower "
            f"[95% {_pct(low)} .. {_pct(high)}]"
            # Reports written before the rounds were kept have none to show.
            + (f"; round by round {', '.join(_pct(v) for v in paired.per_round)}" if paired.per_round else "")
        )
    elif paired is not None:
        lines.append(
            f"           paired by round: {paired.rounds} rounds, fewer than "
            f"{fidelity.MIN_PAIRED_ROUNDS}: not estimated"
        )
    window = report.window_noise  # absent from reports written before it existed
    if window is not None and window.tokens_per_s_cv is not None:
        lines.append(
            f"           window tokens/s (steps after {window.after_step}) varies "
            f"{_pct(window.tokens_per_s_cv, signed=False)} "
            f"over {window.runs} harness runs: {_unsteady_phrase(window)}"
        )
    return lines


def _detection_lines(report: FidelityReport) -> list[str]:
    """Which planted slowdowns the gate caught, per tolerance and series."""
    lines = [
        (
            "detection  step time judged by the gate (median per-step ratio over the steps that repeat, "
            "bootstrap p<0.01):"
        ),
        f"  {'tolerance':>9s}  {'series':10s} {'pooled':10s} {'ratio':>7s}  single runs flagged",
    ]
    for row in report.detection:
        ratio = row.pooled_ratio
        lines.append(
            f"  {row.tolerance:9.0%}  {row.series:10s} {row.pooled or '-':10s} "
            f"{(f'{ratio:.3f}' if ratio else '-'):>7s}  {row.single_flagged}/{row.single}"
        )
    smallest = report.smallest_detected_at_default
    lines.append(
        f"  smallest planted slowdown caught at the default tolerance ({report.default_tolerance:.0%}), "
        "pooled and every "
        f"single run: {'none' if smallest is None else f'{smallest:.0%}'}"
    )
    return lines


def _power_line(power: fidelity.PowerCheck) -> str:
    ms = [
        f"{v * 1000:.1f} ms" if v is not None else "n/a"
        for v in (power.interval_median_s, power.interval_p95_s, power.interval_max_s)
    ]
    return (
        f"power      integral of sampled power vs energy counter: {_pct(power.relative_difference)} "
        "(median of "
        f"{len(power.counter_j)} runs); sampling interval median {ms[0]}, p95 {ms[1]}, max {ms[2]}"
    )


def _unsteady_phrase(window: fidelity.WindowNoise) -> str:
    """Which step indices vary from child to child, and by how much, in words that fit their count."""
    unsteady = window.unsteady_steps
    steady = [cv for key, cv in window.step_cv.items() if int(key) not in unsteady]
    steady_bound = _pct(max(steady) if steady else None, signed=False)
    if not unsteady:
        return f"every step repeats from child to child within {steady_bound}"
    values = [window.step_cv[key] for key in window.step_cv if int(key) in unsteady]
    spread = f"{min(values):.1%}" if len(values) == 1 else f"{min(values):.1%}-{max(values):.1%}"
    which = (
        f"step {unsteady[0]} varies" if len(unsteady) == 1 else f"steps {', '.join(map(str, unsteady))} vary"
    )
    share = _pct(window.unsteady_time_share, signed=False)
    return (
        f"{which} {spread} from child to child ({share} of the window's time), the other {len(steady)} at "
        f"most {steady_bound}"
    )


def _median(values: Sequence[float]) -> str:
    return f"{stats.median(values):,.0f}" if values else "n/a"
