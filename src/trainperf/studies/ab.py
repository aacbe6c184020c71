"""``trainperf ab``: the same cases under two Python environments, interleaved on one machine.

Round after round, the selection runs under both environments, in an order that turns every
other round (A B, B A, A B, ...), each case a fresh child in that environment's interpreter
(``--perf-python``). Interleaving spreads slow drifts of the machine (thermal state, a
neighbour) over both sides instead of charging them to one; turning the order cancels a steady
drift over each pair of rounds, which always-A-first charged to B (on an H200, 2026-11-26, one
host-bound case's four runs of A B A B slowed run after run: 0.536, 0.634, 0.652, 0.765 s).
The rounds of each side are pooled per case (each step's median across processes)
and B is judged against A by ``compare_runs``, like two run folders.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainperf.case import Outcome
from trainperf.errors import TrainperfError
from trainperf.families.candidates import STACK_IMPORTS, BrokenEnvironment, check_runs
from trainperf.families.env_create import probe_versions
from trainperf.ground.folder import RunFolder
from trainperf.judge.compare import CaseVerdict
from trainperf.measure.measurement import merge_metric
from trainperf.result import CaseResult
from trainperf.studies.precision import least_precise, more_rounds, precision_line

MEASURED_OUTCOMES = (Outcome.OK.value, Outcome.OOM.value, Outcome.TIMEOUT.value)
"""Outcomes a side measured (an OOM and a time-out are measurements); anything else measured nothing."""
STUDY_STORE = "study.sqlite"
"""The rounds' own results store, inside the study's folder: A/B and bisect rounds measure other
environments, so they never land in the runner's history that judges its nights."""


def check_environment(python: str, label: str) -> str:
    """The interpreter's key versions once the training stack imports in it. Not an interpreter: one
    line naming the fix; an interpreter that cannot import the stack: ``BrokenEnvironment``."""
    path = Path(os.path.abspath(python))
    if not path.is_file():
        raise TrainperfError(
            f"--env-{label} {python} is not a Python interpreter: give the path of its bin/python"
        )
    try:
        check_runs(path, {}, STACK_IMPORTS)
    except BrokenEnvironment as exc:
        raise BrokenEnvironment(f"--env-{label} {python}", exc.cause) from None
    versions = probe_versions(str(path))
    if isinstance(versions, str):
        raise BrokenEnvironment(f"environment {label.upper()}", versions)
    return " ".join(f"{name} {version}" for name, version in versions.items())


def broken_cases(results_a: Sequence[CaseResult], results_b: Sequence[CaseResult]) -> dict[str, str]:
    """Cases that ran under A and crashed under B (not an OOM or a time-out, which are measured
    outcomes): B cannot run them, and the message says why."""
    ran_a = {r.case_id for r in results_a if r.outcome == Outcome.OK.value}
    return {
        r.case_id: (r.message.strip().splitlines() or ["crashed with no message"])[-1][:300]
        for r in results_b
        if r.case_id in ran_a and r.outcome == Outcome.CRASH.value
    }


def unmeasured_cases(results: Sequence[CaseResult]) -> dict[str, str]:
    """Cases of a side that measured nothing (any outcome but ok, an OOM or a time-out)."""
    return {
        r.case_id: (r.message.strip().splitlines() or [r.outcome])[-1][:300]
        for r in results
        if r.outcome not in MEASURED_OUTCOMES
    }


def pool_case(results: Sequence[CaseResult]) -> CaseResult:
    """One case's results from several rounds as one result: samples, keys and runs concatenated."""
    first = results[0]
    failed = next((r for r in results if r.outcome != Outcome.OK.value), None)
    metrics = {
        name: merge_metric(name, [r.metrics[name] for r in results if name in r.metrics])
        for name in first.metrics
    }
    return dataclasses.replace(
        first,
        outcome=failed.outcome if failed else Outcome.OK.value,
        message=failed.message if failed else "",
        metrics=metrics,
        runs=[run for r in results for run in r.runs],
    )


def pool_rounds(rounds: Sequence[Sequence[CaseResult]]) -> list[CaseResult]:
    by_case: dict[str, list[CaseResult]] = {}
    for results in rounds:
        for result in results:
            by_case.setdefault(result.case_id, []).append(result)
    return [pool_case(results) for _, results in sorted(by_case.items())]


