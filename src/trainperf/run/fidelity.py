"""``trainperf fidelity``: run the suite's self-measurement on one case, and analyse a run of it.

The children are interleaved round by round (A, bare, A2, planted slowdowns), so a slow drift
of the machine is spread over every series instead of being charged to one. Each finished
child is recorded in ``fidelity.json`` at once: a run cut short (a time limit, Ctrl-C) is
continued with ``--resume`` and analysed from whatever finished.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.errors import TrainperfError
from trainperf.families import family_of
from trainperf.jsonio import write_json_atomic
from trainperf.judge import stats
from trainperf.judge.metrics import tolerances_from_pyproject
from trainperf.measure import fidelity
from trainperf.measure.measurement import RunMeasurement, measure_run
from trainperf.measure.nvml import read_samples
from trainperf.run.folder import RunFolder
from trainperf.workloads.protocol import BARE_WINDOW_START, SAMPLES_FILE, SPEC_FILE, read_child_result

STATE_FILE = "fidelity.json"
REPORT_FILE = "fidelity-report.json"


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


# steps, A/A runs per series, bare runs, planted fractions, runs per planted fraction
FIDELITY_DEFAULTS: tuple[int, int, int, tuple[float, ...], int] = (16, 5, 5, (0.03, 0.05), 2)


def load_state(run_dir: Path) -> tuple[Plan, dict[str, Any]]:
    """The plan a fidelity run folder was started with, and its state (the children so far)."""
    state_path = run_dir / STATE_FILE
    try:
        state = json.loads(state_path.read_text())
        saved = state["plan"]
        return Plan(**{**saved, "plant_fractions": tuple(saved["plant_fractions"])}), state
    except FileNotFoundError:
        raise TrainperfError(
            f"{run_dir} has no {STATE_FILE}: give a folder that 'trainperf fidelity' made"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise TrainperfError(f"{state_path} is not a fidelity plan ({exc}); start a new run") from None


def run_fidelity(
    root: Path, case: Case, plan: Plan, cli: dict[str, Any], say: Callable[[str], None] = print
) -> Path:
    """Launch the plan's children (or the rest of them, with ``resume``); return the run folder."""
    from trainperf.measure.detection import detect
    from trainperf.measure.hardware import load_classes
    from trainperf.run.context import open_run
    from trainperf.run.launcher import ChildLauncher
    from trainperf.run.settings import resolve

    settings = resolve(cli, lambda _name: None, root)
    context = open_run(settings, detect(load_classes(), settings.gpu_class), root)
    context.say = say
    state_path = context.run_dir / STATE_FILE
    state: dict[str, Any] = {"plan": asdict(plan), "children": []}
    if state_path.is_file():
        saved, state = load_state(context.run_dir)  # a plan saved before a field existed gets its default
        if saved != plan:
            raise TrainperfError(
                f"{state_path} was started with another plan ({state['plan']}): resume with the same options"
            )
    labels = plan.schedule()
    launcher = ChildLauncher(context)
    say(
        f"[trainperf fidelity] {case.id} on {context.gpu_class.name}: {len(labels)} children, {plan.steps} "
        f"steps each, in {context.run_dir}"
    )
    for index in range(len(state["children"]), len(labels)):
        label = labels[index]
        try:
            child = launcher.run(
                case,
                plan.steps,
                repeat=index,
                total=len(labels),
                plant_slowdown=fidelity.planted_fraction(label) or 0.0,
                bare=label == fidelity.BARE,
                window_after=plan.window_after,
            )
        except KeyboardInterrupt:  # a time limit or Ctrl-C: report what finished, say how to go on
            say(
                f"[trainperf fidelity] interrupted after {index}/{len(labels)} children; continue with "
                f"--resume {context.run_dir}"
            )
            return context.run_dir
        state["children"].append(
            {
                "label": label,
                "dir": child.info["dir"],
                "outcome": child.outcome.value,
                "message": child.message,
            }
        )
        write_json_atomic(state_path, state)
        if child.outcome is not Outcome.OK:
            raise TrainperfError(
                f"{case.id} ({label}) ended {child.outcome.value}: {child.message}; the benchmark needs a "
                "case that runs"
            )
    return context.run_dir


def _read_child(run_dir: Path, relative: str) -> tuple[dict[str, Any], list[Any]]:
    folder = run_dir / relative
    samples = read_samples(folder / SAMPLES_FILE) if (folder / SAMPLES_FILE).is_file() else []
    return read_child_result(folder), samples


