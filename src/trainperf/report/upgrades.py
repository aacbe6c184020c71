"""The upgrade report: A/B studies and bisections of real releases as one Markdown page (no I/O).

Its input is what ``trainperf ab`` and ``trainperf bisect`` write into their folders (``ab.json``,
``bisect.json``, read as their records ``ABRecord`` and ``BisectRecord``), with the figures of each
bisection step read from its rounds' result files where the folder still holds them;
``trainperf upgrade-report`` loads them and writes the page. Every
figure on the page comes from those files: nothing is typed by hand. A study folder may carry an
``explanation.md``: the reading of the release's notes or source that explains a change, shown
under the study as written, apart from the measured figures.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trainperf.judge.fingerprint import SOFTWARE_KEYS
from trainperf.judge.metrics import HOST_INDEX, KERNEL_TIME, STEP_TIME
from trainperf.plan.bisect import narrowed
from trainperf.studies.ab_record import ABRecord, BrokenSide, SideRecord
from trainperf.studies.bisect_record import BisectRecord
from trainperf.studies.comparison_record import ComparedCase, ComparedMetric, Comparison, EnvironmentChange

STEP_FIGURES = (STEP_TIME, KERNEL_TIME, "peak_allocated_gib", "device_mem_peak_gib")
"""A bisection step's figures, GOOD's and the version's (kernel time where the rounds recorded it: the
part of a step that transfers across the machines of a class)."""


@dataclass(frozen=True, slots=True)
class Study:
    name: str
    record: ABRecord | BisectRecord
    step_figures: dict[str, dict[str, tuple[float | None, float | None]]] = field(default_factory=dict)
    """Bisections: per probed version, metric -> (GOOD's value, the version's value)."""
    explanation: str = ""
    stack: str = ""
    """GPU, driver and key packages of the runs, from their fingerprints."""


def _pct(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{(ratio - 1) * 100:+.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pins(side: SideRecord | None) -> dict[str, str]:
    return dict(side.pins or {}) if side is not None else {}


def moved_between_sides(record: ABRecord) -> list[EnvironmentChange]:
    """The stack packages whose versions differ between the two sides' runs, as the A/B's comparison
    found them: what a study of two given environments upgraded."""
    changes = record.comparison.environment_changes if record.comparison is not None else None
    return [c for c in changes or () if c.a and c.b and c.key in SOFTWARE_KEYS]


def change_label(record: ABRecord) -> str:
    """``transformers 5.0.0 -> 5.24.0``: each package B pins, with A's version of it; for two given
    environments (``--env-a``/``--env-b``), every package whose version differs between their runs."""
    a, b = _pins(record.a), _pins(record.b)
    if b:
        return "; ".join(f"{name} {a.get(name, 'base')} -> {version}" for name, version in b.items())
    moved = moved_between_sides(record)
    if moved:  # the package the study is named for (B's label) first
        label = (record.comparison.run_b if record.comparison is not None else None) or ""
        moved.sort(key=lambda c: not label.startswith(c.key))
        return "; ".join(f"{c.key} {c.a} -> {c.b}" for c in moved)
    description = record.b.description if record.b is not None else None
    return description if description is not None else "B"


def reproduce_ab(record: ABRecord) -> str:
    options = [f"--pin-a {n}=={v}" for n, v in _pins(record.a).items()]
    options += [f"--pin-b {n}=={v}" for n, v in _pins(record.b).items()]
    comparison = record.comparison or Comparison()
    for name, side, label in (("a", record.a, comparison.run_a), ("b", record.b, comparison.run_b)):
        given = side.python if side is not None else None
        if given and not _pins(side) and "/candidates/" not in given:
            options.append(f"--env-{name} {shlex.quote(given)}")
            if label and label != given:
                options.append(f"--label-{name} {shlex.quote(label)}")
    selection = " ".join(shlex.quote(s) for s in record.selection)
    return f"trainperf ab {' '.join(options)} --rounds {record.rounds} -- {selection}"


def gpu_of(study: Study) -> str:
    """The runs' GPU (``NVIDIA H200``) from the study's stack line."""
    return study.stack.split(",")[0].removeprefix("GPU ").strip() if study.stack else "nothing measured"


RowKey = tuple[str, str, str]
"""An A/B row: its study's folder name, the study's creation time (two folders of one name are two
studies) and the case."""


def row_key(study: Study, case_id: str) -> RowKey:
    return (study.name, study.record.created, case_id)


def measured_again(studies: Sequence[Study]) -> dict[RowKey, str]:
    """Each A/B row that a later study measured again (the same release pair, case and GPU), with the
    date of the newest measurement: that one is the row's conclusion, the earlier ones stay on the page
    as measured."""
    newest: dict[tuple[str, str, str], RowKey] = {}
    rows: list[tuple[tuple[str, str, str], RowKey]] = []
    for study in studies:
        if not isinstance(study.record, ABRecord):
            continue
        for case in study.record.compared_cases:
            measured = (change_label(study.record), case.case_id, gpu_of(study))
            key = row_key(study, case.case_id)
            rows.append((measured, key))
            if key[1] > newest.get(measured, ("", "", ""))[1]:
                newest[measured] = key
    return {key: newest[measured][1][:10] for measured, key in rows if newest[measured] != key}


def ab_rows(study: Study, again: Mapping[RowKey, str] | None = None) -> list[list[str]]:
    """One row per case of an A/B: verdict, step ratio with its interval, throughput, memory, energy;
    a row measured again later (``measured_again``) says so first in its last cell."""
    record = study.record
    if not isinstance(record, ABRecord):  # a bisection has no A/B rows
        return []
    again = again or {}
    label = change_label(record)
    if record.verdict == "broken-environment" and record.comparison is None:
        broken = record.broken or BrokenSide("b", "", "")
        cause = f"{broken.side.upper()} cannot run: {broken.package}: {broken.cause}"
        return [[label, "(all)", "broken-environment", *BLANK, cause]]
    rows = []
    broken_cases, explained = record.broken_cases or {}, record.explained or {}
    for case in record.compared_cases:
        step, index = case.metric(STEP_TIME), case.metric(HOST_INDEX)
        tps, energy = case.metric("tokens_per_s"), case.metric("energy_per_token_j")
        rows.append([
            label,
            case.case_id,
            "broken-environment" if case.case_id in broken_cases else case.verdict,
            _ratio_cell(step),
            _ratio_cell(case.metric(KERNEL_TIME)),
            _a_to_b(index, 2) if index else "-",
            _pct(tps.ratio if tps else None),
            _a_to_b(case.metric("peak_allocated_gib"), 1),
            _pct(energy.ratio if energy else None),
            _a_to_b(step, 3),
            _last_cell(
                again.get(row_key(study, case.case_id)),
                broken_cases.get(case.case_id) or _explained(case, explained.get(case.case_id, "")),
            ),
        ])  # fmt: skip
    for case_id, why in sorted((record.a_not_run or {}).items()):
        rows.append([label, case_id, "not-judged", *BLANK, f"A cannot run it: {why}"])
    return rows


def _a_to_b(metric: ComparedMetric | None, digits: int) -> str:
    """``31.9 -> 20.4``: A's figure and B's ('-' where a side, or the row, has none)."""
    a, b = (metric.a, metric.b) if metric is not None else (None, None)
    return f"{_num(a, digits)} -> {_num(b, digits)}"


def _explained(case: ComparedCase, profiled: str = "") -> str:
    """The row's last cell: which part of a step moved (where kernel time was recorded), which
    kernel groups and kernels moved (where kernel time did), the reason of a verdict other than pass,
    and what the study's profiled runs found (``profiled``: ``studies.ab_explain``)."""
    reason = case.reason if case.verdict != "pass" else ""
    moved = f"what moved: {case.kernels}" if case.kernels else ""
    parts = (case.parts, moved, reason, noisy_cause(case), profiled)
    return "; ".join(part for part in parts if part)


