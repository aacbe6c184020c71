"""The host speed index: a short, fixed calibration of the host's CPU, run in every child before its case.

A host-bound step is the interpreter and the framework's dispatch: Python bytecode, then PyTorch's
operator dispatch for every kernel it launches. The calibration times a fixed amount of each (a loop
of plain Python work, and a loop of tiny in-place operations on a CPU tensor, which walk the same
dispatcher a CUDA launch does), a few times over, and reports operations per microsecond of the
fastest round: the higher, the faster the host. The fastest round is the host's own speed (another
CPU model, a lower clock or turbo); a neighbour that takes CPU time is the host-load watch's to see
(``measure.host_load``). On one H100 host the median round moved 33% between fresh children whose
steps took the same time, the fastest round 5%. The index is a trigger for judging host time (which
compares only where the host does), never a divisor of anything. It runs first in the child, before
CUDA is initialised: a process that had initialised CUDA read 40% slower on that host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

PYTHON_OPS = 200_000
DISPATCH_OPS = 4_000
REPEATS = 7


def _python_work(count: int) -> int:
    """Interpreter work of the kind a training loop's Python does: calls, attributes, dicts, lists."""
    table: dict[int, int] = {}
    items: list[int] = []
    total = 0
    for index in range(count):
        key = index & 1023
        table[key] = table.get(key, 0) + index
        if index & 7 == 0:
            items.append(key)
        total += len(items) & 3
    return total + len(table)


def _dispatch_work(count: int) -> int:
    import torch

    tensor = torch.zeros(8)
    for _ in range(count):
        tensor.add_(1.0)
    return int(tensor[0].item())


def _timed(work: Callable[[int], int], count: int) -> tuple[float, float]:
    """Operations per microsecond of the median and of the best of ``REPEATS`` timings: the median is
    the host as the case will meet it (a busy neighbour included), the best its undisturbed speed."""
    work(count // 4)  # an untimed round: the first call's one-time costs (imports, caches) are not the host's
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        work(count)
        times.append(time.perf_counter() - started)
    times.sort()
    median, best = times[len(times) // 2], times[0]
    return (count / (median * 1e6) if median > 0 else 0.0), (count / (best * 1e6) if best > 0 else 0.0)


STEP_PROBE_OPS = 1_000
"""Interpreter work timed at every step edge (``step_probe``): about 0.15 ms on a fast host, under
0.05% of a host-bound step."""


def step_probe() -> float:
    """The host's speed at this instant (operations per microsecond of a small fixed piece of
    interpreter work): taken at each step's edge, it follows a host whose speed moves while the case
    runs, which the index taken once before the case cannot (on one cloud H200, 2026-11-29, the host
    flipped between two speeds about 1.8x apart every few seconds)."""
    started = time.perf_counter()
    _python_work(STEP_PROBE_OPS)
    elapsed = time.perf_counter() - started
    return round(STEP_PROBE_OPS / (elapsed * 1e6), 4) if elapsed > 0 else 0.0


def measure_host_index() -> dict[str, Any]:
    """The index (geometric mean of the two parts' fastest rates, operations per microsecond) and its
    parts; the median rates beside them."""
    try:
        import torch  # noqa: F401 - imported before the clock starts: the import is not the host's speed
    except ImportError:
        pass
    from trainperf.measure.host_load import read_cpu_times
    from trainperf.workloads.cpu_context import observed

    before = read_cpu_times()
    started = time.perf_counter()
    python, python_best = _timed(_python_work, PYTHON_OPS)
    try:
        dispatch, dispatch_best = _timed(_dispatch_work, DISPATCH_OPS)
    except ImportError:
        dispatch = dispatch_best = 0.0
    median = (python * dispatch) ** 0.5 if dispatch else python
    best = (python_best * dispatch_best) ** 0.5 if dispatch_best else python_best
    return {
        "index": round(best, 4),
        "median": round(median, 4),
        "python_ops_per_us": round(python_best, 4),
        "dispatch_ops_per_us": round(dispatch_best, 4),
        "seconds": round(time.perf_counter() - started, 3),
        # Where it ran and how busy the host was meanwhile: a core shared with a busy sibling reads
        # about half speed (fresh children of one cloud host read 2x apart).
        "cpu_context": (found.to_dict() if (found := observed(before)) else None),
    }