def analyse(run_dir: Path, root: Path) -> dict[str, Any]:
    """The fidelity report of a run folder, from its files alone (it can be analysed anywhere)."""
    plan, state = load_state(run_dir)
    sessions = json.loads(RunFolder(run_dir).session_path().read_text())["sessions"]
    idle_mem_b = sessions[0].get("idle_mem_b")
    case = (
        Case.from_dict(json.loads((run_dir / state["children"][0]["dir"] / SPEC_FILE).read_text())["case"])
        if state["children"]
        else None
    )
    groups: dict[str, list[RunMeasurement]] = {}
    harness: list[fidelity.HarnessRun] = []
    # Tokens/s over the bare window, per round in launch order: (A/A harness runs, bare runs).
    by_round: dict[int, tuple[list[float], list[float]]] = {}
    for (round_index, _label), entry in zip(plan.rounds(), state["children"], strict=False):
        if entry["outcome"] != Outcome.OK.value:
            continue
        child, samples = _read_child(run_dir, entry["dir"])
        pair = by_round.setdefault(round_index, ([], []))
        if entry["label"] == fidelity.BARE:
            window = child.get("bare_window") or {}
            if window.get("after_step", plan.window_after) != plan.window_after:
                raise TrainperfError(
                    f"{entry['dir']}: its bare run was timed after step {window['after_step']}, "
                    f"the plan says {plan.window_after}: the run folder mixes two plans"
                )
            if window.get("seconds"):
                pair[1].append(window["tokens"] / window["seconds"])
            continue
        assert case is not None
        measured = measure_run(
            child,
            samples,
            samples_per_step=family_of(case.family).samples_per_step(case),
            idle_mem_b=idle_mem_b,
        )
        groups.setdefault(entry["label"], []).append(measured)
        harness.append(fidelity.HarnessRun(entry["label"], measured, child.get("steps", []), samples))
        tps = fidelity.window_tokens_per_s(child.get("steps", []), plan.window_after)
        if entry["label"] in (fidelity.AA_BASE, fidelity.AA_OTHER) and tps is not None:
            pair[0].append(tps)
    unplanted = [run for run in harness if run.label in (fidelity.AA_BASE, fidelity.AA_OTHER)]
    harness_tps = [tps for harness_round, _bare in by_round.values() for tps in harness_round]
    bare_tps = [tps for _harness, bare_round in by_round.values() for tps in bare_round]
    default_tolerance = float(tolerances_from_pyproject(root).get("step_time_s", 0.05))
    tolerances = sorted({*fidelity.TOLERANCE_SWEEP, default_tolerance})
    judged = fidelity.detection(groups, tolerances)
    summary = fidelity.detection_summary(judged)
    smallest = fidelity.smallest_detected(summary, default_tolerance)
    report = {
        "case_id": plan.case_id,
        "run": run_dir.name,
        "plan": asdict(plan),
        "children_done": len(state["children"]),
        "children_planned": len(plan.schedule()),
        "gpu": sessions[0].get("fingerprint", {}),
        "overhead": fidelity.overhead(harness_tps, bare_tps).to_dict(),
        "overhead_paired": fidelity.paired_overhead(
            [(harness_round, bare_round[0]) for harness_round, bare_round in by_round.values() if bare_round]
        ).to_dict(),
        "noise": fidelity.noise([run.measurement for run in unplanted]).to_dict(),
        "default_tolerance": default_tolerance,
        "detection": summary,
        "judgements": [j.to_dict() for j in judged],
        "smallest_detected_at_default": smallest,
        "power": fidelity.power_check(unplanted, plan.window_after).to_dict(),
        "window_noise": fidelity.window_noise([run.steps for run in unplanted], plan.window_after).to_dict(),
    }
    write_json_atomic(run_dir / REPORT_FILE, report)
    return report


def _pct(value: float | None, signed: bool = True) -> str:
    return "n/a" if value is None else (f"{value:+.2%}" if signed else f"{value:.2%}")


def _window(plan: dict[str, Any]) -> str:
    after = int(plan.get("window_after", BARE_WINDOW_START))
    return "" if after == BARE_WINDOW_START else f", overhead and power after step {after}"


