"""Helpers for the case catalogue in ``perf_tests/``: cases become pytest params with their markers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.hardware import CPU_CLASS


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
