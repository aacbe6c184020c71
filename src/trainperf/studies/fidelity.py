"""``trainperf fidelity``: run the suite's self-measurement on one case, and analyse a run of it.

The children are interleaved round by round (A, bare, A2, planted slowdowns), so a slow drift
of the machine is spread over every series instead of being charged to one. Each finished
child is recorded in ``fidelity.json`` at once: a run cut short (a time limit, Ctrl-C) is
continued with ``--resume`` and analysed from whatever finished.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.errors import TrainperfError
from trainperf.families import family_of
from trainperf.fingerprint_record import Fingerprint
from trainperf.ground.folder import RunFolder
from trainperf.jsonio import write_json_atomic
from trainperf.judge.metrics import STEP_TIME, tolerances_from_pyproject, with_tolerances
from trainperf.measure import fidelity_stats as fidelity
from trainperf.measure.measurement import RunMeasurement, measure_run
from trainperf.measure.nvml import read_samples
from trainperf.studies.fidelity_record import DetectionRow, FidelityChild, FidelityReport, FidelityState, Plan
from trainperf.studies.fidelity_render import render
from trainperf.workloads.protocol import SAMPLES_FILE, SPEC_FILE, read_child_result

STATE_FILE = "fidelity.json"
REPORT_FILE = "fidelity-report.json"


# steps, A/A runs per series, bare runs, planted fractions, runs per planted fraction
FIDELITY_DEFAULTS: tuple[int, int, int, tuple[float, ...], int] = (16, 5, 5, (0.03, 0.05), 2)


def load_state(run_dir: Path) -> tuple[Plan, FidelityState]:
    """The plan a fidelity run folder was started with, and its state (the children so far)."""
    state_path = run_dir / STATE_FILE
    try:
        state = FidelityState.from_dict(json.loads(state_path.read_text()))
        return state.plan, state
    except FileNotFoundError:
        raise TrainperfError(
            f"{run_dir} has no {STATE_FILE}: give a folder that 'trainperf fidelity' made"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise TrainperfError(f"{state_path} is not a fidelity plan ({exc}); start a new run") from None


def _harness_settings(cli: dict[str, Any], root: Path) -> Any:
    """The session's settings. The harness's per-step overhead is measured against a bare loop over the
    same steps, so no kernel window unless asked (its steps are untimed; its own cost is measured by
    benchmarks/kernel_time_gpu.sh)."""
    from trainperf.ground.settings import resolve

    return resolve({**cli, "kernel_steps": cli.get("kernel_steps") or 0}, lambda _name: None, root)


def run_fidelity(
    root: Path, case: Case, plan: Plan, cli: dict[str, Any], say: Callable[[str], None] = print
) -> Path:
    """Launch the plan's children (or the rest of them, with ``resume``); return the run folder."""
    from trainperf.launch.launcher import ChildLauncher
    from trainperf.measure.detection import detect
    from trainperf.measure.hardware import load_classes
    from trainperf.run.context import open_run

    settings = _harness_settings(cli, root)
    context = open_run(settings, detect(load_classes(), settings.gpu_class), root)
    context.say = say
    state_path = context.run_dir / STATE_FILE
    state = FidelityState(plan)
    if state_path.is_file():
        saved, state = load_state(context.run_dir)  # a plan saved before a field existed gets its default
        if saved != plan:
            raise TrainperfError(
                f"{state_path} was started with another plan ({saved.to_dict()}): resume with the same "
                "options"
            )
    labels = plan.schedule()
    launcher = ChildLauncher(context)
    say(
        f"[trainperf fidelity] {case.id} on {context.gpu_class.name}: {len(labels)} children, {plan.steps} "
        f"steps each, in {context.run_dir}"
    )
    for index in range(len(state.children), len(labels)):
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
        # The launcher names every child's folder.
        finished = FidelityChild(label, child.info.dir or "", child.outcome, child.message)
        state = replace(state, children=(*state.children, finished))
        write_json_atomic(state_path, state.to_dict())
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


@dataclass(slots=True)
class _MeasuredChildren:
    """The finished children of a fidelity run, measured."""

    groups: dict[str, list[RunMeasurement]] = field(default_factory=dict)
    harness: list[fidelity.HarnessRun] = field(default_factory=list)
    # Tokens/s over the bare window, per round in launch order: (A/A harness runs, bare runs).
    by_round: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)


def analyse(run_dir: Path, root: Path) -> FidelityReport:
    """The fidelity report of a run folder, from its files alone (it can be analysed anywhere)."""
    plan, state = load_state(run_dir)
    sessions = json.loads(RunFolder(run_dir).session_path().read_text())["sessions"]
    children = _measure_children(run_dir, plan, state, sessions[0].get("idle_mem_b"))
    report = _report(run_dir, root, plan, state, sessions[0], children)
    write_json_atomic(run_dir / REPORT_FILE, report.to_dict())
    return report


