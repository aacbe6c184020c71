"""An A/B explains itself like a red night: one profiled run a side of every case that moved.

After the rounds, the cases whose B moved (regressed, improved, or beyond tolerance without the
significance to say so) run once more under each environment with ``--perf-trace``, and the two
profile summaries are diffed as a confirmed regression's diagnosis is (``traces.diagnose``): by
kernel group (GEMM, attention, dtype conversion, memcpy/memset, ...), the grown kernels, and the
time the GPU sat idle waiting on the host. The line names what B does more than A; where B is the
faster side, what A does more than B. Those runs are kept in ``explain-A/`` and ``explain-B/`` beside
the rounds and never pooled into the verdict: a profiled step runs under the profiler's own cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.ground.folder import RunFolder
from trainperf.judge.compare import CaseVerdict, Verdict
from trainperf.judge.metrics import STEP_TIME
from trainperf.studies.ab import run_side
from trainperf.traces.diagnose import diagnose

MOVED = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.NOISY)
EXPLAIN_FOLDER = "explain-{label}"
"""Each side's profiled run folder, beside ``round<i>-<label>`` (never read as a round)."""


def moved_cases(verdicts: Mapping[str, CaseVerdict] | None) -> dict[str, float]:
    """The cases whose B moved, with their B/A step ratio (1.0 where it has none)."""
    if not verdicts:
        return {}
    moved = {}
    for case, verdict in sorted(verdicts.items()):
        if verdict.verdict in MOVED:
            step = next((m for m in verdict.metrics if m.metric == STEP_TIME), None)
            moved[case] = step.ratio if step is not None and step.ratio else 1.0
    return moved


def narrowed_selection(pytest_args: Sequence[str], cases: Sequence[str]) -> list[str]:
    """The study's selection narrowed to ``cases`` (their ids and-ed into its last ``-k``, or a ``-k``
    of their own), every run profiled."""
    ids = " or ".join(cases)
    args = list(pytest_args)
    for index in range(len(args) - 1, -1, -1):
        if args[index] == "-k" and index + 1 < len(args):
            args[index + 1] = f"({args[index + 1]}) and ({ids})"
            break
        if args[index].startswith("-k="):
            args[index] = f"-k=({args[index][3:]}) and ({ids})"
            break
    else:
        args += ["-k", ids]
    return [*args, "--perf-trace"]


def explain_round(
    pythons: tuple[str, str], pytest_args: Sequence[str], cases: Sequence[str], output: Path
) -> tuple[Path, Path]:
    """One profiled run of ``cases`` under A, then under B; each side's run folder."""
    selection = narrowed_selection(pytest_args, cases)
    folders = []
    for label, python in zip(("A", "B"), pythons, strict=True):
        print(f"[trainperf ab] explaining {len(cases)} case(s) that moved: profiled run, environment {label}")
        out = output / EXPLAIN_FOLDER.format(label=label)
        folders.append(run_side(python, selection, out, output, f"the profiled run ({label})"))
    return folders[0], folders[1]


def explanations(folder_a: Path, folder_b: Path, moved: Mapping[str, float]) -> dict[str, str]:
    """Each moved case's line from the two sides' profile summaries; a case either side could not
    profile says so."""
    try:
        sides = [{r.case_id: r for r in RunFolder.open(f).results()} for f in (folder_a, folder_b)]
    except (OSError, ValueError, TrainperfError) as exc:
        return {case: f"not explained: the profiled runs could not be read ({exc})" for case in moved}
    lines = {}
    for case, ratio in moved.items():
        found = [side.get(case) for side in sides]
        profiles = [r.profile if r is not None else None for r in found]
        if not profiles[0] or not profiles[1]:
            missing = " and ".join(label for label, p in zip("AB", profiles, strict=True) if not p)
            lines[case] = f"not explained: no profile summary from {missing}'s profiled run"
            continue
        a, b = (profile.to_dict() for profile in profiles if profile)
        if ratio >= 1:
            line = diagnose(a, b)["line"].removeprefix("diagnosis: ")
            lines[case] = f"B against A, profiled: {line}"
        else:
            line = diagnose(b, a)["line"].removeprefix("diagnosis: ")
            lines[case] = f"A against B (B is faster), profiled: {line}"
    return lines
