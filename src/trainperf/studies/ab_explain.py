"""An A/B explains itself like a red night: every case that moved gets a line saying what moved.

Where the rounds recorded kernel time on both sides, they already say which kernel groups and kernels
moved (``judge.kernel_changes``, CUPTI's own durations) and how the step splits into kernels and
host: that is the case's line, and no run is spent on it. A profiled run adds what the rounds cannot
say only where the host's time itself concluded (regressed or improved: the profile's host-side
categories show where it went) or where the rounds recorded no kernel time. Those cases run once more
under each environment with ``--perf-trace``, and the two profile summaries are diffed as a confirmed
regression's diagnosis is (``traces.diagnose``). The line names what B does more than A; where B is
the faster side, what A does more than B. A pair of profiled runs whose steps went the other way
from the rounds' is said to disagree instead: on a host whose speed moves by itself, one profiled run
a side (under the profiler's own cost on the host) does not compare. Profiled runs are kept in
``explain-A/`` and ``explain-B/`` beside the rounds and never pooled into the verdict.

Measured on an H200 (2026-11-29, TRL GRPO LoRA, trl 1.0.0 -> 1.16.0): the two profiled runs cost 8
minutes against the rounds' 6.7, stepped 7.9 and 12.4 s where the rounds measured B 4.6% faster, and
the kernel records had already named the kernels that moved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.ground.folder import RunFolder
from trainperf.judge.compare import CaseVerdict, Verdict
from trainperf.judge.metrics import HOST_TIME, KERNEL_TIME, STEP_TIME
from trainperf.studies.ab import last_run_in, run_side
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


Profiled = Callable[[dict[str, float]], dict[str, str]]
"""The lines of the cases the rounds cannot explain (case -> its B/A step ratio), from profiled runs."""


def profile_reason(verdict: CaseVerdict) -> str | None:
    """Why one profiled run a side would say more than the rounds did; None where the rounds' own
    kernel records explain the case (a move of kernels or memory, or host time that did not conclude,
    which one more run a side would not settle)."""
    measured = {m.metric: m for m in verdict.metrics}
    kernel = measured.get(KERNEL_TIME)
    if kernel is None or kernel.current is None or kernel.baseline is None:
        return "the rounds recorded no kernel time"
    host = measured.get(HOST_TIME)
    if host is not None and host.verdict in (Verdict.REGRESSED, Verdict.IMPROVED):
        return f"the host's time {host.verdict.value}"
    return None


def rounds_line(verdict: CaseVerdict) -> str:
    """A moved case's line where its rounds explain it: no profiled run, and why (the split of its step
    and what moved in its kernels are the verdict's own ``parts`` and ``kernels``, shown beside it)."""
    kernels = "say what moved" if verdict.kernels else "say kernel time stayed within tolerance"
    return f"no profiled run: the rounds' kernel records {kernels}, and the host's time did not conclude"


def explain_moved(verdicts: Mapping[str, CaseVerdict] | None, profiled: Profiled) -> dict[str, str]:
    """Each moved case's line: from its rounds where they explain it, else from ``profiled`` (one
    profiled run a side, asked only for the cases that need one)."""
    moved = moved_cases(verdicts)
    if not verdicts or not moved:
        return {}
    to_profile = {case: ratio for case, ratio in moved.items() if profile_reason(verdicts[case])}
    lines = {case: rounds_line(verdicts[case]) for case in moved if case not in to_profile}
    if to_profile:
        lines |= profiled(to_profile)
    return dict(sorted(lines.items()))


def profiled_now(profile: Callable[[list[str]], tuple[Path, Path]]) -> Profiled:
    """The lines of one profiled run a side, ``profile`` running them (A's run folder, B's)."""
    return lambda to_profile: explanations(*profile(list(to_profile)), to_profile)


def explained_again(
    verdicts: Mapping[str, CaseVerdict] | None, output: Path, stored: Mapping[str, str] | None
) -> dict[str, str]:
    """``--judge-only``: each moved case's line under today's rules, nothing run: from the rounds, or
    from the profiled runs kept beside them; a case needing a profile where none was kept keeps the
    line its study recorded."""
    kept = [last_run_in(output / EXPLAIN_FOLDER.format(label=label)) for label in "AB"]
    if kept[0] is not None and kept[1] is not None:
        folders = (kept[0], kept[1])
        return explain_moved(verdicts, lambda to_profile: explanations(*folders, to_profile))
    missing = "not explained: no profiled runs kept beside the rounds"
    return explain_moved(
        verdicts, lambda to_profile: {case: (stored or {}).get(case, missing) for case in to_profile}
    )


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
        profile_a, profile_b = (r.profile if r is not None else None for r in found)
        if profile_a is None or profile_b is None:
            missing = " and ".join(
                label for label, p in zip("AB", (profile_a, profile_b), strict=True) if not p
            )
            lines[case] = f"not explained: no profile summary from {missing}'s profiled run"
        elif (disagree := _against_the_rounds(profile_a.step_ms, profile_b.step_ms, ratio)) is not None:
            lines[case] = disagree
        elif ratio >= 1:
            line = diagnose(profile_a.to_dict(), profile_b.to_dict())["line"].removeprefix("diagnosis: ")
            lines[case] = f"B against A, profiled: {line}"
        else:
            line = diagnose(profile_b.to_dict(), profile_a.to_dict())["line"].removeprefix("diagnosis: ")
            lines[case] = f"A against B (B is faster), profiled: {line}"
    return lines


def _against_the_rounds(step_a_ms: float, step_b_ms: float, ratio: float) -> str | None:
    """The profiled pair's steps going the other way from the rounds' (B/A ``ratio``): said as such,
    since a diff of the two would explain a move the rounds did not measure."""
    if ratio == 1.0 or step_a_ms <= 0 or (step_b_ms / step_a_ms > 1) == (ratio > 1):
        return None
    return (
        f"not explained: the profiled runs went the other way from the rounds (B/A {ratio - 1:+.1%}): "
        f"A {step_a_ms:,.1f}, B {step_b_ms:,.1f} ms a profiled step; one profiled run a side does not "
        "compare on this host"
    )