def _class_step_tolerance(root: Path, session: dict[str, Any]) -> float:
    """The step-time tolerance the suite gates this run's class with (its scale, pyproject's override)."""
    from trainperf.measure.hardware import load_classes

    overrides = tolerances_from_pyproject(root)
    gpu_class = load_classes().get(str(session.get("gpu_class") or ""))
    # A run folder from before sessions recorded their class: the configured tolerance, unscaled.
    metrics = gpu_class.metrics(overrides) if gpu_class is not None else with_tolerances(overrides)
    return metrics[STEP_TIME].tolerance


def _measure_children(
    run_dir: Path, plan: Plan, state: FidelityState, idle_mem_b: int | None
) -> _MeasuredChildren:
    """Each child that finished: a harness run measured as the suite measures a case, a bare run
    by its window's tokens/s."""
    case = (
        Case.from_dict(json.loads((run_dir / state.children[0].dir / SPEC_FILE).read_text())["case"])
        if state.children
        else None
    )
    measured_children = _MeasuredChildren()
    for (round_index, _label), entry in zip(plan.rounds(), state.children, strict=False):
        if entry.outcome is not Outcome.OK:
            continue
        child, samples = _read_child(run_dir, entry.dir)
        pair = measured_children.by_round.setdefault(round_index, ([], []))
        if entry.label == fidelity.BARE:
            bare_tps = _bare_tokens_per_s(entry.dir, child, plan)
            if bare_tps is not None:
                pair[1].append(bare_tps)
            continue
        assert case is not None
        measured = measure_run(
            child,
            samples,
            samples_per_step=family_of(case.family).samples_per_step(case),
            idle_mem_b=idle_mem_b,
        )
        measured_children.groups.setdefault(entry.label, []).append(measured)
        measured_children.harness.append(
            fidelity.HarnessRun(entry.label, measured, child.get("steps", []), samples)
        )
        tps = fidelity.window_tokens_per_s(child.get("steps", []), plan.window_after)
        if entry.label in (fidelity.AA_BASE, fidelity.AA_OTHER) and tps is not None:
            pair[0].append(tps)
    return measured_children


def _bare_tokens_per_s(folder: str, child: dict[str, Any], plan: Plan) -> float | None:
    """A bare run's tokens/s over its window (None when it timed none), refusing one timed over
    another window than the plan's."""
    window = child.get("bare_window") or {}
    if window.get("after_step", plan.window_after) != plan.window_after:
        raise TrainperfError(
            f"{folder}: its bare run was timed after step {window['after_step']}, "
            f"the plan says {plan.window_after}: the run folder mixes two plans"
        )
    return window["tokens"] / window["seconds"] if window.get("seconds") else None


def _report(
    run_dir: Path,
    root: Path,
    plan: Plan,
    state: FidelityState,
    session: dict[str, Any],
    children: _MeasuredChildren,
) -> FidelityReport:
    """Overhead, noise, detection of planted slowdowns and the power check, from the measured children."""
    by_round = children.by_round
    unplanted = [run for run in children.harness if run.label in (fidelity.AA_BASE, fidelity.AA_OTHER)]
    harness_tps = [tps for harness_round, _bare in by_round.values() for tps in harness_round]
    bare_tps = [tps for _harness, bare_round in by_round.values() for tps in bare_round]
    default_tolerance = _class_step_tolerance(root, session)
    tolerances = sorted({*fidelity.TOLERANCE_SWEEP, default_tolerance})
    judged = fidelity.detection(children.groups, tolerances)
    summary = fidelity.detection_summary(judged)
    smallest = fidelity.smallest_detected(summary, default_tolerance)
    return FidelityReport(
        case_id=plan.case_id,
        run=run_dir.name,
        plan=plan,
        children_done=len(state.children),
        children_planned=len(plan.schedule()),
        gpu=Fingerprint.from_dict(session.get("fingerprint")),
        overhead=fidelity.overhead(harness_tps, bare_tps),
        overhead_paired=fidelity.paired_overhead(
            [(harness_round, bare_round[0]) for harness_round, bare_round in by_round.values() if bare_round]
        ),
        noise=fidelity.noise([run.measurement for run in unplanted]),
        default_tolerance=default_tolerance,
        detection=tuple(DetectionRow.from_dict(row) for row in summary),
        judgements=tuple(judged),
        smallest_detected_at_default=smallest,
        power=fidelity.power_check(unplanted, plan.window_after),
        window_noise=fidelity.window_noise([run.steps for run in unplanted], plan.window_after),
    )


# The report's text form is re-exported: the command analyses and renders from one module.
__all__ = [
    "FIDELITY_DEFAULTS",
    "REPORT_FILE",
    "STATE_FILE",
    "Plan",
    "analyse",
    "load_state",
    "render",
    "run_fidelity",
]
