"""Result files: one schema-versioned JSON per case (``trainperf.result``), written atomically as each case
ends."""

from __future__ import annotations

import json
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.jsonio import write_json_atomic
from trainperf.paths import RESULTS_DIR
from trainperf.result import CaseResult


def load_result(path: Path) -> CaseResult:
    """Read a result or baseline file; any defect is one line naming the file and the fix (a baseline
    is written again by its class's runner, a run's result by running its case again)."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        return CaseResult.from_dict(data, origin=str(path))
    except TrainperfError:
        raise
    except (OSError, ValueError, TypeError) as exc:
        raise TrainperfError(
            f"{path} is corrupt ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            f"delete it, or write it again: {_rewrite_hint(path)}"
        ) from exc


def _rewrite_hint(path: Path) -> str:
    if path.parent.name == RESULTS_DIR:  # a run folder's: <run>/results/<case>.json
        return f"pytest ... --perf-resume={path.parent.parent} runs every case without a readable result"
    return "pytest -m <class> --perf-update-baselines -k <case> on a runner of the class"


def save_result(path: Path, result: CaseResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, result.to_dict())
