"""``trainperf upgrade-report DIR... --output docs/upgrades.md``: the upgrade report, generated from
the folders ``trainperf ab`` and ``trainperf bisect`` wrote (``trainperf.report.upgrades``)."""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
from pathlib import Path
from typing import Any

from trainperf.case import Outcome
from trainperf.errors import TrainperfError
from trainperf.studies.ab_record import ABRecord
from trainperf.studies.bisect_record import BisectRecord

STACK_KEYS = {
    "gpu_name": "GPU", "driver": "driver", "torch": "torch", "transformers": "transformers", "peft": "peft",
    "trl": "trl", "accelerate": "accelerate", "datasets": "datasets", "python": "Python",
}  # fmt: skip


def _results(folder: Path) -> list[Any]:
    from trainperf.ground.folder import RunFolder

    found = []
    for run in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        if RunFolder(run).is_run():
            found.extend(RunFolder.open(run).results())
    return found


def _side_value(results: list[Any], metric: str) -> float | None:
    values = [r.metrics[metric].value for r in results if metric in r.metrics and r.metrics[metric].value]
    return statistics.median(values) if values else None


def step_figures(study: Path, version: str) -> dict[str, tuple[float | None, float | None]]:
    """A bisection step's figures, GOOD's and the version's, from its rounds' result files."""
    from trainperf.report.upgrades import STEP_FIGURES

    rounds = sorted((study / version).glob("round*-*")) if (study / version).is_dir() else []
    sides = {
        label: [r for p in rounds if p.name.endswith(f"-{label}") for r in _results(p)] for label in "AB"
    }
    return {m: (_side_value(sides["A"], m), _side_value(sides["B"], m)) for m in STEP_FIGURES if sides["A"]}


def _stack(study: Path, studied: set[str]) -> str:
    """The runs' machine and stack from a result's fingerprint, less the packages the study varies."""
    from trainperf.ground.folder import RunFolder

    folders = sorted(p for p in study.rglob("*") if p.is_dir() and RunFolder(p).is_run())
    results = [r for folder in folders for r in RunFolder.open(folder).results()]
    if not results:
        return ""
    # A crashed case's fingerprint may stop before the stack's versions: a measured one has them all.
    # The stack's keys are looked up by the names the file stores them under (machine facts and versions).
    fingerprint = min(results, key=lambda r: r.outcome != Outcome.OK).fingerprint.to_dict()
    return ", ".join(
        f"{label} {fingerprint[key]}"
        for key, label in STACK_KEYS.items()
        if fingerprint.get(key) and key not in studied
    )


def _studied(record: ABRecord | BisectRecord) -> set[str]:
    """The packages a study varies: its bisected package, each side's pins, and for two given
    environments every package whose version differs between their runs."""
    if isinstance(record, BisectRecord):
        return {record.package}
    from trainperf.report.upgrades import moved_between_sides

    pinned = {name for side in (record.a, record.b) if side is not None for name in side.pins or {}}
    return pinned | {change.key for change in moved_between_sides(record)}


def _record(path: Path) -> ABRecord | BisectRecord:
    """The study's record in ``path`` (``ab.json`` or ``bisect.json``)."""
    try:
        stored = json.loads(path.read_text())
    except ValueError as exc:
        raise TrainperfError(f"{path} is not readable JSON ({exc}); run the study again") from exc
    record = ABRecord.from_dict(stored) if path.name == "ab.json" else BisectRecord.from_dict(stored)
    if record is None:
        raise TrainperfError(f"{path} holds no {path.stem} record; run the study again")
    return record


def load_study(folder: Path) -> Any:
    from trainperf.report.upgrades import Study

    explanation = (folder / "explanation.md").read_text() if (folder / "explanation.md").is_file() else ""
    for path in (folder / "ab.json", folder / "bisect.json"):
        if path.is_file():
            record = _record(path)
            figures = {}
            if isinstance(record, BisectRecord):
                figures = {step.version: step_figures(folder, step.version) for step in record.steps}
            return Study(folder.name, record, figures, explanation, _stack(folder, _studied(record)))
    raise TrainperfError(
        f"{folder} holds neither ab.json nor bisect.json: give the folders of trainperf ab or bisect"
    )


def cmd_upgrade_report(args: argparse.Namespace) -> int:
    from trainperf.report.upgrades import render_page

    folders = [Path(f) for f in args.folders]
    studies = [load_study(folder) for folder in folders]
    command = "trainperf upgrade-report " + " ".join(shlex.quote(str(f)) for f in args.folders)
    if args.output:
        command += f" --output {args.output}"
    page = render_page(studies, command)
    if args.output:
        Path(args.output).write_text(page)
        print(f"wrote {args.output}: {len(studies)} studies")
    else:
        print(page, end="")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "upgrade-report", help="the upgrade report (Markdown) from trainperf ab and bisect folders"
    )
    parser.add_argument("folders", nargs="+", help="folders written by trainperf ab or trainperf bisect")
    parser.add_argument("--output", default=None, help="write the page here (default: print it)")
    parser.set_defaults(func=cmd_upgrade_report)
