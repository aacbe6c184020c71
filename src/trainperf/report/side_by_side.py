"""HF LoRA, HF QLoRA and unsloth QLoRA side by side on one GPU class: E2's comparison, from measured results.

One group per model and length profile; in it a row per method and batch size with step time,
tokens/s, samples/hour, peak allocated memory and energy per token, and the ratios of each row to
the HF QLoRA row of the same group (unsloth/HF). No I/O here: the caller loads the results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainperf.case import Outcome
from trainperf.errors import TrainperfError
from trainperf.families import FAMILIES
from trainperf.judge.metrics import STEP_TIME
from trainperf.report.table import align, format_value
from trainperf.result import CaseResult

METHOD_LABELS = {"lora": "LoRA", "qlora": "QLoRA"}
# (family, method, row label): each SFT family in the methods it is compared in, as it declares.
METHODS = tuple(
    (family.name, method, f"{family.label} {METHOD_LABELS[method]}")
    for family in FAMILIES.values()
    if family.kind == "sft"
    for method in family.compared_methods
)
REFERENCE = "HF QLoRA"
SHOWN = (STEP_TIME, "tokens_per_s", "samples_per_hour", "peak_allocated_gib", "energy_per_token_j")
RATIOS = ("tokens_per_s", "samples_per_hour", "peak_allocated_gib", "energy_per_token_j")
HEADER = (
    "model",
    "profile",
    "method",
    "batch",
    "outcome",
    "step s",
    "tok/s",
    "samples/h",
    "peak GiB",
    "J/tok",
    "tok/s x",
    "samples/h x",
    "peak x",
    "J/tok x",
)


@dataclass(frozen=True, slots=True)
class Row:
    model: str
    profile: str
    method: str
    batch: int
    result: CaseResult


def _label(result: CaseResult) -> str | None:
    case = result.case
    return next(
        (label for family, method, label in METHODS if case.family == family and case.method == method),
        None,
    )


def select(results: Sequence[CaseResult]) -> list[Row]:
    """The comparable rows: the three methods, synthetic data, default knobs, one GPU class."""
    classes = {r.gpu_class for r in results}
    if len(classes) > 1:
        raise TrainperfError(
            f"side by side needs results of one GPU class, got {', '.join(sorted(classes))}: give one "
            "class's runs"
        )
    rows = []
    for result in results:
        label = _label(result)
        case = result.case
        if label is None or case.model_path or case.dataset_path or case.memory_cap_gib:
            continue
        if result.cliff or (case.gpus or 1) != 1:  # a cliff search or a multi-GPU case: no like-for-like row
            continue
        if case.model is None or case.profile is None or case.batch_size is None:  # not a whole case
            continue
        rows.append(Row(case.model, case.profile, label, case.batch_size, result))
    order = {label: i for i, (_, _, label) in enumerate(METHODS)}
    return sorted(rows, key=lambda r: (r.model, r.profile != "short", r.profile, order[r.method], r.batch))


def _value(result: CaseResult, metric: str) -> float | None:
    value = result.metrics.get(metric)
    return value.value if value is not None and result.outcome == Outcome.OK else None


def _ratio(row: Row, reference: Row | None, metric: str) -> str:
    if reference is None or reference is row:
        return "-"
    mine, theirs = _value(row.result, metric), _value(reference.result, metric)
    return f"{mine / theirs:.2f}" if mine is not None and theirs else "-"


def table(results: Sequence[CaseResult]) -> list[list[str]]:
    rows = select(results)
    body = []
    for row in rows:
        # The reference is HF QLoRA of the same model and profile; at several batches, the largest.
        peers = [r for r in rows if (r.model, r.profile, r.method) == (row.model, row.profile, REFERENCE)]
        reference = max(peers, key=lambda r: r.batch) if peers else None
        cells = [row.model, row.profile, row.method, str(row.batch), row.result.outcome]
        cells += [format_value(_value(row.result, metric)) for metric in SHOWN]
        cells += [_ratio(row, reference, metric) for metric in RATIOS]
        body.append(cells)
    return body


def render(results: Sequence[CaseResult]) -> str:
    body = table(results)
    if not body:
        labels = [label for _, _, label in METHODS]
        families = list(dict.fromkeys(family for family, _, _ in METHODS))
        raise TrainperfError(
            f"no {', '.join(labels[:-1])} or {labels[-1]} results to put side by side: give runs with "
            f"{' and '.join(families)} cases"
        )
    gpu_class = results[0].gpu_class
    note = (
        f"ratios (x) are against HF QLoRA of the same model and profile on {gpu_class}; batch sizes "
        "differ where E2's did"
    )
    return "\n".join([*align(HEADER, body), "", note])