def round_order(round_index: int, env_a: str, env_b: str) -> tuple[tuple[str, str], ...]:
    """The sides of round ``round_index`` (from 1) in the order they run: A first in odd rounds."""
    sides = (("A", env_a), ("B", env_b))
    return sides if round_index % 2 else sides[::-1]


def last_run_in(folder: Path) -> Path | None:
    """The newest run folder a round's output holds (a round run again adds one), None if none."""
    runs = sorted(p for p in folder.iterdir() if RunFolder(p).is_run()) if folder.is_dir() else []
    return runs[-1] if runs else None


ROUND_NAME = re.compile(r"^round(\d+)-([AB])$")
"""``round_dir``'s folder names, read back by ``round_of``."""


def round_dir(output: Path, round_index: int, label: str) -> Path:
    """Where side ``label`` (A or B) of round ``round_index`` writes its run folder."""
    return output / f"round{round_index}-{label}"


def round_of(folder: Path) -> tuple[int, str] | None:
    """(round, side) of a folder ``round_dir`` named; None for any other folder."""
    match = ROUND_NAME.match(folder.name)
    return (int(match.group(1)), match.group(2)) if match else None


def holds_rounds(output: Path) -> bool:
    """Whether a study's folder already holds a round of either side (measured or cut short)."""
    return any(output.glob("round*-[AB]"))


def run_side(python: str, pytest_args: Sequence[str], out: Path, output: Path, what: str) -> Path:
    """One side's pytest session under ``python``, written to ``out``; its run folder. ``what`` names
    the side in an error (``round 2 (B)``)."""
    empty_baselines = output / "no-baselines"  # judged A against B, not against stored baselines
    empty_baselines.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pytest", *pytest_args,
        "--perf-python", python, "--perf-output", str(out), "--perf-baselines", str(empty_baselines),
        "--perf-confirm", "0", "--perf-store", f"sqlite:///{(output / STUDY_STORE).absolute()}", "-q",
    ]  # fmt: skip
    completed = subprocess.run(command, check=False)
    if completed.returncode not in (0, 1):  # 1: a case failed (e.g. an OOM), still measured
        raise TrainperfError(f"pytest stopped with status {completed.returncode} in {what}")
    run = last_run_in(out)
    if run is None:
        raise TrainperfError(f"{what} measured no case: check the pytest selection")
    return run


def run_round(
    round_index: int, planned: int, env_a: str, env_b: str, pytest_args: Sequence[str], output: Path
) -> dict[str, Path]:
    """Run one round's two sides in ``round_order``; each side's run folder by its label."""
    folders: dict[str, Path] = {}
    for label, python in round_order(round_index, env_a, env_b):
        print(f"[trainperf ab] round {round_index}/{planned}, environment {label}: {python}", flush=True)
        out = round_dir(output, round_index, label)
        folders[label] = run_side(python, pytest_args, out, output, f"round {round_index} ({label})")
    return folders


@dataclass(frozen=True, slots=True)
class RoundPlan:
    rounds: int
    """Rounds measured at least."""
    max_rounds: int
    within_pct: float | None = None
    """Rounds are added until every judged case's step-time interval is this narrow (its half-width
    in percent, ``studies.precision``), up to ``max_rounds``."""


Judge = Callable[[list[Path], list[Path]], Mapping[str, CaseVerdict] | None]
"""Each side's run folders so far, judged B against A: each case's verdict (None when nothing
can be judged)."""


