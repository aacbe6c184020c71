"""Helpers for the case catalogue in ``perf_tests/``: cases become pytest params with their markers."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.measure.hardware import CPU_CLASS


def marks_for(case: Case) -> list[Any]:
    """One marker per GPU class the case belongs to, plus gpu/cpu, multi_gpu and slow."""
    marks = [getattr(pytest.mark, name) for name in case.gpu_classes]
    marks.append(pytest.mark.cpu if case.gpu_classes == (CPU_CLASS,) else pytest.mark.gpu)
    if case.gpus > 1:
        marks.append(pytest.mark.multi_gpu)
    if case.slow:
        marks.append(pytest.mark.slow)
    return marks


def params(cases: Iterable[Case]) -> list[Any]:
    """``pytest.param`` per case, its id the case id; duplicate ids are a catalogue bug."""
    seen: set[str] = set()
    result = []
    for case in cases:
        if case.id in seen:
            raise ValueError(f"duplicate case id {case.id} in the catalogue")
        seen.add(case.id)
        result.append(pytest.param(case, id=case.id, marks=marks_for(case)))
    return result


def load_catalogue(root: Path) -> dict[str, Case]:
    """Every case the catalogue under ``root/perf_tests`` declares (its ``CASES`` lists and the
    cases of its ``CLIFFS``), by id: lets a command outside pytest name a case."""
    return {case.id: case for _key, case in catalogue_items(root)}


def catalogue_items(root: Path) -> list[tuple[str, Case]]:
    """The catalogue's pytest items in the order pytest collects them: each case of a ``CASES`` list
    by its id, then each ``CLIFFS`` entry's search by ``<case id>-cliff-<axis>``, file by file."""
    import importlib.util

    folder = root / "perf_tests"
    if not folder.is_dir():
        raise TrainperfError(f"no perf_tests/ under {root}: run this from the trainperf checkout")
    items: list[tuple[str, Case]] = []
    for path in sorted(folder.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_trainperf_catalogue_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        items += [(case.id, case) for case in getattr(module, "CASES", []) if isinstance(case, Case)]
        cliffs = [entry for entry in getattr(module, "CLIFFS", []) if isinstance(entry[0], Case)]
        items += [(f"{entry[0].id}-cliff-{entry[1]}", entry[0]) for entry in cliffs]
    return items


def find_case(root: Path, case_id: str) -> Case:
    cases = load_catalogue(root)
    if case_id not in cases:
        near = sorted(c for c in cases if case_id.split("-")[0] in c)[:5]
        raise TrainperfError(
            f"no case '{case_id}' in perf_tests/; some that exist: "
            f"{', '.join(near) or ', '.join(sorted(cases)[:5])}"
        )
    return cases[case_id]