def noisy_cause(case: ComparedCase) -> str:
    """Why a ``noisy`` row concluded nothing, from its own figures: the host part alone (the GPU's work
    judged unchanged), or rounds without kernel time, where the two parts cannot be told apart."""
    if case.verdict != "noisy":
        return ""
    kernel = case.metric(KERNEL_TIME)
    if kernel is None:
        return (
            "cause: no kernel time in these rounds, so the GPU's work and the host's cannot be told "
            "apart; measure it again"
        )
    if kernel.verdict == "pass":
        return (
            f"cause: host time alone (host-bound steps on a host whose speed moves by itself); "
            f"the GPU's work is unchanged, kernels {_ratio_cell(kernel)}"
        )
    return ""


def _last_cell(measured_again_on: str | None, diagnosis: str) -> str:
    again = f"measured again {measured_again_on} (that row is the conclusion)" if measured_again_on else ""
    return "; ".join(part for part in (again, diagnosis) if part)


AB_COLUMNS = (
    "upgrade", "case", "verdict", "B/A step, 95% interval", "B/A kernel [range]", "host index A -> B",
    "tokens/s", "peak alloc GiB A -> B", "energy/token", "step s A -> B", "diagnosis",
)  # fmt: skip
BLANK = ["-"] * (len(AB_COLUMNS) - 4)
"""The figure cells of a row without figures (a side that cannot run)."""


