"""pytest-xdist: many workers, one run. The controller names the run folder, every worker writes
its cases' result files into it, and the controller summarises those files (``report.summary``).

The controller collects nothing and measures nothing, so it cannot know the GPU class; it
hands each worker a time stamp (``workerinput``) and each worker opens ``<stamp>-<class>``.
Session-level work is per worker but harmless there: each worker reads the idle memory of its
own GPU, writes ``run.<worker>.json`` (not one shared file), and baselines are per case.
"""

from __future__ import annotations

import fnmatch
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from trainperf.ground.settings import Settings
from trainperf.measure.hardware import CPU_CLASS, load_classes
from trainperf.measure.nvml import Nvml
from trainperf.measure.placement import visible_devices, xdist_workers

STAMP_KEY = "trainperf_run_stamp"
PLAN_LINES_KEY = "trainperf_plan_lines"
PLAN_EMPTIED_KEY = "trainperf_plan_emptied"


def worker_id(config: Any) -> str | None:
    """``gw0``, ``gw1``... in an xdist worker; None in the controller or a serial run."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else None


def is_controller(config: Any) -> bool:
    """True in the xdist controller of a ``-n`` run (it runs no tests itself)."""
    option = config.option
    return (
        worker_id(config) is None
        and bool(getattr(option, "numprocesses", None))
        and getattr(option, "dist", "no") != "no"
    )


def new_stamp(output: Path, now: datetime | None = None) -> str:
    """A run-folder stamp no earlier run in ``output`` has used (``20261121-231500``, ``...-2``)."""
    base = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    stamp, suffix = base, 1
    while output.is_dir() and any(output.glob(f"{stamp}-*")):
        suffix += 1
        stamp = f"{base}.{suffix}"
    return stamp


def shared_stamp(config: Any) -> str | None:
    """The controller's stamp as a worker sees it."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput[STAMP_KEY]) if workerinput and STAMP_KEY in workerinput else None


def send_plan_lines(config: Any, lines: list[str], emptied: bool = False) -> None:
    """A worker: its session plan's lines (the night, the shard, the budget) and whether the plan
    left it no case go to the controller with the output it sends as it finishes; the controller's
    terminal is the one shown."""
    output = getattr(config, "workeroutput", None)
    if output is not None:
        output[PLAN_LINES_KEY] = list(lines)
        output[PLAN_EMPTIED_KEY] = emptied


def received_plan_lines(node: Any) -> tuple[list[str], bool]:
    """The controller: the plan lines a finished worker sent (every worker plans alike), and
    whether its plan left the session no case."""
    output = getattr(node, "workeroutput", None) or {}
    return list(output.get(PLAN_LINES_KEY) or []), bool(output.get(PLAN_EMPTIED_KEY))


def worker_count() -> int:
    """How many xdist workers share this session's cases (1 in a serial run); read on a worker."""
    return xdist_workers(os.environ)


def auto_workers() -> int | None:
    """Workers for ``-n auto``: the number of visible GPUs; None (xdist decides) without one."""
    return len(visible_devices(Nvml.count)) or None


def workers_for_auto(config: Any) -> int | None:
    """``-n auto`` of a run that selects trainperf cases: one worker per visible GPU. Any other
    run (a project's own suite where trainperf happens to be installed) keeps xdist's default."""
    return auto_workers() if selects_cases(config) else None


_USES_FIXTURE = re.compile(r"def\s+test\w*\s*\([^)]*\btrainperf\b|usefixtures\([^)]*[\"']trainperf[\"']")
_SCAN_LIMIT = 2000
"""Test files read at most per run: the decision is made before collection, and must stay quick."""


def selects_cases(config: Any) -> bool:
    """Whether the run can reach trainperf cases. xdist asks before collection, so it is read
    from what the run names: a path (or its testpaths) holding a test that takes the
    ``trainperf`` fixture, or a marker expression selecting a GPU class (``-m h100``), which a
    catalogue reached some other way (a helper wrapping the fixture) still shows."""
    here = Path(config.invocation_params.dir)
    paths = [here / str(arg).split("::")[0] for arg in config.args]
    norecurse = list(config.getini("norecursedirs"))
    return names_gpu_class(config.option.markexpr or "") or any(
        _holds_catalogue(path, norecurse) for path in paths
    )


def names_gpu_class(markexpr: str) -> bool:
    """``-m h100``, ``-m "maxq and not slow"``: a GPU class selected (not merely excluded)."""
    gpu_classes = {name for name in load_classes() if name != CPU_CLASS}
    words = re.findall(r"[A-Za-z_][\w-]*", markexpr)
    return any(word in gpu_classes and words[:i][-1:] != ["not"] for i, word in enumerate(words))


def _holds_catalogue(path: Path, norecurse: list[str]) -> bool:
    if path.is_file():
        return _uses_fixture(path)
    read = 0
    for folder, subfolders, files in os.walk(path):
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(".")
            and not any(fnmatch.fnmatch(name, p) for p in norecurse)
            and not (Path(folder) / name / "pyvenv.cfg").exists()  # a virtualenv, as pytest skips
        ]
        for name in files:
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
                if _uses_fixture(Path(folder) / name):
                    return True
                read += 1
                if read >= _SCAN_LIMIT:
                    return False
    return False


def _uses_fixture(path: Path) -> bool:
    try:
        return bool(_USES_FIXTURE.search(path.read_text(errors="replace")))
    except OSError:
        return False


def run_dirs(output: Path, stamp: str) -> list[Path]:
    return sorted(path for path in output.glob(f"{stamp}-*") if path.is_dir())


def controller_run_dirs(settings: Settings, stamp: str | None) -> list[Path]:
    """The run folders the controller summarises: the resumed one, or those its workers opened
    under its stamp (one per GPU class they found)."""
    return [settings.resume] if settings.resume else run_dirs(settings.output, stamp or "")
