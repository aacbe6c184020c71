"""The folders a session writes and reads, checked before its first case: a mistyped, missing or
read-only path is one line at start, not a failed case after its set-up."""

from __future__ import annotations

import tempfile
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.ground.settings import Settings


def check_paths(settings: Settings) -> None:
    """Before a session runs a case: the baselines folder exists (or is being written), and the run
    folders and the host lock can be written, so that a mistyped or read-only path is one line at
    start, not a failed case after its set-up."""
    check_baselines(settings)
    _check_writable(settings.output, "run folders", "--perf-output")
    if settings.host_lock is not None:
        _check_writable(settings.host_lock.parent, "the host lock", "--perf-host-lock")


def _check_writable(folder: Path, what: str, option: str) -> None:
    # Made and written once for real: permission bits do not tell (root passes os.access on /proc,
    # a read-only mount, a full disk).
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise TrainperfError(
            f"cannot write {what} under {folder} ({exc.strerror or exc}): "
            f"give a writable folder with {option}"
        ) from None


def check_baselines(settings: Settings) -> None:
    """A baselines folder that does not exist is a typo, not a first run: every case would read
    `new` and pass. Refused in one line, unless this run writes baselines (it creates the folder)."""
    if settings.update_baselines or settings.baselines.is_dir():
        return
    raise TrainperfError(
        f"no baselines folder at {settings.baselines} (--perf-baselines / TRAINPERF_BASELINES): every case "
        "would read `new` and pass; give the folder that holds baselines/<class>/, or write baselines first "
        "with --perf-update-baselines, which creates it"
    )