def _ratio_cell(metric: ComparedMetric | None) -> str:
    """``+1.2% [+0.3%, +2.0%]``: B/A with its interval (kernel time's: the range of its window's
    steps); '-' where the row has no such figure."""
    if metric is None:
        return "-"
    shown = " shown" if metric.gated is False else ""
    if metric.interval:
        low, high = metric.interval
        return f"{_pct(metric.ratio)} [{_pct(low)}, {_pct(high)}]{shown}"
    return f"{_pct(metric.ratio)}{shown}"


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    escape = [[str(cell).replace("|", "\\|") for cell in row] for row in rows]
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
        *("| " + " | ".join(row) + " |" for row in escape),
    ]


def bisect_conclusion(record: BisectRecord) -> str:
    """What the bisection established, in one sentence, from its recorded steps alone."""
    what = "the change" if record.look_for == "change" else "the regression"
    if record.first_bad:
        unresolved = record.unresolved
        tail = f" (or one of {', '.join(unresolved)}, which cannot run here)" if unresolved else ""
        return f"{what} came with {record.package} {record.first_bad}{tail}"
    versions = list(record.versions)
    last_good, first_bad = narrowed(versions, [step.judgement() for step in record.steps])
    if first_bad is None:
        return f"no {what.split()[-1]} between {record.good} and {record.bad} at this selection"
    between = versions[versions.index(last_good) + 1 : versions.index(first_bad)]
    return f"stopped before the end: {what} came after {last_good} and at or before {first_bad}" + (
        f" (not yet measured: {', '.join(between)})" if between else ""
    )


def _moved_at_first_bad(record: BisectRecord) -> list[str]:
    """What moved inside the kernel time at the release the bisection found, where it recorded it, and
    what its profiled runs found (``explained``)."""
    first_bad = record.first_bad
    step = next((s for s in record.steps if first_bad and s.version == first_bad), None)
    lines = (
        [f"What moved at {record.package} {first_bad}: {step.kernels}", ""] if step and step.kernels else []
    )
    explained = record.explained or {}
    lines += [f"- {case}: {line}" for case, line in sorted(explained.items())]
    return [*lines, ""] if explained else lines


def bisect_lines(study: Study) -> list[str]:
    record = study.record
    if not isinstance(record, BisectRecord):  # an A/B has no bisection's lines
        return []
    moved_ends = ""
    low, high = record.requested
    if (low, high) != (record.good, record.bad):
        moved_ends = f" (asked {low}..{high}; the ends that run here)"
    lines = [
        f"### {record.package} {record.good}..{record.bad}{moved_ends}",
        "",
        (
            f"Looking for: {record.look_for}; {len(record.versions)} versions, {record.environments} "
            f"environments measured, {record.rounds} round(s) a step."
        ),
        "",
    ]
    for version, cause in sorted(record.broken.items()):
        lines.append(f"- {record.package} {version} cannot run here: {cause}")
    rows = []
    for step in record.steps:
        figures = study.step_figures.get(step.version, {})
        cells = [f"{_num(a, 3 if m == STEP_TIME else 1)} -> {_num(b, 3 if m == STEP_TIME else 1)}"
                 for m in STEP_FIGURES for a, b in [figures.get(m, (None, None))]]  # fmt: skip
        judged = "cannot run" if step.broken else ("changed" if step.bad else "as GOOD")
        rows.append([step.version, judged, step.verdict, _pct(step.ratio), *cells])
    columns = ("version", "judged", "verdict", "B/A step", "step s", "kernel ms", "peak alloc GiB",
               "device peak GiB")  # fmt: skip
    lines += ["", *_table(columns, rows), "", f"**Result:** {bisect_conclusion(record)}.", ""]
    lines += _moved_at_first_bad(record)
    selection = " ".join(shlex.quote(s) for s in record.selection)
    lines.append(
        f"Reproduce: `trainperf bisect {record.package} {low}..{high} --rounds {record.rounds} "
        f"--look-for {record.look_for} -- {selection}`"
    )
    return lines