def render(report: dict[str, Any]) -> str:
    gpu = report["gpu"]
    lines = [
        (
            f"fidelity of {report['case_id']} ({report['run']}): "
            f"{report['children_done']}/{report['children_planned']} children, "
            f"{report['plan']['steps']} steps each{_window(report['plan'])}; GPU {gpu.get('gpu_name', '?')}, "
            f"driver {gpu.get('driver', '?')}"
        ),
    ]
    over = report["overhead"]
    interval = over["interval"]
    lines.append(
        f"overhead   harness {_median(over['harness_tokens_per_s'])} tok/s "
        f"({len(over['harness_tokens_per_s'])} runs) vs bare "
        f"{_median(over['bare_tokens_per_s'])} tok/s ({len(over['bare_tokens_per_s'])} runs): "
        f"{_pct(over['slowdown'])} slower"
        + (f" [95% {_pct(interval[0])} .. {_pct(interval[1])}]" if interval else "")
        + "   target <= 1%"
    )
    paired = report.get("overhead_paired") or {}
    if paired.get("slowdown") is not None:
        low, high = paired["interval"]
        lines.append(
            f"           paired by round ({paired['rounds']} rounds, drift cancels): "
            f"{_pct(paired['slowdown'])} slower "
            f"[95% {_pct(low)} .. {_pct(high)}]"
            # Reports written before the rounds were kept have none to show.
            + (
                f"; round by round {', '.join(_pct(v) for v in paired['per_round'])}"
                if paired.get("per_round")
                else ""
            )
        )
    elif paired:
        lines.append(
            f"           paired by round: {paired['rounds']} rounds, fewer than "
            f"{fidelity.MIN_PAIRED_ROUNDS}: not estimated"
        )
    window = report.get("window_noise")  # absent from reports written before it existed
    if window and window.get("tokens_per_s_cv") is not None:
        lines.append(
            f"           window tokens/s (steps after {window['after_step']}) varies "
            f"{_pct(window['tokens_per_s_cv'], signed=False)} "
            f"over {window['runs']} harness runs: {_unsteady_phrase(window)}"
        )
    noise = report["noise"]
    parts = ", ".join(f"{name} {_pct(value, signed=False)}" for name, value in noise["cv"].items())
    lines.append(f"noise      CV over {noise['runs']} fresh children: {parts}   target step time <= 1%")
    lines.append(
        "detection  step time judged by the gate (median per-step ratio over the steps that repeat, "
        "bootstrap p<0.01):"
    )
    lines.append(f"  {'tolerance':>9s}  {'series':10s} {'pooled':10s} {'ratio':>7s}  single runs flagged")
    for row in report["detection"]:
        ratio = row.get("pooled_ratio")
        lines.append(
            f"  {row['tolerance']:9.0%}  {row['series']:10s} {row.get('pooled', '-'):10s} "
            f"{(f'{ratio:.3f}' if ratio else '-'):>7s}  {row['single_flagged']}/{row['single']}"
        )
    smallest = report["smallest_detected_at_default"]
    lines.append(
        f"  smallest planted slowdown caught at the default tolerance ({report['default_tolerance']:.0%}), "
        "pooled and every "
        f"single run: {'none' if smallest is None else f'{smallest:.0%}'}"
    )
    power = report["power"]
    ms = [
        f"{v * 1000:.1f} ms" if v is not None else "n/a"
        for v in (power["interval_median_s"], power["interval_p95_s"], power["interval_max_s"])
    ]
    lines.append(
        f"power      integral of sampled power vs energy counter: {_pct(power['relative_difference'])} "
        "(median of "
        f"{len(power['counter_j'])} runs); sampling interval median {ms[0]}, p95 {ms[1]}, max {ms[2]}"
    )
    return "\n".join(lines)


def _unsteady_phrase(window: dict[str, Any]) -> str:
    """Which step indices vary from child to child, and by how much, in words that fit their count."""
    unsteady = window["unsteady_steps"]
    steady = [cv for key, cv in window["step_cv"].items() if int(key) not in unsteady]
    steady_bound = _pct(max(steady) if steady else None, signed=False)
    if not unsteady:
        return f"every step repeats from child to child within {steady_bound}"
    values = [window["step_cv"][key] for key in window["step_cv"] if int(key) in unsteady]
    spread = f"{min(values):.1%}" if len(values) == 1 else f"{min(values):.1%}-{max(values):.1%}"
    which = (
        f"step {unsteady[0]} varies" if len(unsteady) == 1 else f"steps {', '.join(map(str, unsteady))} vary"
    )
    share = _pct(window["unsteady_time_share"], signed=False)
    return (
        f"{which} {spread} from child to child ({share} of the window's time), the other {len(steady)} at "
        f"most {steady_bound}"
    )


def _median(values: Sequence[float]) -> str:
    return f"{stats.median(values):,.0f}" if values else "n/a"
