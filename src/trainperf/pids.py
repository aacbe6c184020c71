"""Whether a process runs, for files that name their writer's pid (cache temporaries, verl's kernel
window): one that has ended, a zombie included (ended, not yet reaped by its parent), never will
finish what it started."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: from ``/proc`` where there is one (a zombie does not), else by signal 0."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        stat = ""
    if stat:
        return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