def measure_rounds(
    env_a: str, env_b: str, plan: RoundPlan, pytest_args: Sequence[str], output: Path,
    judge: Judge | None = None, kept: tuple[list[Path], list[Path]] = ([], []),
) -> tuple[list[Path], list[Path]]:  # fmt: skip
    """Run the selection A B, B A, A B ... (``round_order``) and return each side's run folders:
    ``kept`` (an interrupted study's completed rounds) first, then new rounds until the plan's
    count, then, with a precision target (which needs ``judge``), more until the target or
    ``max_rounds``; each addition says why."""
    if plan.rounds < 1 or plan.max_rounds < plan.rounds:
        raise TrainperfError("--rounds must be at least 1 and --max-rounds at least --rounds")
    folders_a, folders_b = list(kept[0]), list(kept[1])
    target = max(plan.rounds, len(folders_a))
    while True:
        while len(folders_a) < target:
            measured = run_round(len(folders_a) + 1, target, env_a, env_b, pytest_args, output)
            folders_a.append(measured["A"])
            folders_b.append(measured["B"])
        if plan.within_pct is None or judge is None:
            return folders_a, folders_b
        precision = least_precise(judge(folders_a, folders_b))
        extra = more_rounds(precision, target, plan.within_pct, plan.max_rounds)
        print(f"[trainperf ab] {precision_line(precision, target, plan.within_pct)}", flush=True)
        if not extra:
            return folders_a, folders_b
        target += extra


def _cases_in(run_folder: Path) -> set[str]:
    try:
        return {r.case_id for r in RunFolder.open(run_folder).results()}
    except (OSError, ValueError, TrainperfError):
        return set()


def completed_rounds(output: Path) -> tuple[list[Path], list[Path]]:
    """The leading rounds of a study already measured on both sides, the same cases on each: what
    an interrupted study resumes from. A round cut short (a side without results, or fewer cases
    than the other) and every round after it are measured again."""
    folders_a: list[Path] = []
    folders_b: list[Path] = []
    for round_index in range(1, 10_000):
        run_a = last_run_in(round_dir(output, round_index, "A"))
        run_b = last_run_in(round_dir(output, round_index, "B"))
        if run_a is None or run_b is None:
            break
        cases = _cases_in(run_a)
        if not cases or cases != _cases_in(run_b):
            break
        folders_a.append(run_a)
        folders_b.append(run_b)
    return folders_a, folders_b


def pooled_sides(
    folders_a: Sequence[Path], folders_b: Sequence[Path]
) -> tuple[list[CaseResult], list[CaseResult]]:
    """Each side's results pooled per case over its rounds' run folders."""
    return (
        pool_rounds([RunFolder.open(f).results() for f in folders_a]),
        pool_rounds([RunFolder.open(f).results() for f in folders_b]),
    )


def measured_sides(
    python_a: str, python_b: str, rounds: int, pytest_args: Sequence[str], output: Path, a_name: str
) -> tuple[list[CaseResult], list[CaseResult]]:
    """Run the rounds and pool each side's results per case. A (``a_name``, the reference) must have
    measured every case: otherwise nothing can be judged against it, one line naming the cases."""
    plan = RoundPlan(rounds, max_rounds=rounds)
    results_a, results_b = pooled_sides(*measure_rounds(python_a, python_b, plan, pytest_args, output))
    not_run = unmeasured_cases(results_a)
    if not_run:
        listed = "; ".join(f"{case}: {why}" for case, why in sorted(not_run.items()))
        raise TrainperfError(f"{a_name} did not run every case, nothing can be judged against it ({listed})")
    return results_a, results_b


def rounds_in(output: Path) -> tuple[list[Path], list[Path]]:
    """The run folders of a study's rounds already in ``output`` (``round<i>-A``, ``round<i>-B``),
    for judging them again without measuring; a side's rounds missing: one line naming the fix."""
    folders: dict[str, list[Path]] = {"A": [], "B": []}
    rounds = sorted((found, folder) for folder in output.glob("round*-[AB]") if (found := round_of(folder)))
    for (_, label), folder in rounds:
        if (run := last_run_in(folder)) is not None:
            folders[label].append(run)
    if not folders["A"] or not folders["B"]:
        raise TrainperfError(
            f"{output} holds no measured rounds of both sides (round<i>-A/, round<i>-B/): "
            "give the --output of a study that ran"
        )
    return folders["A"], folders["B"]


def started_at(run_folder: Path) -> str | None:
    """When the run in ``run_folder`` started, as its run record (``run.json``) says."""
    try:
        sessions = RunFolder(run_folder).session_records()
    except (OSError, ValueError):
        return None
    return str(sessions[0].get("started")) if sessions and sessions[0].get("started") else None