AB_LEGEND = (
    "B/A step: the median of per-step ratios (each step of B over the same step of A), with its 95% "
    "bootstrap interval; where each side ran several rounds, the rounds are resampled as well as the "
    "steps, so a shift between rounds widens the interval instead of reading as a change. Verdicts "
    "as `trainperf ab` gives them, against the class's tolerances."
)


def render_page(studies: Sequence[Study], command: str) -> str:
    """The whole page: a sentence per release pair, the A/B tables (one a date and GPU), each
    bisection, each study's explanation."""
    from trainperf.report.upgrade_summary import summary_lines  # it reads this module's rows

    ab = [s for s in studies if isinstance(s.record, ABRecord)]
    bisections = [s for s in studies if isinstance(s.record, BisectRecord)]
    dates = sorted({_date(s) for s in studies} - {""})
    again = measured_again(ab)
    lines = [
        "# Upgrades measured",
        "",
        f"Generated by `{command}` from the studies' own files; do not edit by hand.",
        "",
        f"Measured: {', '.join(dates) or 'undated'}.",
        "",
        *_at_a_glance(ab, bisections, again),
        *summary_lines(ab, again),
        "## A/B of release pairs",
        "",
        AB_LEGEND,
        "",
    ]
    for (date, gpu), group in _by_date_and_gpu(ab).items():
        stacks = sorted({s.stack for s in group if s.stack})
        lines += [f"### {date or 'undated'}, {gpu}", ""]
        lines += [f"Runs on: {stack}; the package under study as each side pins it." for stack in stacks]
        lines += ["", *_table(AB_COLUMNS, [row for study in group for row in ab_rows(study, again)]), ""]
        reproduced = [reproduce_ab(study.record) for study in group if isinstance(study.record, ABRecord)]
        lines += ["Reproduce a row:", "", *(f"- `{command}`" for command in reproduced), ""]
    if bisections:
        lines += ["## Bisections", ""]
        for study in bisections:
            lines += [*bisect_lines(study), ""]
    explained = [s for s in studies if s.explanation.strip()]
    if explained:
        lines += ["## What the releases say", ""]
        for study in explained:
            lines += [f"### {study.name}", "", study.explanation.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def _at_a_glance(ab: Sequence[Study], bisections: Sequence[Study], again: Mapping[RowKey, str]) -> list[str]:
    """Two lines: how many A/B rows read each verdict (a row measured again counted once, as its
    newest measurement), and what each bisection established."""
    counts: dict[str, int] = {}
    for row in (row for study in ab for row in ab_rows(study) if row_key(study, row[1]) not in again):
        counts[row[2]] = counts.get(row[2], 0) + 1
    tally = ", ".join(
        f"{count} {verdict}" for verdict, count in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    earlier = f"; {len(again)} earlier row(s) measured again, counted as their newest" if again else ""
    lines = [f"At a glance: {sum(counts.values())} A/B rows ({tally or 'none'}){earlier}."]
    records = [s.record for s in bisections if isinstance(s.record, BisectRecord)]
    found = [f"{record.package} {record.first_bad}" for record in records if record.first_bad]
    if found:
        lines.append(f"Bisections found changes with: {', '.join(found)}.")
    return [*lines, ""]


def _date(study: Study) -> str:
    return study.record.created[:10]


def _by_date_and_gpu(studies: Sequence[Study]) -> dict[tuple[str, str], list[Study]]:
    """Studies grouped by the day they ran and their GPU (from the runs' fingerprints), in order."""
    groups: dict[tuple[str, str], list[Study]] = {}
    for study in studies:
        groups.setdefault((_date(study), gpu_of(study)), []).append(study)
    return groups
