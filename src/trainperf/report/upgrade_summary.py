"""The upgrade page's summary: per release pair, one sentence of what moving to the newer release did
to training, from the A/B rows' own verdicts and figures (no I/O, nothing typed by hand).

A sentence reads ``trl 1.0.0 -> 1.16.0 (5 row(s), H100 and H200): slower on rl_trl-...
(step +26.1%); less memory on sft_hf-qwen3_8b-lora-maxlen-b4 (allocated 31.9 -> 20.4 GiB); 1
unchanged beyond tolerance.`` It names only what a row's verdict concluded: a `noisy` row is counted,
never read as a change, and a release pair whose older side cannot run says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trainperf.judge.metrics import KERNEL_TIME, STEP_TIME
from trainperf.report.upgrades import RowKey, Study, change_label, gpu_of, row_key
from trainperf.studies.ab_record import ABRecord
from trainperf.studies.comparison_record import ComparedCase

MEMORY = "peak_allocated_gib"


@dataclass(slots=True)
class PairFindings:
    """What the A/B rows of one release pair concluded, across the studies and GPUs that ran it."""

    label: str
    gpus: set[str] = field(default_factory=set)
    rows: int = 0
    slower: list[str] = field(default_factory=list)
    faster: list[str] = field(default_factory=list)
    more_memory: list[str] = field(default_factory=list)
    less_memory: list[str] = field(default_factory=list)
    unchanged: int = 0
    noisy: int = 0
    noisy_host_only: int = 0
    """Of ``noisy``: rows whose kernel time passed, so only the host part did not settle."""
    kernel_rows: int = 0
    kernel_unchanged: int = 0
    kernel_widest_pct: float = 0.0
    """The widest kernel-time move (its range's far end) among the rows that judged it unchanged."""
    more_gpu_work: list[str] = field(default_factory=list)
    less_gpu_work: list[str] = field(default_factory=list)
    cannot_run: list[str] = field(default_factory=list)

    def sentence(self) -> str:
        parts = [
            *(f"slower on {case}" for case in self.slower),
            *(f"faster on {case}" for case in self.faster),
            *(f"more memory on {case}" for case in self.more_memory),
            *(f"less memory on {case}" for case in self.less_memory),
            *(f"more GPU work on {case}" for case in self.more_gpu_work),
            *(f"less GPU work on {case}" for case in self.less_gpu_work),
        ]
        if self.unchanged:
            parts.append(f"{self.unchanged} unchanged beyond tolerance")
        if self.noisy_host_only:
            parts.append(f"{self.noisy_host_only} not concluded on host time alone")
        if self.noisy - self.noisy_host_only:
            parts.append(f"{self.noisy - self.noisy_host_only} not concluded (noisy)")
        if self.kernel_unchanged:
            parts.append(
                f"the GPU's work unchanged on {self.kernel_unchanged} of {self.kernel_rows} row(s) with "
                f"kernel time (within ±{self.kernel_widest_pct:.{2 if self.kernel_widest_pct < 1 else 1}f}%)"
            )
        parts += self.cannot_run
        where = f" ({self.rows} row(s), {' and '.join(sorted(self.gpus))})" if self.rows else ""
        return f"{self.label}{where}: {'; '.join(parts) or 'nothing judged'}."


def _gpu(study: Study) -> str:
    """The GPU's short name (``H100``) from the runs' stack line."""
    name = gpu_of(study) if study.stack else ""
    return next((word for word in name.split() if word[:1] == "H" or word[:1].isdigit()), name) or "?"


def _percent(ratio: float | None) -> str:
    return f"{(ratio - 1) * 100:+.1f}%" if ratio is not None and math.isfinite(ratio) else "?"


def _add_case(found: PairFindings, case: ComparedCase) -> None:
    """One A/B row: its timing and memory conclusions, where its verdicts drew any."""
    found.rows += 1
    step, memory = case.metric(STEP_TIME), case.metric(MEMORY)
    concluded = False
    if step is not None and step.verdict in ("regressed", "improved"):
        into = found.slower if step.verdict == "regressed" else found.faster
        into.append(f"{case.case_id} (step {_percent(step.ratio)})")
        concluded = True
    if memory is not None and memory.verdict in ("regressed", "improved"):
        into = found.more_memory if memory.verdict == "regressed" else found.less_memory
        into.append(f"{case.case_id} (allocated {memory.a or 0:.1f} -> {memory.b or 0:.1f} GiB)")
        concluded = True
    kernel_unchanged = _add_kernel(found, case)
    if case.verdict == "noisy":
        found.noisy += 1
        found.noisy_host_only += kernel_unchanged
    elif not concluded and case.verdict == "pass":
        found.unchanged += 1


def _add_kernel(found: PairFindings, case: ComparedCase) -> bool:
    """A row's kernel time, where it has one: its conclusion; True when it judged the GPU's work unchanged."""
    kernel = case.metric(KERNEL_TIME)
    if kernel is None:
        return False
    found.kernel_rows += 1
    if kernel.verdict in ("regressed", "improved"):
        into = found.more_gpu_work if kernel.verdict == "regressed" else found.less_gpu_work
        into.append(f"{case.case_id} (kernels {_percent(kernel.ratio)})")
        return False
    if kernel.verdict != "pass":
        return False
    found.kernel_unchanged += 1
    ends = [kernel.ratio, *(kernel.interval or ())]
    moves = [abs(end - 1) * 100 for end in ends if end is not None and math.isfinite(end)]
    found.kernel_widest_pct = max([found.kernel_widest_pct, *moves])
    return True


def pair_findings(ab: Sequence[Study], again: Mapping[RowKey, str] | None = None) -> list[PairFindings]:
    """Each release pair's findings, by package and versions, in the order the studies first name them;
    a row measured again later (``again``, from ``upgrades.measured_again``) counts as its newest only."""
    again = again or {}
    pairs: dict[str, PairFindings] = {}
    for study in ab:
        record = study.record
        if not isinstance(record, ABRecord):  # a bisection is no release pair's A/B row
            continue
        found = pairs.setdefault(change_label(record), PairFindings(change_label(record)))
        if record.verdict == "broken-environment" and record.comparison is None:
            package = (record.broken.package if record.broken is not None else "") or "one side"
            found.cannot_run.append(f"{package} cannot run beside today's stack")
            continue
        broken_cases = record.broken_cases or {}
        for case in record.compared_cases:
            if case.case_id in broken_cases or row_key(study, case.case_id) in again:
                continue
            found.gpus.add(_gpu(study))
            _add_case(found, case)
    return list(pairs.values())


def summary_lines(ab: Sequence[Study], again: Mapping[RowKey, str] | None = None) -> list[str]:
    """The page's summary section: one sentence per release pair."""
    findings = pair_findings(ab, again)
    if not findings:
        return []
    return [
        "What moving to the newer release did, per release pair (from the rows below):",
        "",
        *(f"- {found.sentence()}" for found in findings),
        "",
    ]
