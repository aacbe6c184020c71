"""Run one real child (``python -m trainperf.workloads SPEC``) in a test, as the runner would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainperf.launch.launcher import child_env


def run_child_spec(out_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Write ``spec`` (its out_dir set to ``out_dir``), run the child on the CPU, and return its
    result; a non-zero exit fails the test with the child's traceback."""
    (out_dir / "spec.json").write_text(json.dumps({**spec, "out_dir": str(out_dir)}))
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.workloads", str(out_dir / "spec.json")],
        env=child_env(None), capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    result: dict[str, Any] = json.loads((out_dir / "result.json").read_text())
    assert done.returncode == 0, result.get("traceback") or done.stderr[-2000:]
    return result
