"""Result files: one schema-versioned JSON per case (``trainperf.result``), written atomically as each case ends."""

from __future__ import annotations

import json
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.jsonio import write_json_atomic
from trainperf.result import CaseResult


def load_result(path: Path) -> CaseResult:
    """Read a result or baseline file; any defect is one line naming the file and the fix."""
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
            "delete it or re-create it with --perf-update-baselines"
        ) from exc


def save_result(path: Path, result: CaseResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, result.to_dict())
